"""RemotingCommand and its frame codec (protocol.md §1.2-§1.5).

Frame: int32 length (excluding itself) | int32 serType<<24 | headerLength | header | body.
Headers are read as JSON or ROCKETMQ binary; we always answer in JSON (ali-ons reads only
JSON), with string extFields values, because Java and Go clients require strings.

Every limit of the decoder is explicit, as `NettyDecoder` + `RemotingCommand.decode` have
them: a frame is 4 .. `MAX_FRAME_LENGTH` bytes (Java's `com.rocketmq.remoting.frameMaxLength`),
its header fits the frame and `MAX_HEADER_LENGTH`, `code`/`opaque`/`flag`/`version` are int32
numbers (Java's `int` fields; `Infinity`, `1e999`, `1.5` or 2^40 are no int32), and a JSON
header nests at most `MAX_HEADER_DEPTH` levels and holds at most `MAX_HEADER_BRACKETS` objects
and arrays. A frame outside these raises `FrameError`: Java's decoder throws and closes the
channel, and so does our transport.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import count

import orjson

from rmqtool.remoting.codes import CURRENT_VERSION, LANGUAGE_CODES, LANGUAGES

RESPONSE_FLAG = 0x1
ONEWAY_FLAG = 0x2
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
MAX_FRAME_LENGTH = 16 * 1024 * 1024  # NettyDecoder default frameMaxLength
# RocketMQ headers are a flat object holding a flat extFields map (depth 2); deeper JSON is
# hostile or broken, and Python's json would hit its recursion limit on it long before 16 MiB.
MAX_HEADER_DEPTH = 16
MAX_HEADER_BRACKETS = 1024  # objects and arrays in one header (a Java header has two)
# Java bounds a header only by its 24-bit length field. The largest a client sends is a send's
# properties string, which the broker refuses past 32,767 bytes (PROPERTIES_SIZE is a short):
# 1 MiB leaves room for any real header and bounds what parsing a hostile one costs.
MAX_HEADER_LENGTH = 1024 * 1024
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

_opaques = count(1)
_INT32 = struct.Struct(">i")
_FRAME_HEAD = struct.Struct(">ii")


class FrameError(ValueError):
    """A frame that cannot be decoded: the connection it came on is closed."""


def _ext_str(v: object) -> str:
    """Coerce a JSON scalar to the string Java's header decoding would see (ali-ons sends numbers)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v) if not isinstance(v, (dict, list)) else json.dumps(v, separators=(",", ":"))


