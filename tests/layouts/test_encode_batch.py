"""`encode_records_parts` gives the pieces and message fields `encode_record_parts` gives, record by record."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqtool.layouts.message import MessageExt, encode_record_parts, encode_records_parts
from rmqtool.layouts.net import Host

_hosts = st.sampled_from([Host("127.0.0.1", 10911), Host("10.1.2.3", 1), Host("::1", 8080), Host("fe80::2", 9)])
_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12)
_msgs = st.builds(
    MessageExt,
    topic=st.one_of(st.sampled_from(["T", "Ünï", "x" * 200]), _text.filter(bool)),
    body=st.binary(max_size=300),
    queue_id=st.integers(0, 7),
    flag=st.integers(0, 9),
    sys_flag=st.sampled_from([0, 0x1, 0x4, 0x8, 0x10, 0x20, 0x30]),
    born_timestamp=st.integers(0, 2**41),
    born_host=_hosts,
    store_host=_hosts,
    properties=st.one_of(st.dictionaries(_text.filter(bool), _text, max_size=4),
                         st.just({"TAGS": None, "KEYS": "k"})),
    reconsume_times=st.integers(0, 16),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_msgs, min_size=0, max_size=6))
def test_batch_encoding_equals_per_record_encoding(msgs):
    ref = copy.deepcopy(msgs)
    expected = [bytes(p) for m in ref for p in encode_record_parts(m)]
    assert [bytes(p) for p in encode_records_parts(msgs)] == expected
    for got, want in zip(msgs, ref, strict=True):
        assert (got.sys_flag, got.magic_code, got.total_size, got.body_crc) == (
            want.sys_flag, want.magic_code, want.total_size, want.body_crc)
