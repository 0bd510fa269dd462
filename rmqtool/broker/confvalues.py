"""broker.conf values the request handlers read from the store config's `extra` table, with
BrokerConfig's defaults when a key is missing or does not parse (as Java's MixAll.properties2Object
leaves a field at its default)."""

from __future__ import annotations


def conf_flag(extra: dict[str, str], name: str, default: bool) -> bool:
    v = extra.get(name)
    return default if v is None else v.strip().lower() == "true"


def conf_int(extra: dict[str, str], name: str, default: int) -> int:
    try:
        return int(extra.get(name, default))
    except (TypeError, ValueError):
        return default
