"""Write JSON as fastjson 1.x's pretty format does (formats.md §7.3), for configs repair rewrites.

TAB indentation, `"key":value` without spaces, String-keyed entries each on a new line, and
Integer-keyed maps inline with unquoted keys: `{0:7,1:5` + newline + indentation + `}`.
"""

from __future__ import annotations

import json
from typing import Any


def to_fastjson(obj: Any, depth: int = 0) -> str:
    ind = "\t" * depth
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        if all(isinstance(k, int) for k in obj):
            return "{" + ",".join(f"{k}:{to_fastjson(v, depth + 1)}" for k, v in obj.items()) + "\n" + ind + "}"
        parts = [f"\n{ind}\t{json.dumps(str(k), ensure_ascii=False)}:{to_fastjson(v, depth + 1)}"
                 for k, v in obj.items()]
        return "{" + ",".join(parts) + "\n" + ind + "}"
    if isinstance(obj, list):
        return "[" + ",".join(to_fastjson(v, depth + 1) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)
