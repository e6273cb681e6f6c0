"""ShardStore: the on-disk layout, reconstruction diagnostics, atomic appends."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

import pytest

from ledger.errors import RecordError
from ledger.typed import Record, ShardStore, canonical_json, final_id, record_sha
from ledger.typed.store import MAX_SHARDS

TS = "2026-01-01T00:00:00.000Z"


def ops(*values: object) -> list[dict[str, object]]:
    return [{"operation": "append", "value": v} for v in values]


def shard_files(store: ShardStore, name: str) -> list[Path]:
    return sorted(store.shard_dir(name).glob("*.jsonl"))


def write_shard(store: ShardStore, name: str, text: str | bytes) -> Path:
    directory = store.shard_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4()}.jsonl"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def codes(store: ShardStore, name: str) -> list[str]:
    return [d.code for d in store.read(name).diagnostics]


def test_append_writes_reference_layout_and_chain(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    first = store.append("log1", ops(1, 2), timestamp=TS)
    second = store.append("log1", ops(3), timestamp=TS)
    files = shard_files(store, "log1")
    assert len(files) == 2
    assert all(p.parent == tmp_path / "ledgers" / "log1" / "ledger" / "shards" for p in files)
    assert first[0].parents == () and first[1].parents == (first[0].sha,)
    assert second[0].parents == (first[1].sha,)
    lines = (store.shard_dir("log1") / first[0].shard).read_text()  # type: ignore[operator]
    assert lines == "".join(r.to_line() + "\n" for r in first)
    assert all(r.type == "ledger_append" and r.timestamp == TS for r in first)


def test_read_gives_replay_order_locations_and_heads(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    written = store.append("x", ops("a", "b"), timestamp=TS)
    rec = store.read("x")
    assert rec.ok and [r.sha for r in rec.records] == [r.sha for r in written]
    assert rec.heads == (written[-1].sha,)
    second = rec.records[1]
    assert second.shard == written[0].shard
    assert second.offset == len(written[0].to_line().encode()) + 1
    assert [s.size for s in rec.shards] == [sum(len(r.to_line()) + 1 for r in written)]


def test_missing_ledger_is_empty(tmp_path: Path) -> None:
    rec = ShardStore(tmp_path).read("nothing")
    assert rec.records == () and rec.diagnostics == () and rec.heads == ()


def test_bad_ledger_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="letters, numbers"):
        ShardStore(tmp_path).read("../etc")


def test_truncated_tail_is_diagnosed_and_ignored(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    good = store.append("t", ops(1), timestamp=TS)
    path = store.shard_dir("t") / str(good[0].shard)
    path.write_text(path.read_text() + good[0].to_line()[:20])
    rec = store.read("t")
    assert [d.code for d in rec.diagnostics] == ["truncated-record"]
    assert rec.diagnostics[0].line == 2 and len(rec.records) == 1


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda o: "not json", "invalid-json"),
        (lambda o: canonical_json({**o, "version": 2}), "unsupported-version"),
        (lambda o: canonical_json({**o, "sha": "sha256:" + "0" * 64}), "invalid-sha"),
        (lambda o: json.dumps(o, sort_keys=True), "invalid-envelope"),
    ],
)
def test_line_diagnostics(tmp_path: Path, mutate: object, code: str) -> None:
    store = ShardStore(tmp_path)
    rec = Record.new(id=final_id("t", 0), timestamp=TS, parents=(), payload={"a": 1})
    write_shard(store, "d", mutate(rec.as_dict()) + "\n")  # type: ignore[operator]
    assert codes(store, "d") == [code]


def test_duplicates_dedupe_across_shards_and_flag_conflicts(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    rec = Record.new(id=final_id("t", 0), timestamp=TS, parents=(), payload=1)
    write_shard(store, "d", rec.to_line() + "\n")
    write_shard(store, "d", rec.to_line() + "\n")
    assert store.read("d").ok and len(store.read("d").records) == 1
    other = Record.new(id=rec.id, timestamp=TS, parents=(), payload=2)
    write_shard(store, "d", other.to_line() + "\n")
    assert codes(store, "d") == ["duplicate-id-conflict"]
    assert len(store.read("d").records) == 2


def test_same_record_twice_in_one_shard_is_a_duplicate_id_warning(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    rec = Record.new(id=final_id("t", 0), timestamp=TS, parents=(), payload=1)
    write_shard(store, "d", (rec.to_line() + "\n") * 2)
    assert codes(store, "d") == []  # the reference dedupes silently (faithful on read)
    assert [w.code for w in store.read("d").warnings] == ["duplicate-id"]


def test_missing_parent_and_cycle(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    ghost = "sha256:" + "e" * 64
    orphan = Record.new(id=final_id("t", 0), timestamp=TS, parents=(ghost,), payload=1)
    write_shard(store, "d", orphan.to_line() + "\n")
    rec = store.read("d")
    assert [d.code for d in rec.diagnostics] == ["missing-parent"]
    assert rec.diagnostics[0].id == orphan.id and ghost in str(rec.diagnostics[0].detail)
    assert rec.records == (orphan,)


def test_bad_files_are_skipped_with_invalid_envelope(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    rec = Record.new(id=final_id("t", 0), timestamp=TS, parents=(), payload=1)
    directory = store.shard_dir("d")
    directory.mkdir(parents=True)
    (directory / "not-a-uuid.jsonl").write_text(rec.to_line() + "\n")
    (directory / f"{uuid.uuid4()}.jsonl").write_bytes(b"\xff\xfe\n")
    target = write_shard(store, "d", rec.to_line() + "\n")
    os.symlink(target, directory / f"{uuid.uuid4()}.jsonl")
    (directory / f".{uuid.uuid4()}.jsonl.tmp").write_text("half")  # an unfinished append
    result = store.read("d")
    assert [d.code for d in result.diagnostics] == ["invalid-envelope"] * 3
    assert len(result.records) == 1


def test_oversized_shard_is_refused_with_segment_limit(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    store.append("d", ops("x" * 2000), timestamp=TS)
    assert store.read("d").ok
    assert codes(store.__class__(tmp_path), "d") == []
    assert [d.code for d in store.read("d", max_segment_kb=1).diagnostics] == ["invalid-envelope"]


def test_shard_count_limit(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    directory = store.shard_dir("d")
    directory.mkdir(parents=True)
    for _ in range(MAX_SHARDS + 1):
        (directory / f"{uuid.uuid4()}.jsonl").write_text("")
    assert "Only the first 1024" in str(store.read("d").diagnostics[0].detail)


def test_append_rolls_segments(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    written = store.append("r", ops(*["v" * 400] * 10), timestamp=TS, max_segment_kb=2)
    files = shard_files(store, "r")
    assert len(files) > 1 and all(p.stat().st_size <= 2048 for p in files)
    rec = store.read("r")
    assert rec.ok and [r.sha for r in rec.records] == [r.sha for r in written]


def test_append_refuses_damaged_ledger_and_too_many_heads(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    write_shard(store, "bad", "oops\n")
    with pytest.raises(RecordError, match="Invalid canonical ledger history"):
        store.append("bad", ops(1))
    for i in range(65):
        root = Record.new(id=final_id("h", i), timestamp=TS, parents=(), payload=i)
        write_shard(store, "wide", root.to_line() + "\n")
    with pytest.raises(RecordError, match="Too many ledger DAG heads"):
        store.append("wide", ops(1))


def test_append_merges_forked_heads(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    a = Record.new(id=final_id("f", 0), timestamp=TS, parents=(), payload=1)
    b = Record.new(id=final_id("f", 1), timestamp=TS, parents=(), payload=2)
    store.append_records("m", [a])
    store.append_records("m", [b])
    merged = store.append("m", ops(3), timestamp=TS)
    assert merged[0].parents == tuple(sorted([a.sha, b.sha]))
    assert store.read("m").heads == (merged[0].sha,)


def test_append_records_keeps_ids_and_checks_records(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    rec = Record.new(id=final_id("n", 0), timestamp=TS, parents=(), payload={"x": 1})
    located = store.append_records("n", [rec])
    assert located[0].shard and located[0].offset == 0
    assert store.read("n").records == (rec,)
    forged = dataclasses.replace(rec, sha="sha256:" + "0" * 64)
    with pytest.raises(RecordError):
        store.append_records("n", [forged])


def test_crash_between_shard_renames_is_detectable(tmp_path: Path) -> None:
    """Simulate a crash after the later shard of a rolled append was renamed."""
    store = ShardStore(tmp_path)
    written = store.append("c", ops(*["v" * 400] * 6), timestamp=TS, max_segment_kb=2)
    first_shard = written[0].shard
    (store.shard_dir("c") / str(first_shard)).unlink()
    rec = store.read("c")
    assert "missing-parent" in [d.code for d in rec.diagnostics]


def test_record_sha_matches_stored(tmp_path: Path) -> None:
    store = ShardStore(tmp_path)
    (rec,) = store.append("s", ops({"b": 1, "a": [1, 2]}), timestamp=TS)
    assert record_sha(rec.as_dict()) == rec.sha
