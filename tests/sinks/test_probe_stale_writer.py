"""An open SQLite writer whose cached range still ends where the rows end refuses to
extend them when the head row's mark is past that end: another writer's rows were cut
off, and extending the cut rows would soon move the mark over the evidence (verify
would then find nothing without a checkpoint)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from ledger.errors import IntegrityError
from ledger.integrity.verify import verify_ledger
from ledger.sinks import SQLiteSink
from tests.sinks.factories import action


def test_a_stale_writer_refuses_rows_cut_off_below_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    first = SQLiteSink(path)
    try:
        for i in range(20):
            first.commit_action(action("r", f"a{i}"))
        with SQLiteSink(path) as other:  # its first commit and its close write the mark
            for i in range(5):
                other.commit_action(action("r", f"b{i}"))
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("SELECT size FROM tree_head").fetchone() == (25,)
            conn.execute("DELETE FROM events WHERE leaf_index >= 20")  # the other's rows
            conn.commit()
        with pytest.raises(IntegrityError, match="cut off the end"):
            first.commit_action(action("r", "after the cut"))
        assert not verify_ledger(first, None).ok
    finally:
        first.close()
    with SQLiteSink(path) as sink:
        assert not verify_ledger(sink, None).ok  # the mark was not moved over the cut
