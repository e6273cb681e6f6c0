"""Session 13's hostile review of retention: a policy the log could not read back, a
name from the environment, a request whose text was its preview, a shredding erasure
that took previews without saying so, and a clock behind the log."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import ValidationError
from ledger.model.event import Event
from ledger.retention import Retention, Selection
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _rows(ledger_db: Ledger) -> list[Any]:
    return [tuple(r) for r in ledger_db.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")]


@pytest.mark.parametrize(
    "span", [timedelta(days=365_001), timedelta(minutes=90), timedelta(seconds=1)]
)
def test_a_policy_its_record_could_not_read_back_is_refused_not_stored(
    ledger_db: Ledger, span: timedelta
) -> None:
    """A ``timedelta`` the command line's durations cannot say (over 1000 years, not whole
    hours) would be written to the log as a record that replays as malformed, refusing
    every later change: it is refused first, and the ledger stays usable."""
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    before = _rows(ledger_db)
    for keep, floor in ((span, None), (timedelta(days=400), span)):
        with pytest.raises(ValidationError):
            r.set_policy(keep=keep, floor=floor, reason="odd")
    assert _rows(ledger_db) == before
    assert r.set_policy(keep="500d", reason="v2").version == 2
    assert r.erase(Selection.of_run("old-1"), reason="gdpr").erased == 7
    assert r.tables_changed() == ""


def test_a_name_from_the_environment_is_held_to_the_rules_of_by(
    ledger_db: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1", by="dpo")
    before = _rows(ledger_db)
    monkeypatch.setenv("LEDGER_OPERATOR", "evil\nerasure 0 by dpo")
    with pytest.raises(ValidationError, match="LEDGER_OPERATOR"):
        r.erase(Selection.of_run("old-1"), reason="gdpr")
    result = CliRunner().invoke(
        cli, ["erase", "--db", ledger_db.url, "--run", "old-1", "--reason", "gdpr"]
    )
    assert result.exit_code == 1 and "LEDGER_OPERATOR" in result.stderr
    assert result.stderr.count("\n") == 1
    assert _rows(ledger_db) == before
    monkeypatch.setenv("LEDGER_OPERATOR", "  dpo@example.com ")
    r.erase(Selection.of_run("old-1"), reason="gdpr")
    assert [e.by for e in r.erasures()] == ["dpo@example.com"]


def _preview_run(run_id: str) -> list[Event]:
    """A run whose request's text is its preview (no args), as hand-made runs are."""
    return [
        Event(kind="request", run_id=run_id, time=OLD, preview="book a flight for alice"),
        Event(kind="action", run_id=run_id, call_id="c1", tool="book", args={"who": "alice"},
              verdict="allowed", time=OLD + timedelta(seconds=1),
              refs=[{"source": "tool", "id": "x"}]),
        Event(kind="tool_result", run_id=run_id, call_id="c1", tool="book", result='"ok"',
              time=OLD + timedelta(seconds=2)),
        Event(kind="run_end", run_id=run_id, time=OLD + timedelta(seconds=3)),
    ]  # fmt: skip


