"""Shared helpers for the typed-ledger engine tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ledger.typed.jsontext import final_id
from ledger.typed.records import Record

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "ghaw"
TS = "2026-01-01T00:00:00.000Z"


def vector_lines(name: str) -> list[dict[str, Any]]:
    """The JSON objects of one conformance vector file (split on \\n only)."""
    text = (VECTORS / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line]


def make_chain(
    payloads: Sequence[Any],
    *,
    parents: Sequence[str] = (),
    timestamp: str = TS,
    tx: str = "tx",
    ids: Sequence[str] | None = None,
) -> list[Record]:
    """A linear chain of records, ids from ``final_id(tx, i)`` unless given."""
    out: list[Record] = []
    prev: Sequence[str] = parents
    for i, payload in enumerate(payloads):
        rid = ids[i] if ids is not None else final_id(tx, i)
        rec = Record.new(id=rid, timestamp=timestamp, parents=prev, payload=payload)
        out.append(rec)
        prev = (rec.sha,)
    return out


@pytest.fixture
def chain() -> Callable[..., list[Record]]:
    return make_chain


@pytest.fixture
def vectors() -> Callable[[str], list[dict[str, Any]]]:
    return vector_lines
