"""Session 18's hostile pass over the read side, one test per defect (each failed
before its fix): the timeline's last bucket ended at the newest event's time (leaving
it out of its own bucket), the library read a bound finer than a microsecond otherwise
than the command, a one-event ledger's report said rows were not re-read, the empty
tool and a tool named "(none)" shared a name in JSON, CSV cells ran as spreadsheet
formulas, and ``ledger events --json`` stopped at its default limit without a word."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.model import Event, Ref
from ledger.report import build_report
from ledger.sinks import MemoryReader, SQLiteSink

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
REF = [Ref(source="tool", id="01J00000000000000000000000", hash="sha256:ab")]


def _action(call: str, at: datetime, **fields: Any) -> Event:
    values: dict[str, Any] = {"tool": "w", "verdict": "allowed", "args": {}, "refs": REF}
    values.update(fields)
    values.setdefault("run_id", "r")
    return Event(kind="action", call_id=call, time=at, **values)


def _sqlite(tmp_path: Path, events: list[Event]) -> Path:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many(events)
    return path


@pytest.fixture(params=["memory", "sqlite"])
def reader_of(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def make(events: list[Event]) -> Any:
        if request.param == "memory":
            return MemoryReader(events)
        return SQLiteSink(_sqlite(tmp_path, events), migrate=False)

    return make


def test_the_newest_event_lies_inside_its_timeline_bucket(reader_of: Any) -> None:
    newest = T0 + timedelta(seconds=3)  # on a bucket boundary (1-second buckets)
    events = [_action("a", T0), _action("b", newest, verdict="denied", reason="no")]
    timeline = build_report(reader_of(events)).timeline
    holding = [b for b in timeline if b.denials]
    assert len(holding) == 1
    assert holding[0].start <= newest < holding[0].end


def test_a_bound_finer_than_a_microsecond_is_read_as_the_command_reads_it(
    reader_of: Any, tmp_path: Path
) -> None:
    at = T0 + timedelta(seconds=3)
    events = [_action("a", at), _action("b", at + timedelta(seconds=1))]
    reader = reader_of(events)
    since = "2026-03-01T12:00:03.0000001Z"  # 100 ns after the first event
    assert [e.call_id for e in reader.events(since=since)] == ["b"]
    assert build_report(reader, since=since).events == 1
    assert [e.call_id for e in reader.events(until=since)] == ["a"]


def test_a_one_event_ledgers_report_says_every_row_was_re_read(tmp_path: Path) -> None:
    with SQLiteSink(_sqlite(tmp_path, [_action("a", T0)])) as sink:
        data = build_report(sink).to_dict()
    assert data["log_scope"]["whole"] is True
    assert "every row re-read (1 leaf recomputed)" in data["log_scope"]["statement"]


def test_the_empty_tool_and_a_tool_named_none_are_two_tools_in_json() -> None:
    events = [_action("a", T0, tool="(none)"), _action("b", T0, tool="", verdict="denied")]
    tools = build_report(MemoryReader(events)).to_dict()["tools"]
    assert sorted(t["tool"] for t in tools) == ["", "(none)"]


def test_csv_cells_never_start_a_spreadsheet_formula(tmp_path: Path) -> None:
    evil = ["=cmd|' /C calc'!A0", "+1", "-2+3", "@SUM(1+1)", '=HYPERLINK("http://x","y")']
    events = [
        _action(f"c{i}", T0, tool=text, verdict="denied", reason=text, run_id=text)
        for i, text in enumerate(evil)
    ]
    url = f"sqlite:///{_sqlite(tmp_path, events)}"
    runner = CliRunner()
    outputs = [
        runner.invoke(cli, ["report", "--db", url, "--format", "csv"]),
        runner.invoke(cli, ["events", "--db", url, "--csv"]),
        runner.invoke(cli, ["runs", "--db", url, "--csv"]),
    ]
    for found in outputs:
        assert found.exit_code == 0, found.output
        cells = [c for row in csv.reader(io.StringIO(found.stdout)) for c in row]
        assert not [c for c in cells if c[:1] in "=+-@" and c[:1]], found.stdout
        assert "'=cmd|' /C calc'!A0" in cells
    exact = runner.invoke(cli, ["events", "--db", url, "--json"])
    assert {e["reason"] for e in json.loads(exact.stdout)} == set(evil)  # JSON keeps it


def test_a_listing_cut_at_its_limit_says_so_on_stderr(tmp_path: Path) -> None:
    events = [_action(f"c{i}", T0 + timedelta(seconds=i)) for i in range(5)]
    url = f"sqlite:///{_sqlite(tmp_path, events)}"
    for form in ("--json", "--nl", "--csv"):
        found = CliRunner().invoke(cli, ["events", "--db", url, form, "--limit", "3"])
        assert found.exit_code == 0, found.output
        assert "limit reached (3 events): continue with --after" in found.stderr
        whole = CliRunner().invoke(cli, ["events", "--db", url, form, "--limit", "5"])
        assert "limit reached" not in whole.stderr


@pytest.mark.parametrize("column", ["content_hash", "run_id", "kind"])
def test_text_that_is_not_utf8_is_named_by_its_row(tmp_path: Path, column: str) -> None:
    """Only SQL written around the ledger stores it; every command that meets it says
    which row holds it (SQLite's own message names the column alone)."""
    path = _sqlite(tmp_path, [_action(f"c{i}", T0 + timedelta(seconds=i)) for i in range(5)])
    with sqlite3.connect(path) as conn:
        (event_id,) = conn.execute("SELECT event_id FROM events WHERE seq = 3").fetchone()
        conn.execute(f"UPDATE events SET {column} = CAST(X'7368610AFF' AS TEXT) WHERE seq = 3")
    conn.close()
    url = f"sqlite:///{path}"
    for command in (["report", "--db", url], ["verify", "--db", url], ["db", "check", url]):
        found = CliRunner().invoke(cli, command)
        assert found.exit_code == 1, (command, found.output)
        assert f"seq=3 (event_id {event_id})" in found.output, (command, found.output)
        assert "Traceback" not in found.output


def test_a_limit_of_zero_names_no_event_to_continue_after(tmp_path: Path) -> None:
    url = f"sqlite:///{_sqlite(tmp_path, [_action('a', T0)])}"
    for form in ("--json", "--csv", "--nl"):
        found = CliRunner().invoke(cli, ["events", "--db", url, form, "--limit", "0"])
        assert found.exit_code == 0 and "--after" not in found.stderr, found.stderr
    table = CliRunner().invoke(cli, ["events", "--db", url, "--limit", "0"])
    assert "--after" not in table.stdout
