"""Renderers for inspect items: JSON Lines, Rich tables and the `--format hex` dump.

JSON Lines keep RocketMQ's field names in a stable order. The hex view prints each item's bytes
as `hexdump -C` does (offsets are positions in the file), followed by its field tree (offset,
size, name, decoded value) walked from the construct declaration, like `tshark -V -x`.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Iterable, Iterator
from itertools import groupby
from typing import IO, Any

from rmqtool.inspect.dissect_common import iso
from rmqtool.inspect.fieldtree import Node, walk
from rmqtool.inspect.model import Item
from rmqtool.layouts.constants import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rmqtool.layouts.cqext import is_ext_addr, undecorate
from rmqtool.layouts.properties import decode_properties

try:  # orjson is several times faster on the hot path; output is identical
    import orjson

    _orjson_dumps = orjson.dumps
    _NEWLINE = orjson.OPT_APPEND_NEWLINE

    def dumps(obj: dict[str, Any]) -> str:
        try:
            return orjson.dumps(obj).decode("utf-8")
        except TypeError:  # an integer beyond 64 bits from damaged data: json can print it
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
except ImportError:  # pragma: no cover - depends on the environment
    _orjson_dumps = None
    _NEWLINE = 0

    def dumps(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def write_json(items: Iterable[Item], out: IO[str]) -> int:
    """One JSON object per line, written in batches of 64 lines.

    orjson makes each line as bytes (newline included); a batch is joined and written at once:
    to the binary buffer when `out` has one (stdout), else decoded once and written as text.
    64 lines of ~1 KiB records stay under malloc's mmap threshold (128 KiB): bigger batches
    measured slower, each join then maps and faults in fresh pages.
    """
    if _orjson_dumps is None:
        n = 0
        write = out.write
        for item in items:
            write(dumps(item.to_json()))
            write("\n")
            n += 1
        return n
    raw = getattr(out, "buffer", None)
    if raw is not None:
        out.flush()
        write_batch = raw.write
    else:
        def write_batch(data: bytes) -> None:
            out.write(data.decode("utf-8"))
    orjson_dumps = _orjson_dumps
    n = 0
    batch: list[bytes] = []
    append = batch.append
    for item in items:
        doc = item.fields if item.complete and not item.links else item.to_json()
        try:
            append(orjson_dumps(doc, option=_NEWLINE))
        except TypeError:
            append(dumps(doc).encode("utf-8") + b"\n")
        n += 1
        if len(batch) >= 64:
            write_batch(b"".join(batch))
            batch.clear()
    if batch:
        write_batch(b"".join(batch))
    if raw is not None:
        raw.flush()
    return n


# --- hex view ---------------------------------------------------------------------------------

def hexdump(data: bytes, start: int) -> Iterator[str]:
    """`hexdump -C` lines; offsets are `start + i`."""
    for i in range(0, len(data), 16):
        chunk = data[i : i + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk[:8])
        if len(chunk) > 8:
            hexes += "  " + " ".join(f"{b:02x}" for b in chunk[8:])
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        yield f"{start + i:08x}  {hexes:<49} |{text}|"
    yield f"{start + len(data):08x}"


_MAGICS = {MESSAGE_MAGIC_CODE: "MESSAGE_MAGIC_CODE", MESSAGE_MAGIC_CODE_V2: "MESSAGE_MAGIC_CODE_V2",
           BLANK_MAGIC_CODE: "BLANK_MAGIC_CODE"}
_SYSFLAGS = [(0x1, "COMPRESSED"), (0x2, "MULTI_TAGS"), (0x10, "BORNHOST_V6"), (0x20, "STOREHOSTADDRESS_V6"),
             (0x40, "NEED_UNWRAP"), (0x80, "INNER_BATCH")]
_TX = {0x4: "TRANSACTION_PREPARED", 0x8: "TRANSACTION_COMMIT", 0xC: "TRANSACTION_ROLLBACK"}
_COMPRESSION = {1: "LZ4", 2: "ZSTD", 3: "ZLIB"}
_TIME_FIELDS = {"bornTimestamp", "storeTimestamp", "beginTimestamp", "endTimestamp", "currWriteTime",
                "physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp", "lastReadTimeMs", "timestamp",
                "msgStoreTime"}


def _iso(ms: int) -> str:
    return iso(ms) or "-"


def describe(name: str, value: Any) -> str:
    """A field's decoded value as the hex view shows it."""
    if value is None:
        return "?"
    if name in ("magicCode", "magic") and isinstance(value, int) and value in _MAGICS:
        return f"{value & 0xFFFFFFFF:#010x} ({_MAGICS[value]})"
    if name == "sysFlag" and isinstance(value, int):
        names = [n for bit, n in _SYSFLAGS if value & bit]
        if value & 0xC:
            names.append(_TX[value & 0xC])
        if value & 0x700:
            names.append("COMPRESSION_" + _COMPRESSION.get((value & 0x700) >> 8, "?"))
        return f"{value:#x}" + (f" ({' | '.join(names)})" if names else "")
    if name in _TIME_FIELDS and isinstance(value, int):
        return f"{value} ({_iso(value)})"
    if name == "tagsCode" and isinstance(value, int) and is_ext_addr(value):
        return f"{value} (ConsumeQueueExt address, ext offset {undecorate(value)})"
    if name == "ip" and isinstance(value, bytes | bytearray):
        try:
            return str(ipaddress.ip_address(bytes(value)))
        except ValueError:
            return value.hex()
    if isinstance(value, dict) and "ip" in value and "port" in value:
        ip = describe("ip", value["ip"])
        return f"[{ip}]:{value['port']}" if ":" in ip else f"{ip}:{value['port']}"
    if name == "properties" and isinstance(value, bytes | bytearray):
        props = decode_properties(bytes(value).decode("utf-8", "replace"))
        text = ", ".join(f"{k}={v}" for k, v in props.items())
        return text if len(text) <= 400 else text[:400] + "…"
    if name == "topic" and isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    if name == "body" and isinstance(value, bytes | bytearray):
        try:
            text = bytes(value).decode("utf-8")
            return json.dumps(text[:80], ensure_ascii=False) + ("…" if len(text) > 80 else "")
        except UnicodeDecodeError:
            return f"({len(value)} bytes) {bytes(value[:24]).hex()}" + ("…" if len(value) > 24 else "")
    if isinstance(value, bytes | bytearray):
        return bytes(value[:32]).hex() + ("…" if len(value) > 32 else "")
    return str(value)


