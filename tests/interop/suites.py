"""Run the third-party client suites against a broker, all at once, and hand out their verdicts.

Each suite (Java `ClientSuite`, `node/ali_ons_suite.js`, `cpp_suite.py` under each C++ client
package) checks its own scenarios and prints one JSON line per check: {"scenario", "ok",
"detail", "ms"}. They use distinct topics and groups, so they run concurrently against the same
broker: the wall time is that of the slowest suite, not the sum.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .harness import HERE, JARS_NOT_BUILT, NODE_DIR, PYLIB_DIR, java_classpath, java_cmd

SUITE_TIMEOUT = 300  # seconds; every suite bounds each of its waits well below this

JAVA_CHECKS = ["producer-sync", "producer-async", "producer-oneway", "producer-batch", "push-concurrently",
               "lite-pull", "producer-ordered", "push-orderly", "producer-transaction", "retry", "dlq",
               "delay-level", "split"]
ALI_ONS_CHECKS = ["ali-ons-producer", "ali-ons-push-consumer", "ali-ons-retry", "ali-ons-dlq",
                  "ali-ons-delay-level", "ali-ons-split"]
CPP_SCENARIOS = ["produce-consume", "pull", "retry", "delay", "split"]
CPP_CHECKS = ["cpp-producer", "cpp-push-consumer", "cpp-pull-consumer", "cpp-retry", "cpp-delay-level",
              "cpp-split"]


@dataclass
class SuiteRun:
    """The processes of one client suite against one broker; verdicts parsed when they end."""

    name: str
    procs: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)
    missing: str | None = None  # why this suite cannot run here
    exits: list[str] = field(default_factory=list)
    _results: dict[str, dict] | None = None

    def results(self) -> dict[str, dict]:
        if self._results is None:
            self._results = {}
            deadline = time.time() + SUITE_TIMEOUT
            for proc, err in self.procs:
                try:
                    out, _ = proc.communicate(timeout=max(1.0, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, _ = proc.communicate()
                self.exits.append(f"{str(proc.args)[-60:]}: exit {proc.returncode}")
                text = out.decode("utf-8", "replace")
                err.with_suffix(".stdout").write_text(text)
                for line in text.splitlines():
                    at = line.find('{"scenario"')  # native client code may print on stdout too
                    if at >= 0:
                        r = json.loads(line[at:])
                        r["stderr"] = str(err)
                        self._results[r["scenario"]] = r
        return self._results

    def verdict(self, check: str) -> dict:
        r = self.results().get(check)
        if r is None:
            failed = [f"{x['scenario']}: {x['detail']}" for x in self.results().values() if not x["ok"]]
            if failed:
                return {"scenario": check, "ok": False, "detail": f"{self.name} failed before {check}: {failed}"}
            tails = "\n".join(err.read_text(errors="replace")[-1500:] for _, err in self.procs if err.exists())
            return {"scenario": check, "ok": False,
                    "detail": f"{self.name} reported nothing for {check} ({self.exits}):\n{tails}"}
        return r


def _popen(cmd: list[str], err: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None):
    err.parent.mkdir(parents=True, exist_ok=True)
    with open(err, "wb") as e:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=e, stdin=subprocess.DEVNULL, cwd=cwd, env=env)


def start_suites(namesrv: str, scratch: Path) -> dict[str, SuiteRun]:
    """Start every installed client suite against `namesrv`; verdicts are read on demand."""
    runs: dict[str, SuiteRun] = {}

    java = SuiteRun("Java ClientSuite (rocketmq-client 5.3.3)")
    if java_classpath() is None:
        java.missing = JARS_NOT_BUILT
    else:
        cmd = java_cmd("ClientSuite", "--namesrv", namesrv, home=scratch / "java",
                       props={"rocketmq.client.rebalance.waitInterval": "1000"})
        java.procs.append((_popen(cmd, scratch / "java.stderr"), scratch / "java.stderr"))
    runs["java"] = java

    ons = SuiteRun("ali-ons 3.12.0 suite")
    if not (shutil.which("node") and (NODE_DIR / "node_modules" / "ali-ons").is_dir()):
        ons.missing = "npm ali-ons not installed (run .ci/steps/10-interop.sh)"
    else:
        env = dict(os.environ, HOME=str(scratch / "node"))  # ali-ons keeps offsets and logs under ~
        (scratch / "node").mkdir(parents=True, exist_ok=True)
        cmd = ["node", str(NODE_DIR / "ali_ons_suite.js"), namesrv]
        ons.procs.append((_popen(cmd, scratch / "ali-ons.stderr", cwd=NODE_DIR, env=env), scratch / "ali-ons.stderr"))
    runs["ali-ons"] = ons

    for kind in ("cpp1", "cpp2"):
        run = SuiteRun(f"C++ client suite ({kind})")
        target = PYLIB_DIR / kind
        if not (target / "rocketmq" / "librocketmq.so").is_file():
            run.missing = f"PyPI C++ client {kind} not installed (run .ci/steps/10-interop.sh)"
        else:
            home = scratch / kind
            home.mkdir(parents=True, exist_ok=True)
            env = dict(os.environ, PYTHONPATH=str(target), HOME=str(home))  # C++ client logs go to ~/logs
            env.pop("NAMESRV_ADDR", None)
            # One process per scenario (client-cpp 2.1.0 cannot stop a consumer, so each process
            # keeps its clients until it exits), run one after the other: ten C++ clients at once
            # beside the Java and Node suites overload a 2-core machine.
            chain = " ; ".join(f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'cpp_suite.py'))} "
                               f"{shlex.quote(namesrv)} {scenario}" for scenario in CPP_SCENARIOS)
            err = scratch / f"{kind}.stderr"
            run.procs.append((_popen(["bash", "-c", chain], err, env=env), err))
        runs[kind] = run
    return runs
