"""The committing (default) mode on a store of a broker without a timer wheel (RocketMQ 4.x, or
5.x with timerWheelEnable=false) creates only what that broker would: no `timerlog/`,
`timerwheel` or `config/timercheck`, and `delayOffset.json` keeps its 4.x shape."""

from __future__ import annotations

import json
import shutil
import time

from tests.conftest import rmqtool_ok, run_rmqtool

LEGACY_DELAY_OFFSET = '{\n\t"offsetTable":{1:0\n\t}\n}'


def test_a_store_without_timer_files_gets_none(tmp_path):
    store = tmp_path / "s"
    rmqtool_ok("send", "--store", str(store), "V4", "a", "--json")
    rmqtool_ok("send", "--store", str(store), "V4", "d", "--delay-level", "1", "--json")
    # what a 4.9.7 broker's store has: no timer wheel, delayOffset.json without dataVersion
    shutil.rmtree(store / "timerlog")
    (store / "timerwheel").unlink()
    (store / "config" / "timercheck").unlink()
    (store / "config" / "delayOffset.json").write_text(LEGACY_DELAY_OFFSET)
    for bak in (store / "config").glob("delayOffset.json.bak"):
        bak.unlink()
    time.sleep(1.2)
    got: list[str] = []
    deadline = time.monotonic() + 30
    while "d" not in got and time.monotonic() < deadline:  # the delay level is still delivered
        got += [json.loads(x)["body"] for x in rmqtool_ok("consume", "V4", "--store", str(store), "--json").splitlines()]
    assert sorted(got) == ["a", "d"]
    rmqtool_ok("send", "--store", str(store), "V4", "b", "--json")
    assert not (store / "timerlog").exists() and not (store / "timerwheel").exists()
    assert not (store / "config" / "timercheck").exists()
    text = (store / "config" / "delayOffset.json").read_text()
    assert "dataVersion" not in text and text.startswith('{\n\t"offsetTable":{1:1'), text
    r = run_rmqtool("send", "--store", str(store), "V4", "t", "--delay", "5s", input="")
    assert r.returncode == 2 and "timerWheelEnable" in r.stderr, r.stderr


def test_a_new_store_gets_the_timer_files_of_a_5x_broker(tmp_path):
    store = tmp_path / "s"
    rmqtool_ok("send", "--store", str(store), "V5", "a", "--json")
    assert (store / "timerwheel").is_file() and (store / "timerlog").is_dir()
