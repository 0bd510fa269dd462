"""`crc32` of record bodies (UtilAll.crc32, masked by the callers): zlib-ng's when installed, else zlib's.

Both compute the same CRC-32; zlib-ng's uses the CPU's carry-less multiply and is several
times faster on 1 KiB bodies, which is most of what appending and recovery cost per record
besides Python itself. zlib-ng is a dependency, but nothing fails without it.
"""

from __future__ import annotations

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the plain zlib fallback
    from zlib import crc32

__all__ = ["crc32"]