def test_an_erased_request_preview_reads_as_erased_in_every_reader(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(_preview_run("p1"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    r.erase(Selection.of_run("p1"), reason="GDPR 42")
    chain = sink.chain("p1")
    assert "request: [erased: GDPR 42]" in chain.render()
    assert "[erased: GDPR 42]" in chain.why("c1").render().split("request:")[1]
    runner = CliRunner()
    for args in (["chain", "p1"], ["why", "p1", "c1"]):
        result = runner.invoke(cli, [*args, "--db", ledger_db.url])
        assert result.exit_code == 0, result.output
        line = next(x for x in result.stdout.splitlines() if "request" in x)
        assert "[erased: GDPR 42]" in line, result.stdout
    # a field erasure of the preview alone: the request reads as erased, not blank
    sink.record_many(_preview_run("p2"))
    head = sink.chain("p2").request
    assert head is not None
    r.erase(Selection.of_events([head.event_id]), reason="preview only", fields=["preview"])
    assert "request: [erased: preview only]" in sink.chain("p2").render()


def test_a_shredding_erasure_names_the_previews_its_key_sealed(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    from ledger.sinks.shred import FileKeyWrapper
    from tests.retention.conftest import open_keyed as _open

    key = FileKeyWrapper.create(tmp_path / "payload.key")
    sink = _open(ledger_db, key)
    sink.record_many(_preview_run("p1"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    listed: list[str] = []
    plan = r.erase(Selection.of_run("p1"), reason="x", fields=["args", "result"], dry_run=True,
                   each=lambda s: listed.append(s.kind))  # fmt: skip
    assert "preview" in plan.fields and plan.erased == 3 and "request" in listed
    done = r.erase(Selection.of_run("p1"), reason="GDPR 42", fields=["args", "result"])
    assert done.shredded and done.erased == 3 and "preview" in done.fields
    record = json.loads(_open(ledger_db, key, reader=True).get(done.record_id).args)
    assert "preview" in record["fields"] and record["shredded_events"] == 3
    fresh = _open(ledger_db, key, reader=True)
    assert "request: [erased: GDPR 42]" in fresh.chain("p1").render()
    assert r.tables_changed() == ""


def test_a_clock_behind_the_log_does_not_date_a_change_before_the_last(
    ledger_db: Ledger,
) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    first = Retention(sink).set_policy(keep="400d", floor="0", reason="v1")
    past = Retention(sink, clock=lambda: datetime(2020, 1, 1, tzinfo=UTC))
    second = past.set_policy(keep="500d", reason="v2")
    assert second.set_at >= first.set_at
    hold = past.add_hold(run_id="old-1", reason="case")
    assert hold.created is not None and hold.created >= second.set_at
    assert [p.version for p in Retention(sink).policies()] == [1, 2]


def test_a_refusal_names_the_floor_and_every_hold_in_the_way(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("young", datetime.now(UTC) - timedelta(days=1), secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1")
    hold = r.add_hold(run_id="old-1", reason="litigation")
    before = _rows(ledger_db)
    for dry_run in (True, False):
        with pytest.raises(Exception) as caught:
            r.erase(Selection.older_than(datetime.now(UTC)), reason="all", dry_run=dry_run)
        said = str(caught.value)
        assert "inside the retention floor" in said and hold.hold_id in said, said
    assert _rows(ledger_db) == before


def test_commands_name_a_file_that_is_no_database_and_a_jsonl_url(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database at all")
    runner = CliRunner()
    for args in (
        ["erase", "--db", f"sqlite:///{bad}", "--run", "r", "--reason", "x"],
        ["db", "vacuum", "--db", f"sqlite:///{bad}"],
        ["db", "check", "--db", f"sqlite:///{bad}"],
        ["retention", "set", "--db", f"sqlite:///{bad}", "--keep", "400d"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 1, (args, result.output)
        assert "notes.db is not a SQLite database" in result.stderr, (args, result.stderr)
    assert bad.read_text() == "not a database at all"
    result = runner.invoke(cli, ["db", "vacuum", "--db", f"jsonl:///{tmp_path / 'l.jsonl'}"])
    assert result.exit_code == 1 and "is not a database URL" in result.stderr


def test_piped_report_lines_and_machine_times_keep_their_form(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    hold = r.add_hold(run_id="old-1", reason="case " * 40)
    r.release_hold(hold.hold_id, reason="closed")
    r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request " + "x" * 150)
    runner = CliRunner()
    piped: dict[str, str | None] = {"COLUMNS": None}  # output read by a program
    text = runner.invoke(cli, ["report", "--db", ledger_db.url], env=piped).stdout
    erasure = [line for line in text.splitlines() if line.startswith("erasure ")]
    assert len(erasure) == 1 and erasure[0].endswith("x" * 150), text  # one line, whole
    listed = json.loads(runner.invoke(cli, ["hold", "list", "--db", ledger_db.url, "--all",
                                            "--json"]).stdout)  # fmt: skip
    times = [h[k] for h in listed for k in ("created", "released")]
    assert all(len(t) == 27 and t.endswith("Z") for t in times), times  # microseconds


def test_an_edited_tombstone_is_not_washed_out_by_a_later_erasure(ledger_db: Ledger) -> None:
    """A tombstone changed by SQL after a field erasure: erasing its run again (whole or
    other fields) would rewrite it and hide the edit from ``ledger verify``, so it is
    refused, nothing changed; the ledger's own repeated erasures still go through."""
    from ledger.errors import RetentionError
    from ledger.integrity.verify import verify_ledger

    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD, secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    for run in ("old-1", "old-2"):
        r.erase(Selection.of_run(run), reason="part", fields=["args", "result"])
    r.erase(Selection.of_run("old-2"), reason="whole")  # the ledger's own: fine
    ledger_db.sql(
        "UPDATE {p}events SET event_json = replace(event_json, :denied, :allowed), "
        "verdict = 'allowed' WHERE run_id = 'old-1' AND verdict = 'denied'",
        denied='"verdict":"denied"',
        allowed='"verdict":"allowed"',
    )
    assert not verify_ledger(sink, None).ok
    before = _rows(ledger_db)
    for fields in (None, ["reason"]):
        for dry_run in (True, False):
            with pytest.raises(RetentionError, match="not the bytes it wrote"):
                r.erase(Selection.of_run("old-1"), reason="again", fields=fields,
                        dry_run=dry_run)  # fmt: skip
    assert _rows(ledger_db) == before
    assert not verify_ledger(sink, None).ok


@pytest.mark.parametrize("name", ["a\u2028b", "a\u2029b", "a\u0085b", "a\u202eb", "a\nb", "a\x1bb"])
def test_a_name_with_any_line_break_or_control_is_refused(
    ledger_db: Ledger, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1", by="dpo")
    before = _rows(ledger_db)
    with pytest.raises(ValidationError, match="--by"):
        r.erase(Selection.of_run("old-1"), reason="gdpr", by=name)
    monkeypatch.setenv("LEDGER_OPERATOR", name)
    with pytest.raises(ValidationError, match="LEDGER_OPERATOR"):
        r.add_hold(run_id="old-1", reason="case")
    assert _rows(ledger_db) == before


@pytest.mark.parametrize("reason", ["\x01", "\u200b", " \u3000\t", "\u2028"])
def test_a_reason_that_says_nothing_is_blank(ledger_db: Ledger, reason: str) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    before = _rows(ledger_db)
    with pytest.raises(ValidationError, match="reason is required"):
        r.erase(Selection.of_run("old-1"), reason=reason)
    with pytest.raises(ValidationError, match="reason is required"):
        r.add_hold(run_id="old-1", reason=reason)
    assert _rows(ledger_db) == before


def test_an_option_given_twice_is_a_usage_error(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD, secret="bob"))
    Retention(sink).set_policy(keep="400d", floor="0", reason="v1")
    before = _rows(ledger_db)
    for args in (
        ["erase", "--run", "old-1", "--run", "old-2", "--reason", "x"],
        ["hold", "add", "--run", "old-1", "--run", "old-2", "--reason", "x"],
    ):
        result = CliRunner().invoke(cli, [*args, "--db", ledger_db.url])
        assert result.exit_code == 2 and "given 2 times" in result.stderr, result.output
    assert _rows(ledger_db) == before