def field_tree(nodes: list[Node], base: int, depth: int = 1) -> Iterator[str]:
    ind = "    " * depth
    for n in nodes:
        if n.error and not n.children:
            yield f"{ind}{base + n.offset:08x}  {n.size:>5}  {n.name}: <{n.error}>"
            continue
        yield f"{ind}{base + n.offset:08x}  {n.size:>5}  {n.name}: {describe(n.name, n.value)}"
        if n.children:
            yield from field_tree(n.children, base, depth + 1)


def write_hex(items: Iterable[Item], out: IO[str]) -> int:
    n = 0
    for item in items:
        n += 1
        _hex_item(item, out, 0)
    return n


def _hex_item(item: Item, out: IO[str], depth: int) -> None:
    ind = "    " * depth
    title = item.kind
    summary = item.fields.get("problem") or item.fields.get("type") or ""
    out.write(f"{ind}{item.path} @ {item.pos}: {title}" + (f" ({summary})" if summary else "") + "\n")
    if item.raw is not None:
        for line in hexdump(item.raw, item.pos):
            out.write(ind + line + "\n")
        if item.layout is not None:
            for line in field_tree(walk(item.layout, item.raw), item.pos):
                out.write(ind + line + "\n")
    else:
        for k, v in item.fields.items():
            out.write(f"{ind}    {k}: {v}\n")
    if "detail" in item.fields:
        out.write(f"{ind}    ! {item.fields.get('problem')}: {item.fields['detail']}\n")
    for name, link in item.links.items():
        links = link if isinstance(link, list) else [link]
        out.write(f"{ind}    -> {name}:\n")
        for x in links:
            if isinstance(x, Item):
                _hex_item(x, out, depth + 2)
            else:
                out.write(f"{ind}        {json.dumps(x, ensure_ascii=False)}\n")
    out.write("\n")


# --- table view -------------------------------------------------------------------------------

def _short(v: Any, n: int = 40) -> str:
    s = "" if v is None else str(v)
    return s if len(s) <= n else s[: n - 1] + "…"


