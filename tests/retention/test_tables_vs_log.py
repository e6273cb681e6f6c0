"""The floor and the holds come from the log, not from tables anyone can UPDATE.

The retention tables (``retention_policy``, ``legal_holds``) index the records the log
holds. A floor lowered, a key added, a version deleted, a hold released or deleted by
plain SQL must not let an erasure (or a signed floor change by a key nobody
registered) through: the request is refused and nothing changes. And a command given
a SQLite path that does not exist refuses it instead of creating a fresh ledger.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import RetentionError
from ledger.integrity import Signer, generate_key
from ledger.integrity.verify import verify_ledger
from ledger.retention import Retention, Selection
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _prepared(ledger_db: Ledger) -> tuple[Retention, object, str]:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("young", datetime.now(UTC) - timedelta(days=1), secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="0", reason="v1")
    r.set_policy(keep="400d", floor="30d", reason="v2: raise")
    hold = r.add_hold(run_id="old-1", reason="litigation")
    return r, sink, hold.hold_id


def _rows(ledger_db: Ledger) -> list[object]:
    return ledger_db.sql("SELECT event_id, event_json FROM {p}events ORDER BY seq")


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE {p}retention_policy SET floor_s = 0",
        "DELETE FROM {p}retention_policy WHERE version = 2",
        "UPDATE {p}legal_holds SET released_us = 1, released_by = 'x', release_reason = 'y'",
        "DELETE FROM {p}legal_holds",
        "UPDATE {p}legal_holds SET run_id = 'young'",
    ],
)
def test_a_table_changed_by_sql_does_not_open_the_floor_or_lift_a_hold(
    ledger_db: Ledger, forgery: str
) -> None:
    r, sink, _ = _prepared(ledger_db)
    ledger_db.sql(forgery)
    before = _rows(ledger_db)
    for selection in (Selection.of_run("young"), Selection.of_run("old-1")):
        with pytest.raises(RetentionError, match="changed outside the ledger"):
            r.erase(selection, reason="after a forged table", by="x")
        with pytest.raises(RetentionError):
            r.erase(selection, reason="after a forged table", by="x", dry_run=True)
    assert _rows(ledger_db) == before
    assert verify_ledger(sink, None).ok


def test_a_policy_key_added_by_sql_cannot_sign_a_lower_floor(ledger_db: Ledger) -> None:
    r, _, _ = _prepared(ledger_db)
    evil_key, evil_vkey = generate_key("evil.example/policy")
    ledger_db.sql(
        "UPDATE {p}retention_policy SET keys = :k WHERE version = 2", k=f'["{evil_vkey}"]'
    )
    before = _rows(ledger_db)
    with pytest.raises(RetentionError, match="changed outside the ledger"):
        r.set_policy(keep="400d", floor="0", signer=Signer.from_key(evil_key), reason="x")
    assert _rows(ledger_db) == before


@pytest.mark.parametrize(
    "forgery",
    [
        "DELETE FROM {p}erasures",
        "UPDATE {p}erasures SET reason = 'routine clean-up'",
        "UPDATE {p}erasures SET fields = '[\"args\"]'",
        "UPDATE {p}erasures SET rows_erased = 1",
        "INSERT INTO {p}erasures SELECT '01J00000000000000000000000', at_us, by, reason, "
        "selection, fields, rows_erased, digest, policy_version FROM {p}erasures LIMIT 1",
        "UPDATE {p}erasures SET selection = 'not json'",
        "UPDATE {p}erasures SET fields = '[1'",
    ],
)
def test_an_erasures_table_changed_by_sql_is_reported_and_refuses_erasures(
    ledger_db: Ledger, forgery: str
) -> None:
    r, _, hold_id = _prepared(ledger_db)
    r.release_hold(hold_id, reason="case closed")
    r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args"])
    r.erase(Selection.of_run("old-1"), reason="gdpr whole")
    assert r.tables_changed() == ""
    ledger_db.sql(forgery)
    before = _rows(ledger_db)
    assert "erasures table" in r.tables_changed()
    for fields in (None, ["result"]):  # a whole erasure again; a field erasure
        with pytest.raises(RetentionError, match="erasures table"):
            r.erase(Selection.of_run("old-1"), reason="again", fields=fields)
    assert _rows(ledger_db) == before
    result = CliRunner().invoke(cli, ["verify", "--db", ledger_db.url, "--json"])
    assert result.exit_code == 1
    assert "retention-tables" in result.stdout and "erasures table" in result.stdout
    report = CliRunner().invoke(cli, ["report", "--db", ledger_db.url, "--format", "json"])
    assert report.exit_code == 0, report.output  # a report, never an internal error
    assert "erasures table" in json.loads(report.stdout)["retention"]["tables_changed"]


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE {p}legal_holds SET reason = 'routine' WHERE released_us IS NULL",
        "UPDATE {p}legal_holds SET created_by = 'nobody' WHERE released_us IS NULL",
        "UPDATE {p}legal_holds SET created_us = 253402300799000000 WHERE released_us IS NULL",
        "UPDATE {p}legal_holds SET released_us = 1 WHERE released_us IS NOT NULL",
        "UPDATE {p}legal_holds SET release_reason = 'x' WHERE released_us IS NOT NULL",
        "UPDATE {p}legal_holds SET released_by = 'x' WHERE released_us IS NOT NULL",
        "UPDATE {p}legal_holds SET release_record = NULL WHERE released_us IS NOT NULL",
        "UPDATE {p}legal_holds SET released_us = NULL, released_by = NULL, "
        "release_reason = NULL, release_record = NULL WHERE released_us IS NOT NULL",
        "UPDATE {p}legal_holds SET release_record = hold_id WHERE released_us IS NULL",
    ],
)
def test_a_holds_table_changed_by_sql_is_reported_and_refuses_changes(
    ledger_db: Ledger, forgery: str
) -> None:
    """The report lists the holds table's holds, their reasons and times: who placed a
    hold, when and why, and whether, when, by whom and why it was released must be
    what the log's hold records say, not only its scope."""
    r, _, hold_id = _prepared(ledger_db)
    r.release_hold(hold_id, reason="case closed")
    r.add_hold(since=OLD - timedelta(days=9), until=OLD - timedelta(days=1), reason="range")
    assert r.tables_changed() == ""
    ledger_db.sql(forgery)
    before = _rows(ledger_db)
    assert "legal hold" in r.tables_changed()
    with pytest.raises(RetentionError, match="changed outside the ledger"):
        r.erase(Selection.of_run("old-1"), reason="again")
    with pytest.raises(RetentionError, match="changed outside the ledger"):
        r.add_hold(run_id="young", reason="another")
    assert _rows(ledger_db) == before
    result = CliRunner().invoke(cli, ["verify", "--db", ledger_db.url, "--json"])
    assert result.exit_code == 1 and "retention-tables" in result.stdout
    report = CliRunner().invoke(cli, ["report", "--db", ledger_db.url, "--format", "json"])
    assert report.exit_code == 0, report.output
    assert "legal hold" in json.loads(report.stdout)["retention"]["tables_changed"]


