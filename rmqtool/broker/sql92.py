"""SQL92 message selectors as RocketMQ evaluates them (protocol.md §7.6).

RocketMQ's `filter` module (SelectorParser.jj, from ActiveMQ's JMS selectors): comparisons
`= <> > >= < <=`, `[NOT] BETWEEN a AND b`, `[NOT] IN ('a', ...)`, `IS [NOT] NULL`, `AND OR NOT`,
string literals in single quotes (`''` escapes one), integers (optional `L`), decimals and
exponents, TRUE/FALSE/NULL, unary +/-, parentheses, `--` and `/* */` comments; 5.x adds
`[NOT] CONTAINS`, `STARTSWITH`, `ENDSWITH`. Properties are strings on the wire, so a string is
compared as a number when the other side is a number, like RocketMQ's ComparisonExpression.
A missing property is NULL; a comparison with NULL is unknown and does not match.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Props = Mapping[str, str]
Expr = Callable[[Props], Any]


class SelectorError(ValueError):
    """The expression does not parse (the broker answers SUBSCRIPTION_PARSE_FAILED, 23)."""


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<str>'(?:[^']|'')*')
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lLfFdD]?|0[xX][0-9a-fA-F]+[lL]?)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$.]*)
  | (?P<op><>|>=|<=|=|>|<|\(|\)|,|\+|-|\*|/|%)
    """,
    re.X | re.S,
)
_KEYWORDS = {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH",
             "ENDSWITH", "LIKE", "ESCAPE"}


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise SelectorError(f"unexpected character {text[pos]!r} at {pos}")
        pos = m.end()
        kind = m.lastgroup
        val = m.group()
        if kind == "ws":
            continue
        if kind == "str":
            out.append(("lit", val[1:-1].replace("''", "'")))
        elif kind == "num":
            out.append(("lit", _number(val)))
        elif kind == "id":
            up = val.upper()
            if up in _KEYWORDS:
                out.append(("kw", up))
            else:
                out.append(("id", val))
        else:
            out.append(("op", val))
    out.append(("end", None))
    return out


def _number(text: str) -> int | float:
    t = text.rstrip("lLfFdD") if not text.lower().startswith("0x") else text.rstrip("lL")
    if t.lower().startswith("0x"):
        return int(t, 16)
    if any(c in t for c in ".eE") or text[-1:] in "fFdD":
        return float(t)
    return int(t)


def _as_number(v: Any) -> int | float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            try:
                return float(v)
            except ValueError:
                return None
    return None


