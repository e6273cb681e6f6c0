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
    for selected in (["--expired"], ["--expired", "--dry-run"]):  # refused as alike
        code, _, err = _run("erase", "--db", db, *selected, "--reason", "gdpr")
        assert code == 1 and "no retention policy" in err and "nothing was changed" in err
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
        (("--event", "NOPE", "--reason", "x"), "'NOPE' is not a ULID"),
        (("--event", "01J00000000000000000000000", "--reason", "x"), "no event with id"),
        (("--run", "nope", "--reason", "x"), "no events of run 'nope'"),
        (("--run", "old-1", "--before", "2025-01-01", "--reason", "x"), "exactly one"),
        (("--reason", "x"), "exactly one"),
    ]:
        code, _, err = _run("erase", "--db", db, *args)
        assert code in (1, 2) and words in err, (args, err)
        assert "Traceback" not in err
    code, _, err = _run("retention", "set", "--db", db, "--keep", "6m", "--reason", "x")
    assert code == 2 and "ambiguous" in err  # a malformed value: a usage error
    code, _, err = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "-5d")
    assert code == 2 and "--floor" in err and "not a duration" in err
    code, _, err = _run("erase", "--db", f"jsonl:///{tmp_path / 'l.jsonl'}", "--run", "r",
                        "--reason", "x")  # fmt: skip
    assert code == 1 and "SQL ledger" in err
    with SQLiteSink(Path(db.removeprefix("sqlite:///"))) as sink:
        assert all(e.erased is None for e in sink.events())


