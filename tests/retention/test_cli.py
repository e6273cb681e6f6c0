"""``ledger retention|hold|erase|db vacuum`` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.integrity import generate_key
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _ledger(tmp_path: Path) -> str:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
        sink.record_many(run_events("old-2", OLD, secret="bob"))
    return f"sqlite:///{path}"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_policy_hold_erase_verify_from_the_command_line(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr")
    assert code == 1 and "no retention policy" in err and err.count("\n") == 1
    code, out, _ = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "180d",
                        "--reason", "policy v1", "--by", "dpo")  # fmt: skip
    assert code == 0 and "keep 400d, floor 180d" in out
    code, out, _ = _run("retention", "show", "--db", db, "--json")
    shown = json.loads(out)
    assert shown["policy"]["floor"] == "180d" and shown["policy"]["set_by"] == "dpo"
    code, out, _ = _run("hold", "add", "--db", db, "--run", "old-1", "--reason", "litigation",
                        "--json")  # fmt: skip
    hold_id = json.loads(out)["id"]
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr")
    assert code == 1 and hold_id in err and "nothing was changed" in err
    code, out, _ = _run("hold", "list", "--db", db)
    assert hold_id in out and "litigation" in out
    assert _run("hold", "release", hold_id, "--db", db, "--reason", "closed")[0] == 0
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr", "--dry-run")
    assert code == 0 and "would erase 7 event(s)" in out and out.count("old-1") >= 7
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr")
    assert code == 0 and "erased 7 event(s)" in out
    code, out, _ = _run("chain", "old-1", "--db", db)
    assert code == 0 and "[erased: gdpr]" in out and "alice" not in out
    _, vkey = generate_key("test.example/log")
    code, out, _ = _run("verify", "--db", db, "--vkey", vkey, "--json")
    report = json.loads(out)
    assert report["ok"], report
    assert any(f["kind"] == "erased" and f["severity"] == "info" for f in report["findings"])
    code, out, _ = _run("db", "vacuum", "--db", db, "--json")
    assert code == 0 and json.loads(out)["rows"] > 14


def test_bad_input_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d", "--reason", "v1")
    for args, words in [
        (("--run", "old-1", "--reason", ""), "reason is required"),
        (("--run", "old-1", "--reason", "   "), "reason is required"),
        (("--before", "2025-13-01", "--reason", "x"), "not a calendar date"),
        (("--before", "last week", "--reason", "x"), "not a date"),
        (("--run", "nope", "--reason", "x"), "no events of run 'nope'"),
        (("--run", "old-1", "--before", "2025-01-01", "--reason", "x"), "exactly one"),
        (("--reason", "x"), "exactly one"),
    ]:
        code, _, err = _run("erase", "--db", db, *args)
        assert code in (1, 2) and words in err, (args, err)
        assert "Traceback" not in err
    code, _, err = _run("retention", "set", "--db", db, "--keep", "6m", "--reason", "x")
    assert code == 1 and "ambiguous" in err
    code, _, err = _run("erase", "--db", f"jsonl:///{tmp_path / 'l.jsonl'}", "--run", "r",
                        "--reason", "x")  # fmt: skip
    assert code == 1 and "SQL ledger" in err
    with SQLiteSink(Path(db.removeprefix("sqlite:///"))) as sink:
        assert all(e.erased is None for e in sink.events())
