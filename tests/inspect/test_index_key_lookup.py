"""`inspect index --key K` finds a key without --topic: index keys are TOPIC#KEY."""

from __future__ import annotations

import json

from tests.conftest import run_rmqtool


def test_key_lookup_with_and_without_topic(tmp_path):
    store = tmp_path / "store"
    for topic, key in (("TopicA", "order-1"), ("TopicB", "order-2"), ("TopicB", "order-1")):
        r = run_rmqtool("send", topic, f"{topic}-{key}", "--key", key, "--store", str(store), input="")
        assert r.returncode == 0, r.stderr
    def lookup(*extra):
        r = run_rmqtool("inspect", "index", str(store / "index"), "--key", "order-1", "-L", *extra, input="")
        assert r.returncode == 0, r.stderr
        return sorted(json.loads(line)["message"]["body"] for line in r.stdout.splitlines())

    assert lookup() == ["TopicA-order-1", "TopicB-order-1"]
    assert lookup("--topic", "TopicB") == ["TopicB-order-1"]
