"""verify's replica mode: values a slave copies from its master are not judged against its queues.

Consumer and delay offsets (SlaveSynchronize) and the timer checkpoint's masterTimerQueueOffset
(syncTimerCheckPoint) are the master's; on a replica the findings about them are counted, not
reported. Everything else is checked as on any store.
"""

from __future__ import annotations

import struct

from rmqtool.inspect.layoutconfig import load_layout_config
from rmqtool.inspect.verify import VerifyState, check_store


def verify(root, replica: bool) -> tuple[list, VerifyState]:
    st = VerifyState(load_layout_config(root), replica=replica)
    return list(check_store(root, state=st)), st


def test_copied_offsets_out_of_range_are_not_problems_on_a_replica(stores):
    for name, kind in (("damaged-consumer-offset-out-of-range", "consumer-offset-out-of-range"),
                       ("damaged-delay-offset-out-of-range", "delay-offset-out-of-range")):
        plain, _ = verify(stores / name, replica=False)
        assert kind in {p.kind for p in plain}
        copied, st = verify(stores / name, replica=True)
        assert kind not in {p.kind for p in copied} and st.replica_skipped >= 1
        assert [p for p in plain if p.kind != kind] == copied  # the rest is still checked


def test_the_masters_timer_queue_offset_on_a_replica(store_copy):
    root = store_copy("good")
    cp = root / "config" / "timercheck"
    raw = bytearray(cp.read_bytes())
    raw[24:32] = struct.pack(">q", 10**9)  # masterTimerQueueOffset far past rmq_sys_wheel_timer's end
    cp.write_bytes(bytes(raw))
    plain, _ = verify(root, replica=False)
    assert [(p.path, p.pos, p.kind) for p in plain] == [("config/timercheck", 24, "timercheck-ahead")]
    copied, st = verify(root, replica=True)
    assert copied == [] and st.replica_skipped == 1
    raw[16:24] = struct.pack(">q", 10**9)  # lastTimerQueueOffset is the store's own: still a problem
    cp.write_bytes(bytes(raw))
    assert [(p.pos, p.kind) for p in verify(root, replica=True)[0]] == [(16, "timercheck-ahead")]
