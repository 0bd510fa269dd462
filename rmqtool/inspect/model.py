"""What the dissectors yield and the renderers print: one `Item` per record, unit, slot or entry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Filters:
    """Command-line filters; `None` means no filter. Times are epoch ms."""

    offset: int | None = None
    limit: int | None = None
    topic: str | None = None
    queue: int | None = None
    since: int | None = None
    until: int | None = None
    msg_id: str | None = None
    key: str | None = None
    tag: str | None = None
    follow: bool = False  # follow links: CQ unit -> message, slot -> chain -> messages, msgIds decoded
    body_hex: bool = False
    raw: bool = False  # keep the bytes of each item (the hex view)

    def in_window(self, ts: int) -> bool:
        return (self.since is None or ts >= self.since) and (self.until is None or ts < self.until)


@dataclass
class Item:
    """One dissected thing at `pos` in `path` (relative to the store root or to PATH)."""

    kind: str
    path: str
    pos: int
    fields: dict[str, Any]
    raw: bytes | None = None
    layout: Any = None  # the construct Struct of `raw`
    links: dict[str, Any] = field(default_factory=dict)  # name -> Item | list[Item] | dict
    complete: bool = False  # `fields` already starts with file, path and pos (the JSON hot path)

    @property
    def file(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def to_json(self) -> dict[str, Any]:
        if self.complete and not self.links:
            return self.fields
        if self.complete:
            out: dict[str, Any] = dict(self.fields)
        else:
            out = {"file": self.file, "path": self.path, "pos": self.pos}
            out.update(self.fields)
        for name, link in self.links.items():
            if isinstance(link, Item):
                out[name] = link.to_json()
            elif isinstance(link, list):
                out[name] = [x.to_json() if isinstance(x, Item) else x for x in link]
            else:
                out[name] = link
        return out