def test_a_policy_row_the_ledger_never_writes_is_a_changed_table(ledger_db: Ledger) -> None:
    r, _, _ = _prepared(ledger_db)
    ledger_db.sql("UPDATE {p}retention_policy SET keep_s = 5400 WHERE version = 2")
    with pytest.raises(RetentionError, match="changed outside the ledger"):
        r.erase(Selection.of_run("old-1"), reason="x")
    report = CliRunner().invoke(cli, ["report", "--db", ledger_db.url, "--format", "json"])
    assert report.exit_code == 0, report.output
    assert "cannot be read" in json.loads(report.stdout)["retention"]["tables_changed"]


def test_the_ledgers_own_changes_still_pass_the_check(ledger_db: Ledger) -> None:
    r, sink, hold_id = _prepared(ledger_db)
    key, vkey = generate_key("dpo.example/policy")
    r.set_policy(keep="400d", keys=[vkey], reason="register the DPO key")
    with pytest.raises(RetentionError, match="under legal hold"):
        r.erase(Selection.of_run("old-1"), reason="gdpr")
    r.release_hold(hold_id, reason="case closed")
    assert r.erase(Selection.of_run("old-1"), reason="gdpr").erased == 7
    with pytest.raises(RetentionError, match="inside the retention floor"):
        r.erase(Selection.of_run("young"), reason="gdpr")
    r.set_policy(keep="400d", floor="1h", signer=Signer.from_key(key), reason="signed")
    r.add_hold(since=OLD - timedelta(days=9), until=OLD - timedelta(days=1), reason="range")
    assert r.erase(Selection.of_run("young"), reason="gdpr").erased == 7
    assert verify_ledger(sink, None).ok


