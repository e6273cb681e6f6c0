"""What a new user trips over: narrow terminals, a demo folder that is not as the demo
left it, a locked or read-only ledger, odd files, and the HTML chart's shape."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from ledger.cli.main import error_line
from ledger.errors import StorageError

from .conftest import Ledger, invoke, sqlite_url

NARROW = {"COLUMNS": "80"}


def _lines_fit(text: str, width: int = 80) -> None:
    assert all(len(line) <= width for line in text.splitlines()), text


def test_runs_at_80_columns_keeps_ids_and_counts(sqlite_ledger: Ledger) -> None:
    result = invoke("runs", "--db", sqlite_ledger.url, env=NARROW)
    assert result.exit_code == 0
    _lines_fit(result.stdout)
    assert sqlite_ledger.run_id in result.stdout  # whole, copyable
    row = next(line for line in result.stdout.splitlines() if sqlite_ledger.run_id in line)
    assert row.split()[-5:] == ["10", "2", "1", "0", "yes"]
    assert "…" not in result.stdout


def test_events_at_80_columns_never_clip_ids(sqlite_ledger: Ledger) -> None:
    result = invoke("events", "--db", sqlite_ledger.url, "--run", sqlite_ledger.run_id, env=NARROW)
    assert result.exit_code == 0
    _lines_fit(result.stdout)
    for kind in ("request", "gate_decision", "action", "tool_result", "run_end"):
        assert kind in result.stdout
    call = sqlite_ledger.write_call  # folded across lines, never cut with "…"
    assert call[:10] in result.stdout and call[-4:] in result.stdout
    assert not re.search(r"call_\w*…", result.stdout)
    assert "tail with --after" in result.stdout
    limited = invoke("events", "--db", sqlite_ledger.url, "--limit", "3")
    after = re.search(r"continue with --after (\w+)", limited.stdout)
    assert after is not None
    rest = invoke("events", "--db", sqlite_ledger.url, "--after", after.group(1), "--nl")
    assert len(rest.stdout.splitlines()) == 7


def test_chain_and_drift_human_output_is_short_at_80_columns(sqlite_ledger: Ledger) -> None:
    chain = invoke("chain", sqlite_ledger.run_id, "--db", sqlite_ledger.url, env=NARROW)
    assert chain.exit_code == 0 and sqlite_ledger.write_call in chain.stdout
    assert re.search(r"sha256:[0-9a-f]{12}…", chain.stdout)
    drift = invoke("drift", sqlite_ledger.run_id, "--db", sqlite_ledger.url, env=NARROW)
    assert drift.exit_code == 0
    _lines_fit(drift.stdout)
    assert "intact" in drift.stdout and "unverifiable" in drift.stdout


def test_report_table_lists_runs_and_says_what_the_window_is(sqlite_ledger: Ledger) -> None:
    result = invoke("report", "--db", sqlite_ledger.url, env=NARROW)
    assert result.exit_code == 0
    assert "Runs and their outcomes" in result.stdout and sqlite_ledger.run_id in result.stdout
    assert "all records (no --since or --until)" in result.stdout
    assert "open to open" not in result.stdout
    _lines_fit(result.stdout)


def test_a_directory_is_not_a_ledger(tmp_path: Path) -> None:
    (tmp_path / "d.db").mkdir()
    for args in (("runs",), ("report",), ("demo",)):
        result = invoke(*args, "--db", sqlite_url(tmp_path / "d.db"))
        assert result.exit_code == 1
        (line,) = result.stderr.splitlines()
        assert line.startswith("ledger: error: ") and "is a directory" in line


def test_config_that_is_not_text_or_is_missing(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    result = invoke("typed", "check", str(binary))
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line == f"ledger: error: {binary}: not UTF-8 text (byte 0)"


def test_read_only_typed_commands_refuse_a_missing_store(tmp_path: Path) -> None:
    config = tmp_path / "ledger.yaml"
    config.write_text("knowledge:\n  type: notes\n")
    missing = str(tmp_path / "nostore")
    for args in (
        ("project", str(config), "--store", missing, "--out", str(tmp_path / "out")),
        ("query", str(config), "--store", missing, "--ledger", "knowledge"),
        ("compact", str(config), "--store", missing, "--ledger", "knowledge"),
    ):
        result = invoke("typed", *args)
        assert result.exit_code == 2 and "does not exist" in result.stderr, args
    assert not (tmp_path / "out").exists()


def test_error_line_drops_sqlalchemy_noise() -> None:
    exc = StorageError(
        "cannot prepare the PostgreSQL ledger schema: (psycopg.OperationalError) connection "
        "failed: Connection refused\nIs the server running?\n(Background on this error at: "
        "https://sqlalche.me/e/21/e3q8)"
    )
    assert error_line(exc) == (
        "cannot prepare the PostgreSQL ledger schema: connection failed: Connection refused "
        "Is the server running?"
    )


def test_demo_twice_in_a_fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = invoke("demo")
    assert first.exit_code == 0, first.stderr
    second = invoke("demo", "--json")
    assert second.exit_code == 0 and json.loads(second.stdout)["typed"]["notes"] == 2
    runs = json.loads(invoke("runs", "--json").stdout)
    assert len(runs) == 2 and all(r["ended"] and r["errors"] == 0 for r in runs)


def test_demo_repairs_a_partly_deleted_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("demo").exit_code == 0
    home = tmp_path / "ledger-demo"
    (home / "ledger.yaml").unlink()
    for sub in ("projection", "agent", "transactions"):
        for path in sorted((home / sub).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    result = invoke("demo", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["typed"]["notes"] == 2  # the store kept the first


def test_demo_with_a_foreign_config_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ledger-demo").mkdir()
    (tmp_path / "ledger-demo" / "ledger.yaml").write_text("other:\n  type: set\n")
    result = invoke("demo")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "no `knowledge` notes ledger" in line and "delete the file" in line


def test_demo_into_a_read_only_ledger_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("demo").exit_code == 0
    target = (tmp_path / "ledger.db").resolve()
    real_access = os.access
    monkeypatch.setattr(  # root ignores file modes, so pretend the file is read-only
        os,
        "access",
        lambda p, mode: False if Path(p).resolve() == target else real_access(p, mode),
    )
    result = invoke("demo")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert (
        line
        == "ledger: error: cannot write to ledger.db: the file is read-only (choose another --db)"
    )


def test_demo_into_a_locked_ledger_fails_fast(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "ledger.db")
    assert invoke("demo", "--db", url).exit_code == 0
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = invoke("demo", "--db", url, env={"LEDGER_LOCK_TIMEOUT": "0.2"})
    finally:
        holder.close()
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "is locked by another process" in line and "LEDGER_LOCK_TIMEOUT" in line
    assert len(json.loads(invoke("runs", "--db", url, "--json").stdout)) == 1


def test_demo_hints_quote_the_url(tmp_path: Path) -> None:
    folder = tmp_path / "my ledgers"
    folder.mkdir()
    url = sqlite_url(folder / "ledger.db")
    result = invoke("demo", "--db", url)
    assert result.exit_code == 0 and f"ledger runs --db '{url}'" in result.stdout
    again = invoke("runs", "--db", url)  # what the hint says works
    assert again.exit_code == 0


def test_demo_into_jsonl_explains_the_refused_write(tmp_path: Path) -> None:
    url = "jsonl:///" + str(tmp_path / "run.jsonl")
    result = invoke("demo", "--db", url)
    assert result.exit_code == 0
    assert "not a durable sink" in result.stdout
    assert len(json.loads(invoke("runs", "--db", url, "--json").stdout)) == 1


def test_warnings_are_held_back_when_the_command_fails(tmp_path: Path) -> None:
    config = tmp_path / "ledger.yaml"
    config.write_text("knowledge:\n  type: notes\n")
    shards = tmp_path / "store" / "ledgers" / "knowledge" / "ledger" / "shards"
    shards.mkdir(parents=True)
    (shards / "9b1c6f0e-8f43-4c1e-9d8a-0a0b0c0d0e0f.jsonl").write_text("not json\n")
    args = ("typed", "project", str(config), "--store", str(tmp_path / "store"))
    failed = invoke(*args, "--out", str(tmp_path / "out"))
    assert failed.exit_code == 1 and len(failed.stderr.splitlines()) == 1
    lenient = invoke(*args, "--out", str(tmp_path / "out2"), "--lenient")
    assert lenient.exit_code == 0


def test_html_chart_groups_bars_and_scales(sqlite_ledger: Ledger) -> None:
    html = invoke("report", "--db", sqlite_ledger.url, "--format", "html").stdout
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert 'width="100%"' in svg and "times in UTC" in svg
    xs = {
        name: [
            float(x)
            for x, h in re.findall(
                rf'class="{name}" x="([\d.]+)" y="[\d.]+" '
                r'width="[\d.]+" height="([\d.]+)"',
                svg,
            )
            if float(h) > 0
        ]
        for name in ("actions", "denials")
    }
    assert xs["actions"] and xs["denials"]
    # the denial bar stands right beside the action bar of the same moment
    assert min(abs(d - a) for a in xs["actions"] for d in xs["denials"]) < 40
    assert '<td class="t">' in html and "open to open" not in html


@pytest.mark.parametrize("group", [(), ("typed",), ("db",)])
def test_help_lists_every_command_without_cutting_it_short(group: tuple[str, ...]) -> None:
    result = invoke(*group, "--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:", 1)[1]
    assert "..." not in commands, commands


def test_demo_refuses_a_read_only_home_before_recording_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert invoke("demo").exit_code == 0
    target = (tmp_path / "ledger-demo" / "agent" / "notes.tidy.txt").resolve()
    real_access = os.access
    monkeypatch.setattr(  # root ignores file modes, so pretend the file is read-only
        os,
        "access",
        lambda p, mode: False if Path(p).resolve() == target else real_access(p, mode),
    )
    result = invoke("demo")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "notes.tidy.txt: it is read-only" in line and "--dir" in line
    monkeypatch.setattr(os, "access", real_access)
    assert len(json.loads(invoke("runs", "--json").stdout)) == 1  # nothing half-recorded


def test_an_empty_window_says_so(sqlite_ledger: Ledger) -> None:
    args = ("report", "--db", sqlite_ledger.url, "--since", "2001-01-01", "--until", "2001-01-02")
    data = json.loads(invoke(*args, "--format", "json").stdout)
    assert data["hash_check"]["checked"] == 0
    assert "no events in the window" in data["hash_check"]["summary"]
    html = invoke(*args, "--format", "html").stdout
    assert "no actions and no denials in the window" in html
