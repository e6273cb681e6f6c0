"""A checkpoint of an open SQLite writer's head: the rows above the head row's mark
are checked against the root their stored nodes give before anything is signed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.errors import IntegrityError
from ledger.integrity.verify import verify_ledger
from ledger.sinks import SQLiteSink
from tests.sinks.factories import action

from .test_tampering import SIGNER, VERIFIER


def _open_writer(path: Path) -> SQLiteSink:
    """A ledger of 20 closed commits, then a writer with 3 more (its mark: 21)."""
    with SQLiteSink(path) as sink:
        for i in range(20):
            sink.commit_action(action("r", f"c{i}"))
    sink = SQLiteSink(path)
    for i in range(3):
        sink.commit_action(action("r", f"d{i}"))
    mark = sink.stored_head()
    assert mark is not None and mark[1].size == 21 < sink.tree_head().size == 23
    return sink


def test_a_checkpoint_moves_the_mark_to_the_rows_it_signed(tmp_path: Path) -> None:
    sink = _open_writer(tmp_path / "l.db")
    try:
        cp = sink.checkpoint(SIGNER)
        assert cp.size == 23
        assert sink.stored_head() is not None
        assert sink.stored_head()[1] == sink.tree_head()  # type: ignore[index]
        assert verify_ledger(sink, [VERIFIER]).ok
    finally:
        sink.close()


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE events SET nodes = zeroblob(32) WHERE leaf_index = 22",
        "UPDATE events SET event_json = event_json || ' ' WHERE leaf_index = 21",
    ],
)
def test_nodes_or_rows_changed_above_the_mark_are_not_signed(tmp_path: Path, tamper: str) -> None:
    path = tmp_path / "l.db"
    sink = _open_writer(path)
    try:
        conn = sqlite3.connect(path)
        conn.execute(tamper)
        conn.commit()
        conn.close()
        with pytest.raises(IntegrityError, match="not signed"):
            sink.checkpoint(SIGNER)
        assert sink.checkpoint_notes() == []
        assert not verify_ledger(sink, [VERIFIER]).ok
    finally:
        sink.close()
