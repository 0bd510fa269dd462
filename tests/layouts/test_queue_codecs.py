"""BatchConsumeQueue and ConsumeQueueExt: the struct twins agree with the construct declarations,
and the ext address arithmetic is ConsumeQueueExt's (isExtAddr / decorate / unDecorate)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rmqtool.layouts.batchcq import BCQ_UNIT, BcqUnit
from rmqtool.layouts.constants import BCQ_STORE_UNIT_SIZE
from rmqtool.layouts.cqext import (
    CQ_EXT_HEAD,
    MAX_ADDR,
    MIN_EXT_UNIT_SIZE,
    CqExtUnit,
    decorate,
    is_ext_addr,
    undecorate,
)

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def test_sizes_are_the_java_constants():
    assert BcqUnit.sizeof() == BCQ_UNIT.size == BCQ_STORE_UNIT_SIZE == 46
    assert CQ_EXT_HEAD.size == MIN_EXT_UNIT_SIZE == 20
    # the field offsets BatchConsumeQueue reads by index
    offsets, at = {}, 0
    for sc in BcqUnit.subcons:
        offsets[sc.name] = at
        at += sc.sizeof()
    assert (offsets["tagsCode"], offsets["storeTimestamp"], offsets["msgBaseOffset"], offsets["batchSize"],
            offsets["compactedOffset"]) == (12, 20, 28, 36, 38)


@given(st.tuples(i64, i32, i64, i64, i64, i16, i32, i32))
def test_bcq_unit(v):
    names = [sc.name for sc in BcqUnit.subcons]
    raw = BCQ_UNIT.pack(*v)
    assert raw == BcqUnit.build(dict(zip(names, v, strict=True)))
    assert tuple(BcqUnit.parse(raw)[n] for n in names) == v


@given(i64, i64, st.binary(max_size=64))
def test_ext_unit(tags, ts, bit_map):
    size = MIN_EXT_UNIT_SIZE + len(bit_map)
    raw = CQ_EXT_HEAD.pack(size, tags, ts, len(bit_map)) + bit_map
    built = CqExtUnit.build(dict(size=size, tagsCode=tags, msgStoreTime=ts, bitMapSize=len(bit_map),
                                 filterBitMap=bit_map))
    assert raw == built
    assert CqExtUnit.parse(raw).filterBitMap == bit_map


def test_a_negative_bit_map_size_reads_no_bit_map():
    """CqExtUnit.read: bitMapSize < 1 means no filterBitMap."""
    assert CqExtUnit.parse(CQ_EXT_HEAD.pack(20, 1, 2, -1)).filterBitMap == b""


@given(st.integers(0, MAX_ADDR - (-(2**63))))
def test_addresses_round_trip_and_never_look_like_tag_hashes(offset):
    addr = decorate(offset)
    assert is_ext_addr(addr) and undecorate(addr) == offset


@given(i32)
def test_sign_extended_tag_hashes_are_never_addresses(tags):
    assert not is_ext_addr(tags)
    assert decorate(tags if tags >= 0 else 0) <= MAX_ADDR


def test_java_boundaries():
    assert MAX_ADDR == -2147483649  # Integer.MIN_VALUE - 1L
    assert decorate(0) == -(2**63) and undecorate(-(2**63)) == 0
    assert is_ext_addr(MAX_ADDR) and not is_ext_addr(MAX_ADDR + 1)
