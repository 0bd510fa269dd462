"""Field trees for the hex view, walked from the construct declarations in `rmqtool.layouts`.

Each subcon of a layout `Struct` is parsed in turn as `Struct._parse` does, and the stream
position before and after gives its offset and size, so the declaration stays the only copy of
a layout. A field that fails to parse (a damaged record) ends the tree with an error node, the
fields before it still shown.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

from construct import ConstructError, Container, IfThenElse, Renamed, Struct
from construct.core import evaluate


@dataclass
class Node:
    offset: int  # relative to the start of the parsed bytes
    size: int
    name: str
    value: Any
    children: list[Node] = field(default_factory=list)
    error: str | None = None


def _root_context(stream: io.BytesIO, struct: Struct) -> Container:
    ctx = Container(_params=Container(), _root=None, _parsing=True, _building=False, _sizing=False,
                    _subcons=struct._subcons, _io=stream, _index=None)
    ctx._root = ctx
    return ctx


def _chosen(sc: Any, ctx: Container) -> Any:
    inner = sc.subcon if isinstance(sc, Renamed) else sc
    if isinstance(inner, IfThenElse):
        try:
            return inner.thensubcon if evaluate(inner.condfunc, ctx) else inner.elsesubcon
        except Exception:  # noqa: BLE001 - a condition on a damaged field: no children
            return None
    return inner


def walk(struct: Struct, data: bytes, *, _stream: io.BytesIO | None = None, _ctx: Container | None = None,
         _base: int = 0) -> list[Node]:
    """Nodes (offset, size, name, value) of `struct` parsed from `data`."""
    stream = _stream or io.BytesIO(data)
    ctx = _ctx if _ctx is not None else _root_context(stream, struct)
    nodes: list[Node] = []
    for sc in struct.subcons:
        start = stream.tell()
        chosen = _chosen(sc, ctx)
        try:
            if isinstance(chosen, Struct):
                sub_ctx = Container(_=ctx, _params=ctx._params, _root=ctx._root, _parsing=True, _building=False,
                                    _sizing=False, _subcons=chosen._subcons, _io=stream, _index=None)
                children = walk(chosen, data, _stream=stream, _ctx=sub_ctx, _base=0)
                value = Container({c.name: c.value for c in children})
                if any(c.error for c in children):
                    nodes.append(Node(start, stream.tell() - start, sc.name, value, children,
                                      error=next(c.error for c in children if c.error)))
                    return nodes
            else:
                children = []
                value = sc._parsereport(stream, ctx, "(hex)")
        except (ConstructError, ValueError, OverflowError) as e:
            nodes.append(Node(start, max(0, len(data) - start), sc.name or "?", None,
                              error=str(e).splitlines()[-1] if str(e) else e.__class__.__name__))
            return nodes
        if sc.name:
            ctx[sc.name] = value
        nodes.append(Node(start, stream.tell() - start, sc.name or "?", value, children))
    return nodes
