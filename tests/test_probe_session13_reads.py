"""Session 13's hostile review of the read side: ``ledger verify`` of a JSONL file whose
lines are not events, and the report's content-hash line for rows stored without one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.model.event import Event
from ledger.model.values import Ref
from ledger.report import build_report
from ledger.sinks import JSONLSink, SQLiteSink


def _run_events(run_id: str, big: bool = False) -> list[Event]:
    args = '{"n":1152921504606846976}' if big else '{"n":1}'
    return [
        Event(kind="request", run_id=run_id, args='"x"'),
        Event(kind="action", run_id=run_id, call_id="a", tool="t", verdict="allowed", args=args,
              refs=[Ref(source="tool", id="x")]),
        Event(kind="tool_result", run_id=run_id, call_id="a", tool="t", result="1"),
        Event(kind="run_end", run_id=run_id),
    ]  # fmt: skip


def _verify(url: str) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(cli, ["verify", "--db", url, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_verify_of_a_jsonl_file_reports_the_lines_no_reader_can_read(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for event in _run_events("r1"):
            sink.record(event)
    code, out = _verify(f"jsonl:///{path}")
    assert code == 0 and out["ok"], out
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:40]  # a line cut short
    lines[2] = lines[2].replace(b'"kind":"tool_result"', b'"kind":"bogus"')
    path.write_bytes(b"\n".join(lines))
    code, out = _verify(f"jsonl:///{path}")
    assert code == 1 and not out["ok"]
    rows = [f["message"] for f in out["findings"] if f["kind"] == "row"]  # type: ignore[attr-defined]
    assert any(m.startswith("line 2 ") for m in rows) and any("line 3 " in m for m in rows), rows


def test_verify_of_a_sqlite_file_given_as_jsonl_says_it_is_not_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many(_run_events("r1"))
    result = CliRunner().invoke(cli, ["verify", "--db", f"jsonl:///{path}"])
    assert result.exit_code == 1, result.output
    assert "not a JSONL ledger" in result.stdout and "sqlite:///" in result.stdout
    assert "NOT verified" in result.stdout


def test_the_report_says_which_rows_no_content_hash_vouches_for(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many(_run_events("r1", big=True))
        report = build_report(sink)
    check = report.hash_check
    assert check.checked == 4 and check.unhashed == 1 and check.mismatch_count == 0
    assert "1 stored without a content hash" in check.summary()
    assert report.to_dict()["hash_check"]["unhashed"] == 1
    with SQLiteSink(path) as sink:
        sink.record_many(_run_events("r2"))
        assert "without a content hash" in build_report(sink).hash_check.summary()


T = datetime(2025, 3, 1, tzinfo=UTC)


def _result_first(*, result_at: timedelta, action_at: timedelta) -> list[Event]:
    """A run whose tool result is committed before its allowed action (times after
    ``T`` as given): a result without a preceding intent."""
    return [
        Event(kind="request", run_id="r1", time=T, args='"x"'),
        Event(kind="tool_result", run_id="r1", call_id="c1", tool="t", result="1",
              time=T + result_at),
        Event(kind="action", run_id="r1", call_id="c1", tool="t", verdict="allowed",
              args="{}", refs=[Ref(source="tool", id="x")], time=T + action_at),
        Event(kind="run_end", run_id="r1", time=T + max(result_at, action_at) * 2),
    ]  # fmt: skip


def _readers(tmp_path: Path, events: list[Event]) -> list[object]:
    from ledger.sinks import MemoryReader

    sink = SQLiteSink(tmp_path / "l.db")
    sink.record_many(events)
    return [MemoryReader(events), sink]  # the streaming build and the database build


def test_a_result_committed_before_an_intent_dated_after_the_window_is_a_violation(
    tmp_path: Path,
) -> None:
    """With a clock that runs forward, a result in the window whose only allowed action
    is dated after the window's end was committed before it: a violation, however the
    window is cut (a clock that stepped back inside a run is the exception docs/cli.md
    gives)."""
    events = _result_first(result_at=timedelta(hours=1), action_at=timedelta(hours=3))
    for reader in _readers(tmp_path, events):
        for window in ({}, {"until": T + timedelta(hours=2)}):
            report = build_report(reader, **window)  # type: ignore[arg-type]
            assert len(report.unsafe_without_intent) == 1, (reader, window)
            assert not report.compliant


def test_a_result_committed_before_its_action_is_a_violation_not_a_missing_result(
    tmp_path: Path,
) -> None:
    events = _result_first(result_at=timedelta(seconds=2), action_at=timedelta(seconds=1))
    for reader in _readers(tmp_path, events):
        report = build_report(reader)  # type: ignore[arg-type]
        assert [f.detail for f in report.unsafe_without_intent] == [
            "the result was recorded before its intent was committed"
        ]
        assert not report.missing_results, reader


def test_verify_names_a_line_a_crashed_writer_cut_short(tmp_path: Path) -> None:
    """A JSONL writer killed mid-line leaves a torn line; the next sink seals it and goes
    on (the torn bytes are kept as evidence). Verification says the line is cut short:
    the event it held is not in the file, so the file does not verify."""
    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for event in _run_events("r1"):
            sink.record(event)
    with open(path, "ab") as f:
        f.write(b'{"event_id":"01J0000000')  # the crash
    with JSONLSink(path) as sink:
        for event in _run_events("r2"):
            sink.record(event)
    code, out = _verify(f"jsonl:///{path}")
    assert code == 1
    rows = [f["message"] for f in out["findings"] if f["kind"] == "row"]  # type: ignore[attr-defined]
    assert len(rows) == 1 and rows[0].startswith("line 5 ") and "cut short" in rows[0], rows


def test_verify_says_a_last_line_without_a_newline_is_not_read(tmp_path: Path) -> None:
    """The readers take a last line without its newline for one a writer was cut off
    in (``read_jsonl``'s ``truncated_tail``), however well it parses: verification says
    so instead of counting it as a verified record."""
    from ledger.sinks import read_jsonl

    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for event in _run_events("r1"):
            sink.record(event)
    path.write_bytes(path.read_bytes()[:-1])
    assert read_jsonl(path).truncated_tail
    code, out = _verify(f"jsonl:///{path}")
    assert code == 1
    rows = [f["message"] for f in out["findings"] if f["kind"] == "row"]  # type: ignore[attr-defined]
    assert rows == ["line 4 has no newline: the readers take it as cut short (a writer cut "
                    "off) and do not read its event"], rows  # fmt: skip
