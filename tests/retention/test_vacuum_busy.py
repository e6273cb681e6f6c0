"""``ledger db vacuum`` while another connection reads: the VACUUM runs, and the user is
told the write-ahead log could not be truncated (the files are larger for now), instead
of a silent "0 freed" with the files doubled."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from ledger.retention import Retention, Selection
from ledger.retention.vacuum import vacuum
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def test_a_reader_holding_the_wal_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        for i in range(20):
            sink.record_many(run_events(f"old-{i}", OLD))
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="v1")
        r.erase(Selection.of_run("old-1"), reason="gdpr")
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM events").fetchone()
            with caplog.at_level(logging.WARNING, logger="ledger"):
                outcome = vacuum(sink)
        finally:
            reader.execute("COMMIT")
            reader.close()
        assert outcome.rows == sink.count_rows()
        assert any("could not be truncated" in m for m in caplog.messages)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ledger"):
            vacuum(sink)  # idle now: truncated, nothing to say
        assert not any("could not be truncated" in m for m in caplog.messages)
        assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
