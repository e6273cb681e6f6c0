"""Lossless compaction: plans, the five outcomes, and replay equality (items 51-55)."""

from __future__ import annotations

import copy
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.typed.compaction.apply import apply_compaction, plan_compaction
from ledger.typed.compaction.plan import RejectedPlanError, plan_id, read_plan, validate_plan
from ledger.typed.compaction.segments import COMPACTION_METADATA, build_segment, file_digest
from ledger.typed.config import LedgerConfig, parse_config
from ledger.typed.jsontext import final_id
from ledger.typed.persist import persist
from ledger.typed.projection import build_projection
from ledger.typed.query import query_sql
from ledger.typed.records import Record
from ledger.typed.reducers.simple import replay
from ledger.typed.store import ShardStore
from ledger.typed.transactions import normalize_appends

TS = "2026-01-01T00:00:00.000Z"
SMALL = {"min-segments": 2, "max-segments": 2}
CITATION = {"type": "repository", "path": "README.md"}


def config_for(kind: str | None, **extra: Any) -> LedgerConfig:
    definition: dict[str, Any] = {"compaction": SMALL, **extra}
    if kind:
        definition["type"] = kind
    return parse_config({"x": definition})


def shards(store: ShardStore) -> list[str]:
    return sorted(p.name for p in store.shard_dir("x").glob("*.jsonl"))


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def tables(config: LedgerConfig, store: ShardStore, out: Path) -> dict[str, Any]:
    path = build_projection(config, store, out)["x"]
    names = query_sql(path, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
    found: dict[str, Any] = {}
    for row in names:
        name = row["name"]
        sql = f'SELECT * FROM "{name}"'
        rows = query_sql(path, sql, limit=10_000)
        for item in rows:
            item.pop("shard", None), item.pop("offset", None)  # physical layout only
        found[name] = rows if name != "shards" else len(rows) > 0
    return found


def written_by_two_writers(
    kind: str, first: list[Any], second: list[Any], root: Path
) -> ShardStore:
    store = ShardStore(root)
    store.append("x", first, timestamp=TS)
    store.append("x", second, timestamp=TS)
    return store


def test_built_segment_vectors() -> None:
    r1 = Record.new(
        id="ldg-12345678-1234-4123-8123-123456789abc",
        timestamp=TS,
        parents=[],
        payload={"id": final_id("12345:1", 0), "operation": "append", "value": "x"},
    )
    r2 = Record.new(
        id="ldg-12345678-1234-4123-8123-123456789abd",
        timestamp="2026-01-01T00:00:01.000Z",
        parents=[r1.sha],
        payload={"id": final_id("12345:1", 1), "operation": "append", "value": "y"},
    )
    assert build_segment([r2, r1], {})[0] == "ea51d6b0-8657-4de0-a7ee-020ae576902b"
    seg_id, content = build_segment([r1, r2, r1], COMPACTION_METADATA)
    assert seg_id == "4fdc078e-716d-4d24-b8cf-1050f1587b3d"
    expected = "sha256:b872d7e6a76ba0b2d522f1dce81fc306da98c51b51bf67f9049a52b59309bdeb"
    assert file_digest(content) == expected


@pytest.mark.parametrize(
    ("kind", "first", "second"),
    [
        (
            "log",
            [{"operation": "append", "value": v} for v in "ab"],
            [{"operation": "append", "value": v} for v in "cd"],
        ),
        (
            "set",
            [{"operation": "add", "value": "a"}, {"operation": "remove", "value": "a"}],
            [{"operation": "add", "value": "a"}],
        ),
        (
            "map",
            [{"operation": "put", "key": "a", "value": 1}],
            [
                {"operation": "put", "key": "a", "value": 2},
                {"operation": "delete", "key": "missing"},
            ],
        ),
        (
            "counter",
            [
                {"operation": "increment", "name": "a", "amount": 3},
                {"operation": "increment", "name": "a", "amount": 5},
            ],
            [{"operation": "decrement", "name": "a", "amount": 2}],
        ),
    ],
)
def test_projection_is_unchanged_by_compaction(
    tmp_path: Path, kind: str, first: list[Any], second: list[Any]
) -> None:
    config = config_for(kind)
    store = written_by_two_writers(kind, first, second, tmp_path / "store")
    before = tables(config, store, tmp_path / "before")
    before_records = {r.sha: (r.id, r.parents) for r in store.read("x").records}
    plan = plan_compaction(config, store, "x")
    assert plan is not None and len(plan["sources"]) == 2
    outcome = apply_compaction(config, store, plan)
    assert (outcome.status, outcome.applied) == ("ready", True)
    assert shards(store) == [f"{plan['replacement']['segment']}.jsonl"]
    assert {r.sha: (r.id, r.parents) for r in store.read("x").records} == before_records
    assert tables(config, store, tmp_path / "after") == before


def test_notes_forked_votes_survive_compaction_in_either_order(tmp_path: Path) -> None:
    config = config_for("notes")
    store = ShardStore(tmp_path / "store")
    note_id = final_id("n", 0)
    note = {
        "operation": "note",
        "subject": "S",
        "note": "N",
        "reason": "R",
        "citations": [CITATION],
    }
    (root,) = store.append("x", [note], ids=[note_id], timestamp=TS)
    up = Record.new(
        id=final_id("v", 0),
        timestamp="2026-01-02T00:00:00.000Z",
        parents=[root.sha],
        payload={"operation": "vote", "note_id": note_id, "vote": "up", "reason": "Verified"},
    )
    down = Record.new(
        id=final_id("v", 1),
        timestamp="2026-01-03T00:00:00.000Z",
        parents=[root.sha],
        payload={"operation": "vote", "note_id": note_id, "vote": "down"},
    )
    store.append_records("x", [up])
    store.append_records("x", [down])
    before = tables(config, store, tmp_path / "before")
    assert before["note_state"] == [
        {
            "note_id": note_id,
            "upvotes": 1,
            "downvotes": 1,
            "net_votes": 0,
            "last_vote_at": "2026-01-03T00:00:00.000Z",
            "last_positive_vote_at": "2026-01-02T00:00:00.000Z",
        }
    ]
    for _ in range(2):  # three shards: compact pairwise until one is left
        plan = plan_compaction(config, store, "x")
        assert plan is not None
        assert apply_compaction(config, store, plan).status == "ready"
    assert len(shards(store)) == 1
    assert tables(config, store, tmp_path / "after") == before


def make_store(tmp_path: Path, writers: int = 2) -> tuple[LedgerConfig, ShardStore]:
    config = config_for("log")
    store = ShardStore(tmp_path / "store")
    for i in range(writers):
        store.append("x", [{"operation": "append", "value": i}], timestamp=TS)
    return config, store


def test_nothing_to_plan(tmp_path: Path) -> None:
    config, store = make_store(tmp_path, writers=1)
    assert plan_compaction(config, store, "x") is None  # fewer than min-segments
    disabled = parse_config({"x": {"type": "log", "compaction": False}})
    _, two = make_store(tmp_path / "b")
    assert plan_compaction(disabled, two, "x") is None


def test_schedule_decides_when_scheduled_runs_are_due(tmp_path: Path) -> None:
    config, store = make_store(tmp_path)
    manual = parse_config({"x": {"type": "log", "compaction": {**SMALL, "schedule": "manual"}}})
    assert plan_compaction(manual, store, "x", trigger="scheduled") is None
    assert plan_compaction(manual, store, "x", trigger="requested") is not None
    now = datetime(2026, 3, 1, tzinfo=UTC)
    plan = plan_compaction(config, store, "x", trigger="scheduled", now=now)
    assert plan is not None and plan["trigger"] == "scheduled"
    apply_compaction(config, store, plan, now=now)
    store.append("x", [{"operation": "append", "value": 9}], timestamp=TS)
    soon, later = now + timedelta(hours=19), now + timedelta(hours=21)
    assert plan_compaction(config, store, "x", trigger="scheduled", now=soon) is None
    assert plan_compaction(config, store, "x", trigger="scheduled", now=later) is not None


def test_already_applied_stale_and_conflict(tmp_path: Path) -> None:
    config, store = make_store(tmp_path)
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    assert apply_compaction(config, store, plan).status == "ready"
    assert apply_compaction(config, store, plan).status == "already_applied"
    state = store.shard_dir("x").parent / "compaction" / "state.json"
    assert json.loads(state.read_text())["recent_plan_ids"] == [plan["plan_id"]]
    state.unlink()  # without the state file: the files are the evidence
    assert apply_compaction(config, store, plan).status == "already_applied"

    config, store = make_store(tmp_path / "stale")
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    (store.shard_dir("x") / f"{plan['sources'][0]['segment']}.jsonl").unlink()
    assert apply_compaction(config, store, plan).status == "stale"

    config, store = make_store(tmp_path / "conflict")
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    source = store.shard_dir("x") / f"{plan['sources'][1]['segment']}.jsonl"
    source.write_bytes(source.read_bytes()[:-1])
    before = snapshot(tmp_path / "conflict")
    assert apply_compaction(config, store, plan).status == "conflict"
    assert snapshot(tmp_path / "conflict") == before


def tampered(plan: dict[str, Any], how: str) -> dict[str, Any]:
    bad = copy.deepcopy(plan)
    match how:
        case "extra-key":
            bad["note"] = "hi"
        case "version":
            bad["version"] = "v2"
        case "ledger":
            bad["ledger"] = "other"
        case "branch":
            bad["branch"] = "ledgers/../x"
        case "traversal":
            bad["sources"][0]["segment"] = "../../etc/passwd"
        case "plan-id":
            bad["plan_id"] = "sha256:" + "0" * 64
        case "unsorted":
            bad["sources"].reverse()
        case "replacement-is-source":
            bad["replacement"]["segment"] = bad["sources"][0]["segment"]
        case "bytes":
            bad["sources"][0]["bytes"] = 10**9
        case "trigger":
            bad["trigger"] = "now"
        case "created":
            bad["created_at"] = "yesterday"
        case "not-superset":
            bad["replacement"]["records"] = bad["replacement"]["records"][:1]
        case "extra-record":  # a valid plan whose replacement cannot be rebuilt
            bad["replacement"]["records"] = sorted(
                [*bad["replacement"]["records"], "sha256:" + "f" * 64]
            )
    if how in ("replacement-is-source", "unsorted", "extra-record"):
        bad["plan_id"] = plan_id(bad)
    return bad


@pytest.mark.parametrize(
    "how",
    [
        "extra-key",
        "version",
        "ledger",
        "branch",
        "traversal",
        "plan-id",
        "unsorted",
        "replacement-is-source",
        "bytes",
        "trigger",
        "created",
        "not-superset",
        "extra-record",
    ],
)
def test_hostile_plans_are_rejected_and_change_nothing(tmp_path: Path, how: str) -> None:
    config, store = make_store(tmp_path)
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    before = snapshot(tmp_path)
    outcome = apply_compaction(config, store, tampered(plan, how))
    assert outcome.status == "rejected", outcome
    assert outcome.reason
    assert snapshot(tmp_path) == before


def test_validate_plan_raises_with_the_reference_wording(tmp_path: Path) -> None:
    config, _store = make_store(tmp_path)
    with pytest.raises(RejectedPlanError, match="Rejected ledger compaction plan"):
        validate_plan(config, {"version": 1})
    with pytest.raises(RejectedPlanError):
        validate_plan(config, "not a plan")


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    config, store = make_store(tmp_path)
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    before = snapshot(tmp_path)
    outcome = apply_compaction(config, store, plan, dry_run=True)
    assert (outcome.status, outcome.applied) == ("ready", False)
    assert snapshot(tmp_path) == before


def test_appends_keep_working_around_compaction(tmp_path: Path) -> None:
    config, store = make_store(tmp_path)
    plan = plan_compaction(config, store, "x")
    assert plan is not None
    artifact = normalize_appends(config, [{"operation": "append", "value": "late"}], "late:1")
    persist(config, store, artifact)
    assert apply_compaction(config, store, plan).status == "ready"
    values = [r["value"] for r in replay(config["x"], store.read("x").records).tables["state"]]
    assert values == ["0", "1", '"late"']
    persist(config, store, normalize_appends(config, [{"operation": "append", "value": 2}], "t:1"))
    assert store.read("x").ok and len(store.read("x").records) == 4


def test_read_plan_file_rules(tmp_path: Path) -> None:
    config, store = make_store(tmp_path)
    plan = plan_compaction(config, store, "x")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert read_plan(path) == plan
    link = tmp_path / "link.json"
    os.symlink(path, link)
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe")
    for bad in (link, empty, garbage, tmp_path / "missing.json"):
        with pytest.raises(RejectedPlanError):
            read_plan(bad)
