"""rmqtool's modules import one way: no import cycle, and no lower layer importing a higher one.

Every `import` / `from ... import` is read from the source with `ast`, wherever it stands (module
level, inside a function, under `if TYPE_CHECKING:`), so a cycle hidden by a lazy import counts.
The layers, lowest first: layouts (and the top-level helpers errors, validators, timeparse) <-
store <- remoting <- broker, client <- proxy; store <- inspect <- cli. A package may import its
own layer and any layer below.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import rmqtool

ROOT = Path(rmqtool.__file__).parent

# what each top-level package (or module) of rmqtool may import besides itself
BASE = {"layouts", "errors", "validators", "timeparse"}
ALLOWED: dict[str, set[str]] = {
    "layouts": {"errors"},
    "errors": set(),
    "validators": {"layouts", "errors"},
    "timeparse": {"errors"},
    "store": BASE,
    "remoting": BASE | {"store"},
    "broker": BASE | {"store", "remoting"},
    "client": BASE | {"store", "remoting"},
    "proxy": BASE | {"store", "remoting", "broker", "client"},
    "inspect": BASE | {"store"},
    "cli": BASE | {"store", "remoting", "broker", "client", "proxy", "inspect"},
    "__main__": {"cli"},
}
# rmqtool.store is below remoting: it must not know the wire
assert "remoting" not in ALLOWED["store"]


def module_names() -> dict[str, Path]:
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        parts = ("rmqtool", *p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = module_names()


def _known(name: str) -> str | None:
    """The longest rmqtool module that `name` is or lies in (a name imported from it, a package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imported_names(source: str, package: str) -> set[str]:
    """The rmqtool modules a source text imports, at any depth; `package` resolves relative imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for n in names:
            target = _known(n) if n.startswith("rmqtool") else None
            if target is not None:
                found.add(target)
    return found


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return imported_names(path.read_text(), package) - {module}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    return {m: imports_of(m) for m in MODULES}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_cycles_are_found_in_a_made_up_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_lazy_relative_and_type_checking_imports_are_seen():
    source = """
from typing import TYPE_CHECKING
from . import message
from .route import TopicRouteData
if TYPE_CHECKING:
    from rmqtool.client.instance import ClientInstance
def f():
    import rmqtool.store.config
    from rmqtool.layouts import properties as P
"""
    assert imported_names(source, "rmqtool.client") == {
        "rmqtool.client.message", "rmqtool.client.route", "rmqtool.client.instance", "rmqtool.store.config",
        "rmqtool.layouts.properties"}


# rmqtool.proxy included (issue #15: the receipt handle in its own module, rmqtool/proxy/handle.py,
# broke the consumer <-> renew circle); tests/proxy/test_proxy_imports.py checks its modules too
@pytest.mark.parametrize("package", sorted({layer(m) for m in MODULES if layer(m)}))
def test_no_import_cycle(package):
    graph = import_graph()
    bad = [c for c in cycles(graph) if any(layer(m) == package for m in c)]
    assert bad == [], "\n".join(
        " <-> ".join(c) + "\n  " + "\n  ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in bad)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_lower_layer_imports_a_higher_one(package):
    graph = import_graph()
    bad = sorted(f"{m} -> {t}" for m, ts in graph.items() if layer(m) == package for t in ts
                 if layer(t) and layer(t) != package and layer(t) not in ALLOWED[package])
    assert bad == []


def test_every_package_has_a_layer():
    assert {layer(m) for m in MODULES if layer(m)} <= set(ALLOWED)


# --- the tests' own modules: a test module imports helpers, never another test module -------------
#
# A helper kept in a test module hides where shared code lives, and importing that module runs its
# module-level code in the importer (an importorskip there skips the importer too). Shared code
# goes to a helper module: conftest.py or a name ending in _helpers.py, which pytest does not collect.
#
# One exception, named here: a module that runs other modules' tests as suites against more targets
# (test_grpc: tests/proxy's gRPC suites against Apache's proxy too) imports those modules whole and
# calls nothing of them but their test_ functions.

TESTS = Path(__file__).parent
SUITE_RUNNERS: dict[str, set[str]] = {
    "tests.interop.test_grpc": {f"tests.proxy.{m}" for m in (
        "test_sdk_consumer", "test_sdk_dlq", "test_sdk_producer", "test_sdk_recall", "test_status")},
}


def imported_test_modules(source: str, module: str) -> dict[str, set[str]]:
    """The `test_*` modules under tests/ that a source text imports, at any depth, each with what
    the source takes from it: "*" for names imported from it or a plain `import`, else the
    attributes read off the name it is bound to (`from pkg import test_x as suite`: suite.attr).
    `module` is the importer's dotted name (tests.cli.test_x), against which relative imports resolve."""
    package = module.split(".")[:-1]
    tree = ast.parse(source)
    found: dict[str, set[str]] = {}
    bound: dict[str, str] = {}  # local name -> test module imported whole under it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(a.name, "*") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - (node.level - 1)] + ([base] if base else []))
            pairs = [(base, "*")]
            for a in node.names:
                pairs.append((f"{base}.{a.name}", ""))
                if a.name.startswith("test_"):
                    bound[a.asname or a.name] = f"{base}.{a.name}"
        else:
            continue
        for name, use in pairs:
            parts = name.split(".")
            if parts[0] == "tests" and any(p.startswith("test_") for p in parts):
                stop = next(i for i, p in enumerate(parts) if p.startswith("test_"))
                uses = found.setdefault(".".join(parts[: stop + 1]), set())
                if use or stop + 1 < len(parts):
                    uses.add("*")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            found[bound[node.value.id]].add(node.attr)
    return found


def test_module_import_finder_sees_every_form():
    source = """
from tests.store.test_ha import HOST
from tests.proxy import test_sdk_consumer as suite
from .test_apache_store import client
from . import harness
from tests.serve_helpers import READY
from tests.broker.conftest import Wire
suite.test_one(1)
suite.helper(2)
def f():
    import tests.cli.test_send_stream
"""
    assert imported_test_modules(source, "tests.interop.test_slave_reads") == {
        "tests.store.test_ha": {"*"}, "tests.proxy.test_sdk_consumer": {"test_one", "helper"},
        "tests.interop.test_apache_store": {"*"}, "tests.cli.test_send_stream": {"*"}}


def test_no_test_module_imports_another():
    bad = []
    for p in sorted(TESTS.rglob("test_*.py")):
        rel = p.relative_to(TESTS.parent).with_suffix("")
        if "pylib" in rel.parts:  # third-party client packages installed for the interop tests
            continue
        module = ".".join(rel.parts)
        for target, uses in sorted(imported_test_modules(p.read_text(), module).items()):
            if target == module:
                continue
            if target in SUITE_RUNNERS.get(module, ()):
                uses = {u for u in uses if not u.startswith("test_")}  # a suite's tests, run again
                if not uses:
                    continue
            bad.append(f"{module} -> {target} {sorted(uses)}")
    assert bad == [], "\n".join(bad)
