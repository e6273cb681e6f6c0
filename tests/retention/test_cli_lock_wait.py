"""Retention commands wait ``LEDGER_LOCK_TIMEOUT`` seconds for a SQLite file another
process keeps locked, as every ``ledger`` command does, then fail in one line that says
what to do (they waited the library's two minutes, and said only "database is
locked")."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema, run_events

pytestmark = needs_retention_schema


@pytest.mark.parametrize(
    "argv",
    [
        ["retention", "set", "--keep", "400d", "--floor", "30d", "--reason", "policy"],
        ["hold", "add", "--run", "old", "--reason", "litigation"],
        ["erase", "--run", "old", "--reason", "GDPR"],
        ["db", "vacuum"],
        ["checkpoint"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_locked_ledger_is_waited_for_lock_timeout_then_refused(
    tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old", OLD))
    url = f"sqlite:///{path}"
    if argv[0] == "checkpoint":
        key = tmp_path / "log.key"
        made = CliRunner().invoke(cli, ["keygen", "example.com/log", "--out", str(key)])
        assert made.exit_code == 0, made.output
        argv = [*argv, "--key", str(key)]
    if argv[0] == "erase":
        set_policy = ["retention", "set", "--db", url, "--keep", "400d", "--floor", "30d"]
        assert CliRunner().invoke(cli, [*set_policy, "--reason", "p"]).exit_code == 0
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer keeps the file locked
    try:
        start = time.monotonic()
        result = CliRunner(env={"LEDGER_LOCK_TIMEOUT": "1"}).invoke(cli, [*argv, "--db", url])
        took = time.monotonic() - start
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 1, result.output
    assert took < 15, took  # not the library's default of two minutes
    line = result.output.strip().splitlines()[-1]
    if argv[0] == "db":  # VACUUM says it its own way
        assert "database is locked; retry when it is idle" in line, line
    else:
        assert "locked by another process" in line and "LEDGER_LOCK_TIMEOUT" in line, line
