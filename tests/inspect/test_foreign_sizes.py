"""Writing into a store made with other sizes than RocketMQ's defaults: the fixture stores
(64 KiB CommitLog files, 16-slot / 40-entry index files, 20-unit TimerLog files).

`send` and `consume` adopt the sizes the store was written with (its broker.conf, else its
files), and never write into an index file whose shape they cannot tell.
"""

from __future__ import annotations

import json
import struct

from typer.testing import CliRunner

from rmqtool.cli.main import app
from rmqtool.errors import StoreError
from rmqtool.inspect.verify import check_store
from rmqtool.layouts.constants import INDEX_HEADER_SIZE
from rmqtool.layouts.index import INDEX_HEADER
from rmqtool.store.index import fit_index_geometry, index_geometry_fits

runner = CliRunner()


def _send_and_verify(root):
    result = runner.invoke(app, ["send", "TopicTest", "after", "--store", str(root), "--key", "k1", "--key", "k2"])
    assert result.exit_code == 0, result.output
    sent = json.loads(result.stdout)
    problems = [p for p in check_store(root)]
    assert problems == [], problems
    result = runner.invoke(app, ["consume", "TopicTest", "--store", str(root), "--group", "g-foreign",
                                 "--json", "--timeout", "0"])
    assert result.exit_code == 0, result.output
    got = [json.loads(line) for line in result.stdout.splitlines()]
    assert [m["body"] for m in got if m["msgId"] == sent["msgId"]] == ["after"]


def test_send_into_a_store_with_its_broker_conf_keeps_it_intact(store_copy):
    _send_and_verify(store_copy("good"))


def test_send_into_a_store_without_broker_conf_reads_the_sizes_off_its_files(store_copy):
    root = store_copy("good")
    (root / "broker.conf").unlink()
    _send_and_verify(root)


def test_index_geometry_is_read_off_the_content_where_the_size_allows_several(stores):
    files = sorted((stores / "good" / "index").iterdir())
    for f in files:
        assert fit_index_geometry(f, (5_000_000, 20_000_000)) == (16, 40)
        data = f.read_bytes()
        # 904 bytes are also 1 slot + 43 entries, 11 + 41, 36 + 36, ...: none of them reads right
        assert not any(index_geometry_fits(data, s, n) for s, n in [(1, 43), (11, 41), (36, 36)])


def test_an_index_whose_shape_cannot_be_told_is_not_written_into(store_copy):
    root = store_copy("good")
    (root / "broker.conf").unlink()
    for f in sorted((root / "index").iterdir())[:-1]:
        f.unlink()
    last = sorted((root / "index").iterdir())[-1]
    data = bytearray(last.stat().st_size)  # a header with no entries: every geometry fits
    INDEX_HEADER.pack_into(data, 0, 0, 0, 0, 0, 0, 1)
    last.write_bytes(bytes(data))
    assert fit_index_geometry(last, (5_000_000, 20_000_000)) is None
    before = last.read_bytes()
    result = runner.invoke(app, ["send", "TopicTest", "after", "--store", str(root)])
    assert isinstance(result.exception, StoreError) and result.exception.exit_code == 3  # one line, exit 3
    assert "index file" in str(result.exception)
    assert last.read_bytes() == before
    assert struct.unpack_from(">i", before, INDEX_HEADER_SIZE - 4)[0] == 1


def test_a_big_index_with_the_default_slot_count_and_fewer_entries_is_recognised(tmp_path):
    from rmqtool.store.index import IndexFile

    f = IndexFile(tmp_path / "20250101000000000", 5_000_000, 1_000_000, create=True)
    for i in range(100):
        f.put_key(f"T#k{i}", i * 100, 1_700_000_000_000 + i)
    f.flush()
    f.close()
    assert fit_index_geometry(tmp_path / "20250101000000000", (5_000_000, 20_000_000)) == (5_000_000, 1_000_000)


def test_replay_into_a_store_with_other_sizes_keeps_it_intact(store_copy):
    root = store_copy("good")
    (root / "broker.conf").unlink()
    result = runner.invoke(app, ["replay", "--topic", "TopicTest", "--store", str(root), "--json"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip(), "nothing was replayed"
    problems = [p for p in check_store(root)]
    assert problems == [], problems