COLUMNS: dict[str, list[tuple[str, Any]]] = {
    "message": [("pos", "pos"), ("topic", "topic"), ("queueId", "queueId"), ("queueOffset", "queueOffset"),
                ("commitLogOffset", "commitLogOffset"), ("totalSize", "totalSize"),
                ("storeTime", lambda d: _iso(d["storeTimestamp"])), ("tags", "tags"), ("keys", "keys"),
                ("msgId", "msgId"), ("body", lambda d: _short(d.get("body", "<binary>"), 30)),
                ("problem", "problem")],
    "cq-unit": [("pos", "pos"), ("topic", "topic"), ("queueId", "queueId"), ("queueOffset", "queueOffset"),
                ("commitLogOffset", "commitLogOffset"), ("size", "size"),
                ("tagsCode", lambda d: f"ext@{d['extOffset']}" if "extOffset" in d else d["tagsCode"]),
                ("message", lambda d: _short((d.get("message") or {}).get("msgId") or "", 34))],
    "bcq-unit": [("pos", "pos"), ("topic", "topic"), ("queueId", "queueId"), ("msgBaseOffset", "msgBaseOffset"),
                 ("batchSize", "batchSize"), ("commitLogOffset", "commitLogOffset"), ("size", "size"),
                 ("tagsCode", "tagsCode"), ("storeTime", lambda d: _iso(d["storeTimestamp"])),
                 ("compactedOffset", "compactedOffset"),
                 ("message", lambda d: _short((d.get("message") or {}).get("msgId") or "", 34))],
    "cq-ext-unit": [("pos", "pos"), ("topic", "topic"), ("queueId", "queueId"), ("extOffset", "extOffset"),
                    ("extAddr", "extAddr"), ("size", "size"), ("tagsCode", "tagsCode"),
                    ("msgStoreTime", lambda d: _iso(d["msgStoreTime"])), ("bitMapSize", "bitMapSize"),
                    ("filterBitMap", "filterBitMap")],
    "index-entry": [("pos", "pos"), ("entry", "entry"), ("keyHash", "keyHash"), ("phyOffset", "phyOffset"),
                    ("timeDiff", "timeDiff"), ("prevIndex", "prevIndex"),
                    ("storeTime", lambda d: _iso(d["storeTimestamp"]))],
    "timerlog-unit": [("pos", "pos"), ("prevPos", "prevPos"), ("magic", "magic"),
                      ("currWriteTime", lambda d: _iso(d["currWriteTime"])), ("delayTime", "delayTime"),
                      ("delayedTime", lambda d: _iso(d["delayedTime"])), ("offsetPy", "offsetPy"),
                      ("sizePy", "sizePy"), ("hashCodeOfRealTopic", "hashCodeOfRealTopic")],
    "wheel-slot": [("pos", "pos"), ("slot", "slot"), ("time", "time"), ("firstPos", "firstPos"),
                   ("lastPos", "lastPos"), ("num", "num"),
                   ("chain", lambda d: " <- ".join(str(u.get("pos")) for u in d.get("chain", [])))],
}


def _cell(d: dict[str, Any], spec: Any) -> str:
    if callable(spec):
        return _short(spec(d), 60)
    v = d.get(spec)
    if isinstance(v, dict | list):
        v = json.dumps(v, ensure_ascii=False)
    return _short(v, 60)


def write_table(items: Iterable[Item], out: IO[str], *, width: int | None = None) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=width or (None if out.isatty() else 200), highlight=False,
                      soft_wrap=False, emoji=False, markup=False)
    n = 0

    def key(it: Item) -> tuple[str, str]:
        return (it.kind, str(it.fields.get("section", "")))

    for (kind, section), group in groupby(items, key=key):
        rows = list(_chunks(group, 500))
        for chunk in rows:
            docs = [it.to_json() for it in chunk]
            n += len(chunk)
            if kind in ("problem", "blank", "timerlog-blank", "cq-ext-blank", "index-header", "checkpoint", "timercheck", "config"):
                for d in docs:
                    console.print(f"{d['path']} @ {d['pos']}: " + ", ".join(
                        f"{k}={_short(json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v, 80)}"
                        for k, v in d.items() if k not in ("file", "path", "pos")))
                continue
            skip = ("file", "path", "pos", "section") if kind == "store" else ("file", "path")
            cols = COLUMNS.get(kind) or [(k, k) for k in docs[0] if k not in skip]
            title = f"{kind} {section}".strip() + f" — {docs[0]['path'] if kind != 'store' else ''}".rstrip(" —")
            table = Table(title=title, title_justify="left", show_lines=False)
            for name, _ in cols:
                table.add_column(name, overflow="fold")
            for d in docs:
                table.add_row(*(_cell(d, spec) for _, spec in cols))
            console.print(table)
    return n


def _chunks(it: Iterable[Item], size: int) -> Iterator[list[Item]]:
    buf: list[Item] = []
    for x in it:
        buf.append(x)
        if len(buf) >= size:
            yield buf
            buf = []
    if buf:
        yield buf


def default_format() -> str:
    return "table" if sys.stdout.isatty() else "json"
