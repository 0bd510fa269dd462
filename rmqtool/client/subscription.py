"""`SubscriptionData` as `FilterAPI.build` makes it (protocol.md §7.6) and the client-side tag re-check."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rmqtool.layouts.javahash import java_string_hash

TAG = "TAG"
SQL92 = "SQL92"
SUB_ALL = "*"


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    expression_type: str = TAG
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))

    @classmethod
    def build(cls, topic: str, sub_string: str | None, expression_type: str | None = TAG) -> SubscriptionData:
        etype = (expression_type or TAG).upper()
        if etype == SQL92:
            return cls(topic, sub_string or "", SQL92)
        if not sub_string or sub_string.strip() in ("", SUB_ALL):
            return cls(topic, SUB_ALL, TAG)
        tags = []
        for t in sub_string.split("||"):
            t = t.strip()
            if t and t not in tags:
                tags.append(t)
        return cls(topic, sub_string, TAG, tags, [java_string_hash(t) for t in tags])

    def matches_tags(self, tags: str | None) -> bool:
        """`PullAPIWrapper.processPullResult`: exact tag strings, since hash codes can collide."""
        if self.expression_type != TAG or not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": False, "codeSet": list(self.code_set), "expressionType": self.expression_type,
                "subString": self.sub_string, "subVersion": self.sub_version, "tagsSet": list(self.tags_set),
                "topic": self.topic}
