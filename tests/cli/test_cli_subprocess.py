"""The command as a new user runs it: real processes, the default ``./ledger.db``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, run_cli


def test_demo_twice_in_a_fresh_directory(tmp_path: Path) -> None:
    first = run_cli("demo", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "run_shell" in first.stdout and "denied" in first.stdout
    assert "zero non-safe actions ran without a committed intent" in first.stdout
    assert (tmp_path / "ledger.db").is_file()
    assert (tmp_path / "ledger-demo" / "agent" / "notes.tidy.txt").is_file()
    second = run_cli("demo", "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    data = json.loads(second.stdout)
    assert data["typed"]["notes"] == 2 and data["report"]["compliant"] is True
    runs = json.loads(run_cli("runs", "--json", cwd=tmp_path).stdout)
    assert len(runs) == 2 and all(r["ended"] and r["denials"] == 1 for r in runs)
    why = run_cli("why", data["run_id"], data["write_call_id"], cwd=tmp_path)
    assert why.returncode == 0 and "write_file" in why.stdout
    report = run_cli("report", "--format", "json", "--strict", cwd=tmp_path)
    assert report.returncode == 0 and json.loads(report.stdout)["totals"]["runs"] == 2
    assert run_cli("db", "check", "sqlite:///ledger.db", cwd=tmp_path).returncode == 0


def test_errors_never_show_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("x:\n  type: nope\n", encoding="utf-8")
    cases = [
        ("runs", "--db", "oracle://db"),
        ("runs",),  # no ./ledger.db here
        ("typed", "check", str(bad)),
        ("report", "--db", "postgresql://nobody@127.0.0.1:1/none"),
    ]
    for args in cases:
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("ledger: error: "), line
    debug = run_cli("--debug", "runs", "--db", "oracle://db", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_locked_database_is_one_line(tmp_path: Path) -> None:
    assert run_cli("db", "upgrade", "sqlite:///ledger.db", cwd=tmp_path).returncode == 0
    holder = sqlite3.connect(tmp_path / "ledger.db", isolation_level=None)
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        result = run_cli("runs", cwd=tmp_path, env={"LEDGER_LOCK_TIMEOUT": "0.5"})
    finally:
        holder.close()
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "is locked by another process (waited 0.5 s)" in result.stderr, result.stderr
    assert "LEDGER_LOCK_TIMEOUT" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_piped_output_has_no_progress_or_colour(tmp_path: Path) -> None:
    assert run_cli("demo", cwd=tmp_path).returncode == 0
    result = run_cli("report", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert "\x1b[" not in result.stdout


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    script = shutil.which("script")
    if script is None:
        pytest.skip("util-linux `script` (a pseudo-terminal) is not installed")
    assert run_cli("demo", cwd=tmp_path).returncode == 0
    command = shlex.join([sys.executable, "-m", "ledger", "report", "--format", "json",
                         "-o", "r.json"])  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm")
    result = subprocess.run(
        [script, "-qec", command, "/dev/null"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    assert "reading events" in result.stdout and (tmp_path / "r.json").is_file()


def test_console_script_when_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("ledger")
    if not script.exists():
        pytest.skip("the package is not installed in this environment (no `ledger` script)")
    result = subprocess.run(
        [str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "demo" in result.stdout
