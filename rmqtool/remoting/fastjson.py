"""JSON as Java's fastjson writes remoting bodies (protocol.md §3.1, §3.2).

fastjson writes bean fields in alphabetical order, no whitespace, skips nulls, and writes
non-string map keys *unquoted* (`{0:"127.0.0.1:10911"}`) unless the name server was asked for
standard JSON (`version >= 401` or `acceptStandardJsonOnly`). `loads` reads both forms, because
ali-ons and our own client must parse what old brokers send.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_str = json.JSONEncoder(ensure_ascii=False).encode
_str_ascii = json.JSONEncoder(ensure_ascii=True).encode


def dumps(obj: Any, *, quote_keys: bool = True, browser_compatible: bool = False) -> str:
    """Encode `obj`; dict keys that are ints stay unquoted when `quote_keys` is False.

    Dicts are written in their own order (build bean dicts with `bean()` to get fastjson's sorted
    field order); None values are skipped like fastjson does without WriteMapNullValue.
    """
    enc = _str_ascii if browser_compatible else _str
    parts: list[str] = []

    def emit(o: Any) -> None:
        if o is None:
            parts.append("null")
        elif o is True:
            parts.append("true")
        elif o is False:
            parts.append("false")
        elif isinstance(o, str):
            parts.append(enc(o))
        elif isinstance(o, int):
            parts.append(str(o))
        elif isinstance(o, float):
            parts.append(repr(o))
        elif isinstance(o, Mapping):
            parts.append("{")
            first = True
            for k, v in o.items():
                if v is None:
                    continue
                if not first:
                    parts.append(",")
                first = False
                if isinstance(k, bool):
                    k = "true" if k else "false"
                if isinstance(k, int):
                    parts.append(f'"{k}":' if quote_keys else f"{k}:")
                elif hasattr(k, "to_json_obj"):  # Map<MessageQueue, ...>: fastjson writes the object itself
                    emit(k.to_json_obj())
                    parts.append(":")
                else:
                    parts.append(enc(str(k)))
                    parts.append(":")
                emit(v)
            parts.append("}")
        elif isinstance(o, (list, tuple, set, frozenset)):
            parts.append("[")
            for i, v in enumerate(o):
                if i:
                    parts.append(",")
                emit(v)
            parts.append("]")
        elif hasattr(o, "to_json_obj"):
            emit(o.to_json_obj())
        else:
            raise TypeError(f"cannot encode {type(o).__name__} as fastjson")

    emit(obj)
    return "".join(parts)


def dumpb(obj: Any, **kw: bool) -> bytes:
    return dumps(obj, **kw).encode("utf-8")


def bean(**fields: Any) -> dict[str, Any]:
    """A Java bean as fastjson writes it: fields sorted by name, nulls dropped."""
    return {k: fields[k] for k in sorted(fields) if fields[k] is not None}


class _Parser:
    """Reads fastjson output: bare number keys and object keys (`{{"topic":..}:{...}}`) included.

    An object key becomes a tuple of its sorted (name, value) pairs so it can key a dict.
    """

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self._dec = json.JSONDecoder()

    def ws(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in " \t\r\n":
            i += 1
        self.i = i

    def value(self) -> Any:
        self.ws()
        c = self.s[self.i : self.i + 1]
        if c == "{":
            return self.obj()
        if c == "[":
            self.i += 1
            out = []
            self.ws()
            if self.s[self.i : self.i + 1] == "]":
                self.i += 1
                return out
            while True:
                out.append(self.value())
                self.ws()
                c = self.s[self.i : self.i + 1]
                self.i += 1
                if c == "]":
                    return out
                if c != ",":
                    raise ValueError(f"expected , or ] at {self.i - 1}")
        if not c:
            raise ValueError("unexpected end of JSON")
        v, self.i = self._dec.raw_decode(self.s, self.i)
        return v

    def obj(self) -> dict[Any, Any]:
        self.i += 1
        out: dict[Any, Any] = {}
        self.ws()
        if self.s[self.i : self.i + 1] == "}":
            self.i += 1
            return out
        while True:
            self.ws()
            c = self.s[self.i : self.i + 1]
            if c == "{":
                k: Any = tuple(sorted(self.obj().items()))
            elif c == '"':
                k, self.i = self._dec.raw_decode(self.s, self.i)
            else:
                j = self.i
                while j < len(self.s) and self.s[j] not in ": \t\r\n":
                    j += 1
                word = self.s[self.i : j]
                k = int(word) if word.lstrip("-").isdigit() else word
                self.i = j
            self.ws()
            if self.s[self.i : self.i + 1] != ":":
                raise ValueError(f"expected : at {self.i}")
            self.i += 1
            out[k] = self.value()
            self.ws()
            c = self.s[self.i : self.i + 1]
            self.i += 1
            if c == "}":
                return out
            if c != ",":
                raise ValueError(f"expected , or }} at {self.i - 1}")


def loads(data: bytes | str) -> Any:
    """Parse fastjson output: standard JSON, bare integer map keys, object map keys.

    Raises ValueError on malformed input, and on nesting past the interpreter's recursion limit
    (a hostile body must be a decoding error like any other, not a RecursionError). Bare integer
    keys come back as ints.
    """
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray, memoryview)) else data
    try:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            p = _Parser(text)
            v = p.value()
            p.ws()
            if p.i != len(text):
                raise ValueError(f"trailing data at {p.i}") from None
            return v
    except RecursionError:
        raise ValueError("JSON nested too deep") from None
