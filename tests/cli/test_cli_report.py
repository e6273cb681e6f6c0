"""``ledger report`` and the report library: denials, missing results, actions that ran
without a committed intent, records held, the content-hash check, all four formats."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger.model import Event, Kind, Ref, RefSource
from ledger.report import build_report
from ledger.report.timeline import bucket, width_for
from ledger.sinks import SQLiteSink

from .conftest import Ledger, invoke, sqlite_url

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REQ = Ref(source=RefSource.TOOL, id="01J0000000000000000000000R")


def _report(url: str, *args: str) -> dict[str, Any]:
    result = invoke("report", "--db", url, "--format", "json", *args)
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_report_of_a_demo_run(sqlite_ledger: Ledger) -> None:
    data = _report(sqlite_ledger.url)
    assert data["compliant"] is True
    assert data["totals"] == {
        "events": 10, "runs": 1, "actions": 1, "denials": 1, "missing_results": 0,
        "unsafe_without_intent": 0, "approved_actions": 1, "outside_runs": 0,
    }  # fmt: skip
    (approved,) = data["approved_actions"]
    assert approved["tool"] == "write_file" and approved["policy"] == "operator"
    assert data["ledger"] == sqlite_ledger.url
    (denial,) = data["denials"]
    assert denial["tool"] == "run_shell" and "dangerous" in denial["reason"]
    unsafe = data["unsafe_without_intent"]
    assert unsafe == {
        "count": 0,
        "statement": "zero non-safe actions ran without a committed intent",
        "items": [],
    }
    tools = {t["tool"]: t for t in data["tools"]}
    assert tools["read_file"]["safe_reads"] == 1 and tools["write_file"]["succeeded"] == 1
    check = data["hash_check"]
    assert check["available"] and check["checked"] == 10 and check["mismatch_count"] == 0
    held = data["records_held"]
    assert held["oldest"] and held["newest"] and held["oldest"] <= held["newest"]
    assert sum(b["actions"] for b in data["timeline"]) == 1


def test_table_format_says_zero_explicitly(sqlite_ledger: Ledger) -> None:
    result = invoke("report", "--db", sqlite_ledger.url, env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert "zero non-safe actions ran without a committed intent" in result.stdout
    assert "10 events checked, all content hashes match" in result.stdout
    assert "dangerous shell command refused" in result.stdout


def test_csv_and_html_formats(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    text = invoke("report", "--db", sqlite_ledger.url, "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {r["section"] for r in rows} >= {"summary", "run", "tool", "denial", "hash_check"}
    out = tmp_path / "r.html"
    result = invoke("report", "--db", sqlite_ledger.url, "--format", "html", "-o", str(out))
    assert result.exit_code == 0 and "wrote html report" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and '<svg id="timeline-chart"' in page
    for external in ("<script", "<link", "src=", "@import", "url("):
        assert external not in page


def _events(run: str) -> list[Event]:
    """A run with a safe read, an intact write, an allowed action without a result, and two
    results that ran without a committed intent (one with a decision, one without)."""
    t = T0
    return [
        Event(kind=Kind.REQUEST, run_id=run, args='"go"', time=t),
        Event(kind=Kind.GATE_DECISION, run_id=run, call_id="r", tool="read", verdict="allowed",
              reason="safe tool", time=t + timedelta(seconds=1)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="r", tool="read", result='"x"',
              time=t + timedelta(seconds=2)),
        Event(kind=Kind.ACTION, run_id=run, call_id="w", tool="write", args="{}", refs=[REQ],
              verdict="allowed", reason="ok", time=t + timedelta(seconds=3)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="w", tool="write", result="1",
              time=t + timedelta(seconds=4)),
        Event(kind=Kind.ACTION, run_id=run, call_id="lost", tool="write", args="{}", refs=[REQ],
              verdict="allowed", reason="ok", time=t + timedelta(seconds=5)),
        Event(kind=Kind.GATE_DECISION, run_id=run, call_id="sneak", tool="delete",
              verdict="allowed", reason="allow-all policy", time=t + timedelta(seconds=6)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="sneak", tool="delete", result="true",
              time=t + timedelta(seconds=7)),
        Event(kind=Kind.TOOL_RESULT, run_id=run, call_id="", tool="delete", result="true",
              time=t + timedelta(seconds=8)),
    ]  # fmt: skip


@pytest.fixture
def odd_db(tmp_path: Path) -> Path:
    path = tmp_path / "odd.db"
    with SQLiteSink(path) as sink:
        sink.record_many(_events("run-odd"))
        late = T0 + timedelta(days=30)
        sink.record(Event(kind=Kind.REQUEST, run_id="run-late", args='"later"', time=late))
    return path


def test_violations_and_missing_results(odd_db: Path) -> None:
    with SQLiteSink(odd_db) as reader:
        report = build_report(reader, until=T0 + timedelta(days=1))
    assert [f.call_id for f in report.missing_results] == ["lost"]
    assert [(f.call_id, f.tool) for f in report.unsafe_without_intent] == [
        ("sneak", "delete"),
        ("", "delete"),
    ]
    assert report.unsafe_statement().startswith("VIOLATION: 2 non-safe action(s)")
    assert not report.compliant
    assert [r.run_id for r in report.runs] == ["run-odd"]
    assert report.oldest_record == T0 and report.newest_record == T0 + timedelta(days=30)


def test_strict_exit_status_and_window(odd_db: Path) -> None:
    url = sqlite_url(odd_db)
    assert invoke("report", "--db", url, "--strict").exit_code == 3
    late = _report(url, "--since", "2026-03-02", "--strict")
    assert late["totals"]["runs"] == 1 and late["compliant"] is True
    table = invoke("report", "--db", url)
    assert "VIOLATION: 2 non-safe action(s) ran without a committed intent" in table.stdout


def test_tampered_row_is_listed(sqlite_ledger: Ledger) -> None:
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET event_json = replace(event_json, 'Tidy', 'Wipe') "
            "WHERE kind = 'request'"
        )
    data = _report(sqlite_ledger.url)
    check = data["hash_check"]
    assert check["mismatch_count"] == 1 and data["compliant"] is False
    assert "changed after writing" in check["mismatches"][0]["detail"]
    assert invoke("report", "--db", sqlite_ledger.url, "--strict").exit_code == 3


def test_rows_edited_by_hand_are_listed_not_fatal(sqlite_ledger: Ledger) -> None:
    """A JSON value that also has a column (the verdict) and a column alone (the kind)
    edited by hand: the report is still made, and lists both rows."""
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        query = "SELECT event_id FROM events WHERE kind = 'action' AND verdict = ? LIMIT 1"
        [(first,)] = conn.execute(query, ("allowed",))
        [(second,)] = conn.execute(query, ("denied",))
        conn.execute(
            "UPDATE events SET event_json = replace(event_json, '\"allowed\"', '\"denied\"') "
            "WHERE event_id = ?",
            (first,),
        )
        conn.execute("UPDATE events SET kind = 'request' WHERE event_id = ?", (second,))
    data = _report(sqlite_ledger.url)
    check = data["hash_check"]
    details = {m["event_id"]: m["detail"] for m in check["mismatches"]}
    assert check["mismatch_count"] == 2 and data["compliant"] is False
    assert "changed after writing" in details[first]
    assert "columns disagree with its JSON: kind is 'request'" in details[second]


def test_a_row_that_does_not_parse_is_listed_and_the_report_made(sqlite_ledger: Ledger) -> None:
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        [(damaged,)] = conn.execute("SELECT max(event_id) FROM events WHERE kind = 'tool_result'")
        conn.execute("UPDATE events SET event_json = 'garbage' WHERE event_id = ?", (damaged,))
    data = _report(sqlite_ledger.url)
    [mismatch] = data["hash_check"]["mismatches"]
    assert mismatch["event_id"] == damaged and "does not parse" in mismatch["detail"]
    assert data["compliant"] is False and data["totals"]["events"] == 9  # of 10: one left out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        ("UPDATE events SET verdict = 'denied' WHERE event_id = :i", "columns disagree"),
        (
            'UPDATE events SET event_json = replace(event_json, \'"source":"tool"\', '
            "'\"source\":1') WHERE event_id = :i",
            "does not read back as an event",
        ),
    ],
)
def test_an_unhashed_row_edited_by_hand_is_listed(tmp_path: Path, edit: str, words: str) -> None:
    """A row stored without a content hash (an integer beyond 2^53 in its args) still
    goes through the other checks: an edited column, or JSON that no longer reads back
    as an event, is a finding."""
    path = tmp_path / "l.db"
    ev = Event(
        kind=Kind.ACTION, run_id="r1", call_id="c1", tool="t", args={"n": 2**60},
        verdict="allowed", refs=[REQ],
    )  # fmt: skip
    with SQLiteSink(path) as sink:
        sink.commit_action(ev)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT content_hash FROM events").fetchone() == (None,)
        conn.execute(edit.replace(":i", "?"), (str(ev.event_id),))
    data = _report(sqlite_url(path))
    [mismatch] = data["hash_check"]["mismatches"]
    assert mismatch["event_id"] == str(ev.event_id) and words in mismatch["detail"]
    assert data["compliant"] is False


def test_json_bytes_that_are_not_utf8_are_listed(sqlite_ledger: Ledger) -> None:
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        [(damaged,)] = conn.execute("SELECT max(event_id) FROM events WHERE kind = 'tool_result'")
        conn.execute(
            "UPDATE events SET event_json = CAST(X'7B22FF22' AS TEXT) WHERE event_id = ?",
            (damaged,),
        )
    data = _report(sqlite_ledger.url)
    [mismatch] = data["hash_check"]["mismatches"]
    assert mismatch["event_id"] == damaged and data["compliant"] is False
    check = invoke("db", "check", sqlite_ledger.url, "--json")
    assert check.exit_code == 1
    assert json.loads(check.stdout)["hash_check"]["mismatches"][0]["event_id"] == damaged


def test_jsonl_report_says_hashes_unavailable(tmp_path: Path) -> None:
    from ledger.sinks import JSONLSink

    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for e in _events("j"):
            sink.record(e)
    data = _report("jsonl:///" + str(path))
    assert data["hash_check"]["available"] is False
    assert data["totals"]["unsafe_without_intent"] == 2


def test_timeline_buckets() -> None:
    assert width_for(timedelta(seconds=2)) == timedelta(seconds=1)  # a demo run: 3 bars
    assert width_for(timedelta(minutes=30)) == timedelta(seconds=30)
    assert width_for(timedelta(hours=2)) == timedelta(minutes=5)
    assert width_for(timedelta(days=365)) == timedelta(days=7)
    times = [T0, T0 + timedelta(minutes=5), T0 + timedelta(hours=2)]
    buckets = bucket(times, [T0], T0, T0 + timedelta(hours=2))
    assert sum(b.actions for b in buckets) == 3 and sum(b.denials for b in buckets) == 1
    assert len(buckets) <= 61 and buckets[0].start <= T0 < buckets[0].end
    assert bucket([], [], None, None) == ()


def test_calls_cut_by_the_window_edges_are_settled(odd_db: Path) -> None:
    with SQLiteSink(odd_db) as reader:
        # "w" was committed at +3 s and its result came at +4 s; "r"'s safe decision at +1 s.
        late_start = build_report(reader, since=T0 + timedelta(seconds=3.5))
        early_end = build_report(reader, until=T0 + timedelta(seconds=3.5))
        cut_read = build_report(reader, since=T0 + timedelta(seconds=1.5))
    assert {f.call_id for f in late_start.unsafe_without_intent} == {"sneak", ""}
    assert {f.call_id for f in early_end.missing_results} == set()
    assert {f.call_id for f in early_end.unsafe_without_intent} == set()
    assert "r" not in {f.call_id for f in cut_read.unsafe_without_intent}


def test_the_text_report_counts_past_its_capped_listings(tmp_path: Path) -> None:
    """The report lists the first 1,000 denials; its summary counts all of them."""
    from ledger.model import Verdict

    path = tmp_path / "many.db"
    with SQLiteSink(path) as sink:
        sink.record_many(
            Event(
                kind=Kind.ACTION,
                run_id=f"r{i // 10}",
                call_id=f"c{i}",
                tool="rm",
                verdict=Verdict.DENIED,
                reason="not allowed",
            )
            for i in range(1200)
        )
    result = invoke("report", "--db", sqlite_url(path))
    assert result.exit_code in (0, 3), result.stderr
    denials = next(x for x in result.stdout.splitlines() if x.strip().startswith("│ denials"))
    assert "1200" in denials, denials
