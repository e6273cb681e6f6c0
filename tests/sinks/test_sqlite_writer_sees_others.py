"""A SQLite writer reads nothing before numbering its rows while no other connection
has committed since its own last commit (``PRAGMA data_version``); any commit by
another connection (another sink, another process, a hand edit) sends it back to the
stored leaves, head and times. Each test makes such a commit between two of one
writer's commits and checks what the second stored."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.errors import DuplicateEvent, EventNotFound, IntegrityError, StorageError
from ledger.integrity.verify import verify_ledger
from ledger.sinks import SQLiteSink
from tests.sinks.factories import action

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _leaves(path: Path) -> list[tuple[int, int, int]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT leaf_index, time_us, time_hi_us FROM events ORDER BY seq"
        ).fetchall()


def test_rows_another_process_appended_are_numbered_after(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        for i in range(3):
            sink.commit_action(action("r", f"a{i}", time=T0 + timedelta(seconds=i)))
        script = (
            "import sys\n"
            "from datetime import UTC, datetime\n"
            "from ledger.sinks import SQLiteSink\n"
            "from tests.sinks.factories import action\n"
            "later = datetime(2027, 1, 1, tzinfo=UTC)\n"
            "with SQLiteSink(sys.argv[1]) as other:\n"
            "    for i in range(4):\n"
            "        other.commit_action(action('o', f'b{i}', time=later))\n"
        )
        root = Path(__file__).resolve().parents[2]
        subprocess.run([sys.executable, "-c", script, str(path)], check=True, cwd=root)
        sink.commit_action(action("r", "after", time=T0 + timedelta(seconds=9)))
        assert verify_ledger(sink, None).ok
    rows = _leaves(path)
    assert [r[0] for r in rows] == list(range(8))
    later = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    assert rows[-1][2] == later  # raised to the other process's time, not its own


def test_a_time_raised_by_hand_raises_the_next_rows_high_water(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    far = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    with SQLiteSink(path) as sink:
        for i in range(3):
            sink.commit_action(action("r", f"a{i}", time=T0 + timedelta(seconds=i)))
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("UPDATE events SET time_us = ? WHERE leaf_index = 1", (far,))
            conn.commit()
        sink.commit_action(action("r", "next", time=T0 + timedelta(seconds=5)))
    assert _leaves(path)[-1][2] == far  # events(since=...) must still reach this row


def test_rows_cut_off_by_hand_after_the_mark_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        for i in range(20):  # the mark is written at the first commit and every 8th
            sink.commit_action(action("r", f"a{i}"))
        with closing(sqlite3.connect(path)) as conn:
            (mark,) = conn.execute("SELECT size FROM tree_head").fetchone()
            conn.execute("DELETE FROM events WHERE leaf_index >= ?", (mark - 2,))
            conn.commit()
        with pytest.raises(IntegrityError, match="cut off the end"):
            sink.commit_action(action("r", "after the cut"))
        assert not verify_ledger(sink, None).ok


@pytest.mark.parametrize("other", ["sink", "raw"])
def test_a_writer_alone_again_keeps_numbering_without_gaps(tmp_path: Path, other: str) -> None:
    """After another connection's commit the writer reads the table once, then runs
    alone again: every later commit is numbered on from there."""
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.commit_action(action("r", "first"))
        if other == "sink":
            with SQLiteSink(path) as second:
                second.commit_action(action("r", "second"))
        else:  # a commit that changes no row still moves data_version
            with closing(sqlite3.connect(path)) as conn:
                conn.execute("CREATE TABLE scratch (x)")
                conn.commit()
        for i in range(10):
            sink.commit_action(action("r", f"again{i}"))
        assert verify_ledger(sink, None).ok
    leaves = [r[0] for r in _leaves(path)]
    assert leaves == list(range(len(leaves)))


def test_a_write_refused_for_another_reason_than_a_stored_id_is_no_duplicate(
    tmp_path: Path,
) -> None:
    """A writer that numbers its row on a range another writer extended (forced here:
    it is told nothing changed) hits a leaf index already taken. That is no duplicate
    of its event: it is told the write was refused, nothing is stored, and its next
    write reads the log afresh and goes in."""
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.commit_action(action("r", "first"))
        with SQLiteSink(path) as second:
            second.commit_action(action("r", "second"))
        conn = sink._writer_conn()
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        assert sink._since_last is not None
        sink._since_last = (version, sink._since_last[1])  # "nothing changed": stale
        stale = action("r", "stale")
        with pytest.raises(StorageError, match="refused") as refused:
            sink.commit_action(stale)
        assert not isinstance(refused.value, DuplicateEvent)
        with pytest.raises(EventNotFound):
            sink.get(stale.event_id)
        sink.commit_action(stale)  # read afresh: it goes in, numbered after the other's
        assert verify_ledger(sink, None).ok
    assert [r[0] for r in _leaves(path)] == [0, 1, 2]


@pytest.mark.parametrize("how", ["ABORT", "FAIL"])
def test_a_caller_the_table_refuses_fails_alone_in_its_group_commit(
    tmp_path: Path, how: str
) -> None:
    """A constraint the table was given by hand (a trigger here) refuses one caller's
    row: that caller gets the refusal, not a duplicate, and the others in the same
    transaction are stored (with FAIL, SQLite keeps the rows the failed statement had
    written: they are undone before each caller is tried alone)."""
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.commit_action(action("r", "first"))
        with closing(sqlite3.connect(path)) as conn:
            conn.execute(
                "CREATE TRIGGER no_bad BEFORE INSERT ON events WHEN NEW.tool = 'bad' "
                f"BEGIN SELECT RAISE({how}, 'bad tool'); END"
            )
            conn.commit()
        good, other, bad = action("r", "g"), action("r", "o"), action("r", "b", tool="bad")
        errors = sink._write_batch([[sink._row(e)] for e in (good, other, bad)])
        assert errors[0] is None and errors[1] is None
        assert isinstance(errors[2], StorageError) and not isinstance(errors[2], DuplicateEvent)
        assert "bad tool" in str(errors[2])
        assert {e.call_id for e in sink.events()} == {"first", "g", "o"}
        assert verify_ledger(sink, None).ok
