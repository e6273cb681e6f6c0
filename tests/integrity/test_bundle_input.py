"""verify_bundle refuses any file that is not a bundle with an IntegrityError (never a
RecursionError or another internal error), and ``ledger bundle -o`` into a missing
folder is a usage error naming the folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import IntegrityError
from ledger.integrity import Verifier, generate_key
from ledger.integrity.bundle import verify_bundle

_, VKEY = generate_key("test.example/log")


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xfe", b"null", b"[]", b"{}", b"[" * 100_000, b'{"a":' * 100_000],
)
def test_garbage_is_refused_with_a_reason(data: bytes) -> None:
    with pytest.raises(IntegrityError, match="bundle refused"):
        verify_bundle(data, [Verifier.from_key(VKEY)])


def test_verify_bundle_of_deeply_nested_json_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 100_000)
    result = CliRunner().invoke(cli, ["verify-bundle", str(path), "--vkey", VKEY])
    assert result.exit_code == 1, result.output
    assert "nested too deeply" in result.output


def test_bundle_into_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    from ledger.sinks import SQLiteSink
    from tests.sinks.factories import action

    db = tmp_path / "ledger.db"
    skey_path = tmp_path / "log.key"
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["keygen", "test.example/log", "--out", str(skey_path)]).exit_code == 0
    )
    with SQLiteSink(db) as sink:
        sink.commit_action(action("r1"))
    out = tmp_path / "missing" / "run.json"
    result = runner.invoke(
        cli, ["bundle", "r1", "--db", f"sqlite:///{db}", "-o", str(out), "--key", str(skey_path)]
    )
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output
    assert not out.parent.exists()


def test_bundle_of_a_changed_row_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    import sqlite3

    from ledger.sinks import SQLiteSink
    from tests.sinks.factories import action

    db = tmp_path / "ledger.db"
    key = tmp_path / "log.key"
    runner = CliRunner()
    assert runner.invoke(cli, ["keygen", "test.example/log", "--out", str(key)]).exit_code == 0
    with SQLiteSink(db) as sink:
        for i in range(5):
            sink.commit_action(action("r1", f"c{i}"))
    url = f"sqlite:///{db}"
    assert runner.invoke(cli, ["checkpoint", "--db", url, "--key", str(key)]).exit_code == 0
    with sqlite3.connect(db) as conn:  # the attacker edits a row under the checkpoint
        conn.execute("UPDATE events SET event_json = replace(event_json, 'c2', 'cX')")
    out = tmp_path / "run.json"
    result = runner.invoke(cli, ["bundle", "r1", "--db", url, "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "not bundled" in result.output
    assert not out.exists()
