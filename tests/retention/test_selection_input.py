"""Input taken as a user means it: an event id given twice is one event (and said so),
``fields="args"`` is the field ``args``, not its letters, a duration too long is named
as such, and an empty erase reason is a one-line refusal like every other."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import ValidationError
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink
from ledger.timefmt import parse_duration
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def test_an_event_id_given_twice_is_one_event(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    events = run_events("old-1", OLD)
    sink.record_many(events)
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1")
    first, second = str(events[0].event_id), str(events[1].event_id)
    selection = Selection.of_events([first, first, second, first])
    assert selection.event_ids == (first, second)
    assert selection.describe() == "2 event(s) by id"
    done = r.erase(selection, reason="gdpr")
    assert done.erased == 2


def test_one_field_given_as_a_string(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1")
    done = r.erase(Selection.of_run("old-1"), reason="gdpr", fields="args")
    assert done.fields == ("args",) and done.erased == 4  # the events holding args
    chain = sink.chain("old-1")
    assert chain.actions[0].intent.reason == "ok"  # the rest stays readable


def test_a_duration_too_long_is_named_as_such() -> None:
    for text in ("99999999d", "999999999y", "1" + "0" * 40 + "d", "365001d"):
        with pytest.raises(ValidationError, match="longer than 1000 years"):
            parse_duration(text)
    assert parse_duration("365000d").days == 365000


def test_an_empty_erase_reason_is_one_line_and_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
    for reason in ("", "   ", "\t\n"):
        result = CliRunner().invoke(
            cli, ["erase", "--db", f"sqlite:///{path}", "--run", "old-1", "--reason", reason]
        )
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert "reason is required" in result.stderr


def test_setting_the_same_policy_again_says_nothing_was_recorded(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
    args = ["retention", "set", "--db", f"sqlite:///{path}", "--keep", "400d", "--reason", "v1"]
    first = CliRunner().invoke(cli, args)
    again = CliRunner().invoke(cli, args)
    assert first.exit_code == again.exit_code == 0
    assert "unchanged" not in first.stdout and "unchanged: nothing recorded" in again.stdout
    with SQLiteSink(path) as sink:
        assert len(Retention(sink).policies()) == 1


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"run_id": 5}, "run id must be text"),
        ({"run_id": ["r0"]}, "run id must be text"),
        ({"since": 20250101}, "since must be a datetime with a time zone"),
        ({"since": "2025-13-01"}, "not a calendar date"),  # text is read as a date
        ({"until": datetime(2025, 1, 1)}, "until must be a datetime with a time zone"),
    ],
)
def test_a_hold_of_the_wrong_type_is_a_validation_error(
    tmp_path: Path, given: dict[str, Any], said: str
) -> None:
    """Not a TypeError from deep inside nor a database error: what was wrong, and
    nothing recorded."""
    sink = SQLiteSink(tmp_path / "l.db")
    sink.record_many(run_events("r0", OLD))
    r = Retention(sink)
    with pytest.raises(ValidationError, match=said):
        r.add_hold(reason="litigation", **given)
    assert r.holds() == []
    sink.close()


@pytest.mark.parametrize("told", ["noon", None, datetime(2025, 1, 1)])
def test_a_clock_that_gives_no_aware_time_is_a_validation_error(
    tmp_path: Path, told: object
) -> None:
    sink = SQLiteSink(tmp_path / "l.db")
    r = Retention(sink, clock=lambda: told)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValidationError, match="clock"):
        r.set_policy(keep="400d", reason="v1")
    assert Retention(sink).policy() is None
    sink.close()


@pytest.mark.parametrize("verb", [["erase"], ["hold", "add"]])
def test_an_empty_run_id_is_a_usage_error(tmp_path: Path, verb: list[str]) -> None:
    """A malformed value, like `--keep 6m`: exit 2, nothing opened or changed."""
    db = tmp_path / "l.db"
    SQLiteSink(db).close()
    before = db.read_bytes()
    args = [*verb, "--db", f"sqlite:///{db}", "--run", "", "--reason", "gdpr"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "the run id is empty" in result.output
    assert db.read_bytes() == before
