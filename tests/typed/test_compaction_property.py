"""Property: compaction never changes the record set, the replay order or the state."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.typed.compaction.apply import apply_compaction, plan_compaction
from ledger.typed.config import parse_config
from ledger.typed.jsontext import new_record_id
from ledger.typed.records import Record
from ledger.typed.reducers.simple import replay
from ledger.typed.store import ShardStore

CONFIG = parse_config({"x": {"type": "set", "compaction": {"min-segments": 2, "max-segments": 3}}})
operations = st.builds(
    lambda op, v: {"operation": op, "value": v},
    st.sampled_from(["add", "remove"]),
    st.sampled_from(["a", "b", 1, [1], {"k": None}]),
)
# each writer: the index of an earlier record to fork from (or None: the current heads)
writers = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 50)), st.lists(operations, min_size=1, max_size=3)
    ),
    min_size=1,
    max_size=7,
)


def write(store: ShardStore, plan: list[tuple[int | None, list[Any]]]) -> None:
    written: list[Record] = []
    for fork, payloads in plan:
        if fork is None or not written:
            written += store.append("x", payloads, timestamp="2026-01-01T00:00:00.000Z")
            continue
        parents: tuple[str, ...] = (written[fork % len(written)].sha,)
        chain = []
        for payload in payloads:
            record = Record.new(
                id=new_record_id(),
                timestamp="2026-01-02T00:00:00.000Z",
                parents=parents,
                payload=payload,
            )
            chain.append(record)
            parents = (record.sha,)
        written += store.append_records("x", chain)


def fingerprint(store: ShardStore) -> tuple[Any, ...]:
    history = store.read("x")
    assert history.ok
    order = [(r.sha, r.id, r.parents) for r in history.records]
    return order, replay(CONFIG["x"], history.records, ordered=True).tables


@settings(max_examples=30, deadline=None)
@given(plan=writers)
def test_compaction_is_lossless(plan: list[tuple[int | None, list[Any]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ShardStore(Path(tmp))
        write(store, plan)
        before = fingerprint(store)
        rounds = 0
        while (compaction := plan_compaction(CONFIG, store, "x")) is not None:
            assert apply_compaction(CONFIG, store, compaction).status == "ready"
            assert fingerprint(store) == before
            rounds += 1
            assert rounds < 10
        shards = list(store.shard_dir("x").glob("*.jsonl"))
        assert len(shards) == 1  # small segments merge until one is left
