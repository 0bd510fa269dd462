"""rmqtool/proxy's modules import one another one way only: no module reaches back, at import
time or inside a function, to one that (directly or not) imports it. And the proxy imports no
higher layer than the broker it fronts (never the cli)."""

from __future__ import annotations

import ast
from pathlib import Path

import rmqtool.proxy

PROXY = Path(rmqtool.proxy.__file__).parent


def _proxy_imports(path: Path) -> set[str]:
    """Every rmqtool.proxy module a file imports, wherever the import statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "rmqtool.proxy":
                found.update(a.name for a in node.names)
            elif node.module.startswith("rmqtool.proxy."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names if a.name.startswith("rmqtool.proxy."))
    return found


def _graph() -> dict[str, set[str]]:
    return {p.stem: _proxy_imports(p) - {p.stem} for p in PROXY.glob("*.py") if p.stem != "__init__"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_proxy_modules_import_one_way():
    graph = _graph()
    assert {"consumer", "context", "renew", "handle"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    assert "consumer" not in graph["renew"] and "consumer" not in graph["context"]


def test_proxy_imports_no_cli():
    for p in PROXY.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("rmqtool.cli"), p.name
