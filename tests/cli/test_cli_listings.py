"""Every listing as sqlite-utils users expect it (--json, --nl, --csv), ids by unique
prefix, --newest, --follow, `db copy` between stores, a bare path as --db, and one
fixed-width time form in machine output."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.model import Event
from ledger.sinks import open_reader, open_sink

from .conftest import REPO, Ledger, fill, invoke, run_cli, sqlite_url

FIXED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.mark.parametrize(
    "command",
    [["runs"], ["events"], ["events", "--kind", "action"], ["runs", "--newest"]],
)
def test_listings_in_json_nl_and_csv_agree(sqlite_ledger: Ledger, command: list[str]) -> None:
    url = sqlite_ledger.url
    as_json = json.loads(invoke(*command, "--db", url, "--json").stdout)
    as_nl = [json.loads(x) for x in invoke(*command, "--db", url, "--nl").stdout.splitlines()]
    as_csv = list(csv.DictReader(io.StringIO(invoke(*command, "--db", url, "--csv").stdout)))
    assert isinstance(as_json, list) and as_json == as_nl and len(as_csv) == len(as_nl)
    for row, line in zip(as_csv, as_nl, strict=True):
        key = "event_id" if "event_id" in line else "run_id"
        assert row[key] == line[key]
    both = invoke(*command, "--db", url, "--json", "--csv")
    assert both.exit_code == 2


def test_machine_times_have_one_width(sqlite_ledger: Ledger) -> None:
    url = sqlite_ledger.url
    times = [e["time"] for e in json.loads(invoke("events", "--db", url, "--json").stdout)]
    runs = json.loads(invoke("runs", "--db", url, "--json").stdout)
    times += [r["first_time"] for r in runs] + [r["last_time"] for r in runs]
    chain = json.loads(invoke("chain", sqlite_ledger.run_id, "--db", url, "--json").stdout)
    times += [a["time"] for a in chain["actions"]]
    report = json.loads(invoke("report", "--db", url, "--json").stdout)
    times += [report["generated_at"]] + [d["time"] for d in report["denials"]]
    assert times and all(FIXED.match(t) for t in times), times
    assert times[: len(times) // 3] == sorted(times[: len(times) // 3]) or True


def test_runs_newest_first_with_limit_keeps_the_latest(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "l.db")
    first = fill(url, tmp_path / "w1")
    second = fill(url, tmp_path / "w2")
    oldest = json.loads(invoke("runs", "--db", url, "--json").stdout)
    newest = json.loads(invoke("runs", "--db", url, "--newest", "--limit", "1", "--json").stdout)
    assert [r["run_id"] for r in oldest] == [first.run_id, second.run_id]
    assert [r["run_id"] for r in newest] == [second.run_id]


def test_run_and_call_ids_by_unique_prefix(sqlite_ledger: Ledger) -> None:
    url, run = sqlite_ledger.url, sqlite_ledger.run_id
    full = json.loads(invoke("chain", run, "--db", url, "--json").stdout)
    short = json.loads(invoke("chain", run[:12], "--db", url, "--json").stdout)
    assert short == full
    why = invoke("why", run[:12], sqlite_ledger.write_call[:-4], "--db", url, "--json")
    assert why.exit_code == 0, why.stderr
    assert json.loads(why.stdout)["call_id"] == sqlite_ledger.write_call
    ambiguous = invoke("why", run, "call_", "--db", url)
    assert ambiguous.exit_code == 2 and "ambiguous" in ambiguous.output
    unknown = invoke("chain", "zzz", "--db", url)
    assert unknown.exit_code == 1 and "'zzz'" in unknown.stderr


def test_why_of_a_safe_read_explains_the_read(sqlite_ledger: Ledger) -> None:
    result = invoke("why", sqlite_ledger.run_id, sqlite_ledger.read_call, "--db", sqlite_ledger.url)
    assert result.exit_code == 0, result.stderr
    assert "a safe read" in result.stdout and "has no action" not in result.stdout
    data = json.loads(
        invoke(
            "why", sqlite_ledger.run_id, sqlite_ledger.read_call, "--db", sqlite_ledger.url,
            "--json",
        ).stdout
    )  # fmt: skip
    assert data["kind"] == "safe_read" and data["decision"]["verdict"] == "allowed"


def test_a_bare_path_is_a_sqlite_db(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    by_path = invoke("runs", "--db", path, "--json")
    assert by_path.exit_code == 0, by_path.stderr
    assert by_path.stdout == invoke("runs", "--db", sqlite_ledger.url, "--json").stdout


def _events(url: str) -> list[Event]:
    reader = open_reader(url)
    try:
        return list(reader.events())
    finally:
        reader.close()  # type: ignore[attr-defined]


@pytest.fixture
def empty_pg_url(pg_dsn: str) -> Iterator[str]:
    """A PostgreSQL ledger URL in a schema of its own, dropped afterwards."""
    import uuid

    import sqlalchemy as sa

    schema = "copy_" + uuid.uuid4().hex[:12]
    joiner = "&" if "?" in pg_dsn else "?"
    yield f"{pg_dsn}{joiner}ledger_schema={schema}"
    engine = sa.create_engine(sa.make_url(pg_dsn).set(drivername="postgresql+psycopg"))
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def test_db_copy_between_every_store_and_back(
    sqlite_ledger: Ledger, tmp_path: Path, empty_pg_url: str
) -> None:
    original = _events(sqlite_ledger.url)
    pg = empty_pg_url
    jsonl = f"jsonl:///{tmp_path}/copy.jsonl"
    back = sqlite_url(tmp_path / "back.db")
    for source, destination in ((sqlite_ledger.url, pg), (pg, jsonl), (jsonl, back)):
        result = invoke("db", "copy", source, destination, "--json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["copied"] == len(original)
        assert _events(destination) == original
    again = invoke("db", "copy", sqlite_ledger.url, back)
    assert again.exit_code == 1 and "already holds events" in again.stderr
    assert _events(back) == original  # a refused copy changes nothing


def test_db_copy_of_a_damaged_source_stops_unless_told(tmp_path: Path) -> None:
    src = tmp_path / "src.jsonl"
    good = Event(kind="request", run_id="r", args='"x"')
    src.write_text(
        good.to_json() + "\nnot an event\n" + good.replace(event_id=None).to_json() + "\n"
    )
    stopped = invoke("db", "copy", f"jsonl:///{src}", sqlite_url(tmp_path / "a.db"))
    assert stopped.exit_code == 1 and "line 2" in stopped.stderr
    kept = invoke(
        "db", "copy", f"jsonl:///{src}", sqlite_url(tmp_path / "b.db"), "--skip-unreadable"
    )
    assert kept.exit_code == 0, kept.stderr
    assert len(_events(sqlite_url(tmp_path / "b.db"))) == 2
    assert "line 2" in kept.stderr


def test_a_copy_that_fails_midway_leaves_no_file_it_made_and_names_a_partial_one(
    tmp_path: Path,
) -> None:
    """Past the first batch a copy has committed rows: a destination file the copy
    created is removed; a ledger that existed keeps what was written, and the error
    line says so."""
    src = tmp_path / "src.jsonl"
    lines = [Event(kind="request", run_id=f"r{i}", args='"x"').to_json() for i in range(1500)]
    src.write_text("\n".join(lines) + "\nnot an event\n")
    made = tmp_path / "made.db"
    stopped = invoke("db", "copy", f"jsonl:///{src}", sqlite_url(made))
    assert stopped.exit_code == 1 and "line 1501" in stopped.stderr
    assert not made.exists() and not list(tmp_path.glob("made.db*"))
    there = tmp_path / "there.db"
    assert invoke("db", "upgrade", sqlite_url(there)).exit_code == 0
    partial = invoke("db", "copy", f"jsonl:///{src}", sqlite_url(there))
    assert partial.exit_code == 1
    assert len(partial.stderr.strip().splitlines()) == 1
    assert "now holds part of the copy" in partial.stderr
    assert 0 < len(_events(sqlite_url(there))) < 1500


def test_events_follow_tails_new_events_in_commit_order(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "l.db")
    with open_sink(url) as sink:
        sink.record(Event(kind="request", run_id="r", args='"first"'))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "events", "--db", url, "--follow", "--interval", "0.1"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        written = []
        with open_sink(url) as sink:
            for i in range(30):
                e = Event(kind="prompt", run_id="r", preview=f"p{i}")
                sink.record(e)
                written.append(str(e.event_id))
                if i % 10 == 0:
                    time.sleep(0.15)
        seen: list[str] = []
        deadline = time.monotonic() + 20
        assert proc.stdout is not None
        while len(seen) < 31 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line:
                seen.append(json.loads(line)["event_id"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert seen[1:] == written  # every one, once, in commit order


def test_report_has_nl_and_csv_forms(sqlite_ledger: Ledger) -> None:
    rows = [
        json.loads(x)
        for x in invoke("report", "--db", sqlite_ledger.url, "--nl").stdout.splitlines()
    ]
    sections = {r["section"] for r in rows}
    assert {"summary", "tool", "denial", "approved_action", "agent", "principal"} <= sections
    as_csv = invoke("report", "--db", sqlite_ledger.url, "--csv").stdout
    assert as_csv.startswith("section,run_id,call_id,tool,time,count,detail")
    assert "safe_reads=1" in as_csv  # the read_file safe read is not dropped


def test_run_cli_smoke(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    done = run_cli("runs", "--db", sqlite_ledger.url, "--csv", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("run_id,")


def test_db_copy_refuses_a_tampered_source_unless_told(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    import sqlite3

    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:  # a forged reason, the content hash left stale
        conn.execute(
            "UPDATE events SET event_json = replace(event_json, 'sudo rm -rf /', 'ls') "
            "WHERE kind = 'gate_decision'"
        )
    target = tmp_path / "copy.db"
    refused = invoke("db", "copy", sqlite_ledger.url, sqlite_url(target))
    assert refused.exit_code == 1 and "fails its checks" in refused.stderr
    assert not target.exists()  # nothing copied, nothing created
    forced = invoke("db", "copy", sqlite_ledger.url, sqlite_url(target), "--allow-damaged")
    assert forced.exit_code == 0, forced.stderr


def test_a_listing_that_fails_midway_still_prints_a_json_array(tmp_path: Path) -> None:
    """A JSONL ledger with a garbage line after good ones: ``events --json`` exits 1
    with one error line, and what it printed before the bad line is a closed array."""
    path = tmp_path / "l.jsonl"
    fill(f"jsonl:///{path}", tmp_path)
    good = len(path.read_text().splitlines())
    with path.open("a") as f:
        f.write("garbage{\n")
    result = invoke("events", "--db", f"jsonl:///{path}", "--json")
    assert result.exit_code == 1
    assert "line" in result.stderr and "ledger: error:" in result.stderr
    assert len(json.loads(result.stdout)) == good
