"""`rmqtool serve` from the command line: `--json` ready facts on stdout, the line on stderr that
says it stopped and closed the store, and the next step a second process is told when the store
is held (`--namesrv HOST:PORT`)."""

from __future__ import annotations

import json

from tests.conftest import run_rmqtool
from tests.serve_helpers import start_serve, stop_process


def test_serve_json_stop_line_and_locked_store_hint(tmp_path):
    store, conf, err = tmp_path / "store", tmp_path / "broker.conf", tmp_path / "serve.stderr"
    conf.write_text("brokerName=cli-serve\n")
    out_path = tmp_path / "serve.stdout"
    with open(out_path, "wb") as out:
        proc, ready = start_serve(store, conf, err, extra_args=("--json",), stdout=out)
    try:
        assert ready is not None, err.read_text()
        facts = json.loads(out_path.read_text().splitlines()[0])
        assert facts["brokerName"] == "cli-serve" and facts["namesrv"] == f"{ready.group(1)}:{ready.group(2)}"
        assert facts["broker"] == f"{ready.group(4)}:{ready.group(5)}"
        r = run_rmqtool("send", "--store", str(store), "Held", "x", input="")
        assert r.returncode == 3, r.stderr
        assert "held by a broker: use --namesrv HOST:PORT" in r.stderr and "Traceback" not in r.stderr
        r = run_rmqtool("send", "Held", "via-broker", "--namesrv", facts["namesrv"], input="", timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        rc = stop_process(proc)
    assert rc == 0
    text = err.read_text()
    assert f"rmqtool serve: stopped; store {store} closed cleanly" in text, text
    assert not (store / "abort").exists()


def test_serve_that_fails_to_start_does_not_claim_a_clean_stop(tmp_path):
    f = tmp_path / "afile"
    f.write_text("not a store")
    r = run_rmqtool("serve", "--store", str(f), "--namesrv-port", "0", "--broker-port", "0", input="", timeout=60)
    assert r.returncode in (2, 3) and "stopped" not in r.stderr and "Traceback" not in r.stderr, r.stderr
