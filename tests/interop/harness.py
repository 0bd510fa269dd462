"""What the interop tests need from the outside world: Apache's Java code, ali-ons, the C++ clients.

Each third-party reader or client is installed by `.ci/steps/10-interop.sh`; a test that needs
one that is missing on this machine skips with the reason (a missing install is a CI failure of
that step, not of the test). Nothing here is rmqtool's own reading code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
JAVA_DIR = HERE / "java"
NODE_DIR = HERE / "node"
PYLIB_DIR = HERE / "pylib"  # one --target dir per C++ client package (both are called `rocketmq`)

CPP_CLIENTS = {"cpp1": "rocketmq==0.4.4", "cpp2": "rocketmq-python-cvs==2.1.0.3"}


def has_module(name: str) -> bool:
    """True when this checkout has `name` (e.g. `rmqtool.cli.serve`): gates tests on code not yet landed."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def needs_module(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not has_module(name), reason=f"{name} is not on this branch yet")


# --- Java (Apache RocketMQ 5.3.3 from Maven Central) -----------------------------------------------

# the Apache version of tests/interop/java/target, and others built beside it (target-<version>)
APACHE_VERSION = "5.3.3"
APACHE_SECOND_VERSION = "5.5.0"


def java_classpath(version: str = APACHE_VERSION) -> str | None:
    target = JAVA_DIR / ("target" if version == APACHE_VERSION else f"target-{version}")
    cp = target / "classpath.txt"
    classes = target / "classes" / "rmqtool" / "interop"
    if not (cp.is_file() and classes.is_dir() and shutil.which("java")):
        return None
    return str(target / "classes") + os.pathsep + cp.read_text().strip()


# the one wording of this skip reason in every test report (tests/client uses it too)
JARS_NOT_BUILT = "Apache RocketMQ 5.3.3 jars not built (run .ci/steps/10-interop.sh; needs Maven Central)"


def require_java(version: str = APACHE_VERSION) -> str:
    cp = java_classpath(version)
    if cp is None:
        pytest.skip(JARS_NOT_BUILT if version == APACHE_VERSION else JARS_NOT_BUILT.replace(APACHE_VERSION, version))
    return cp


# Java 17 runs RocketMQ 5.x only with these opened (mmap cleaners, netty).
JAVA_OPENS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
]


def java_cmd(main: str, *args: str, heap: str = "256m", home: Path | None = None,
             props: dict[str, str] | None = None, version: str = APACHE_VERSION) -> list[str]:
    """A `java` command line for one of our mains; `home` keeps RocketMQ's logs out of ~."""
    cp = require_java(version)
    cmd = ["java", f"-Xmx{heap}", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-Djava.net.preferIPv4Stack=true", *JAVA_OPENS]
    if home is not None:
        cmd += [f"-Duser.home={home}", f"-Drocketmq.client.logRoot={home}/logs"]
    for k, v in (props or {}).items():
        cmd.append(f"-D{k}={v}")
    return [*cmd, "-cp", cp, f"rmqtool.interop.{main}", *args]


# --- Node (npm ali-ons 3.12.0) ------------------------------------------------------------------

def require_node() -> Path:
    if not (shutil.which("node") and (NODE_DIR / "node_modules" / "ali-ons").is_dir()):
        pytest.skip("npm ali-ons not installed (run .ci/steps/10-interop.sh)")
    return NODE_DIR


# --- PyPI C++ clients -------------------------------------------------------------------------------

def require_cpp(kind: str) -> dict[str, str]:
    """Environment whose PYTHONPATH imports that C++ client's `rocketmq` package."""
    target = PYLIB_DIR / kind
    if not (target / "rocketmq" / "librocketmq.so").is_file():
        pytest.skip(f"PyPI {CPP_CLIENTS[kind]} not installed (run .ci/steps/10-interop.sh)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(target)
    env.pop("NAMESRV_ADDR", None)
    return env


# --- running readers --------------------------------------------------------------------------------

def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def decode_with_apache(commitlog_dir: Path, tmp: Path) -> tuple[int, list[dict]]:
    """Apache's MessageDecoder.decode(..., checkCRC=true) over every record; (exit code, JSON lines)."""
    p = subprocess.run(java_cmd("DecodeCommitLog", str(commitlog_dir), home=tmp), capture_output=True,
                       timeout=120)
    assert p.returncode in (0, 1), p.stderr.decode(errors="replace")
    return p.returncode, json_lines(p.stdout.decode("utf-8"))


def decode_with_ali_ons(commitlog_dir: Path) -> tuple[int, list[dict]]:
    """ali-ons' message_decoder.decode over every v1 record; (exit code, JSON lines)."""
    node = require_node()
    p = subprocess.run(["node", str(node / "decode_commitlog.js"), str(commitlog_dir)], capture_output=True,
                       timeout=120)
    assert p.returncode in (0, 1), p.stderr.decode(errors="replace")
    return p.returncode, json_lines(p.stdout.decode("utf-8"))


def python() -> str:
    return sys.executable
