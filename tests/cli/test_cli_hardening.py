"""What an adversarial review of the command found, and the siblings of each class:
time windows that overflow or say nothing, arguments that are not UTF-8, JSONL files of
garbage, read-only commands on a database whose schema stamp was removed."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from ledger.sinks import read_jsonl

from .conftest import Ledger, invoke, run_cli

NOT_COMPLIANT = 3


@pytest.mark.parametrize(
    "window",
    [
        ["--since", "2000-01-01", "--until", "9999-12-31"],
        ["--since", "0001-01-01"],
        ["--until", "9999-12-31T23:59:59Z"],
        ["--since", "1000w"],
    ],
)
def test_far_windows_make_a_report(sqlite_ledger: Ledger, window: list[str]) -> None:
    result = invoke("report", "--db", sqlite_ledger.url, "--format", "json", *window)
    assert result.exit_code == 0, result.output
    assert '"compliant": true' in result.stdout


@pytest.mark.parametrize(
    ("window", "said"),
    [
        (["--since", "99999999d"], "before the year 1"),
        (["--until", "99999999999w"], "before the year 1"),
        (["--since", ""], "empty time"),
        (["--since", "   "], "empty time"),
        (["--since", "1d", "--until", "1d"], "empty time window"),
        (["--since", "2026-01-02", "--until", "2026-01-01"], "empty time window"),
        (["--since", "yesterday"], "RFC 3339"),
    ],
)
def test_unusable_windows_are_usage_errors(
    sqlite_ledger: Ledger, window: list[str], said: str
) -> None:
    for command in ("report", "runs", "events"):
        result = invoke(command, "--db", sqlite_ledger.url, *window)
        assert result.exit_code == 2, (command, result.output)
        assert said in result.output


def test_arguments_that_are_not_utf8_are_one_line_errors(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    bad = os.fsdecode(b"\xff\xfe")  # how Python hands a non-UTF-8 argv entry over
    for args in (
        ["chain", bad],
        ["why", bad, "c1"],
        ["why", sqlite_ledger.run_id, bad],
        ["events", "--tool", bad],
        ["events", "--run", bad],
    ):
        done = run_cli(*args, "--db", sqlite_ledger.url, cwd=tmp_path)
        assert done.returncode in (1, 2), (args, done.stderr)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    "garbage",
    [
        os.urandom(4000),
        b"\x00\x01 binary\n\xff\xfe\n",
        b"not json at all\n",
        b'{"event_id": "01J',  # a torn first line, nothing else
    ],
)
def test_a_jsonl_file_of_garbage_is_not_compliant(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(garbage)
    result = invoke("report", "--db", f"jsonl:///{path}", "--strict", "--format", "json")
    assert result.exit_code == NOT_COMPLIANT, result.output
    assert '"compliant": false' in result.stdout


def test_a_torn_tail_never_swallows_the_next_record(tmp_path: Path) -> None:
    from ledger.model import Event
    from ledger.sinks import JSONLSink

    path = tmp_path / "l.jsonl"
    first = Event(kind="request", run_id="r", args='"one"')
    second = Event(kind="request", run_id="r2", args='"two"')
    whole = first.to_json().encode() + b"\n"
    for cut in range(1, len(whole) - 1):  # every place a crash can cut the line
        path.write_bytes(whole[:cut])
        with JSONLSink(path) as sink:
            sink.record(second)
        data = path.read_bytes()
        assert data.startswith(whole[:cut])  # the torn bytes stay, as evidence
        contents = read_jsonl(path)
        assert contents.events == [second], cut
        assert contents.corrupt_lines == [1] and not contents.truncated_tail
        if cut > 1:
            assert contents.torn_lines == [1], cut


def test_read_commands_on_a_database_without_its_schema_stamp_change_nothing(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    path = Path(sqlite_ledger.url.removeprefix("sqlite:///"))
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE ledger_schema_version")

    def content() -> list[object]:
        with sqlite3.connect(path) as conn:
            tables = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")
            return [*tables, *conn.execute("SELECT seq, event_json FROM events ORDER BY seq")]

    before = content()
    for command in (["runs"], ["events"], ["chain", sqlite_ledger.run_id], ["report"]):
        done = run_cli(*command, "--db", sqlite_ledger.url, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert "no ledger schema version" in done.stderr
        assert "already exists" not in done.stderr
    assert content() == before  # nothing migrated, created or stamped
