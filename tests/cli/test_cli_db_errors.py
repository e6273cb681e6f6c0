"""``ledger db upgrade / check`` and the error contract: one line on stderr, non-zero
status, no traceback unless ``--debug``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import Ledger, invoke, sqlite_url


def test_db_upgrade_creates_and_check_reports(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "new.db")
    result = invoke("db", "upgrade", url)
    assert result.exit_code == 0 and result.stdout.startswith("schema at revision ")
    again = json.loads(invoke("db", "upgrade", url, "--json").stdout)
    assert again["revision"] == result.stdout.split()[-1]
    data = json.loads(invoke("db", "check", url, "--json").stdout)
    assert data["ok"] and data["schema"]["status"] == "current"
    assert data["rows"]["events"] == 0 and data["integrity"] == "ok"


def test_db_check_counts_rows(sqlite_ledger: Ledger) -> None:
    result = invoke("db", "check", sqlite_ledger.url, "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["rows"]["events"] == 10 and data["rows"]["runs"] == 1
    assert data["rows"]["kinds"]["action"] == 2
    assert data["hash_check"]["checked"] == 10
    human = invoke("db", "check", sqlite_ledger.url)
    assert "integrity" in human.stdout and "ok" in human.stdout


def test_db_check_finds_tampering(sqlite_ledger: Ledger) -> None:
    path = sqlite_ledger.url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET content_hash = 'sha256:00' WHERE kind = 'run_end'")
    result = invoke("db", "check", sqlite_ledger.url, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["hash_check"]["mismatch_count"] == 1


def test_db_check_of_a_non_ledger_file(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    sqlite3.connect(path).close()
    result = invoke("db", "check", sqlite_url(path), "--json")
    assert result.exit_code == 1 and json.loads(result.stdout)["schema"]["status"] == "empty"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("runs", "--db", "mysql://x/y"), "unsupported ledger URL 'mysql://x/y'"),
        (("runs", "--db", "sqlite://"), "names no file"),
        (("runs", "--db", "sqlite:///does/not/exist.db"), "no ledger at does/not/exist.db"),
        (("chain", "r", "--db", "jsonl:///missing.jsonl"), "no ledger at missing.jsonl"),
        (("db", "check", "sqlite:///missing.db"), "no ledger database at missing.db"),
        (("db", "check", "jsonl:///x.jsonl"), "`db` commands take sqlite:///FILE"),
        (("db", "upgrade", "jsonl:///x.jsonl"), "`db` commands take sqlite:///FILE"),
        (("typed", "check", "missing.yaml"), "No such file or directory: missing.yaml"),
    ],
)
def test_errors_are_one_line(
    args: tuple[str, ...], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("ledger: error: ") and words in line, line
    assert result.stdout == ""


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ledger.cli import cli

    result = CliRunner().invoke(cli, ["--debug", "runs", "--db", "mysql://x/y"])
    assert result.exit_code == 1 and isinstance(result.exception, Exception)
    assert "unsupported ledger URL" in str(result.exception)


def test_help_and_version() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("demo", "runs", "chain", "why", "events", "drift", "report", "typed", "db"):
        assert command in result.stdout
    assert invoke("--version").stdout.startswith("ledger, version ")


def test_db_check_of_a_schema_behind_says_the_log_was_not_checked_and_why(tmp_path: Path) -> None:
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from ledger.sinks.schema import MIGRATIONS_DIR

    path = tmp_path / "old.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["connection"] = conn
        config.attributes["schema"] = None
        command.upgrade(config, "0003_retention")
    engine.dispose()
    result = invoke("db", "check", f"sqlite:///{path}", "--json")
    assert result.exit_code == 1
    found = json.loads(result.stdout)
    assert found["schema"]["status"] == "behind"
    assert "not checked" in found["log_statement"] and "ledger db upgrade" in found["log_statement"]
    assert "not a SQL ledger" not in result.stdout
