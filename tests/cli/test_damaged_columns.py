"""A column of the events table changed by SQL to a value of another type or range than
the ledger writes (SQLite keeps whatever an UPDATE gives: a BLOB for text, text that is
not UTF-8, a float for an integer; any database: a time or a ``seq`` out of range) is a
finding or a one-line error naming it, in every command that reads the rows, never an
internal error; and no reader steps over the row without a word."""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.report import build_report
from ledger.sinks import SQLiteSink
from tests.retention.conftest import run_events

T0 = datetime(2026, 3, 1, tzinfo=UTC)
WINDOW = ["--since", "2026-03-01", "--until", "2026-03-02"]
COMMANDS = [
    ["report"],
    ["report", *WINDOW],
    ["runs"],
    ["chain", "B"],
    ["why", "B", "c0"],
    ["drift", "B"],
    ["events"],
    ["events", "--since", "2026-03-01"],
    ["verify"],
    ["db", "check"],
]
DAMAGE = (
    [
        (column, value)
        for column in ("event_id", "run_id", "call_id", "kind", "tool", "verdict", "content_hash")
        for value in ("CAST({c} AS BLOB)", "CAST(X'FFFE' AS TEXT)", "7")
    ]
    + [
        (column, value)
        for column in ("time_us", "time_hi_us", "leaf_index", "has_err")
        for value in (
            "{c} + 0.5",
            "CAST({c} AS TEXT)",
            "9223372036854775807",
            "-9223372036854775808",
        )
    ]
    + [
        ("nodes", "CAST({c} AS TEXT)"),
        ("nodes", "7"),
        ("nodes", "2.5"),
        ("event_json", "CAST({c} AS BLOB)"),
        ("event_json", "CAST(X'FFFE' AS TEXT)"),
        ("event_json", "7"),
        ("seq", "-5"),
        ("seq", "0"),
    ]
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damaged") / "base.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("A", T0))
        sink.record_many(run_events("B", T0 + timedelta(hours=1)))
    return path


def _damaged(base: Path, tmp_path: Path, statement: str, *params: object) -> Path:
    """A copy of the ``base`` ledger with ``statement`` run on it by plain SQLite."""
    path = tmp_path / "ledger.db"
    shutil.copy(base, path)
    conn = sqlite3.connect(path)
    conn.execute(statement, params)
    conn.commit()
    conn.close()
    return path


def _every_command_answers(url: str) -> None:
    """Each of :data:`COMMANDS` on ``url`` exits 0 or 1, never with an internal error;
    an error of a command that is no check is one line."""
    for command in COMMANDS:
        result = CliRunner().invoke(cli, [*command, "--db", url])
        shown = f"{' '.join(command)}: {result.output}"
        assert result.exit_code in (0, 1), shown
        assert "internal error" not in result.output, shown
        assert not isinstance(result.exception, Exception), shown
        if result.exit_code == 1 and command[0] not in ("verify", "drift", "db"):
            assert result.output.count("ledger: error:") == 1, shown


@pytest.mark.parametrize(("column", "value"), DAMAGE, ids=[f"{c}={v}" for c, v in DAMAGE])
def test_no_command_meets_an_internal_error(
    base: Path, tmp_path: Path, column: str, value: str
) -> None:
    path = _damaged(
        base,
        tmp_path,
        f"UPDATE events SET {column} = {value.format(c=column)} "
        "WHERE run_id = 'B' AND kind = 'action' AND call_id = 'c0'",
    )
    _every_command_answers(f"sqlite:///{path}")


@pytest.mark.parametrize("seq", [0, -5])
def test_a_row_whose_seq_sql_set_below_the_first_is_still_read(
    base: Path, tmp_path: Path, seq: int
) -> None:
    with SQLiteSink(base) as sink:
        stored = len(list(sink.events()))
        since = len(list(sink.events(since=T0)))
    path = _damaged(
        base,
        tmp_path,
        "UPDATE events SET seq = ? WHERE run_id = 'B' AND kind = 'action' AND call_id = 'c0'",
        seq,
    )
    with SQLiteSink(path) as sink:
        assert len(list(sink.events())) == stored
        assert len(list(sink.events(since=T0))) == since


def test_an_unreadable_row_beyond_the_listed_mismatches_is_counted_once(tmp_path: Path) -> None:
    """More than 1,000 mismatches (only 1,000 are listed) and a row that does not read
    back: the row is one mismatch, not two."""
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        for i in range(160):
            sink.record_many(run_events(f"r{i:03d}", T0 + timedelta(minutes=i)))
        total = sink.count_rows()
    conn = sqlite3.connect(path)
    changed = conn.execute(
        "UPDATE events SET content_hash = 'sha256:00' WHERE seq < ?", (total - 10,)
    ).rowcount
    conn.execute("UPDATE events SET event_json = '{bad' WHERE seq = ?", (total - 5,))
    # JSON that parses but is no event: its hash mismatch comes first, and the readers
    # refuse it too
    conn.execute("UPDATE events SET event_json = '{\"oops\":1}' WHERE seq = ?", (total - 3,))
    conn.commit()
    conn.close()
    assert changed > 1000
    with SQLiteSink(path) as sink:
        check = build_report(sink).hash_check
    assert check.mismatch_count == changed + 2
    assert len(check.mismatches) == 1000


