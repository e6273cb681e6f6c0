"""Replay order: topological waves, SHA-256 order inside a wave."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ledger.typed import Record, replay_order
from ledger.typed.order import order_records

Vectors = Callable[[str], list[dict[str, Any]]]


def test_dag_order_vectors(vectors: Vectors) -> None:
    for case in vectors("dag_order.jsonl"):
        records = [Record.from_line(line) for line in case["records"]]
        ordering = order_records(records)
        assert [r.sha for r in ordering.records] == case["order"]
        assert [r.sha for r in ordering.cycle] == case["cycle"]
        assert [r.sha for r in replay_order(reversed(records))] == case["order"]


def _fake(sha_digit: str, parents: tuple[str, ...] = ()) -> Record:
    return Record(
        version=1,
        id="ldg-00000000-0000-4000-8000-000000000000",
        type="ledger_append",
        timestamp="2026-01-01T00:00:00.000Z",
        parents=parents,
        payload=None,
        sha="sha256:" + sha_digit * 64,
    )


def test_waves_not_priority_queue() -> None:
    a = _fake("1")
    b = _fake("9")
    c = _fake("0", (a.sha,))
    assert replay_order([c, b, a]) == [a, b, c]


def test_missing_parent_does_not_block_and_is_reported() -> None:
    ghost = "sha256:" + "f" * 64
    a = _fake("2", (ghost,))
    b = _fake("1")
    ordering = order_records([a, b])
    assert list(ordering.records) == [b, a]
    assert ordering.missing == ((a, (ghost,)),)
    assert ordering.heads == (b.sha, a.sha)


def test_cycle_records_are_left_out() -> None:
    x = _fake("3")
    y = _fake("4", (x.sha,))
    x = replace(x, parents=(y.sha,))
    z = _fake("5", (y.sha,))
    root = _fake("6")
    ordering = order_records([x, y, z, root])
    assert list(ordering.records) == [root]
    assert [r.sha for r in ordering.cycle] == sorted([x.sha, y.sha, z.sha])


def test_duplicates_by_sha_are_ignored() -> None:
    a = _fake("1")
    assert replay_order([a, a]) == [a]
