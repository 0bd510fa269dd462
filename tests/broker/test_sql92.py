"""The SQL92 selector evaluator against RocketMQ's grammar (protocol.md §7.6)."""

from __future__ import annotations

import pytest

from rmqtool.broker.sql92 import SelectorError, compile_selector

PROPS = {"a": "5", "b": "-2.5", "s": "it's", "TAGS": "TagA", "flag": "true", "big": "9223372036854775807"}


@pytest.mark.parametrize("expr, want", [
    ("a = 5", True), ("a <> 5", False), ("a > 4 AND a < 6", True), ("a >= 5 and a <= 5", True),
    ("a BETWEEN 1 AND 5", True), ("a NOT BETWEEN 1 AND 5", False), ("b < -2", True), ("b > -3.0E0", True),
    ("TAGS = 'TagA'", True), ("TAGS IN ('TagB', 'TagA')", True), ("TAGS NOT IN ('TagA')", False),
    ("s = 'it''s'", True), ("missing IS NULL", True), ("a IS NOT NULL", True), ("missing = 1", False),
    ("NOT missing = 1", False), ("missing = 1 OR a = 5", True), ("NOT (a = 5)", False), ("flag = TRUE", True),
    ("TRUE", True), ("FALSE OR a = 5", True), ("a = 5L", True), ("big = 9223372036854775807", True),
    ("a = 2 + 3", True), ("-a = -5", True), ("a = 5 -- comment", True), ("/* c */ a = 5", True),
    ("a > 'x'", False), ("TAGS > 3", False), ("s CONTAINS 't''s'", True), ("s STARTSWITH 'it'", True),
    ("s ENDSWITH 'x'", False), ("TAGS NOT IN ('x') AND NOT missing IS NOT NULL", True),
])
def test_selector(expr, want):
    assert compile_selector(expr)(PROPS) is want


@pytest.mark.parametrize("bad", ["", "a >", "a = ", "IN ('x')", "((a = 1)", "a BETWEEN 1", "a IN (1,", "a = 'x",
                                 "a === 1", "a IS 5"])
def test_parse_errors(bad):
    with pytest.raises(SelectorError):
        compile_selector(bad)