@dataclass(slots=True)
class RemotingCommand:
    code: int
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = "JAVA"
    version: int = CURRENT_VERSION
    serialize_type: int = SERIALIZE_JSON

    @classmethod
    def request(cls, code: int, ext_fields: dict[str, object] | None = None, body: bytes = b"",
                oneway: bool = False) -> RemotingCommand:
        ext = {k: _ext_str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return cls(code, ext, body, next(_opaques), ONEWAY_FLAG if oneway else 0)

    def response(self, code: int = 0, ext_fields: dict[str, object] | None = None, body: bytes = b"",
                 remark: str | None = None) -> RemotingCommand:
        ext = {k: _ext_str(v) for k, v in (ext_fields or {}).items() if v is not None}
        return RemotingCommand(code, ext, body, self.opaque, RESPONSE_FLAG, remark)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def encode(self) -> bytes:
        """The whole frame, header in JSON as fastjson writes it (sorted keys, no spaces)."""
        h = self._header_json()
        body = self.body
        return _FRAME_HEAD.pack(4 + len(h) + len(body), len(h)) + h + body

    def encode_parts(self) -> tuple[bytes, bytes]:
        """`encode()` as (length fields + header, body): the transport hands both to one
        `writelines`, so a pull's 32 KiB body is not copied once more behind its header."""
        h = self._header_json()
        body = self.body
        return _FRAME_HEAD.pack(4 + len(h) + len(body), len(h)) + h, body

    def _header_json(self) -> bytes:
        """orjson writes exactly what `json.dumps(ensure_ascii=False, separators=(",", ":"))`
        does (same escapes, UTF-8 as is) several times faster; json stays as the fallback for
        what orjson refuses (integers past 64 bits, lone surrogates), so the bytes never change.
        """
        header: dict[str, object] = {"code": self.code}
        if self.ext_fields:
            header["extFields"] = self.ext_fields
        header["flag"] = self.flag
        header["language"] = self.language
        header["opaque"] = self.opaque
        if self.remark is not None:
            header["remark"] = self.remark
        header["serializeTypeCurrentRPC"] = "JSON"
        header["version"] = self.version
        try:
            return orjson.dumps(header)
        except TypeError:  # orjson.JSONEncodeError
            return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame without its leading length field (what follows the int32 length)."""
    data = frame if isinstance(frame, bytes) else bytes(frame)
    return _decode_at(data, 0, len(data))


def _decode_at(data: bytes, start: int, end: int) -> RemotingCommand:
    """Decode the frame in `data[start:end]` (after its length field) without copying it first.

    FrameReader hands whole read chunks here, so a frame is sliced once (header, body) rather
    than copied out of the stream buffer and then sliced again.
    """
    if end - start < 4:
        raise FrameError("frame shorter than its header-length field")
    (mark,) = _INT32.unpack_from(data, start)
    ser = (mark >> 24) & 0xFF
    hlen = mark & 0xFFFFFF
    hs = start + 4
    if hlen > end - hs:
        raise FrameError(f"header length {hlen} exceeds the frame ({end - hs} bytes)")
    if hlen > MAX_HEADER_LENGTH:
        raise FrameError(f"header length {hlen} over the {MAX_HEADER_LENGTH}-byte limit")
    header = data[hs : hs + hlen]
    if ser == SERIALIZE_JSON:
        cmd = _decode_json_header(header)
    elif ser == SERIALIZE_ROCKETMQ:
        cmd = _decode_binary_header(header)
    else:
        raise FrameError(f"unknown serialize type {ser}")
    cmd.body = data[hs + hlen : end]
    cmd.serialize_type = ser
    return cmd


def _loads_header(header: bytes) -> tuple[object, bool]:
    """Parse a JSON header: orjson when the result is plain, else json (the reference).

    orjson refuses some documents json accepts (NaN, lone surrogate escapes) and reads integers
    past 64 bits as floats, so its result is used only when every field we read has the type a
    Java client sends (ints, strings, string extFields); anything else is parsed again with
    json, which keeps exactly the headers we accept and the values we derive from them, and is
    checked for its nesting depth. A header with many brackets goes to json only: orjson 3.8
    recurses on the C stack and crashes the process (SIGSEGV) at ~100,000 levels, while json
    stops at the interpreter's recursion limit with a RecursionError.
    """
    obj = None
    # a header no longer than the bracket limit cannot exceed it: no count (a send's is ~400 bytes)
    if len(header) <= 2 * MAX_HEADER_BRACKETS or header.count(b"[") + header.count(b"{") <= 2 * MAX_HEADER_BRACKETS:
        try:
            obj = orjson.loads(header)
        except orjson.JSONDecodeError:
            obj = None
        if obj is not None and _plain(obj):
            return obj, True
    try:
        obj = json.loads(header.decode("utf-8"))
    except ValueError as e:  # not UTF-8, not JSON, or an integer past Python's 4,300 digits
        raise FrameError(f"header is not JSON: {_short_text(str(e))}") from None
    except RecursionError:
        obj = None
    if obj is None or _too_deep(obj, MAX_HEADER_DEPTH):
        raise FrameError(f"header nests deeper than {MAX_HEADER_DEPTH} levels or holds over "
                         f"{MAX_HEADER_BRACKETS} objects and arrays")
    return obj, False


def _too_deep(obj: object, limit: int) -> bool:
    """True when `obj` nests more than `limit` containers or holds over MAX_HEADER_BRACKETS of
    them (iteratively: no recursion of ours)."""
    stack: list[tuple[object, int]] = [(obj, 1)]
    seen = 0
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            children: Iterable[object] = o.values()
        elif isinstance(o, list):
            children = o
        else:
            continue
        seen += 1
        if d > limit or seen > MAX_HEADER_BRACKETS:
            return True
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _int32(obj: dict, key: str, default: int) -> int:
    """A header number Java reads into an `int`: an integer (or integral float, or decimal string,
    as fastjson coerces them) within int32; anything else makes the frame undecodable."""
    v = obj.get(key, default)
    if type(v) is int:
        n = v
    elif isinstance(v, float) and math.isfinite(v) and v.is_integer():
        n = int(v)
    elif isinstance(v, str) and v.strip().lstrip("+-").isdigit() and len(v) < 24:
        n = int(v)
    elif v is None:
        n = default
    else:
        raise FrameError(f"header field {key} is not an int32: {_short(v)}")
    if not INT32_MIN <= n <= INT32_MAX:
        raise FrameError(f"header field {key} is outside int32: {_short(n)}")
    return n


def _short_text(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def _short(v: object) -> str:
    """A value for a log line: at most 40 characters of it."""
    if isinstance(v, int) and v.bit_length() > 128:
        return f"an integer of {v.bit_length()} bits"
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _plain(obj: object) -> bool:
    """A header as Java clients write it: int32 numbers, str language/remark, str extFields,
    nothing else nested: such a header is decoded as it is, without any further check."""
    if type(obj) is not dict:
        return False
    get = obj.get
    for k in ("code", "opaque", "flag", "version"):
        v = get(k, 0)
        if type(v) is not int or not -0x80000000 <= v <= 0x7FFFFFFF:
            return False
    remark = get("remark")
    lang = get("language", "JAVA")
    if type(lang) is not str or lang not in LANGUAGE_CODES or (remark is not None and type(remark) is not str):
        return False
    ext = get("extFields")
    for v in obj.values():  # another nested value takes the checked path (nesting depth)
        if (type(v) is dict or type(v) is list) and v is not ext:
            return False
    if ext is None:
        return True
    if type(ext) is not dict:
        return False
    for v in ext.values():
        if type(v) is not str:
            return False
    return True


def _decode_json_header(header: bytes) -> RemotingCommand:
    obj, plain = _loads_header(header)
    if plain:  # what every Java client sends: no coercion, no check left to make
        get = obj.get  # type: ignore[union-attr]
        return RemotingCommand(get("code", 0), get("extFields") or {}, b"", get("opaque", 0), get("flag", 0),
                               get("remark"), get("language", "JAVA"), get("version", 0))
    if not isinstance(obj, dict):
        raise FrameError("header is not a JSON object")
    ext = obj.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    # Java clients send only strings: keep the parsed dict as is unless a value needs
    # coercing (ali-ons numbers and booleans, nulls to drop). JSON keys are always str.
    for v in ext.values():
        if type(v) is not str:
            ext = {k: _ext_str(v) for k, v in ext.items() if v is not None}
            break
    lang = obj.get("language", "JAVA")
    if type(lang) is int:
        lang = LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER"
    elif not isinstance(lang, str):
        raise FrameError(f"header field language is not a name: {_short(lang)}")
    elif lang not in LANGUAGE_CODES:
        lang = "OTHER"  # Java's LanguageCode has no other names (nor may a log line get one)
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _ext_str(remark)
    return RemotingCommand(
        _int32(obj, "code", 0),
        ext,
        b"",
        _int32(obj, "opaque", 0),
        _int32(obj, "flag", 0),
        remark,
        lang,
        _int32(obj, "version", 0),
    )


def _decode_binary_header(h: bytes) -> RemotingCommand:
    try:
        code, lang, version, opaque, flag, rlen = struct.unpack_from(">hbhiii", h, 0)
        p = 17
        if rlen < 0 or p + rlen > len(h):
            raise FrameError("remark runs past the header")
        remark = h[p : p + rlen].decode("utf-8", "replace") if rlen > 0 else None
        p += rlen
        (elen,) = struct.unpack_from(">i", h, p)
        p += 4
        end = p + elen
        if elen < 0 or end > len(h):
            raise FrameError("extFields run past the header")
        ext: dict[str, str] = {}
        while p < end:
            (kl,) = struct.unpack_from(">h", h, p)
            p += 2
            if kl < 0 or p + kl > end:
                raise FrameError("an extField runs past the header")
            k = h[p : p + kl].decode("utf-8", "replace")
            p += kl
            (vl,) = struct.unpack_from(">i", h, p)
            p += 4
            if vl < 0 or p + vl > end:
                raise FrameError("an extField runs past the header")
            ext[k] = h[p : p + vl].decode("utf-8", "replace")
            p += vl
    except struct.error as e:
        raise FrameError(f"binary header cut short: {e}") from None
    language = LANGUAGES[lang] if 0 <= lang < len(LANGUAGES) else "OTHER"
    return RemotingCommand(code, ext, b"", opaque, flag, remark, language, version)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """ROCKETMQ binary header (RocketMQSerializable), for tests and clients that opt in."""
    remark = (cmd.remark or "").encode("utf-8")
    ext = b"".join(
        struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
        for kb, vb in ((k.encode(), v.encode()) for k, v in cmd.ext_fields.items())
    )
    head = struct.pack(">hbhiii", cmd.code, LANGUAGE_CODES.get(cmd.language, 7), cmd.version, cmd.opaque,
                       cmd.flag, len(remark)) + remark + struct.pack(">i", len(ext)) + ext
    return struct.pack(">ii", 4 + len(head) + len(cmd.body), (SERIALIZE_ROCKETMQ << 24) | len(head)) + head + cmd.body


class FrameReader:
    """Splits a byte stream into frames, enforcing the frame size cap.

    A read chunk that holds whole frames is decoded in place; only an incomplete tail is kept,
    and a partial frame is merely appended to until its declared length is there, so a 16 MiB
    frame arriving in 256 KiB reads costs one copy, not one per read.
    """

    def __init__(self, max_frame: int = MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._need = 0  # bytes the buffered tail must reach before it can yield a frame
        self.max_frame = max_frame

    def pending(self) -> int:
        """Bytes of the frame being assembled (its length field included), 0 between frames.

        What the frame will occupy once complete: the transport reserves it against its budget
        for partial frames before reading more (the buffer itself only grows as data comes).
        """
        return self._need if self._buf else 0

    def buffered(self) -> int:
        return len(self._buf)

    def clear(self) -> None:
        """Drop a partial frame (the connection is gone): its memory is freed now."""
        self._buf = bytearray()
        self._need = 0

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if type(data) is not bytes:
            data = bytes(data)
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return []
            data = bytes(buf)
            buf.clear()
        out: list[RemotingCommand] = []
        p, n = 0, len(data)
        need = 4
        while n - p >= 4:
            (length,) = _INT32.unpack_from(data, p)
            if length < 4 or length > self.max_frame:
                raise FrameError(f"frame length {length} outside 4..{self.max_frame}")
            end = p + 4 + length
            if end > n:
                need = 4 + length
                break
            out.append(_decode_at(data, p + 4, end))
            p = end
        if p < n:
            buf += memoryview(data)[p:]
            self._need = need
        return out
