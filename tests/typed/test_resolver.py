"""Typed-ledger records as provenance evidence: record_ref and LedgerResolver."""

from __future__ import annotations

from pathlib import Path

from ledger.drift import RefState, Resolver, verify_refs
from ledger.model import Ref, RefSource
from ledger.typed.config import parse_config
from ledger.typed.jsontext import final_id
from ledger.typed.persist import persist
from ledger.typed.resolver import LedgerResolver, record_ref
from ledger.typed.store import ShardStore
from ledger.typed.transactions import normalize_appends


def test_refs_resolve_intact_drifted_missing_unverifiable(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}, "tags": {"type": "set"}})
    store = ShardStore(tmp_path)
    (record,) = store.append("history", [{"operation": "append", "value": "x"}])
    resolver = LedgerResolver(store, config)
    assert isinstance(resolver, Resolver)
    assert resolver.sources == {RefSource.LEDGER}
    ref = record_ref(record)
    assert ref == Ref(source="ledger", id=record.id, hash=record.sha)
    refs = [
        ref,
        Ref(source="ledger", id=record.id, hash="sha256:" + "0" * 64),
        Ref(source="ledger", id="ldg-00000000-0000-4000-8000-000000000000", hash=record.sha),
        Ref(source="tool", id=record.id, hash=record.sha),
    ]
    states = [check.state for check in verify_refs(refs, resolver)]
    assert states == [RefState.INTACT, RefState.DRIFTED, RefState.MISSING, RefState.UNVERIFIABLE]


def test_deterministic_ids_from_a_persist_result_resolve(tmp_path: Path) -> None:
    config = parse_config({"history": {"type": "log"}})
    store = ShardStore(tmp_path)
    resolver = LedgerResolver(store, ["history"])
    assert resolver.current_hash(RefSource.LEDGER, final_id("run:1", 0)) is None
    artifact = normalize_appends(config, [{"operation": "append", "value": 1}], "run:1")
    result = persist(config, store, artifact)
    ident = result["ledgers"]["history"]["transactions"][0]["id"]
    (record,) = store.read("history").records
    assert resolver.current_hash("ledger", ident) == record.sha  # found after a refresh
    assert resolver.current_hash("ledger", record.id) == record.sha
    assert resolver.current_hash("ledger", "") is None