def _compare(a: Any, b: Any, op: str) -> bool | None:
    if a is None or b is None:
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        if op in ("=", "<>") and isinstance(a, bool) and isinstance(b, bool):
            return (a == b) if op == "=" else (a != b)
        if isinstance(a, str) or isinstance(b, str):  # 'true' = TRUE
            sa, sb = str(a).lower(), str(b).lower()
            return (sa == sb) if op == "=" else (sa != sb) if op == "<>" else None
        return None
    if isinstance(a, str) and isinstance(b, str):
        if op == "=":
            return a == b
        if op == "<>":
            return a != b
        na, nb = _as_number(a), _as_number(b)
        if na is None or nb is None:
            return None
        a, b = na, nb
    else:
        na, nb = _as_number(a), _as_number(b)
        if na is None or nb is None:
            return False if op == "=" else True if op == "<>" else None
        a, b = na, nb
    if op == "=":
        return a == b
    if op == "<>":
        return a != b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "<":
        return a < b
    return a <= b


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, Any]:
        return self.toks[self.i]

    def take(self) -> tuple[str, Any]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind: str, val: Any = None) -> bool:
        k, v = self.peek()
        if k == kind and (val is None or v == val):
            self.i += 1
            return True
        return False

    def expect(self, kind: str, val: Any = None) -> Any:
        k, v = self.take()
        if k != kind or (val is not None and v != val):
            raise SelectorError(f"expected {val or kind}, found {v!r}")
        return v

    def parse(self) -> Expr:
        e = self.or_expr()
        if self.peek()[0] != "end":
            raise SelectorError(f"unexpected {self.peek()[1]!r} after the expression")
        return e

    def or_expr(self) -> Expr:
        left = self.and_expr()
        while self.accept("kw", "OR"):
            right = self.and_expr()
            left = (lambda a, b: lambda p: _or(_truth(a(p)), _truth(b(p))))(left, right)
        return left

    def and_expr(self) -> Expr:
        left = self.not_expr()
        while self.accept("kw", "AND"):
            right = self.not_expr()
            left = (lambda a, b: lambda p: _and(_truth(a(p)), _truth(b(p))))(left, right)
        return left

    def not_expr(self) -> Expr:
        if self.accept("kw", "NOT"):
            inner = self.not_expr()
            return lambda p: _not(_truth(inner(p)))
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.additive()
        k, v = self.peek()
        if k == "op" and v in ("=", "<>", ">", ">=", "<", "<="):
            self.take()
            right = self.additive()
            return lambda p: _compare(left(p), right(p), v)
        negate = False
        if k == "kw" and v == "NOT":
            nk, nv = self.toks[self.i + 1]
            if nk == "kw" and nv in ("BETWEEN", "IN", "CONTAINS", "STARTSWITH", "ENDSWITH", "LIKE"):
                self.take()
                negate = True
                k, v = self.peek()
        if k == "kw" and v == "BETWEEN":
            self.take()
            lo = self.additive()
            self.expect("kw", "AND")
            hi = self.additive()

            def between(p: Props) -> bool | None:
                x = left(p)
                r = _and(_compare(x, lo(p), ">="), _compare(x, hi(p), "<="))
                return _not(r) if negate else r

            return between
        if k == "kw" and v == "IN":
            self.take()
            self.expect("op", "(")
            items = [self.expect("lit")]
            while self.accept("op", ","):
                items.append(self.expect("lit"))
            self.expect("op", ")")
            values = [str(x) for x in items]

            def in_(p: Props) -> bool | None:
                x = left(p)
                if x is None:
                    return None
                r = str(x) in values
                return not r if negate else r

            return in_
        if k == "kw" and v in ("CONTAINS", "STARTSWITH", "ENDSWITH", "LIKE"):
            self.take()
            pat = self.expect("lit")
            if not isinstance(pat, str):
                raise SelectorError(f"{v} needs a string")
            if v == "LIKE":
                rx = re.compile(_like_regex(pat, self._escape()), re.S)

            def text_op(p: Props) -> bool | None:
                x = left(p)
                if not isinstance(x, str):
                    return None
                if v == "CONTAINS":
                    r = pat in x
                elif v == "STARTSWITH":
                    r = x.startswith(pat)
                elif v == "ENDSWITH":
                    r = x.endswith(pat)
                else:
                    r = rx.fullmatch(x) is not None
                return not r if negate else r

            return text_op
        if k == "kw" and v == "IS":
            self.take()
            neg = self.accept("kw", "NOT")
            self.expect("kw", "NULL")
            return (lambda p: left(p) is not None) if neg else (lambda p: left(p) is None)
        return left

    def _escape(self) -> str | None:
        if self.accept("kw", "ESCAPE"):
            e = self.expect("lit")
            if not isinstance(e, str) or len(e) != 1:
                raise SelectorError("ESCAPE needs one character")
            return e
        return None

    def additive(self) -> Expr:
        left = self.multiplicative()
        while True:
            k, v = self.peek()
            if k == "op" and v in ("+", "-"):
                self.take()
                right = self.multiplicative()
                left = (lambda a, b, o: lambda p: _arith(a(p), b(p), o))(left, right, v)
            else:
                return left

    def multiplicative(self) -> Expr:
        left = self.unary()
        while True:
            k, v = self.peek()
            if k == "op" and v in ("*", "/", "%"):
                self.take()
                right = self.unary()
                left = (lambda a, b, o: lambda p: _arith(a(p), b(p), o))(left, right, v)
            else:
                return left

    def unary(self) -> Expr:
        if self.accept("op", "+"):
            return self.unary()
        if self.accept("op", "-"):
            inner = self.unary()
            return lambda p: _neg(inner(p))
        return self.primary()

    def primary(self) -> Expr:
        k, v = self.take()
        if k == "lit":
            return lambda p: v
        if k == "kw" and v in ("TRUE", "FALSE"):
            b = v == "TRUE"
            return lambda p: b
        if k == "kw" and v == "NULL":
            return lambda p: None
        if k == "id":
            return lambda p: p.get(v)
        if k == "op" and v == "(":
            e = self.or_expr()
            self.expect("op", ")")
            return e
        raise SelectorError(f"unexpected {v!r}")


def _like_regex(pat: str, esc: str | None) -> str:
    out, i = [], 0
    while i < len(pat):
        c = pat[i]
        if esc is not None and c == esc and i + 1 < len(pat):
            out.append(re.escape(pat[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return "".join(out)


def _truth(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, str):
        low = v.lower()
        return True if low == "true" else False if low == "false" else None
    return None


def _not(v: bool | None) -> bool | None:
    return None if v is None else not v


def _neg(v: Any) -> Any:
    n = _as_number(v)
    return None if n is None else -n


def _arith(a: Any, b: Any, op: str) -> Any:
    x, y = _as_number(a), _as_number(b)
    if x is None or y is None:
        return None
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        return None
    return x / y if op == "/" else x % y


def compile_selector(text: str) -> Callable[[Props], bool]:
    """Compile an expression into `matches(properties) -> bool` (unknown counts as no match)."""
    if text is None or not text.strip():
        raise SelectorError("empty SQL92 expression")
    expr = _Parser(text).parse()
    return lambda props: _truth(expr(props)) is True
