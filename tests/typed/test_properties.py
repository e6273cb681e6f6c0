"""Properties: layout independence, fork merges, determinism, notes order independence."""

from __future__ import annotations

import random
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.canonical import canonicalize
from ledger.typed import (
    LedgerDef,
    Record,
    ShardStore,
    build_projection,
    canonical_json,
    parse_config,
    replay,
)
from ledger.typed.jsontext import final_id

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEYS = st.sampled_from(["a", "b", "c", "é", "10"])
TIMES = st.sampled_from(
    ["2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
counter_ops = st.builds(
    lambda op, name, amount: {"operation": op, "name": name, "amount": amount},
    st.sampled_from(["increment", "decrement"]),
    KEYS,
    st.integers(0, 1000),
)
map_ops = st.one_of(
    st.builds(lambda k, v: {"operation": "put", "key": k, "value": v}, KEYS, json_values),
    st.builds(lambda k: {"operation": "delete", "key": k}, KEYS),
)


def build_dag(payloads: list[Any], shape: list[int], seed: int) -> list[Record]:
    """Records whose parents are random earlier records (a DAG with forks and merges)."""
    rng = random.Random(seed)
    records: list[Record] = []
    for i, payload in enumerate(payloads):
        pool = [r.sha for r in records]
        count = min(len(pool), shape[i % len(shape)])
        parents = sorted(rng.sample(pool, count)) if count else []
        records.append(
            Record.new(
                id=final_id("p", i),
                timestamp="2026-01-01T00:00:00.000Z",
                parents=parents,
                payload=payload,
            )
        )
    return records


def write_layout(root: Path, name: str, records: list[Record], seed: int) -> ShardStore:
    """Scatter ``records`` over shard files in a random split and order."""
    rng = random.Random(seed)
    shuffled = list(records)
    rng.shuffle(shuffled)
    store = ShardStore(root)
    directory = store.shard_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    files = max(1, rng.randint(1, len(shuffled) or 1))
    groups: list[list[Record]] = [[] for _ in range(files)]
    for record in shuffled:
        groups[rng.randrange(files)].append(record)
    for group in groups:
        (directory / f"{uuid.UUID(int=rng.getrandbits(128), version=4)}.jsonl").write_text(
            "".join(r.to_line() + "\n" for r in group)
        )
    return store


@FAST
@given(
    st.lists(st.one_of(counter_ops, map_ops), min_size=1, max_size=25),
    st.lists(st.integers(0, 3), min_size=1),
    st.integers(),
    st.integers(),
)
def test_layout_does_not_change_replay(
    ops: list[dict[str, Any]], shape: list[int], seed_a: int, seed_b: int
) -> None:
    counters = [op for op in ops if op["operation"] in ("increment", "decrement")]
    maps = [op for op in ops if op not in counters]
    for kind, payloads in (("counter", counters), ("map", maps)):
        records = build_dag(payloads, shape, seed_a)
        ledger = LedgerDef(name="p", type=kind)
        with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
            first = write_layout(Path(one), "p", records, seed_a).read("p")
            second = write_layout(Path(two), "p", records, seed_b).read("p")
        assert first.ok and second.ok
        assert [r.sha for r in first.records] == [r.sha for r in second.records]
        assert replay(ledger, first.records).tables == replay(ledger, second.records).tables


def dump_state(db: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [line for line in conn.iterdump() if "state" in line]
    finally:
        conn.close()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(map_ops, min_size=1, max_size=8),
    st.lists(map_ops, min_size=1, max_size=8),
    st.lists(map_ops, max_size=4),
)
def test_fork_merge_order_and_rebuild_are_deterministic(
    base: list[Any], left: list[Any], right: list[Any]
) -> None:
    config = parse_config({"m": {"type": "map"}})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seed = ShardStore(root / "seed")
        common = seed.append("m", base, timestamp="2026-01-01T00:00:00.000Z")
        heads = (common[-1].sha,)
        branch_l = _chain(left, heads, "l")
        branch_r = _chain(right or [{"operation": "delete", "key": "zz"}], heads, "r")
        dumps: list[list[str]] = []
        for order in ((branch_l, branch_r), (branch_r, branch_l)):
            store = ShardStore(root / str(len(dumps)))
            store.append_records("m", common)
            for branch in order:
                store.append_records("m", branch)
            for attempt in range(2):
                db = build_projection(config, store, root / f"out{len(dumps)}-{attempt}")["m"]
                dumps.append(dump_state(db))
        assert all(d == dumps[0] for d in dumps)


def _chain(payloads: list[Any], parents: tuple[str, ...], tx: str) -> list[Record]:
    out: list[Record] = []
    for i, payload in enumerate(payloads):
        rec = Record.new(
            id=final_id(tx, i),
            timestamp="2026-01-02T00:00:00.000Z",
            parents=parents,
            payload=payload,
        )
        out.append(rec)
        parents = (rec.sha,)
    return out


@FAST
@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["up", "down"]), TIMES), max_size=10),
    st.randoms(),
)
def test_notes_replay_is_order_independent(
    notes: int, votes: list[tuple[int, str, str]], rng: random.Random
) -> None:
    records = [
        Record.new(
            id=final_id("n", i),
            timestamp="2026-01-01T00:00:00.000Z",
            parents=[],
            payload={
                "operation": "note",
                "subject": f"s{i}",
                "note": "n",
                "reason": "r",
                "citations": [{"type": "repository", "path": f"f{i}.md"}],
            },
        )
        for i in range(notes)
    ]
    for j, (target, kind, ts) in enumerate(votes):
        records.append(
            Record.new(
                id=final_id("v", j),
                timestamp=ts,
                parents=[],
                payload={
                    "operation": "vote",
                    "note_id": final_id("n", target % notes),
                    "vote": kind,
                },
            )
        )
    ledger = LedgerDef(name="k", type="notes")
    shuffled = list(records)
    rng.shuffle(shuffled)
    assert (
        replay(ledger, records, ordered=True).tables
        == replay(ledger, shuffled, ordered=True).tables
    )


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fast_canonical_path_matches_reference(value: Any) -> None:
    assert canonical_json(value) == canonicalize(value, profile="gh-aw")