@pytest.mark.parametrize(
    "args",
    [
        ("db", "vacuum"),
        ("erase", "--run", "r", "--reason", "x"),
        ("retention", "set", "--keep", "400d", "--reason", "x"),
        ("hold", "add", "--run", "r", "--reason", "x"),
    ],
)
def test_a_missing_sqlite_file_is_refused_not_created(tmp_path: Path, args: tuple[str]) -> None:
    path = tmp_path / "typo.db"
    result = CliRunner().invoke(cli, [*args, "--db", f"sqlite:///{path}"])
    assert result.exit_code == 1, result.output
    assert "no ledger at" in result.stderr and result.stderr.count("\n") == 1
    assert not path.exists()


@pytest.mark.postgres
def test_a_postgres_schema_without_a_ledger_is_refused_not_created(pg_dsn: str) -> None:
    import sqlalchemy as sa

    from ledger.sinks.url import parse_url

    schema = "ledger_r_typo_schema"
    sep = "&" if "?" in pg_dsn else "?"
    found = parse_url(pg_dsn).dsn
    assert found is not None
    engine = sa.create_engine(found, poolclass=sa.pool.NullPool)
    try:
        result = CliRunner().invoke(
            cli, ["db", "vacuum", "--db", f"{pg_dsn}{sep}ledger_schema={schema}"]
        )
        assert result.exit_code == 1 and "no ledger at" in result.stderr
        with engine.connect() as conn:
            assert not sa.inspect(conn).has_table("events", schema=schema)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


def test_a_policy_record_edited_in_the_log_and_the_table_is_refused(ledger_db: Ledger) -> None:
    r, _, _ = _prepared(ledger_db)
    ledger_db.sql(
        'UPDATE {p}events SET event_json = replace(event_json, \'"floor":"30d"\', '
        "'\"floor\":\"0d\"') WHERE tool = 'ledger.retention.set' AND kind = 'action'"
    )
    ledger_db.sql("UPDATE {p}retention_policy SET floor_s = 0")
    before = _rows(ledger_db)
    with pytest.raises(RetentionError, match="no longer match the leaf"):
        r.erase(Selection.of_run("young"), reason="after a forged record", by="x")
    assert _rows(ledger_db) == before


def test_a_signer_key_given_as_a_policy_key_is_named_and_not_stored(tmp_path: Path) -> None:
    from ledger.sinks import SQLiteSink

    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
    signer, _ = generate_key("dpo.example/policy")
    key_file = tmp_path / "dpo.key"
    key_file.write_text(signer + "\n", encoding="utf-8")
    for given in (str(key_file), signer):
        result = CliRunner().invoke(
            cli, ["retention", "set", "--db", f"sqlite:///{path}", "--keep", "400d",
                  "--policy-key", given, "--reason", "x"],
        )  # fmt: skip
        assert result.exit_code == 2 and "signer (private) key" in result.stderr
        assert signer not in result.output
    assert b"PRIVATE+KEY" not in path.read_bytes()


def test_a_clock_ahead_of_the_wall_clock_does_not_move_the_floor(ledger_db: Ledger) -> None:
    _, sink, _ = _prepared(ledger_db)
    ahead = Retention(sink, clock=lambda: datetime(2100, 1, 1, tzinfo=UTC))
    before = _rows(ledger_db)
    with pytest.raises(RetentionError, match="inside the retention floor"):
        ahead.erase(Selection.of_run("young"), reason="time travel")
    assert _rows(ledger_db) == before
    behind = Retention(sink, clock=lambda: datetime.now(UTC) - timedelta(days=3650))
    with pytest.raises(RetentionError, match="inside the retention floor"):
        behind.erase(Selection.of_run("young"), reason="a stricter floor is fine")


