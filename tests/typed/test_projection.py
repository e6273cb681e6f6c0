"""SQLite projections: tables, types, metadata, read-only files, fail-closed replay."""

from __future__ import annotations

import json
import sqlite3
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import ReplayError
from ledger.typed import (
    ProjectionFailed,
    ShardStore,
    build_projection,
    final_id,
    parse_config,
)
from ledger.typed.projection import validate_replay_output
from ledger.typed.reducers.base import TableSpec

TS = "2026-01-01T00:00:00.000Z"


def query(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def columns(path: Path, table: str) -> list[tuple[str, str, int]]:
    return [(r[1], r[2], r[5]) for r in query(path, f"PRAGMA table_info({table})")]


def test_raw_projection_generic_tables(tmp_path: Path) -> None:
    config = parse_config({"audit": {}})
    store = ShardStore(tmp_path / "repo")
    payload = {"record_type": "audit", "status": "ok", "id": final_id("t", 0)}
    (rec,) = store.append("audit", [payload], timestamp=TS)
    paths = build_projection(config, store, tmp_path / "out")
    db = paths["audit"]
    assert db == tmp_path / "out" / "audit" / "ledger.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o444
    rows = query(
        db, 'SELECT ordinal, id, sha, type, timestamp, payload, shard, "offset" FROM records'
    )
    assert rows == [(0, rec.id, rec.sha, "ledger_append", TS, rec.payload_json(), rec.shard, 0)]
    assert json.loads(rows[0][5]) == payload
    tables = {r[0] for r in query(db, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"shards", "records", "parents", "diagnostics"}
    indexes = {
        r[0]
        for r in query(db, "SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")
    }
    assert indexes == {
        "records_by_id",
        "records_by_type_time",
        "records_by_shard_offset",
        "parents_by_parent",
        "diagnostics_by_code",
    }
    assert columns(db, "records")[0] == ("ordinal", "INTEGER", 1)
    assert query(db, "SELECT json_extract(payload, '$.status') FROM records") == [("ok",)]


def test_table_projection_state_and_metadata(tmp_path: Path) -> None:
    config = parse_config({"findings": {"type": "table", "key": "id"}})
    store = ShardStore(tmp_path / "repo")
    store.append(
        "findings", [{"operation": "insert", "value": {"id": "a", "score": 1}}], timestamp=TS
    )
    store.append(
        "findings", [{"operation": "update", "key": "a", "patch": {"score": 3}}], timestamp=TS
    )
    db = build_projection(config, store, tmp_path / "out")["findings"]
    assert query(db, "SELECT key, value FROM state") == [("a", '{"id":"a","score":3}')]
    assert query(db, "SELECT count(*) FROM records") == [(2,)]
    assert query(db, "SELECT count(*) FROM parents") == [(1,)]
    meta = query(db, "SELECT * FROM replay_metadata")
    assert meta == [
        (
            "findings",
            1,
            2,
            "796badefbf5623e66d37ae1be2b18c3be2ec6bb55a6452e6544ac8f07f8a6988",
            1,
            "state",
            '{"key":"text","value":"text"}',
        )
    ]
    assert columns(db, "state") == [("key", "TEXT", 1), ("value", "TEXT", 0)]


def test_counter_value_is_integer_and_log_position(tmp_path: Path) -> None:
    config = parse_config({"m": {"type": "counter"}, "h": {"type": "log"}})
    store = ShardStore(tmp_path / "repo")
    store.append("m", [{"operation": "increment", "name": "a", "amount": 3}], timestamp=TS)
    store.append("h", [{"operation": "append", "value": "findings"}], timestamp=TS)
    paths = build_projection(config, store, tmp_path / "out")
    assert query(paths["m"], "SELECT name, value, typeof(value) FROM state") == [
        ("a", 3, "integer")
    ]
    assert columns(paths["h"], "state") == [("position", "INTEGER", 1), ("value", "TEXT", 0)]
    assert query(paths["h"], "SELECT value FROM state") == [('"findings"',)]
    assert query(paths["h"], "SELECT ledger_name FROM replay_metadata") == [("h",)]


def test_empty_notes_ledger_has_all_tables(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    db = build_projection(config, ShardStore(tmp_path / "repo"), tmp_path / "out")["knowledge"]
    kinds = dict(query(db, "SELECT name, type FROM sqlite_master WHERE name LIKE 'note%'"))
    assert kinds == {
        "notes": "table",
        "note_citations": "table",
        "note_votes": "table",
        "note_state": "table",
    }
    assert [c[0] for c in columns(db, "note_state")] == [
        "note_id",
        "upvotes",
        "downvotes",
        "net_votes",
        "last_vote_at",
        "last_positive_vote_at",
    ]
    assert query(db, "SELECT count(*) FROM note_state") == [(0,)]
    names = [r[0] for r in query(db, "SELECT table_name FROM replay_metadata ORDER BY rowid")]
    assert names == ["notes", "note_citations", "note_votes", "note_state"]  # reference order


def test_note_with_no_votes_in_sqlite(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    store = ShardStore(tmp_path / "repo")
    payload = {
        "operation": "note",
        "subject": "s",
        "note": "n",
        "reason": "r",
        "citations": [{"type": "repository", "path": "a.md"}],
    }
    (n,) = store.append("knowledge", [payload], ids=[final_id("t", 0)], timestamp=TS)
    db = build_projection(config, store, tmp_path / "out")["knowledge"]
    assert query(db, "SELECT * FROM note_state") == [(n.id, 0, 0, 0, None, None)]


def _damage(store: ShardStore, name: str) -> None:
    directory = store.shard_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{uuid.uuid4()}.jsonl").write_text('{"broken": true}\n')


def test_failure_is_per_ledger_and_fail_closed(tmp_path: Path) -> None:
    config = parse_config(
        {"good": {"type": "log"}, "bad": {"type": "log"}, "badop": {"type": "table", "key": "id"}}
    )
    store = ShardStore(tmp_path / "repo")
    store.append("good", [{"operation": "append", "value": 1}], timestamp=TS)
    store.append("bad", [{"operation": "append", "value": 1}], timestamp=TS)
    _damage(store, "bad")
    written = store.append(
        "badop", [{"operation": "update", "key": "a", "patch": {"x": 1}}], timestamp=TS
    )
    stale = tmp_path / "out" / "bad" / "ledger.db"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    with pytest.raises(ProjectionFailed) as info:
        build_projection(config, store, tmp_path / "out")
    assert set(info.value.failures) == {"bad", "badop"}
    assert "invalid canonical records" in info.value.failures["bad"]
    assert (
        written[0].id in info.value.failures["badop"]
        and "does not exist" in info.value.failures["badop"]
    )
    assert set(info.value.written) == {"good"} and info.value.written["good"].exists()
    assert not stale.exists()
    assert not (tmp_path / "out" / "badop" / "ledger.db").exists()
    assert isinstance(info.value, ReplayError)


def test_lenient_projection_quarantines(tmp_path: Path) -> None:
    config = parse_config({"t": {"type": "table", "key": "id"}})
    store = ShardStore(tmp_path / "repo")
    store.append("t", [{"operation": "insert", "value": {"id": "a"}}] * 2, timestamp=TS)
    _damage(store, "t")
    db = build_projection(config, store, tmp_path / "out", strict=False)["t"]
    assert query(db, "SELECT key FROM state") == [("a",)]
    assert sorted(r[0] for r in query(db, "SELECT code FROM diagnostics")) == [
        "invalid-operation",
        "unsupported-version",
    ]
    assert query(db, "SELECT record_count FROM replay_metadata") == [(1,)]


def test_replay_config_creates_no_database(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Custom ledger replay is no longer supported"):
        parse_config({"x": {"type": "log", "replay": {"script": "x"}}})
    assert not (tmp_path / "out").exists()


def test_rebuild_replaces_read_only_database(tmp_path: Path) -> None:
    config = parse_config({"h": {"type": "log"}})
    store = ShardStore(tmp_path / "repo")
    store.append("h", [{"operation": "append", "value": 1}], timestamp=TS)
    build_projection(config, store, tmp_path / "out")
    store.append("h", [{"operation": "append", "value": 2}], timestamp=TS)
    db = build_projection(config, store, tmp_path / "out")["h"]
    assert query(db, "SELECT value FROM state ORDER BY position") == [("1",), ("2",)]
    assert [p.name for p in db.parent.iterdir()] == ["ledger.db"]
    assert stat.S_IMODE(db.stat().st_mode) == 0o444


SPEC = TableSpec(
    name="items",
    columns=(
        ("id", "text"),
        ("count", "integer"),
        ("ok", "boolean"),
        ("ratio", "real"),
        ("data", "json"),
    ),
    primary_key=("id",),
)


def test_validate_output_converts_types() -> None:
    rows = validate_replay_output(
        [SPEC],
        {
            "items": [
                {
                    "id": "DROP TABLE x",
                    "count": 1,
                    "ok": True,
                    "ratio": 0.5,
                    "data": {"b": 1, "a": 2},
                }
            ]
        },
    )
    assert rows == {"items": [("DROP TABLE x", 1, 1, 0.5, '{"a":2,"b":1}')]}


@pytest.mark.parametrize(
    ("specs", "rows"),
    [
        ([TableSpec(name="records", columns=(("a", "text"),), primary_key=("a",))], {}),
        ([TableSpec(name="sqlite_shadow", columns=(("a", "text"),), primary_key=("a",))], {}),
        ([TableSpec(name="records_by_id", columns=(("a", "text"),), primary_key=("a",))], {}),
        (
            [
                TableSpec(name="Items", columns=(("a", "text"),), primary_key=("a",)),
                TableSpec(name="items", columns=(("a", "text"),), primary_key=("a",)),
            ],
            {},
        ),
        ([TableSpec(name="t", columns=(("a", "blob"),), primary_key=("a",))], {}),
        ([SPEC], {"items": [{"id": "a"}, {"id": "a"}]}),
        ([SPEC], {"items": [{"id": 1}]}),
        ([SPEC], {"items": [{"id": "x" * 65537}]}),
        ([SPEC], {"items": [{"id": "a", "data": float("inf")}]}),
        ([SPEC], {"items": [{"id": str(i)} for i in range(10_001)]}),
    ],
)
def test_validate_output_refusals(
    specs: list[TableSpec], rows: dict[str, list[dict[str, Any]]]
) -> None:
    with pytest.raises((ReplayError, ValueError)):
        validate_replay_output(specs, rows)


def test_large_log_uses_builtin_row_limit(tmp_path: Path) -> None:
    config = parse_config({"big": {"type": "log", "max-segment-kb": 10240}})
    store = ShardStore(tmp_path / "repo", config)
    store.append("big", [{"operation": "append", "value": i} for i in range(10_001)], timestamp=TS)
    db = build_projection(config, store, tmp_path / "out")["big"]
    assert query(db, "SELECT count(*), max(position) FROM state") == [(10_001, 10_000)]
    assert query(db, "SELECT record_count FROM replay_metadata") == [(10_001,)]


def test_forked_votes_merge_in_either_order(tmp_path: Path) -> None:
    """Conformance item 54: two branches vote on one note; shard order does not matter."""
    from ledger.typed import Record

    config = parse_config({"knowledge": {"type": "notes"}})
    payload = {
        "operation": "note",
        "subject": "s",
        "note": "n",
        "reason": "r",
        "citations": [{"type": "repository", "path": "a.md"}],
    }
    note = Record.new(id=final_id("t", 0), timestamp=TS, parents=[], payload=payload)
    up = Record.new(
        id=final_id("t", 1),
        timestamp="2026-01-02T00:00:00.000Z",
        parents=[note.sha],
        payload={"operation": "vote", "note_id": note.id, "vote": "up"},
    )
    down = Record.new(
        id=final_id("t", 2),
        timestamp="2026-01-03T00:00:00.000Z",
        parents=[note.sha],
        payload={"operation": "vote", "note_id": note.id, "vote": "down"},
    )
    results: list[list[list[tuple[Any, ...]]]] = []
    for order in ((up, down), (down, up)):
        store = ShardStore(tmp_path / f"repo{len(results)}")
        store.append_records("knowledge", [note])
        for vote in order:
            store.append_records("knowledge", [vote])
        db = build_projection(config, store, tmp_path / f"out{len(results)}")["knowledge"]
        results.append(
            [query(db, f"SELECT * FROM {t}") for t in ("note_votes", "note_state")]
            + [query(db, "SELECT sha FROM records ORDER BY ordinal")]
        )
    assert results[0] == results[1]
    assert results[0][1] == [
        (note.id, 1, 1, 0, "2026-01-03T00:00:00.000Z", "2026-01-02T00:00:00.000Z")
    ]
