"""Issue 12, Done when: in-flight POP state moves with the store between Apache's broker and
`rmqtool serve`. A broker pops four messages and acks two; it stops, its store is copied to
the other kind, and there exactly the two unacked messages come back (reconsumeTimes 1) after
their invisible time, and the acked ones never do. Both directions."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from tests.broker.conftest import Wire
from tests.pop_serve_helpers import ack, handles, pop_ext, pop_until, send

from .conftest import start_apache, start_rmqtool_serve, stop_apache, stop_rmqtool_serve
from .harness import require_java
from .side_by_side import side_by_side

pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.timeout(300)]
TOPIC, GROUP = "PopMoved", "cg_moved"
APACHE_SIZES = ("mappedFileSizeCommitLog=67108864", "mappedFileSizeTimerLog=8388608")


def create_topic(w: Wire) -> None:
    r = w.request(17, {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
                       "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"})
    assert r.code == 0, r.remark


def pop_four_ack_two(addr: str) -> None:
    w = Wire(addr)
    try:
        create_topic(w)
        send(w, TOPIC, 4)
        got = pop_until(w, TOPIC, GROUP, 4, timeout=20, invisible=25_000)  # a broker may dispatch a moment late
        assert sorted(m.body for m, _ in got) == [b"m0", b"m1", b"m2", b"m3"]
        for m, h in got:
            if m.body in (b"m0", b"m2"):
                assert ack(w, GROUP, TOPIC, h).code == 0
    finally:
        w.close()


def only_unacked_come_back(addr: str) -> None:
    w = Wire(addr)
    try:
        back = pop_until(w, TOPIC, GROUP, 2, timeout=60)
        assert sorted(m.body for m, _ in back) == [b"m1", b"m3"]
        assert all(m.reconsume_times == 1 for m, _ in back)
        for _m, h in back:
            assert ack(w, GROUP, TOPIC, h).code == 0
        r = w.request(200050, pop_ext(TOPIC, GROUP, poll=3000), timeout=10)
        assert r.code == 210, [m.body for m, _ in handles(r)]
    finally:
        w.close()


def copy_store(src, dst) -> None:
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True, timeout=60)
    (dst / "lock").unlink(missing_ok=True)


def apache_to_serve(tmp_path) -> None:
    a = start_apache(tmp_path / "apache")
    try:
        pop_four_ack_two(a.broker)
    finally:
        stop_apache(a)  # clean: flush, timer checkpoint, consumer offsets
    (tmp_path / "serve").mkdir()
    copy_store(a.store, tmp_path / "serve" / "store")
    conf = "\n".join(APACHE_SIZES) + "\n"
    s = start_rmqtool_serve(tmp_path / "serve", "-c", str(_conf(tmp_path, conf)))
    try:
        only_unacked_come_back(s.broker)
    finally:
        assert stop_rmqtool_serve(s) == 0
    assert "Traceback" not in (tmp_path / "serve" / "serve.stderr").read_text()


def serve_to_apache(tmp_path) -> None:
    (tmp_path / "serve").mkdir()
    s = start_rmqtool_serve(tmp_path / "serve", "-c", str(_conf(tmp_path, "\n".join(APACHE_SIZES) + "\n")))
    try:
        pop_four_ack_two(s.broker)
    finally:
        assert stop_rmqtool_serve(s) == 0
    root = tmp_path / "apache"
    root.mkdir()
    copy_store(s.store, root / "store")
    a = start_apache(root, *APACHE_SIZES)
    try:
        only_unacked_come_back(a.broker)
    finally:
        a.proc.kill()
        a.proc.wait()


@pytest.fixture(scope="module")
def moves(tmp_path_factory) -> Iterator[dict[str, Future]]:
    """Both directions at once (side_by_side): each mostly waits out its 25 s invisible time and the
    revive, on brokers, ports and stores of its own."""
    require_java()
    with side_by_side(tmp_path_factory, {"apache-to-serve": apache_to_serve, "serve-to-apache": serve_to_apache}) as f:
        yield f


def test_apache_in_flight_state_is_redelivered_by_serve(moves):
    moves["apache-to-serve"].result()


def test_serve_in_flight_state_is_redelivered_by_apache(moves):
    moves["serve-to-apache"].result()


def _conf(tmp_path, text: str):
    p = tmp_path / "sizes.conf"
    p.write_text("transactionCheckInterval=1000\ntransactionTimeOut=1000\n" + text)
    return p
