"""Acceptance probes of retention, holds and erasure (session 10), as a hostile but
realistic new user runs them from the command line, on SQLite and PostgreSQL: odd
selector input, dates with offsets, erasing twice, holds over part of a selection,
floor changes, what the report and ``retention show`` print, dry runs against what then
goes, and ``ledger verify`` after erasures, appends, checkpoints, bundles and vacuum.

The second half are the defects the probe found, each a test that failed before its
fix: reasons that forged lines of ``retention show`` and the report, a field erasure
that marked events holding none of its fields, ``events`` hiding a kept reason, a report
window that did not account for its erased events, a refused dry run that had listed
rows, and a reversed hold window that was not a usage error."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.model.erasure import erased_whole
from ledger.retention import Retention
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _seed(db: Ledger) -> dict[str, list[str]]:
    """old-1 (2025-01-01), old-2 (2025-02-01), young (ten days old), a policy of keep
    400d, floor 180d. Returns each run's event ids in commit order: request, action c0,
    result c0, action c1, result c1, denied action cd, run end."""
    sink = db.open()
    runs = {
        "old-1": run_events("old-1", OLD),
        "old-2": run_events("old-2", OLD + timedelta(days=31), secret="bob"),
        "young": run_events("young", datetime.now(UTC) - timedelta(days=10), secret="dave"),
    }
    for events in runs.values():
        sink.record_many(events)
    sink.close()
    code, _, err = _run("retention", "set", "--db", db.url, "--keep", "400d", "--floor",
                        "180d", "--reason", "policy v1", "--by", "dpo")  # fmt: skip
    assert code == 0, err
    return {run: [str(e.event_id) for e in events] for run, events in runs.items()}


def _rows(db: Ledger) -> list[Any]:
    return [tuple(r) for r in db.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")]


def _one_line_error(err: str) -> None:
    assert err.startswith("ledger: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


def _vkey(tmp_path: Path) -> tuple[Path, str]:
    key = tmp_path / "log.key"
    code, out, err = _run("keygen", "test.example/log", "--out", str(key))
    assert code == 0, err
    return key, out.strip()


# --- what held up -------------------------------------------------------------------


def test_event_selectors_are_checked_before_anything_changes(ledger_db: Ledger) -> None:
    ids = _seed(ledger_db)
    before = _rows(ledger_db)
    db = ledger_db.url
    code, _, err = _run("erase", "--db", db, "--event", "nonsense", "--reason", "x")
    assert code == 2 and "not a ULID" in err  # a malformed value: a usage error
    unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    code, _, err = _run("erase", "--db", db, "--event", ids["old-1"][0], "--event", unknown,
                        "--reason", "x")  # fmt: skip
    assert code == 1 and unknown in err and "nothing was changed" in err
    _one_line_error(err)
    # an id in the floor among old ones: the whole request is refused
    code, _, err = _run("erase", "--db", db, "--event", ids["old-1"][0], "--event",
                        ids["young"][0], "--reason", "x")  # fmt: skip
    assert code == 1 and "inside the retention floor" in err
    _one_line_error(err)
    for mixed in (
        ("--run", "old-1", "--event", ids["old-1"][0]),
        ("--before", "2025-06-01", "--expired"),
        ("--run", "old-1", "--before", "2025-06-01"),
    ):
        code, _, err = _run("erase", "--db", db, *mixed, "--reason", "x")
        assert code == 2 and "exactly one" in err, (mixed, err)
    # a lower-case id is the same event, listed as stored
    code, out, _ = _run("erase", "--db", db, "--event", ids["old-1"][0].lower(), "--reason",
                        "x", "--dry-run")  # fmt: skip
    assert code == 0 and ids["old-1"][0] in out and "would erase 1 event(s)" in out
    assert _rows(ledger_db) == before


def test_dates_with_offsets_and_before_the_first_event(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    before = _rows(ledger_db)
    db = ledger_db.url
    # 05:00+05:00 is midnight UTC: the request at exactly 00:00:00Z is not before it
    code, out, _ = _run("erase", "--db", db, "--before", "2025-01-01T05:00:00+05:00",
                        "--reason", "x", "--dry-run", "--json")  # fmt: skip
    plan = json.loads(out)
    assert code == 0 and plan["erased"] == 0
    assert plan["selection"]["before"] == "2025-01-01T00:00:00Z"
    code, out, _ = _run("erase", "--db", db, "--before", "2025-01-01T05:00:01.5+05:00",
                        "--reason", "x", "--dry-run", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["erased"] == 3  # request, action c0, its result
    code, out, _ = _run("erase", "--db", db, "--before", "2024-01-01", "--reason", "x")
    assert code == 0 and "nothing to erase" in out
    for bad in ("2025-01-01T00:00:00", "2025-02-30", "1d", "yesterday", "2025-1-1"):
        code, _, err = _run("erase", "--db", db, "--before", bad, "--reason", "x")
        assert code == 2 and "--before" in err and "Traceback" not in err, (bad, err)
    assert _rows(ledger_db) == before  # no erasure record for an empty selection


def test_erasing_twice_and_growing_a_field_erasure(ledger_db: Ledger, tmp_path: Path) -> None:
    ids = _seed(ledger_db)
    db = ledger_db.url
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--field", "args", "--reason",
                        "first")  # fmt: skip
    assert code == 0 and "erased 4 event(s)" in out  # those holding args
    rows = _rows(ledger_db)
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--field", "args", "--reason",
                        "again")  # fmt: skip
    assert code == 0 and "nothing to erase" in out and "4 already erased" in out
    assert _rows(ledger_db) == rows
    code, out, _ = _run("erase", "--db", db, "--event", ids["old-1"][1], "--reason", "whole")
    assert code == 0 and "erased 1 event(s)" in out
    sink = ledger_db.open()
    whole = sink.get(ids["old-1"][1])
    gone = whole.erased
    assert erased_whole(whole) and gone is not None and len(gone.records) == 2
    assert gone.reason == "whole"
    assert sink.get(ids["old-1"][3]).erased.fields == ("args",)
    _, vkey = _vkey(tmp_path)
    code, out, _ = _run("verify", "--db", db, "--vkey", vkey, "--json")
    assert json.loads(out)["ok"], out


def test_a_time_hold_over_part_of_a_selection(ledger_db: Ledger) -> None:
    ids = _seed(ledger_db)
    db = ledger_db.url
    code, out, _ = _run("hold", "add", "--db", db, "--since", "2025-01-01T00:00:05Z",
                        "--until", "2025-01-15", "--reason", "audit", "--json")  # fmt: skip
    hold = json.loads(out)["id"]
    rows = _rows(ledger_db)
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason", "x")
    assert code == 1 and "2 selected event(s) are under legal hold" in err and hold in err
    _one_line_error(err)
    code, _, err = _run("erase", "--db", db, "--event", ids["old-1"][5], "--reason", "x")
    assert code == 1 and hold in err
    code, _, err = _run("erase", "--db", db, "--before", "2025-03-01", "--reason", "x",
                        "--dry-run")  # fmt: skip
    assert code == 1 and hold in err
    assert _rows(ledger_db) == rows
    code, out, _ = _run("erase", "--db", db, "--before", "2025-01-01T00:00:05Z", "--reason",
                        "x", "--dry-run", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["erased"] == 5  # up to the hold's inclusive start
    # releasing: unknown and twice are refused; once released the run may go
    code, _, err = _run("hold", "release", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--db", db,
                        "--reason", "x")  # fmt: skip
    assert code == 1 and "no legal hold" in err
    assert _run("hold", "release", hold, "--db", db, "--reason", "closed")[0] == 0
    code, _, err = _run("hold", "release", hold, "--db", db, "--reason", "closed")
    assert code == 1 and "already released" in err
    _one_line_error(err)
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--reason", "x")
    assert code == 0 and "erased 7 event(s)" in out


def test_the_floor_is_not_lowered_without_a_signature(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    db = ledger_db.url
    rows = _rows(ledger_db)
    for floor in ("179d", "4319h", "0", "25w"):
        code, _, err = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", floor,
                            "--reason", "lower")  # fmt: skip
        assert code == 1 and "signed" in err, (floor, err)
        _one_line_error(err)
    code, _, err = _run("retention", "set", "--db", db, "--keep", "100d", "--reason", "short")
    assert code == 1 and "cannot exceed keep" in err
    assert _rows(ledger_db) == rows
    code, out, _ = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "4320h",
                        "--reason", "the same floor in hours")  # fmt: skip
    assert code == 0 and "unchanged" in out
    assert len(Retention(ledger_db.open()).policies()) == 1


def test_dry_run_lists_exactly_what_then_goes(ledger_db: Ledger) -> None:
    ids = _seed(ledger_db)
    db = ledger_db.url
    assert _run("erase", "--db", db, "--event", ids["old-2"][2], "--reason", "first")[0] == 0
    args = ("erase", "--db", db, "--before", "2025-03-01", "--reason", "expired", "--json")
    code, out, _ = _run(*args, "--dry-run")
    assert code == 0
    plan = json.loads(out)
    rows = _rows(ledger_db)
    code, out, _ = _run(*args)
    assert code == 0
    done = json.loads(out)
    assert plan["events"] == done["events"] and len(done["events"]) == 14
    assert (plan["erased"], plan["already_erased"]) == (done["erased"], done["already_erased"])
    assert (done["erased"], done["already_erased"]) == (13, 1)
    sink = ledger_db.open()
    after = {str(e.event_id): e.erased for e in sink.events()}
    went = {e["event_id"] for e in done["events"]}
    assert all(after[i] is not None for i in went)
    assert all(after[i] is None for i in ids["young"])
    assert len(_rows(ledger_db)) == len(rows) + 4  # the tombstones and one retention run


def test_verify_after_erasures_appends_checkpoints_bundles_and_vacuum(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    ids = _seed(ledger_db)
    db = ledger_db.url
    key, vkey = _vkey(tmp_path)
    first, second = tmp_path / "cp1.txt", tmp_path / "cp2.txt"
    assert _run("checkpoint", "--db", db, "--key", str(key), "-o", str(first))[0] == 0
    assert _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr")[0] == 0
    assert _run("erase", "--db", db, "--event", ids["old-2"][1], "--field", "args",
                "--reason", "gdpr 2")[0] == 0  # fmt: skip
    sink = ledger_db.open()
    sink.record_many(run_events("new-1", datetime.now(UTC), secret="erin"))
    assert _run("checkpoint", "--db", db, "--key", str(key), "-o", str(second))[0] == 0
    code, out, err = _run("verify", "--db", db, "--vkey", vkey, "--checkpoint", str(first),
                          "--checkpoint", str(second), "--json")  # fmt: skip
    report = json.loads(out)
    assert code == 0 and report["ok"], report
    erased = [f for f in report["findings"] if f["kind"] == "erased"]
    assert len(erased) == 2 and all(f["severity"] == "info" for f in erased)
    for run in ("old-1", "old-2"):
        bundle = tmp_path / f"{run}.bundle"
        assert _run("bundle", run, "--db", db, "-o", str(bundle))[0] == 0
        code, _, err = _run("verify-bundle", str(bundle), "--vkey", vkey)
        assert code == 0, err
    rows = _rows(ledger_db)
    code, out, _ = _run("db", "vacuum", "--db", db, "--json")
    assert code == 0 and json.loads(out)["rows"] == len(rows)
    assert _rows(ledger_db) == rows
    code, out, _ = _run("verify", "--db", db, "--vkey", vkey, "--checkpoint", str(second))
    assert code == 0 and "verified" in out


def test_the_report_lists_holds_by_when_they_stood(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    db = ledger_db.url
    code, out, _ = _run("hold", "add", "--db", db, "--run", "old-2", "--reason", "lit",
                        "--json")  # fmt: skip
    hold = json.loads(out)["id"]
    window = ("--since", "2025-01-01", "--until", "2025-03-01")
    code, out, _ = _run("report", "--db", db, "--format", "json", *window)
    assert code == 0 and json.loads(out)["retention"]["holds"] == []  # placed after
    code, out, _ = _run("report", "--db", db, "--format", "json", "--since", "1d")
    assert [h["id"] for h in json.loads(out)["retention"]["holds"]] == [hold]


def test_run_ids_with_sql_and_like_characters_select_exactly_that_run(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    sink = ledger_db.open()
    weird = ["r%'1", 'r"2;--', "r\u00fcn\u02bc3", "r_4", "R_4"]
    for run in weird:
        sink.record_many(run_events(run, OLD))
    db = ledger_db.url
    assert _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "180d",
                "--reason", "v1")[0] == 0  # fmt: skip
    assert _run("hold", "add", "--db", db, "--run", "r_4", "--reason", "held")[0] == 0
    code, _, err = _run("erase", "--db", db, "--run", "r%", "--reason", "x")
    # "r%" selects no run (it is no LIKE pattern); it only begins the id of run r%'1
    assert code == 1 and "no run 'r%' is stored; it begins the id of run r%'1" in err
    for run in ("R_4", *weird[:3]):
        code, out, err = _run("erase", "--db", db, "--run", run, "--reason", "x")
        assert code == 0 and "erased 7 event(s)" in out, (run, err)
    code, _, err = _run("erase", "--db", db, "--run", "r_4", "--reason", "x")
    assert code == 1 and "under legal hold" in err
    assert all(e.erased is None for e in ledger_db.open().events(run_id="r_4"))
    _, vkey = _vkey(tmp_path)
    code, out, _ = _run("verify", "--db", db, "--vkey", vkey, "--json")
    assert code == 0 and json.loads(out)["ok"]


# --- defects found, now fixed ------------------------------------------------------


def test_retention_show_keeps_a_policy_reason_on_one_line(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.close()
    db = ledger_db.url
    forged = "keep 9999d, floor 9999d (version 7)"
    code, _, err = _run("retention", "set", "--db", db, "--keep", "400d", "--floor", "180d",
                        "--reason", f"v1\n{forged}")  # fmt: skip
    assert code == 0, err
    code, out, _ = _run("retention", "show", "--db", db)
    assert code == 0
    assert forged not in out.splitlines(), out


def test_the_report_keeps_hold_and_erasure_reasons_on_one_line(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    db = ledger_db.url
    verdict = "zero non-safe actions ran without a committed intent"
    code, _, err = _run("hold", "add", "--db", db, "--run", "old-2", "--reason",
                        "litigation\nno legal hold")  # fmt: skip
    assert code == 0, err
    code, _, err = _run("erase", "--db", db, "--run", "old-1", "--reason",
                        f"gdpr 42\n{verdict}")  # fmt: skip
    assert code == 0, err
    code, out, _ = _run("report", "--db", db)
    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    assert not any(line.startswith("no legal hold") for line in lines), out
    assert lines.count(verdict) == 1, out  # the report's own verdict line only


def test_a_field_erasure_leaves_events_without_those_fields_unmarked(ledger_db: Ledger) -> None:
    ids = _seed(ledger_db)
    code, out, _ = _run("erase", "--db", ledger_db.url, "--run", "old-1", "--field", "args",
                        "--field", "result", "--reason", "gdpr", "--json")  # fmt: skip
    assert code == 0
    sink = ledger_db.open()
    run_end = sink.get(ids["old-1"][6])
    assert run_end.args is None and run_end.result is None
    assert run_end.erased is None, run_end.erased  # nothing of it was erased
    assert json.loads(out)["erased"] == 6  # every event but the run end held args or result


def test_events_listing_keeps_a_readable_reason_after_an_args_erasure(
    ledger_db: Ledger,
) -> None:
    _seed(ledger_db)
    db = ledger_db.url
    code, before, _ = _run("events", "--db", db, "--run", "old-1", "--kind", "action")
    assert code == 0 and "not for alice" in before
    assert _run("erase", "--db", db, "--run", "old-1", "--field", "args", "--reason",
                "gdpr")[0] == 0  # fmt: skip
    code, after, _ = _run("events", "--db", db, "--run", "old-1", "--kind", "action")
    assert code == 0
    assert "not for alice" in after, after  # the denial's reason was not erased


def test_a_report_window_accounts_for_its_erased_events(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    db = ledger_db.url
    code, out, _ = _run("erase", "--db", db, "--run", "old-1", "--reason", "gdpr", "--json")
    record = json.loads(out)["record"]
    code, out, _ = _run("report", "--db", db, "--format", "json", "--since", "2025-01-01",
                        "--until", "2025-03-01")  # fmt: skip
    assert code == 0
    report = json.loads(out)
    assert report["denials"], report  # the window shows the erased denial ...
    section = report["retention"]
    # ... and must say which erasure took it
    assert [e["record"] for e in section["erasures"]] == [record], section
    assert section["erased_events"] == 7, section


def test_a_refused_dry_run_lists_nothing(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    ledger_db.sql(
        "UPDATE {p}events SET event_json = replace(event_json, 'not for alice', "
        "'not for ALICE') WHERE run_id = 'old-1' AND tool = 'rm'"
    )
    code, out, err = _run("erase", "--db", ledger_db.url, "--run", "old-1", "--reason", "x",
                          "--dry-run")  # fmt: skip
    assert code == 1 and "no longer match" in err
    assert out == "", out


def test_a_reversed_hold_window_is_a_usage_error_naming_both_times(ledger_db: Ledger) -> None:
    _seed(ledger_db)
    rows = _rows(ledger_db)
    code, _, err = _run("hold", "add", "--db", ledger_db.url, "--since", "2025-02-15",
                        "--until", "2025-01-15", "--reason", "x")  # fmt: skip
    assert _rows(ledger_db) == rows
    assert code == 2 and "2025-02-15" in err and "2025-01-15" in err, (code, err)