def test_a_copy_made_from_jsonl_has_no_tables_and_refuses_to_erase_what_a_hold_kept(
    tmp_path: Path,
) -> None:
    """A JSONL export carries the policy and hold records as events but no tables: on a
    ledger copied from it, the hold the records place must still stop an erasure."""
    from ledger.sinks import SQLiteSink

    source, lines, copy = tmp_path / "source.db", tmp_path / "x.jsonl", tmp_path / "copy.db"
    with SQLiteSink(source) as sink:
        sink.record_many(run_events("old-1", OLD))
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="v1")
        r.add_hold(run_id="old-1", reason="litigation")
    result = CliRunner().invoke(cli, ["db", "copy", f"sqlite:///{source}", f"jsonl:///{lines}"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["db", "copy", f"jsonl:///{lines}", f"sqlite:///{copy}"])
    assert result.exit_code == 0, result.output
    with SQLiteSink(copy) as sink:
        r = Retention(sink)
        with pytest.raises(RetentionError, match="ledger db copy"):
            r.erase(Selection.of_run("old-1"), reason="on the copy")
        with pytest.raises(RetentionError, match="ledger db copy"):
            r.set_policy(keep="400d", floor="0", reason="start over on the copy")
        assert all(e.erased is None for e in sink.events(run_id="old-1"))


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE {p}legal_holds SET created_us = -99999999999999999",
        "UPDATE {p}legal_holds SET since_us = 99999999999999999",
        "UPDATE {p}retention_policy SET keys = 'not json' WHERE version = 2",
    ],
)
def test_a_retention_row_sql_made_unreadable_is_reported_not_an_internal_error(
    ledger_db: Ledger, forgery: str
) -> None:
    r, _, _ = _prepared(ledger_db)
    r.add_hold(since=OLD - timedelta(days=9), until=OLD - timedelta(days=1), reason="range")
    ledger_db.sql(forgery)
    runner = CliRunner()
    report = runner.invoke(cli, ["report", "--db", ledger_db.url, "--format", "json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["retention"]["tables_changed"]
    for args in (["verify"], ["hold", "list"], ["retention", "show"]):
        result = runner.invoke(cli, [*args, "--db", ledger_db.url])
        assert result.exit_code == 1, (args, result.output)
        assert "internal error" not in result.output, (args, result.output)


def test_an_erasure_committed_during_the_check_is_no_tampering(ledger_db: Ledger) -> None:
    """The log and the tables are read in one snapshot: an erasure that commits between
    the read of the log and the read of the erasures table is seen in neither."""
    r, _, hold_id = _prepared(ledger_db)
    r.release_hold(hold_id, reason="case closed")
    other = Retention(ledger_db.open())

    class Racing(Retention):
        raced = False

        def _trusted_policy(self, conn, records=None):  # type: ignore[no-untyped-def]
            if not self.raced:  # after the log was read, before the tables are
                self.raced = True
                other.erase(Selection.of_run("old-1"), reason="nightly expiry")
            return super()._trusted_policy(conn, records)

    racing = Racing(ledger_db.open())
    assert racing.tables_changed() == "" and racing.raced
    assert r.tables_changed() == ""  # and afterwards, both are seen
    assert len(r.erasures()) == 1


@pytest.mark.parametrize(
    "forgery",
    [
        "UPDATE {p}retention_policy SET set_by = 'mallory' WHERE version = 1",
        "UPDATE {p}retention_policy SET keep_s = 0, floor_s = 0 WHERE version = 1",
        "UPDATE {p}retention_policy SET reason = 'routine' WHERE version = 1",
        "INSERT INTO {p}legal_holds (hold_id, run_id, reason, created_us, created_by, "
        "record_id) VALUES ('01M91CPB0P9FY3REE7SGJFBMN9', 'young', 'fake', 1, 'm', "
        "'01M91CPB0P9FY3REE7SGJFBMN9')",
        "DELETE FROM {p}legal_holds",
        "DELETE FROM {p}erasures",
    ],
)
def test_every_retention_change_refuses_tables_sql_changed(ledger_db: Ledger, forgery: str) -> None:
    """A policy's history, a hold the log never placed, a deleted hold or erasure row:
    reported, and no retention change (policy, hold, release, erasure) is made on them."""
    r, _, hold_id = _prepared(ledger_db)
    r.release_hold(hold_id, reason="case closed")
    r.erase(Selection.of_run("old-1"), reason="gdpr")
    hold = r.add_hold(run_id="old-1", reason="second case")
    assert r.tables_changed() == ""
    ledger_db.sql(forgery)
    before = _rows(ledger_db)
    assert r.tables_changed()
    changes = [
        lambda: r.set_policy(keep="400d", floor="60d", reason="raise"),
        lambda: r.add_hold(run_id="young", reason="x"),
        lambda: r.release_hold(hold.hold_id, reason="x"),
        lambda: r.release_hold("01M91CPB0P9FY3REE7SGJFBMN9", reason="x"),
        lambda: r.erase(Selection.of_run("young"), reason="x"),
    ]
    for change in changes:
        with pytest.raises(RetentionError):
            change()
    assert _rows(ledger_db) == before
    result = CliRunner().invoke(cli, ["verify", "--db", ledger_db.url, "--json"])
    assert result.exit_code == 1 and "retention-tables" in result.stdout