PG_DAMAGE = [
    ("time_us", "9223372036854775807"),
    ("time_us", "-9223372036854775808"),
    ("time_hi_us", "0"),
    ("seq", "-5"),
    ("leaf_index", "9223372036854775807"),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("column", "value"), PG_DAMAGE, ids=[f"{c}={v}" for c, v in PG_DAMAGE])
def test_no_command_meets_an_internal_error_on_postgres(
    pg_dsn: str, column: str, value: str
) -> None:
    import uuid

    import sqlalchemy as sa

    from ledger.sinks import PostgresSink
    from ledger.sinks.url import parse_url

    schema = "damaged_" + uuid.uuid4().hex[:12]
    with PostgresSink.open(pg_dsn, schema=schema) as sink:
        sink.record_many(run_events("A", T0))
        sink.record_many(run_events("B", T0 + timedelta(hours=1)))
    plain = parse_url(pg_dsn).dsn
    assert plain is not None
    engine = sa.create_engine(plain, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f'UPDATE "{schema}".events SET {column} = {value} '
                "WHERE run_id = 'B' AND kind = 'action' AND call_id = 'c0'"
            )
        _every_command_answers(f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}ledger_schema={schema}")
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


def test_a_reader_steps_over_an_unreadable_row_whose_seq_is_below_the_first(
    base: Path, tmp_path: Path
) -> None:
    """The report and `ledger db copy --skip-unreadable` resume after a row they cannot
    read by its seq: one SQL set to -5 is stepped over like any other."""
    path = _damaged(
        base,
        tmp_path,
        "UPDATE events SET seq = -5, event_json = '{\"oops\":1}' "
        "WHERE run_id = 'B' AND kind = 'action' AND call_id = 'c0'",
    )
    from ledger.report.hashes import each_event

    with SQLiteSink(path) as sink:
        skipped: list[Exception] = []
        read = list(each_event(sink, skipped))  # type: ignore[arg-type]
        assert len(skipped) == 1 and len(read) == sink.count_rows() - 1
    copy = tmp_path / "copy.db"
    result = CliRunner().invoke(
        cli,
        ["db", "copy", "--skip-unreadable", "--allow-damaged", f"sqlite:///{path}",
         f"sqlite:///{copy}"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_a_time_moved_years_later_on_one_row_blames_that_row_alone(
    base: Path, tmp_path: Path
) -> None:
    """A row's time moved to 2099 (its column and its JSON): the row is a finding, and
    the running maximum it would raise does not make every row after it one."""
    path = _damaged(
        base,
        tmp_path,
        "UPDATE events SET time_us = 4070908800000000, event_json = json_set(event_json, "
        "'$.time', '2099-01-01T00:00:00Z') WHERE seq = 3",
    )
    for command in (["report", "--format", "json"], ["db", "check", "--json"]):
        result = CliRunner().invoke(cli, [*command, "--db", f"sqlite:///{path}"])
        assert result.exit_code in (0, 1), result.output
        data = json.loads(result.stdout)
        assert data["hash_check"]["mismatch_count"] == 1, (command, data["hash_check"])


@pytest.mark.parametrize("value", ["9223372036854775807", "CAST(time_us AS TEXT) || 'x'"])
def test_runs_names_the_row_whose_time_sql_made_no_time(
    base: Path, tmp_path: Path, value: str
) -> None:
    """``runs()`` (and so ``ledger runs``) named only the run of a row whose
    ``time_us`` holds no time; it now names the row, as the other readers do."""
    from ledger.errors import CorruptRecord

    with SQLiteSink(base) as sink:
        (target,) = [e for e in sink.events(run_id="B") if e.kind == "action" and e.call_id == "c0"]
    path = _damaged(
        base, tmp_path, f"UPDATE events SET time_us = {value} WHERE event_id = ?",
        str(target.event_id),
    )  # fmt: skip
    with SQLiteSink(path) as sink, pytest.raises(CorruptRecord) as caught:
        list(sink.runs())
    assert caught.value.event_id == str(target.event_id) and caught.value.seq is not None
    result = CliRunner().invoke(cli, ["runs", "--db", f"sqlite:///{path}"])
    assert result.exit_code == 1 and f"seq={caught.value.seq}" in result.output
    assert str(target.event_id) in result.output, result.output
