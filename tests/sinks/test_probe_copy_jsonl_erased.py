"""``db copy`` of a JSONL file holding erased events (tombstones, e.g. lines taken
from a SQL ledger) is refused before anything is written, also into a ledger that
exists already (whose partial copy would not be removed)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import timedelta
from pathlib import Path

import pytest

from ledger.errors import ValidationError
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink, copy_ledger
from ledger.sinks.copy import BATCH
from tests.retention.conftest import OLD, run_events
from tests.sinks.factories import action


def _lines(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT event_json FROM events ORDER BY seq")]


def test_a_jsonl_source_with_tombstones_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    before = tmp_path / "before.db"
    with SQLiteSink(before) as sink:  # more than a batch of events before the tombstones
        sink.record_many([action("pre", call=f"p{i}") for i in range(BATCH + 10)])
    erased = tmp_path / "erased.db"
    with SQLiteSink(erased) as sink:
        for i in range(2):
            sink.record_many(run_events(f"old-{i}", OLD + timedelta(days=i)))
        retention = Retention(sink)
        retention.set_policy(keep="30d", floor="10d", reason="v1")
        retention.erase(Selection.of_run("old-1"), reason="a data subject asked")
    source = tmp_path / "source.jsonl"
    source.write_text("\n".join(_lines(before) + _lines(erased)) + "\n")
    target = tmp_path / "target.db"
    SQLiteSink(target).close()  # an empty ledger that exists: a partial copy would stay
    with pytest.raises(ValidationError, match="erased events"):
        copy_ledger(f"jsonl:///{source}", f"sqlite:///{target}")
    assert _lines(target) == []
