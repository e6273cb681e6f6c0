"""SQLite under real faults: SIGKILLed writers, several processes on one file, tailing."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ledger import CorruptRecord, SchemaVersionError
from ledger.integrity.verify import verify_ledger
from ledger.sinks import SQLiteSink, open_sink
from ledger.sinks.rows import event_row
from ledger.sinks.sql import COLUMNS

from .conftest import Store
from .factories import action

ROOT = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("_writer.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _spawn(path: Path, run_id: str, count: int, threads: int) -> subprocess.Popen[str]:
    args = [sys.executable, str(WRITER), str(path), run_id, str(count), str(threads)]
    return subprocess.Popen(
        args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def _assert_tree_verifies(sink: SQLiteSink, path: Path, when: str) -> None:
    """After a kill: no leaf without its event, no event without its leaf, dense leaf
    indexes in commit order, and the head is the root of exactly those rows."""
    result = verify_ledger(sink, None)
    assert result.ok, f"{when}: {[f.message for f in result.errors]}"
    conn = sqlite3.connect(path)
    try:
        indexes = [r[0] for r in conn.execute("SELECT leaf_index FROM events ORDER BY seq")]
        leaves = conn.execute("SELECT count(*) FROM events WHERE length(nodes) >= 32").fetchone()[0]
        mark = conn.execute("SELECT size FROM tree_head").fetchone()[0]
    finally:
        conn.close()
    assert indexes == list(range(len(indexes))), when
    head = sink.tree_head()  # where the rows end; the head row is a mark at most behind
    assert leaves == head.size == len(indexes) >= mark, when
    assert head.root == result.root, when


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_commit(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    SQLiteSink(path).close()
    rng = random.Random(20261130)
    acked: set[str] = set()
    for round_ in range(20):
        proc = _spawn(path, f"kill-{round_}", 0, 4)
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the writer is up and committing
        assert first.startswith("ack "), proc.stderr.read() if proc.stderr else first
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        acked.update(line.split()[1] for line in (first + rest).splitlines() if line)
        assert _integrity(path) == "ok"
        with SQLiteSink(path) as sink:
            stored = {str(e.event_id) for e in sink.events()}
            _assert_tree_verifies(sink, path, f"round {round_}")
        missing = acked - stored
        assert not missing, f"round {round_}: acknowledged but lost: {sorted(missing)[:5]}"
    assert len(acked) > 20


@pytest.mark.slow
def test_four_processes_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    SQLiteSink(path).close()
    procs = [_spawn(path, f"proc-{k}", 500, 1) for k in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err and "busy" not in err
        assert out.count("ack ") == 500
    with SQLiteSink(path) as sink:
        for k in range(4):
            assert len(sink.chain(f"proc-{k}").actions) == 500
        _assert_tree_verifies(sink, path, "four processes")
    assert _integrity(path) == "ok"


def test_tail_never_skips_a_row_that_commits_late(sqlite_store: Store, run_id: str) -> None:
    """A slow writer holds row A (the lower sequence number) uncommitted while B tries
    to commit: SQLite's single writer lock makes B wait, so B can neither take a lower
    number nor become visible first, and a tailer sees A then B."""
    sink = sqlite_store.open()
    first = action(run_id, "c0")
    sink.commit_action(first)
    late, quick = action(run_id, "late"), action(run_id, "quick")
    slow = sqlite3.connect(sqlite_store.path or "", isolation_level=None, timeout=30)
    marks = ", ".join("?" * len(COLUMNS))
    slow.execute("BEGIN IMMEDIATE")
    slow.execute(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({marks})", event_row(late))
    writer = threading.Thread(target=sink.commit_action, args=(quick,))
    writer.start()
    time.sleep(0.3)
    assert list(sink.events(after=first.event_id)) == []
    slow.execute("COMMIT")
    slow.close()
    writer.join(timeout=30)
    tail = [e.call_id for e in sink.events(after=first.event_id)]
    assert tail == ["late", "quick"]


_OPENER = """
import sys
from ledger.model import Event, Kind
from ledger import CorruptRecord, SchemaVersionError
from ledger.sinks import SQLiteSink, open_sink
with SQLiteSink(sys.argv[1]) as sink:
    sink.record(Event(kind=Kind.PROMPT, run_id="opener"))
"""


def test_processes_creating_one_new_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, str(path)], env=ENV, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    errors = [p.communicate(timeout=60)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], errors
    with SQLiteSink(path) as sink:
        assert len(list(sink.events(run_id="opener"))) == 4


def test_a_newer_database_is_refused_unchanged(tmp_path: Path) -> None:
    """The version is read read-only first: a refused file keeps every byte and its
    journal mode (nothing turned WAL on)."""
    path = tmp_path / "newer.db"
    SQLiteSink(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("UPDATE ledger_schema_version SET version_num = '0099_from_the_future'")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError, match="newer than this code"):
        SQLiteSink(path)
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()
    with pytest.raises(SchemaVersionError):
        open_sink(f"sqlite:///{path}")
    assert path.read_bytes() == before


def test_json_that_is_not_utf8_names_its_row(sqlite_store: Store, run_id: str) -> None:
    """Bytes written around the ledger that are not UTF-8: the row is named, and a
    reader can go on past it, instead of the whole fetch failing in the driver."""
    sink = sqlite_store.open()
    events = [action(run_id, f"c{i}") for i in range(3)]
    sink.record_many(events)
    conn = sqlite3.connect(sqlite_store.path or "")
    conn.execute(
        "UPDATE events SET event_json = CAST(X'7B22FF22' AS TEXT) WHERE event_id = ?",
        (str(events[1].event_id),),
    )
    conn.commit()
    conn.close()
    with pytest.raises(CorruptRecord, match="not UTF-8") as info:
        sink.get(events[1].event_id)
    assert str(events[1].event_id) in str(info.value)
    assert sink.get(events[0].event_id) == events[0]
    with pytest.raises(CorruptRecord):
        list(sink.events(run_id=run_id))
    assert list(sink.events(run_id=run_id, after=info.value.seq)) == events[2:]
