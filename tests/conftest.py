"""Shared test helpers: run the real `rmqtool` command as a subprocess of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def rmqtool_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment in which `python -m rmqtool` imports this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NAMESRV_ADDR", None)
    env.pop("RMQ_STORE", None)
    if extra:
        env.update(extra)
    return env


def run_rmqtool(*args: str, input: bytes | str | None = None, timeout: float = 60,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `python -m rmqtool ARGS` and capture its output (bytes unless input is str)."""
    return subprocess.run([sys.executable, "-m", "rmqtool", *args], input=input, capture_output=True,
                          timeout=timeout, env=rmqtool_env(env), text=isinstance(input, str))


def rmqtool_ok(*args: str) -> str:
    """`rmqtool ARGS` with empty stdin that must exit 0; its stdout (text)."""
    r = run_rmqtool(*args, input="")
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


@pytest.fixture
def rmq():
    return run_rmqtool


# --- spreading the suite over xdist's workers (`--dist loadscope`, pyproject's addopts) --------------
#
# One unit of work is one module (tests/client: the whole directory, whose modules share one
# parametrized session fixture, `server`: serve then Apache, so Apache starts once). A unit runs on
# one worker: its module fixtures, and the Java suites a module runs once for all its scenario tests
# (pop_helpers.start_java_suites, test_pop_proxy's results_for, the mqadmin sessions, the scenarios
# of tests/interop/side_by_side.py), are not started again on the other worker. Units go out
# longest first (the longest-processing-time rule), so the last unit a worker starts is a short
# one instead of a suite that keeps the run open alone.

# Seconds a unit takes alone (`pytest -n 0 --durations=0`, setup + call + teardown summed per
# module) on the 2-core CI machine, under load; units not listed take a few seconds and go last,
# in collection order. The order only needs the big ones roughly right. (The modules that now run
# their scenarios side by side are scaled by their measured new/old ratio; test_grpc estimated.)
UNIT_SECONDS: dict[str, float] = {
    "tests/interop/test_grpc.py": 300, "tests/client/": 250, "tests/interop/test_pop_proxy.py": 160,
    "tests/interop/test_ha_interop.py": 210, "tests/interop/test_mqadmin_all.py": 105,
    "tests/interop/test_clients.py": 114, "tests/inspect/test_inspect_fuzz.py": 98,
    "tests/interop/test_pop_store.py": 68, "tests/interop/test_mixed_cluster.py": 57,
    "tests/interop/test_apache_store.py": 79, "tests/interop/test_apache_slave_sync.py": 78,
    "tests/interop/test_pop_push.py": 51, "tests/interop/test_pop.py": 60,
    "tests/interop/test_mqadmin_cluster.py": 63, "tests/interop/test_pop_buffer_merge.py": 49, "tests/interop/test_mqadmin.py": 37,
    "tests/broker/test_serve_ha.py": 45, "tests/interop/test_request_reply.py": 41,
    "tests/interop/test_slave_of_apache.py": 35, "tests/broker/test_pop_restart.py": 27,
    "tests/proxy/test_renew.py": 26, "tests/broker/test_pop_buffer.py": 26,
    "tests/store/test_timer_crash.py": 24, "tests/broker/test_pop_serve.py": 23,
    "tests/broker/test_cluster_failover.py": 22, "tests/cli/test_send_stream.py": 22,
    "tests/proxy/test_sdk_producer.py": 21, "tests/proxy/test_sdk_dlq.py": 21,
    "tests/broker/test_serve_limits.py": 20, "tests/proxy/test_serve_grpc_cli.py": 19,
    "tests/broker/test_disk_full_tmpfs.py": 18, "tests/store/test_crash.py": 18,
    "tests/cli/test_send_consume.py": 71, "tests/cli/test_read_only.py": 52, "tests/inspect/test_inspect_cli.py": 32,
    "tests/cli/test_inspect_replica.py": 26, "tests/cli/test_help.py": 25, "tests/store/test_ha.py": 24,
    "tests/cli/test_verify_replica.py": 20, "tests/inspect/test_readonly_and_live.py": 20,
}
SHARED_UNITS = ("tests/client/",)


def xdist_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((p for p in SHARED_UNITS if path.startswith(p)), path)


@pytest.hookimpl(tryfirst=True)  # before pytest groups the items of parametrized session fixtures
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest units first (a stable sort, so each unit keeps the order of its own items).

    `quiet` tests assert latencies (500 new groups: every route look-up under 100 ms), which
    tests running beside them on other cores would make: in a parallel run (an xdist worker)
    they are skipped, and the README's test command runs them afterwards on their own."""
    items.sort(key=lambda item: -UNIT_SECONDS.get(xdist_unit(item.nodeid), 0.0))
    if not hasattr(config, "workerinput"):
        return
    skip = pytest.mark.skip(reason="quiet: measured alone by `python3 -m pytest -ra -m quiet -n 0`")
    for item in items:
        if item.get_closest_marker("quiet") is not None:
            item.add_marker(skip)


try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # run without xdist (-p no:xdist): nothing to schedule
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:
    class UnitScheduling(LoadScopeScheduling):
        """xdist's LoadScopeScheduling with our units (`_split_scope`, its documented extension point)."""

        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    @pytest.hookimpl(optionalhook=True)  # a hook of xdist's: unknown under -p no:xdist
    def pytest_xdist_make_scheduler(config: pytest.Config, log):
        if config.getoption("dist") != "loadscope":
            return None  # another --dist given: xdist's own scheduler
        config.option.loadscopereorder = False  # our order (longest first), not xdist's (most tests first)
        return UnitScheduling(config, log)
