"""Session 14's hostile review of retention: the run keys of a crypto-shredding ledger
are a retention table too (a key destroyed, restored or deleted by SQL is tampering,
not an erasure)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import RetentionError
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, open_keyed, run_events

pytestmark = needs_retention_schema


@pytest.fixture
def shredding(ledger_db: Ledger, key: FileKeyWrapper) -> Iterator[tuple[Ledger, Retention]]:
    """A shredding ledger: two old runs, a young one under a hold, a floor of 30 days."""
    sink = open_keyed(ledger_db, key)
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1), secret="bob"))
    from datetime import UTC, datetime

    sink.record_many(run_events("young", datetime.now(UTC) - timedelta(days=1), secret="carol"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    r.add_hold(run_id="young", reason="litigation", by="legal")
    yield ledger_db, r


def _rows(db: Ledger) -> list[Any]:
    return [tuple(r) for r in db.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")]


def _verify(db: Ledger) -> Any:
    return CliRunner().invoke(cli, ["verify", "--db", db.url])


def _refused_and_unchanged(db: Ledger, r: Retention) -> None:
    before = _rows(db)
    with pytest.raises(RetentionError, match="changed outside the ledger"):
        r.erase(Selection.of_run("old-2"), reason="gdpr")
    assert _rows(db) == before


def test_a_key_destroyed_by_sql_is_tampering_not_an_erasure(
    shredding: tuple[Ledger, Retention],
) -> None:
    """A held, young run's data key overwritten by plain SQL reads as "[erased: ...]"
    everywhere; the log holds no erasure that destroyed it, so verify, the report's
    tables check and the next erasure all say the run keys were changed."""
    db, r = shredding
    r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args", "result"])
    assert r.tables_changed() == ""
    assert _verify(db).exit_code == 0
    record = r.erasures()[0].record_id
    db.sql(
        "UPDATE {p}run_keys SET wrapped = NULL, destroyed_us = 1, record_id = :rec, "
        "reason = 'oops' WHERE run_id = 'young'",
        rec=record,
    )
    changed = r.tables_changed()
    assert "young" in changed and "run_keys" in changed
    result = _verify(db)
    assert result.exit_code == 1 and "retention-tables" in result.output
    _refused_and_unchanged(db, r)


@pytest.mark.parametrize("marks", ["cleared", "kept"])
def test_a_destroyed_key_put_back_by_sql_is_tampering(
    shredding: tuple[Ledger, Retention], marks: str
) -> None:
    """A shredded run's wrapped key restored by SQL (from a backup) makes erased
    payloads readable again: the erasure record says the key is gone. Also when the
    row keeps the marks of its destruction (readers still show the run erased while
    the key opens its payloads)."""
    db, r = shredding
    saved = db.sql("SELECT wrapped FROM {p}run_keys WHERE run_id = 'old-1'")[0][0]
    r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args", "result"])
    cleared = ", destroyed_us = NULL" if marks == "cleared" else ""
    db.sql(f"UPDATE {{p}}run_keys SET wrapped = :w{cleared} WHERE run_id = 'old-1'", w=saved)
    changed = r.tables_changed()
    assert "old-1" in changed
    result = _verify(db)
    assert result.exit_code == 1 and "retention-tables" in result.output
    _refused_and_unchanged(db, r)


def test_a_destroyed_keys_reason_edited_by_sql_is_tampering(
    shredding: tuple[Ledger, Retention],
) -> None:
    """What readers show as the erasure's reason comes from the key's row: it must be
    what the erasure record says."""
    db, r = shredding
    r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args", "result"])
    db.sql("UPDATE {p}run_keys SET reason = 'routine cleanup' WHERE run_id = 'old-1'")
    assert "old-1" in r.tables_changed()
    _refused_and_unchanged(db, r)


def test_a_key_row_deleted_by_sql_is_tampering(shredding: tuple[Ledger, Retention]) -> None:
    """A young run's key row deleted: its sealed payloads are lost with no erasure
    (the readers refuse the run, saying "run `ledger verify`"): verify says so too."""
    db, r = shredding
    db.sql("DELETE FROM {p}run_keys WHERE run_id = 'young'")
    changed = r.tables_changed()
    assert "young" in changed
    result = _verify(db)
    assert result.exit_code == 1 and "retention-tables" in result.output


def test_a_window_finer_than_a_microsecond_is_rounded_as_holds_and_erasures_round_it(
    sqlite_ledger: Ledger,
) -> None:
    """Events are stored to the microsecond: ``--since``/``--until`` of 7 decimal places
    bound the same events in ``ledger events`` and ``ledger report`` as in ``hold add``
    and ``erase --before`` (rounded up, never truncated: an event at .005 is before
    .0050001, so out of a window starting there and inside one ending there)."""
    import json

    sink = sqlite_ledger.open()
    sink.record_many(run_events("old-1", OLD))  # a result at 00:00:01.005
    edge = "2025-01-01T00:00:01.0050001Z"
    runner = CliRunner()
    url = sqlite_ledger.url

    def times(*window: str) -> list[str]:
        out = runner.invoke(cli, ["events", "--db", url, "--json", *window])
        assert out.exit_code == 0, out.output
        return [e["time"] for e in json.loads(out.stdout)]

    assert "2025-01-01T00:00:01.005000Z" not in times("--since", edge)
    assert "2025-01-01T00:00:01.005000Z" in times("--until", edge)
    Retention(sink).set_policy(keep="400d", floor="0", reason="v1")
    dry = runner.invoke(
        cli, ["erase", "--db", url, "--before", edge, "--reason", "x", "--dry-run", "--json"]
    )
    erased = {e["time"] for e in json.loads(dry.stdout)["events"]}
    assert "2025-01-01T00:00:01.005000Z" in erased
    report = runner.invoke(cli, ["report", "--db", url, "--until", edge, "--format", "json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["totals"]["events"] == len(erased)


def test_library_misuse_is_a_ledger_error_and_hold_ids_read_as_event_ids_do(
    ledger_db: Ledger,
) -> None:
    """A selection that is no ``Selection``, a hold id of another type: a
    ``ValidationError`` (a ``LedgerError``), never an ``AttributeError`` or a driver
    error; and a hold id is read as the ULID it is, in any case, as ``--event`` ids
    are (``ledger hold list`` prints it in capitals; a user may type it in lower
    case)."""
    from ledger.errors import LedgerError, ValidationError

    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    before = _rows(ledger_db)
    for wrong in (None, "old-1", {"run_id": "old-1"}):
        with pytest.raises(ValidationError, match="Selection"):
            r.erase(wrong, reason="gdpr")  # type: ignore[arg-type]
    for wrong_id in (5, None, b"01"):
        with pytest.raises(LedgerError):
            r.release_hold(wrong_id)  # type: ignore[arg-type]
    assert _rows(ledger_db) == before
    hold = r.add_hold(run_id="old-1", reason="litigation")
    result = CliRunner().invoke(
        cli, ["hold", "release", hold.hold_id.lower(), "--db", ledger_db.url]
    )
    assert result.exit_code == 0, result.output
    assert hold.hold_id in result.stdout
    assert r.holds() == []


def test_a_policy_key_given_twice_is_kept_once(ledger_db: Ledger, tmp_path: Path) -> None:
    """``--policy-key K --policy-key K`` (or a key also given with its file) is one key:
    the policy does not list it twice, and giving it once later is no key change that
    needs a signature."""
    import json

    from ledger.integrity import generate_key

    _signer, vkey = generate_key("dpo.example/policy")
    (tmp_path / "dpo.vkey").write_text(vkey + "\n")
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    runner = CliRunner()
    url = ledger_db.url
    given = ["--policy-key", vkey, "--policy-key", str(tmp_path / "dpo.vkey")]
    first = runner.invoke(cli, ["retention", "set", "--db", url, "--keep", "400d",
                                "--floor", "30d", *given])  # fmt: skip
    assert first.exit_code == 0, first.output
    shown = json.loads(runner.invoke(cli, ["retention", "show", "--db", url, "--json"]).stdout)
    assert shown["policy"]["keys"] == [vkey]
    again = runner.invoke(cli, ["retention", "set", "--db", url, "--keep", "400d",
                                "--policy-key", vkey])  # fmt: skip
    assert again.exit_code == 0 and "unchanged" in again.stdout


def test_drift_without_the_payload_key_does_not_call_sealed_evidence_drifted(
    sqlite_ledger: Ledger, key: FileKeyWrapper
) -> None:
    """In a crypto-shredding ledger read without the payload key, a cited result is
    ciphertext: its hash cannot be compared with the one the action captured. ``ledger
    drift`` says so (unverifiable), never ``drifted`` (exit 1) for intact evidence."""
    import json

    from ledger.chain.assemble import result_ref
    from ledger.model.event import Event

    sink = open_keyed(sqlite_ledger, key)
    read = Event(kind="tool_result", run_id="r1", call_id="read-1", tool="read_file",
                 time=OLD, result='"the notes"', label="notes.txt")  # fmt: skip
    cited = result_ref(read)
    sink.record_many([
        Event(kind="request", run_id="r1", time=OLD, args='"tidy"'),
        read,
        Event(kind="action", run_id="r1", call_id="c1", tool="write_file", args={"p": 1},
              verdict="allowed", refs=[cited], time=OLD + timedelta(seconds=1)),
        Event(kind="tool_result", run_id="r1", call_id="c1", tool="write_file", result="1",
              time=OLD + timedelta(seconds=2)),
    ])  # fmt: skip
    runner = CliRunner()
    with_key = runner.invoke(
        cli, ["drift", "r1", "--db", sqlite_ledger.url, "--json"],
        env={ENV_KEY: str(key.path)},
    )  # fmt: skip
    assert with_key.exit_code == 0, with_key.output
    assert {c["state"] for c in json.loads(with_key.stdout)} == {"intact"}
    blind = runner.invoke(cli, ["drift", "r1", "--db", sqlite_ledger.url, "--json"])
    assert blind.exit_code == 0, blind.output
    states = {c["state"] for c in json.loads(blind.stdout)}
    assert states == {"unverifiable"}, blind.stdout
    # the viewer's run page checks refs the same way (ledger.drift.EventResolver)
    from ledger.viewer.pages.run import ref_checks

    keyless = SQLiteSink(Path(sqlite_ledger.url.removeprefix("sqlite:///")))
    try:
        assert str(ref_checks(keyless, [cited])[cited].state) == "unverifiable"
    finally:
        keyless.close()
    # a field of the cited result that is not sealed (its err, its label) erased: the
    # result itself is still ciphertext, still unverifiable
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    r.erase(Selection.of_events([str(read.event_id)]), reason="pii", fields=["label"])
    blind = runner.invoke(cli, ["drift", "r1", "--db", sqlite_ledger.url, "--json"])
    assert blind.exit_code == 0, blind.output
    assert {c["state"] for c in json.loads(blind.stdout)} == {"unverifiable"}, blind.stdout


def test_a_hold_window_of_two_ages_takes_one_now(sqlite_ledger: Ledger) -> None:
    """``hold add --since 30d --until 7d`` spans exactly 23 days, and ``--since 7d
    --until 7d`` is the empty window it says (a usage error), as every command's window
    reads its ages from one "now"."""
    import json

    sink = sqlite_ledger.open()
    sink.record_many(run_events("old-1", OLD))
    Retention(sink).set_policy(keep="400d", floor="0", reason="v1")
    runner = CliRunner()
    url = sqlite_ledger.url
    empty = runner.invoke(cli, ["hold", "add", "--db", url, "--since", "7d", "--until", "7d",
                                "--reason", "audit"])  # fmt: skip
    assert empty.exit_code == 2 and "empty time window" in empty.output
    placed = runner.invoke(cli, ["hold", "add", "--db", url, "--since", "30d", "--until", "7d",
                                 "--reason", "audit", "--json"])  # fmt: skip
    assert placed.exit_code == 0, placed.output
    hold = json.loads(placed.stdout)
    from ledger.timefmt import parse_time

    span = parse_time(hold["until"]) - parse_time(hold["since"])
    assert span == timedelta(days=23)


def test_a_result_in_clear_that_looks_encrypted_is_still_checked(sqlite_ledger: Ledger) -> None:
    """Only a reader that leaves payloads encrypted (a crypto-shredding ledger opened
    without the key) calls a cited result unverifiable. In a ledger in clear a result
    whose text merely starts like an envelope is hashed as any other: intact, and
    drifted once changed (not hidden behind "unverifiable")."""
    import json

    from ledger.chain.assemble import result_ref
    from ledger.model.event import Event

    looks = '{"encrypted":"aes-256-gcm","nonce":"AAAA","ciphertext":"BBBB"}'
    read = Event(kind="tool_result", run_id="r1", call_id="read-1", tool="fetch", time=OLD,
                 result=looks)  # fmt: skip
    cited = result_ref(read)
    path = Path(sqlite_ledger.url.removeprefix("sqlite:///"))
    with SQLiteSink(path) as sink:  # in clear: no key anywhere
        sink.record_many([
            read,
            Event(kind="action", run_id="r1", call_id="c1", tool="write", args={"p": 1},
                  verdict="allowed", refs=[cited], time=OLD + timedelta(seconds=1)),
        ])  # fmt: skip
    runner = CliRunner()
    found = runner.invoke(cli, ["drift", "r1", "--db", sqlite_ledger.url, "--json"])
    assert found.exit_code == 0, found.output
    assert {c["state"] for c in json.loads(found.stdout)} == {"intact"}
    sqlite_ledger.sql(
        "UPDATE {p}events SET event_json = replace(event_json, 'BBBB', 'CCCC') WHERE event_id = :i",
        i=str(read.event_id),
    )
    found = runner.invoke(cli, ["drift", "r1", "--db", sqlite_ledger.url, "--json"])
    assert found.exit_code == 1, found.output
    assert "drifted" in {c["state"] for c in json.loads(found.stdout)}


@pytest.mark.parametrize("fields", [["args", "result"], ["args"], ["result"]])
def test_erasing_args_and_result_takes_the_preview_that_clips_them(
    sqlite_ledger: Ledger, fields: list[str]
) -> None:
    """The preview is the gate's clip of an event's args or result: a field erasure of
    args and result (the documented way to minimise data) left it, and with it the text,
    in ``events --json``, the CSV and the viewer's search. Naming only one of them
    leaves every preview (one may clip the field kept) and every event that holds none
    of the named fields as it was."""
    import json

    from ledger.model.event import Event

    secret = "call Sam about the Q3 report"
    run = [
        Event(kind="request", run_id="r1", time=OLD, args=json.dumps(secret), preview=secret),
        Event(kind="action", run_id="r1", call_id="c1", tool="send", verdict="allowed",
              args={"body": secret}, preview=f"send {secret}", time=OLD),
        Event(kind="tool_result", run_id="r1", call_id="c1", tool="send",
              result=json.dumps(secret), preview=secret, time=OLD),
    ]  # fmt: skip
    path = Path(sqlite_ledger.url.removeprefix("sqlite:///"))
    with SQLiteSink(path) as sink:
        sink.record_many(run)
        r = Retention(sink)
        r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
        done = r.erase(Selection.of_run("r1"), reason="minimise", fields=fields)
        stored = list(sink.events(run_id="r1"))
    if fields == ["args", "result"]:
        assert "preview" in done.fields and done.erased == 3  # every event held a preview
        assert all(secret not in e.preview for e in stored)
        assert all(e.erased is not None and "preview" in e.erased.fields for e in stored)
        listed = CliRunner().invoke(
            cli, ["events", "--db", sqlite_ledger.url, "--run", "r1", "--nl"]
        )
        assert listed.exit_code == 0 and secret not in listed.output, listed.output
    else:
        holding = [e for e in run if getattr(e, fields[0]) is not None]
        assert done.fields == tuple(fields) and done.erased == len(holding)
        assert all(e.preview == kept.preview for e, kept in zip(stored, run, strict=True))
        untouched = [e for e in stored if getattr(e, fields[0]) is None and e.erased is None]
        assert len(untouched) == len(run) - len(holding)
    verified = _verify(sqlite_ledger)
    assert verified.exit_code == 0, verified.output


def test_db_check_reports_retention_tables_changed_outside_the_ledger(
    ledger_db: Ledger,
) -> None:
    """``ledger db check`` (what a cron job runs) said ok while a legal hold had been
    deleted by SQL; verify and the report said otherwise. It checks the retention
    tables against the log as verify does."""
    import json

    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    r.add_hold(run_id="old-1", reason="litigation", by="dpo")
    runner = CliRunner()
    before = runner.invoke(cli, ["db", "check", ledger_db.url, "--json"])
    assert before.exit_code == 0, before.output
    ledger_db.sql("DELETE FROM {p}legal_holds")
    after = runner.invoke(cli, ["db", "check", ledger_db.url, "--json"])
    assert after.exit_code == 1, after.output
    found = json.loads(after.stdout)
    assert not found["ok"]
    kinds = [f["kind"] for f in found["log_check"]["findings"]]
    assert "retention-tables" in kinds
    shown = runner.invoke(cli, ["db", "check", ledger_db.url])
    assert shown.exit_code == 1 and "problems found" in shown.output


def test_a_run_id_prefix_is_refused_as_a_prefix_not_as_an_unknown_run(
    ledger_db: Ledger,
) -> None:
    """The readers take a unique prefix of a run id; holds and erasures take the whole
    id, and a prefix is told so (it was "no events of run ... are stored")."""
    sink = ledger_db.open()
    sink.record_many(run_events("old-run-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="30d", reason="v1", by="dpo")
    for attempt in (
        lambda: r.add_hold(run_id="old-run", reason="x", by="dpo"),
        lambda: r.erase(Selection.of_run("old-run"), reason="x", by="dpo"),
        lambda: r.erase(Selection.of_run("old-run"), reason="x", by="dpo", dry_run=True,
                        each=lambda _: None),
    ):  # fmt: skip
        with pytest.raises(RetentionError, match=r"begins the id of run old-run-1.*whole run id"):
            attempt()
    with pytest.raises(RetentionError, match="no events of run 'nothing-like-it'"):
        r.erase(Selection.of_run("nothing-like-it"), reason="x", by="dpo")
    assert r.holds() == [] and r.erasures() == []


def test_a_malformed_id_is_a_usage_error_wherever_an_id_is_given(sqlite_ledger: Ledger) -> None:
    """``erase --event NOPE`` was a usage error (exit 2) while ``events --after NOPE`` and
    ``hold release NOPE`` were refusals (exit 1): a malformed id is a usage error in all
    of them; a well-formed id nothing has is still a refusal."""
    sink = sqlite_ledger.open()
    sink.record_many(run_events("old-1", OLD))
    db = sqlite_ledger.url
    runner = CliRunner()
    for args in (
        ["events", "--db", db, "--after", "NOPE"],
        ["hold", "release", "NOPE", "--db", db],
        ["erase", "--db", db, "--event", "NOPE", "--reason", "x"],
    ):
        result = runner.invoke(cli, args)
        assert result.exit_code == 2 and "is not a ULID" in result.output, (args, result.output)
    unknown = "01J00000000000000000000000"
    result = runner.invoke(cli, ["hold", "release", unknown.lower(), "--db", db])
    assert result.exit_code == 1 and "no legal hold" in result.output, result.output
