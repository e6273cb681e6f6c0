"""Defects a hostile pass over the retention library found in session 18, each failing
before its fix: erased rows put back by SQL went unseen (verify, `db check` and the
whole-ledger report all passed), a `Selection` built directly read its event ids
otherwise than `Selection.of_events`, bad policy arguments raised the tampering error
class or an AttributeError, and durations took digits of other scripts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.errors import ValidationError
from ledger.integrity.verify import verify_ledger
from ledger.report import build_report
from ledger.retention import Retention, Selection
from ledger.sinks import PostgresSink, SQLiteSink

from .conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _erased_then_put_back(db: Ledger, *, fields: tuple[str, ...] | None = None) -> str:
    """Run r1 erased (after ``fields`` of it were, when given), then every row it
    erased written back as it was before that erasure; returns the record id."""
    sink = db.open()
    later = OLD + timedelta(days=1)
    sink.record_many(run_events("r1", OLD) + run_events("r2", later, secret="bob"))
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="t")
    if fields is not None:
        retention.erase(Selection.of_run("r1"), reason="fields first", fields=fields)
    before = db.sql(
        "SELECT seq, event_json, content_hash, has_err FROM {p}events WHERE run_id = 'r1'"
    )
    done = retention.erase(Selection.of_run("r1"), reason="GDPR Art. 17 request 42")
    assert done.erased == len(before) and done.record_id is not None
    assert verify_ledger(sink, None).ok
    for seq, text, digest, has_err in before:  # a restore from a backup, by hand
        db.sql(
            "UPDATE {p}events SET event_json = :j, content_hash = :h, has_err = :x WHERE seq = :s",
            j=text, h=digest, x=has_err, s=seq,
        )  # fmt: skip
    return done.record_id


def _said(result: Any, record: str) -> list[str]:
    return [f.message for f in result.findings if f.kind == "changed" and record in f.message]


def test_every_erased_row_put_back_is_found(ledger_db: Ledger) -> None:
    record = _erased_then_put_back(ledger_db)
    sink = ledger_db.open()
    result = verify_ledger(sink, None)
    assert not result.ok
    assert any("no tombstone names it" in m for m in _said(result, record))
    report = build_report(sink)
    assert report.log_check is not None and not report.log_check.ok  # every row re-read
    checked = CliRunner().invoke(cli, ["db", "check", ledger_db.url, "--json"])
    assert checked.exit_code == 1, checked.output
    assert record in json.dumps(json.loads(checked.stdout)["log_check"])


def test_a_whole_erasure_undone_back_to_an_earlier_field_erasure_is_found(
    ledger_db: Ledger,
) -> None:
    record = _erased_then_put_back(ledger_db, fields=("args",))
    result = verify_ledger(ledger_db.open(), None)
    assert any("no tombstone names it" in m for m in _said(result, record))


def test_a_selection_built_directly_reads_its_ids_as_of_events_does(
    sqlite_ledger: Ledger,
) -> None:
    sink = sqlite_ledger.open()
    events = run_events("r1", OLD)
    sink.record_many(events)
    Retention(sink).set_policy(keep="400d", floor="180d", reason="t")
    ids = [str(e.event_id) for e in events[:3]]
    direct = Selection(event_ids=(i.lower() for i in ids))  # type: ignore[arg-type]
    assert direct == Selection.of_events(ids)
    assert Selection(event_ids=ids[0]) == Selection.of_events([ids[0]])  # type: ignore[arg-type]
    done = Retention(sink).erase(direct, reason="GDPR")
    assert done.erased == 3


def test_bad_policy_arguments_are_validation_errors(sqlite_ledger: Ledger) -> None:
    retention = Retention(sqlite_ledger.open())
    with pytest.raises(ValidationError, match="not a note verifier key"):
        retention.set_policy(keep="400d", floor="180d", keys=["/etc/dpo.vkey"])
    with pytest.raises(ValidationError, match="expected a signer"):
        retention.set_policy(keep="400d", signer="/etc/dpo.key")  # type: ignore[arg-type]
    for digits in ("\u0661\u0668\u0660d", "\uff14\uff10\uff10d"):  # Arabic-Indic, fullwidth
        with pytest.raises(ValidationError, match="not a duration"):
            retention.set_policy(keep=digits)
    assert retention.policy() is None  # nothing was set


def test_the_command_refuses_a_duration_in_other_digits(sqlite_ledger: Ledger) -> None:
    sqlite_ledger.open().close()
    url = sqlite_ledger.url
    found = CliRunner().invoke(cli, ["retention", "set", "--db", url, "--keep", "\u0661\u0660d"])
    assert found.exit_code == 2, found.output


def test_a_dry_run_lets_writers_write_while_it_lists(ledger_db: Ledger) -> None:
    """A dry run changes nothing: it reads one snapshot and takes no writers' lock, so
    an agent's write during it goes in at once (it waited for the whole listing)."""
    sink = ledger_db.open()
    sink.record_many(run_events("r1", OLD))
    Retention(sink).set_policy(keep="400d", floor="180d", reason="t")
    if ledger_db.backend == "sqlite":  # a writer that waits at most 0.3 s for the lock
        writer: Any = SQLiteSink(sink.path, lock_wait=0.3)
    else:  # (a dry run that took the lock would make this wait fail, not hang)
        sep = "&" if "?" in ledger_db.sql_url else "?"
        timeout = f"{ledger_db.sql_url}{sep}options=-c%20lock_timeout%3D3000"
        writer = PostgresSink.open(timeout, schema=ledger_db.schema)
    ledger_db.opened.append(writer)
    listed: list[str] = []
    late = run_events("r9", OLD + timedelta(days=3), secret="carol")

    def each(found: Any) -> None:
        if not listed:  # while the dry run is listing: another writer writes
            writer.record_many(late)
        listed.append(found.event_id)

    done = Retention(sink).erase(Selection.of_run("r1"), reason="r", dry_run=True, each=each)
    assert done.erased == len(listed) == len(run_events("r1", OLD))
    assert len(list(sink.events(run_id="r9"))) == len(late)
    assert verify_ledger(sink, None).ok


def test_an_erased_finding_gives_its_row_count_as_a_number(sqlite_ledger: Ledger) -> None:
    sink = sqlite_ledger.open()
    sink.record_many(run_events("r1", OLD))
    Retention(sink).set_policy(keep="400d", floor="180d", reason="t")
    done = Retention(sink).erase(Selection.of_run("r1"), reason="GDPR")
    found = CliRunner().invoke(cli, ["verify", "--db", sqlite_ledger.url, "--json"])
    erased = [f for f in json.loads(found.stdout)["findings"] if f["kind"] == "erased"]
    assert [(f["event_id"], f["rows"]) for f in erased] == [(done.record_id, done.erased)]
