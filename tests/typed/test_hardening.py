"""Issue 12 (typed): links inside a store are refused, duplicate JSON/YAML keys are
refused where a user or agent writes them, and SQL answers are capped in bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ledger.errors import ConfigError, LedgerError, PersistError, QueryError, ReplayError
from ledger.typed import (
    LedgerQueryTool,
    ShardStore,
    build_projection,
    normalize_appends,
    parse_config,
    persist,
    query_sql,
    read_artifact,
    write_artifact,
)
from ledger.typed.compaction.apply import apply_compaction, plan_compaction
from ledger.typed.compaction.plan import RejectedPlanError, read_plan
from ledger.typed.layout import StoreError

CONFIG = parse_config({"log": {"type": "log", "compaction": {"min-segments": 2}}})


def seeded(root: Path, n: int = 2) -> ShardStore:
    store = ShardStore(root, CONFIG)
    for i in range(n):
        store.append("log", [{"operation": "append", "value": i}])
    return store


# --- symbolic links --------------------------------------------------------------------


@pytest.mark.parametrize(
    "level", ["ledgers", "ledgers/log", "ledgers/log/ledger", "ledgers/log/ledger/shards"]
)
def test_a_symlinked_folder_is_refused_by_every_reader_and_writer(
    tmp_path: Path, level: str
) -> None:
    outside = tmp_path / "outside"
    seeded(outside)  # a real store elsewhere, which a link would expose
    real = outside / level
    root = tmp_path / "store"
    link = root / level
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real, target_is_directory=True)
    store = ShardStore(root, CONFIG)
    before = sorted(p.name for p in (outside / "ledgers/log/ledger/shards").iterdir())
    for attempt in (
        lambda: store.read("log"),
        lambda: store.names(),
        lambda: store.append("log", [{"operation": "append", "value": 9}]),
        lambda: build_projection(CONFIG, store, tmp_path / "out"),
        lambda: plan_compaction(CONFIG, store, "log"),
    ):
        with pytest.raises(LedgerError, match=f"{link} is a symbolic link"):
            attempt()
    artifact = normalize_appends(CONFIG, [{"operation": "append", "value": 9}], "t:1")
    with pytest.raises(PersistError, match="is a symbolic link"):
        persist(CONFIG, store, artifact)
    after = sorted(p.name for p in (outside / "ledgers/log/ledger/shards").iterdir())
    assert after == before  # nothing was written through the link


def test_a_symlinked_shard_file_is_never_read(tmp_path: Path) -> None:
    outside = seeded(tmp_path / "outside")
    store = seeded(tmp_path / "store", 1)
    foreign = next(outside.shard_dir("log").iterdir())
    (store.shard_dir("log") / foreign.name).symlink_to(foreign)
    rec = store.read("log")
    assert [d.code for d in rec.diagnostics] == ["invalid-envelope"]
    assert rec.diagnostics[0].file == foreign.name and "symbolic link" in str(rec.diagnostics[0])
    assert len(rec.records) == 1
    with pytest.raises(ReplayError):  # the strict projection fails closed
        build_projection(CONFIG, store, tmp_path / "out")


def test_a_symlinked_compaction_state_is_refused(tmp_path: Path) -> None:
    store = seeded(tmp_path / "store", 3)
    state_dir = tmp_path / "store/ledgers/log/ledger/compaction"
    (tmp_path / "elsewhere").mkdir()
    state_dir.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    plan = plan_compaction(CONFIG, store, "log")
    assert plan is not None
    with pytest.raises(StoreError, match="compaction is a symbolic link"):
        apply_compaction(CONFIG, store, plan)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_link_to_a_file_in_place_of_state_json_is_refused(tmp_path: Path) -> None:
    store = seeded(tmp_path / "store", 3)
    state_dir = tmp_path / "store/ledgers/log/ledger/compaction"
    state_dir.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    (state_dir / "state.json").symlink_to(secret)
    with pytest.raises(StoreError, match=r"state\.json is a symbolic link"):
        store.read_state("log")


# --- duplicate keys ----------------------------------------------------------------------


def test_duplicate_keys_in_an_artifact_are_refused(tmp_path: Path) -> None:
    artifact = normalize_appends(CONFIG, [{"operation": "append", "value": 1}], "t:1")
    text = json.dumps(artifact)
    doubled = text[:-1] + ', "transaction_id": "other:1"}'  # the same key, a second time
    path = tmp_path / "t.json"
    path.write_text(doubled)
    with pytest.raises(PersistError, match='duplicate key "transaction_id"'):
        read_artifact(path)
    nested = text.replace('"operation": "append"', '"operation": "append", "operation": "x"')
    path.write_text(nested)
    with pytest.raises(PersistError, match='duplicate key "operation"'):
        read_artifact(path)
    ok = write_artifact(tmp_path / "ok.json", artifact)
    assert read_artifact(ok) == artifact


def test_duplicate_keys_in_a_compaction_plan_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text('{"version": 1, "ledger": "a", "ledger": "b"}')
    with pytest.raises(RejectedPlanError, match='duplicate key "ledger"'):
        read_plan(path)


def test_duplicate_keys_in_the_yaml_config_are_refused() -> None:
    with pytest.raises(ConfigError, match="duplicate key 'type'"):
        parse_config("findings:\n  type: table\n  key: id\n  type: log\n")
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        parse_config("a:\n  type: log\na:\n  type: set\n")


def test_duplicate_keys_in_a_schema_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "s.json").write_text('{"type": "object", "type": "string"}')
    with pytest.raises(ConfigError, match='duplicate key "type"'):
        parse_config({"x": {"type": "log", "schema": "s.json"}}, base_dir=tmp_path)


# --- SQL byte caps -----------------------------------------------------------------------


@pytest.fixture
def projection(tmp_path: Path) -> Path:
    store = ShardStore(tmp_path / "s", CONFIG)
    store.append("log", [{"operation": "append", "value": i} for i in range(200)])
    return build_projection(CONFIG, store, tmp_path / "out")["log"]


def test_a_huge_value_is_refused_inside_sqlite(projection: Path) -> None:
    with pytest.raises(QueryError, match="cap of 1048576 bytes per value"):
        query_sql(projection, "SELECT zeroblob(16000000) AS z FROM records")
    with pytest.raises(QueryError, match="per value"):
        query_sql(projection, "SELECT group_concat(hex(zeroblob(100000))) FROM records")


def test_the_total_result_is_capped(projection: Path) -> None:
    sql = "SELECT zeroblob(900000) AS z FROM records"
    with pytest.raises(QueryError, match="exceeds the cap of 16777216 bytes"):
        query_sql(projection, sql)
    rows = query_sql(projection, sql, limit=3)  # within the caps: answered
    assert len(rows) == 3 and len(rows[0]["z"]) == 900000
    with pytest.raises(QueryError, match="exceeds the cap of 1000 bytes"):
        query_sql(projection, "SELECT payload FROM records", max_bytes=1000)
    with pytest.raises(QueryError, match="max_bytes must be"):
        query_sql(projection, "SELECT 1", max_bytes=0)


def test_the_agent_tool_caps_bytes_and_says_so(tmp_path: Path, projection: Path) -> None:
    store = ShardStore(tmp_path / "s", CONFIG)
    tool = LedgerQueryTool(CONFIG, store, projections={"log": projection})
    answer = tool(ledger="log", sql="SELECT zeroblob(16000000) FROM records")
    assert answer["success"] is False and "per value" in answer["error"]
    answer = tool(ledger="log", sql="SELECT zeroblob(500000) AS z FROM records")
    assert answer["success"] is False and "exceeds the cap of 1048576 bytes" in answer["error"]
    assert os.path.getsize(projection) < 10_000_000
