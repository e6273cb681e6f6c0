"""The trusted persistence step (reference §7.3; conformance items 40-45)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import PersistError
from ledger.typed.config import LedgerConfig, parse_config
from ledger.typed.jsontext import final_id
from ledger.typed.persist import InvalidVoteError, persist
from ledger.typed.records import Record
from ledger.typed.store import ShardStore
from ledger.typed.transactions import normalize_appends

CITATION = {"type": "repository", "path": "README.md"}
NOTE = {"operation": "note", "subject": "S", "note": "N", "reason": "R", "citations": [CITATION]}
NOW = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def run(
    config: LedgerConfig, store: ShardStore, requests: Sequence[Any], tx: str = "12345:1"
) -> dict[str, Any]:
    return persist(config, store, normalize_appends(config, requests, tx), now=NOW)


def test_typed_result_reports_ids_and_operations_never_values(tmp_path: Path) -> None:
    config = parse_config({"processed": {"type": "set"}})
    store = ShardStore(tmp_path)
    result = run(config, store, [{"operation": "add", "value": "top-secret-value"}])
    entry = result["ledgers"]["processed"]
    assert entry["type"] == "set"
    assert entry["transactions"] == [
        {
            "id": final_id("12345:1", 0),
            "transaction_id": "12345:1",
            "operation": "add",
            "validated": True,
        }
    ]
    assert (entry["requested"], entry["persisted"], entry["rejected"]) == (1, 1, 0)
    assert entry["branch"] == "ledgers/processed"
    assert "top-secret-value" not in json.dumps(result)


def test_written_shard_carries_deterministic_payload_id(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    store = ShardStore(tmp_path)
    run(
        config,
        store,
        [{"operation": "append", "value": "x"}, {"operation": "append", "value": "y"}],
    )
    shards = list((tmp_path / "ledgers/history/ledger/shards").glob("*.jsonl"))
    assert len(shards) == 1
    records = [Record.from_line(line) for line in shards[0].read_text().splitlines()]
    assert [r.payload["id"] for r in records] == [final_id("12345:1", 0), final_id("12345:1", 1)]
    assert records[0].id != final_id("12345:1", 0)  # the envelope id is random
    assert records[1].parents == (records[0].sha,)  # a linear chain
    assert {r.timestamp for r in records} == {"2026-01-02T03:04:05.678Z"}


def test_notes_envelope_ids_are_deterministic(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    store = ShardStore(tmp_path)
    requests = [{**NOTE, "temp_id": "n"}, {"operation": "vote", "note_id": "#n", "vote": "up"}]
    run(config, store, requests)
    records = store.read("knowledge").records
    assert sorted(r.id for r in records) == sorted([final_id("12345:1", 0), final_id("12345:1", 1)])
    assert all("id" not in r.payload for r in records)
    vote = next(r for r in records if r.payload["operation"] == "vote")
    assert vote.payload["note_id"] == final_id("12345:1", 0)


def test_notes_counts_after_a_failed_then_retried_persist(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    store = ShardStore(tmp_path)
    blocker = tmp_path / "ledgers" / "knowledge"  # a file where the ledger's folder goes
    blocker.parent.mkdir()
    blocker.write_text("in the way")
    requests = [
        {**NOTE, "temp_id": "n"},
        {"operation": "vote", "note_id": "#n", "vote": "up", "reason": "Verified"},
        {"operation": "vote", "note_id": "#n", "vote": "down"},
    ]
    artifact = normalize_appends(config, requests, "12345:1")
    with pytest.raises(PersistError, match=r"not durable.*ledgers/knowledge is not a folder"):
        persist(config, store, artifact, now=NOW)
    assert snapshot(tmp_path) == {"ledgers/knowledge": b"in the way"}
    blocker.unlink()
    entry = persist(config, store, artifact, now=NOW)["ledgers"]["knowledge"]
    counts = {k: entry[k] for k in ("persisted", "notes_added", "note_votes_added")}
    assert counts == {"persisted": 3, "notes_added": 1, "note_votes_added": 2}
    assert (entry["upvotes"], entry["downvotes"], entry["invalid_vote_requests"]) == (1, 1, 0)


def test_retry_counts_only_what_is_new(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    store = ShardStore(tmp_path)
    requests = [
        {**NOTE, "temp_id": "n"},
        {"operation": "vote", "note_id": "#n", "vote": "up"},
        {"operation": "vote", "note_id": "#n", "vote": "down"},
    ]
    run(config, store, requests[:2])
    entry = run(config, store, requests)["ledgers"]["knowledge"]
    assert (entry["notes_added"], entry["note_votes_added"]) == (0, 1)
    assert (entry["upvotes"], entry["downvotes"]) == (0, 1)
    assert (entry["already_present"], entry["reconciled"], entry["persisted"]) == (2, 2, 1)
    before = snapshot(tmp_path)
    again = run(config, store, requests)["ledgers"]["knowledge"]
    assert again["persisted"] == 0 and again["already_present"] == 3
    assert snapshot(tmp_path) == before  # nothing new: nothing written


def test_vote_for_missing_note_writes_the_audit_and_fails(tmp_path: Path) -> None:
    config = parse_config({"knowledge": {"type": "notes"}})
    store = ShardStore(tmp_path)
    with pytest.raises(InvalidVoteError, match="missing note") as caught:
        run(config, store, [{"operation": "vote", "note_id": "ldg-nope", "vote": "up"}])
    assert caught.value.result["ledgers"]["knowledge"] == {
        "requested": 1,
        "persisted": 0,
        "rejected": 1,
        "invalid_vote_requests": 1,
    }
    assert snapshot(tmp_path) == {}


def test_conflicting_payload_under_the_same_id_fails(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    store = ShardStore(tmp_path)
    run(config, store, [{"operation": "append", "value": "x"}])
    before = snapshot(tmp_path)
    with pytest.raises(PersistError, match="Conflicting ledger record ID"):
        run(config, store, [{"operation": "append", "value": "changed"}])
    assert snapshot(tmp_path) == before


def test_dry_run_failure_writes_nothing_in_any_ledger(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}, "t": {"type": "table", "key": "id"}})
    store = ShardStore(tmp_path)
    requests = [
        {"ledger": "history", "operation": "append", "value": 1},
        {"ledger": "t", "operation": "update", "key": "absent", "patch": {"a": 1}},
    ]
    with pytest.raises(PersistError, match="does not exist"):
        run(config, store, requests)
    assert snapshot(tmp_path) == {}


def test_failed_second_ledger_leaves_the_first_untouched(tmp_path: Path) -> None:
    config = parse_config({"a": {"type": "log"}, "b": {"type": "log"}})
    root = tmp_path / "store"
    store = ShardStore(root)
    run(config, store, [{"ledger": "a", "operation": "append", "value": 0}], tx="seed:1")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "ledgers" / "b").mkdir()
    (root / "ledgers" / "b" / "ledger").symlink_to(outside)  # a link out of the store
    before = snapshot(root)
    requests = [
        {"ledger": "a", "operation": "append", "value": 1},
        {"ledger": "b", "operation": "append", "value": 2},
    ]
    with pytest.raises(PersistError, match=r"not durable.*ledgers/b/ledger is a symbolic link"):
        run(config, store, requests)
    assert snapshot(root) == before
    assert list(outside.iterdir()) == []
    assert [r.payload["value"] for r in store.read("a").records] == [0]


def test_damaged_history_blocks_persistence(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    store = ShardStore(tmp_path)
    run(config, store, [{"operation": "append", "value": "x"}], tx="seed:1")
    shard = next((tmp_path / "ledgers/history/ledger/shards").glob("*.jsonl"))
    shard.write_bytes(shard.read_bytes()[:-1])  # a truncated last line
    before = snapshot(tmp_path)
    with pytest.raises(PersistError, match="Invalid canonical ledger history"):
        run(config, store, [{"operation": "append", "value": "y"}])
    assert snapshot(tmp_path) == before


def test_new_records_chain_from_the_current_heads(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    store = ShardStore(tmp_path)
    run(config, store, [{"operation": "append", "value": "x"}], tx="one:1")
    run(config, store, [{"operation": "append", "value": "y"}], tx="two:1")
    history = store.read("history")
    assert history.ok and len(history.heads) == 1
    assert [r.payload["value"] for r in history.records] == ["x", "y"]
    assert history.records[1].parents == (history.records[0].sha,)


def test_raw_ledger_result_has_counts_only(tmp_path: Path) -> None:
    config = parse_config({"audit": {"schema": {"type": "object"}}})
    result = run(config, ShardStore(tmp_path), [{"record": {"status": "ok"}}])
    entry = result["ledgers"]["audit"]
    assert entry["persisted"] == 1 and "type" not in entry and "transactions" not in entry
    assert "ok" not in json.dumps(result)


def test_naive_now_is_refused(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    artifact = normalize_appends(config, [{"operation": "append", "value": 1}], "tx")
    with pytest.raises(PersistError, match="persistence time"):
        persist(config, ShardStore(tmp_path), artifact, now=datetime(2026, 1, 1))


def test_concurrent_retries_of_one_artifact_append_once(tmp_path: Path) -> None:
    config = parse_config({"metrics": {"type": "counter"}})
    store = ShardStore(tmp_path)
    requests = [{"operation": "increment", "name": "runs", "amount": 1}] * 5
    artifact = normalize_appends(config, requests, "9:1")
    results: list[dict[str, Any]] = []

    def attempt() -> None:
        results.append(persist(config, ShardStore(tmp_path), artifact)["ledgers"]["metrics"])

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(entry["persisted"] for entry in results) == [0, 0, 0, 0, 0, 5]
    assert len(store.read("metrics").records) == 5
