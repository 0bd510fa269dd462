"""Socket addresses as RocketMQ stores them: raw IPv4 (4 B) or IPv6 (16 B) then an int32 port."""

from __future__ import annotations

import ipaddress
import struct
from functools import lru_cache
from typing import NamedTuple


class Host(NamedTuple):
    ip: str
    port: int

    @property
    def is_v6(self) -> bool:
        return ":" in self.ip

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if self.is_v6 else f"{self.ip}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> Host:
        """`1.2.3.4:10911` or `[::1]:10911`."""
        if text.startswith("["):
            ip, _, port = text[1:].partition("]:")
        else:
            ip, _, port = text.rpartition(":")
        return cls(str(ipaddress.ip_address(ip)), int(port))


@lru_cache(maxsize=4096)  # hot path: every stored record packs two hosts
def pack_host(host: Host) -> bytes:
    return ipaddress.ip_address(host.ip).packed + struct.pack(">i", host.port)


@lru_cache(maxsize=4096)  # hot path too: every decoded record (pull bodies, scans) has two hosts
def unpack_host(raw: bytes) -> Host:
    if len(raw) == 8:
        return Host(str(ipaddress.IPv4Address(raw[:4])), struct.unpack(">i", raw[4:])[0])
    return Host(str(ipaddress.IPv6Address(raw[:16])), struct.unpack(">i", raw[16:])[0])
