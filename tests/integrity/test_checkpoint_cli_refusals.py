"""``ledger checkpoint`` never creates a ledger (a mistyped path would get a fresh,
empty, signed log), and a file in ``-o DIR/`` that is not a checkpoint is named."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.integrity import generate_key
from ledger.sinks import SQLiteSink
from tests.sinks.factories import action

SKEY, VKEY = generate_key("test.example/log")


def _key(tmp_path: Path) -> Path:
    key = tmp_path / "log.key"
    key.write_text(SKEY + "\n")
    return key


def test_checkpoint_of_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    result = CliRunner().invoke(
        cli, ["checkpoint", "--db", f"sqlite:///{missing}", "--key", str(_key(tmp_path))]
    )
    assert result.exit_code == 1, result.output
    assert "does not exist" in result.output
    assert not missing.exists()


def test_a_non_utf8_file_in_the_checkpoint_folder_is_named(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with SQLiteSink(db) as sink:
        sink.commit_action(action("r1"))
    folder = tmp_path / "cps"
    folder.mkdir()
    (folder / "checkpoint-000000000001.txt").write_bytes(b"\xff\xfe")
    result = CliRunner().invoke(
        cli,
        ["checkpoint", "--db", f"sqlite:///{db}", "--key", str(_key(tmp_path)), "-o", f"{folder}/"],
    )
    assert result.exit_code == 1, result.output
    assert "checkpoint-000000000001.txt is not a checkpoint" in result.output


def test_verify_against_a_folder_without_checkpoints_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with SQLiteSink(db) as sink:
        sink.commit_action(action("r1"))
    empty = tmp_path / "cps"
    empty.mkdir()
    result = CliRunner().invoke(
        cli, ["verify", "--db", f"sqlite:///{db}", "--vkey", VKEY, "--checkpoint", str(empty)]
    )
    assert result.exit_code == 2, result.output
    assert "holds no checkpoint-*.txt" in result.output


def test_a_signer_key_given_as_vkey_is_named(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with SQLiteSink(db) as sink:
        sink.commit_action(action("r1"))
    result = CliRunner().invoke(cli, ["verify", "--db", f"sqlite:///{db}", "--vkey", SKEY])
    assert result.exit_code == 2, result.output
    assert "signer key" in result.output
    assert SKEY not in result.output


def test_checkpoint_of_another_applications_database_creates_nothing(tmp_path: Path) -> None:
    import sqlite3

    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    result = CliRunner().invoke(
        cli, ["checkpoint", "--db", f"sqlite:///{other}", "--key", str(_key(tmp_path))]
    )
    assert result.exit_code == 1, result.output
    assert "no ledger at" in result.output
    with sqlite3.connect(other) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"t"}