def test_the_issue_s_command_lines_work_as_written(tmp_path: Path) -> None:
    """``retention set --keep 400d --floor 180d`` and ``hold release ID`` with no reason
    (the record says none was given), ``--event ID ID`` naming several events, and
    ``verify`` with no key."""
    db = _ledger(tmp_path)
    code, out, err = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "0d")
    assert code == 0 and "keep 400d, floor 0d" in out, err
    code, out, _ = _run("retention", "show", "--db", db, "--json")
    assert json.loads(out)["policy"]["reason"] == "(no reason given)"
    code, out, _ = _run("hold", "add", "--db", db, "--run", "old-2", "--reason", "case", "--json")
    hold_id = json.loads(out)["id"]
    code, _, err = _run("hold", "release", hold_id, "--db", db)
    assert code == 0, err
    code, out, _ = _run("hold", "list", "--db", db, "--all", "--json")
    assert json.loads(out)[0]["release_reason"] == "(no reason given)"
    code, _, err = _run("hold", "release", hold_id, "--db", db, "--reason", " ")
    assert code == 1 and "must not be blank" in err  # blank is refused, not defaulted
    code, out, _ = _run("events", "--db", db, "--run", "old-1", "--json")
    first, second = (e["event_id"] for e in json.loads(out)[:2])
    code, out, err = _run("erase", "--db", db, "--event", first, second, "--reason", "gdpr")
    assert code == 0 and "erased 2 event(s)" in out, err
    code, _, err = _run("erase", "--db", db, first, "--reason", "gdpr")
    assert code == 2 and "--event" in err  # a bare id is not taken for a run
    code, out, err = _run("verify", "--db", db, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"], report
    erased = [f["message"] for f in report["findings"] if f["kind"] == "erased"]
    assert len(erased) == 1 and erased[0].startswith("2 row(s) erased (hash kept)")


def test_hold_input_is_refused_before_anything_is_held(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d")
    for args in (("--since", "6m"), ("--until", "6M"), ()):
        code, _, err = _run("hold", "add", "--db", db, *args, "--reason", "x")
        assert code == 2 and "Traceback" not in err, (args, err)
    code, _, err = _run("hold", "add", "--db", db, "--since", "6m", "--reason", "x")
    assert "ambiguous" in err
    code, _, err = _run("hold", "add", "--db", db, "--run", "old-1", "--since", "7d",
                        "--reason", "x")  # fmt: skip
    assert code == 2 and "one of the two" in err
    code, out, _ = _run("hold", "list", "--db", db, "--all", "--json")
    assert json.loads(out) == []


def test_a_refusal_names_every_hold_that_blocks_it(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d")
    ids = []
    for args in (("--run", "old-1"), ("--run", "old-2"), ("--since", "2020-01-01")):
        code, out, _ = _run("hold", "add", "--db", db, *args, "--reason", "case", "--json")
        ids.append(json.loads(out)["id"])
    code, _, err = _run("erase", "--db", db, "--before", "2030-01-01", "--reason", "x")
    assert code == 1 and "3 legal holds" in err and all(i in err for i in ids), err
    assert err.count("\n") == 1


def test_retention_tables_changed_by_sql_are_reported_by_show_list_and_verify(
    tmp_path: Path,
) -> None:
    import sqlite3

    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "180d")
    code, out, _ = _run("hold", "add", "--db", db, "--run", "old-1", "--reason", "case", "--json")
    for command in (("retention", "show"), ("hold", "list"), ("verify",)):
        assert _run(*command, "--db", db)[0] == 0, command
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    conn.execute("UPDATE retention_policy SET floor_s = 0")
    conn.execute("DELETE FROM legal_holds")
    conn.commit()
    conn.close()
    code, out, err = _run("retention", "show", "--db", db, "--json")
    assert code == 1 and json.loads(out)["tables_changed"] and "backup" in err
    code, _, err = _run("hold", "list", "--db", db)
    assert code == 1 and "disagree with the retention records" in err
    code, out, _ = _run("verify", "--db", db, "--json")
    kinds = {f["kind"] for f in json.loads(out)["findings"]}
    assert code == 1 and "retention-tables" in kinds
    code, _, err = _run("erase", "--db", db, "--run", "old-2", "--reason", "x")
    assert code == 1 and "changed outside the ledger" in err and "backup" in err


def test_db_commands_take_the_ledger_as_an_argument_or_as_db(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    for command in (("db", "check"), ("db", "vacuum"), ("db", "upgrade")):
        assert _run(*command, db)[0] == 0, command
        assert _run(*command, "--db", db)[0] == 0, command
        code, _, err = _run(*command, db, "--db", f"sqlite:///{tmp_path / 'other.db'}")
        assert code == 2 and "two ledgers given" in err, command
    assert not (tmp_path / "other.db").exists()


def test_a_verifier_key_given_as_the_signer_key_is_named(tmp_path: Path) -> None:
    db = _ledger(tmp_path)
    _, vkey = generate_key("dpo.example/policy")
    (tmp_path / "dpo.vkey").write_text(vkey)
    code, _, err = _run("retention", "set", "--db", db, "--keep", "400d", "--key",
                        str(tmp_path / "dpo.vkey"))  # fmt: skip
    assert code == 2 and "--key" in err and "not a signer key" in err


def test_review_cases_dropped_tables_spaced_minutes_no_url_garbage_fields(
    tmp_path: Path,
) -> None:
    import sqlite3

    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d")
    code, _, err = _run("hold", "add", "--db", db, "--since", "6 m", "--reason", "x")
    assert code == 2 and "ambiguous" in err
    code, _, err = _run("db", "upgrade")  # it would create ./ledger.db
    assert code == 2 and "which ledger" in err
    assert _run("erase", "--db", db, "--run", "old-1", "--field", "args", "--reason", "f")[0] == 0
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    conn.execute("UPDATE erasures SET fields = 'notjson'")
    conn.commit()
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason", "whole")
    assert code == 1 and "erasures table" in err and "internal error" not in err, err
    conn.execute("DROP TABLE legal_holds")
    conn.execute("DROP TABLE retention_policy")
    conn.commit()
    conn.close()
    code, out, _ = _run("verify", "--db", db, "--json")
    assert code == 1 and "retention-tables" in {f["kind"] for f in json.loads(out)["findings"]}


def test_an_erasure_says_what_it_met_already_erased_and_report_times_are_one_width(
    tmp_path: Path,
) -> None:
    """The real run says "(N already erased)" as its dry run does; the report's
    retention lines give every time with six fractional digits, as the rest of the
    report, so CSV time cells line up and sort as text."""
    import re

    db = _ledger(tmp_path)
    _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "180d")
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr")
    assert code == 0, err
    code, out, err = _run("erase", "--db", db, "--before", "2026-01-01", "--reason", "expired")
    assert code == 0, err
    assert re.search(r"erased \d+ event\(s\) of events before .* \(7 already erased\); ", out), out
    code, out, _ = _run("report", "--db", db, "--csv")
    lines = [line for line in out.splitlines() if line.startswith("retention,")]
    # (an erasure's selection, "events before <time>", is shown as recorded)
    stamp = r"(?<!before )\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"
    times = re.findall(stamp, "\n".join(lines))
    assert len(times) >= 3 and all(re.fullmatch(r".*\.\d{6}Z", t) for t in times), lines
