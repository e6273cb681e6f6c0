"""Read commands never create a PostgreSQL ledger; write commands still do (needs
``LEDGER_TEST_POSTGRES_DSN``; see conftest). Every schema and database made here is
dropped again."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from .conftest import invoke

pytestmark = pytest.mark.postgres


def _engine(dsn: str, **options: object) -> sa.Engine:
    return sa.create_engine(sa.make_url(dsn).set(drivername="postgresql+psycopg"), **options)


def _with_schema(dsn: str, schema: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}ledger_schema={schema}"


def _schema_exists(dsn: str, schema: str) -> bool:
    engine = _engine(dsn)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :s"),
                {"s": schema},
            ).first()
    finally:
        engine.dispose()
    return found is not None


@pytest.fixture
def schema_name(pg_dsn: str) -> Iterator[str]:
    """A schema name no one uses; dropped afterwards if anything created it."""
    name = "trial_" + uuid.uuid4().hex[:12]
    yield name
    engine = _engine(pg_dsn)
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
    engine.dispose()


@pytest.fixture
def empty_database(pg_dsn: str) -> Iterator[str]:
    """The DSN of a new, empty database (no events table in ``public``); dropped after."""
    name = "ledger_trial_" + uuid.uuid4().hex[:12]
    admin = _engine(pg_dsn, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield sa.make_url(pg_dsn).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


READS = (
    ("runs",),
    ("events", "--kind", "action"),
    ("chain", "01M8PF3BBS6D5DXK1X81RJ1D2H"),
    ("why", "01M8PF3BBS6D5DXK1X81RJ1D2H", "call_x"),
    ("drift", "01M8PF3BBS6D5DXK1X81RJ1D2H"),
    ("report", "--format", "json"),
)


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_read_commands_refuse_a_schema_that_does_not_exist(
    args: tuple[str, ...], pg_dsn: str, schema_name: str
) -> None:
    url = _with_schema(pg_dsn, schema_name)
    result = invoke(*args, "--db", url)
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"ledger: error: no ledger at {url}: ")
    assert f"schema '{schema_name}' has no events table" in line
    assert f"create it with `ledger db upgrade '{url}'`" in line
    assert not _schema_exists(pg_dsn, schema_name)


def test_read_commands_refuse_a_database_without_a_ledger(empty_database: str) -> None:
    result = invoke("runs", "--db", empty_database)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "schema 'public' has no events table" in line and "ledger db upgrade" in line
    engine = _engine(empty_database)
    try:
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []  # nothing was created
    finally:
        engine.dispose()


def test_db_check_on_an_empty_schema_says_why(pg_dsn: str, schema_name: str) -> None:
    url = _with_schema(pg_dsn, schema_name)
    result = invoke("db", "check", url)
    assert result.exit_code == 1
    text = " ".join(result.stdout.replace("│", " ").split())
    assert f"content-hash check not available: schema '{schema_name}' has no events table" in text
    data = json.loads(invoke("db", "check", url, "--json").stdout)
    assert (
        data["hash_check"]["available"] is False and "no events table" in data["hash_check"]["note"]
    )
    assert not _schema_exists(pg_dsn, schema_name)


def test_write_commands_still_create_the_schema(
    pg_dsn: str, schema_name: str, tmp_path: Path
) -> None:
    url = _with_schema(pg_dsn, schema_name)
    assert invoke("db", "upgrade", url).exit_code == 0
    empty = invoke("runs", "--db", url, "--json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []
    assert invoke("db", "check", url).exit_code == 0
    demo = invoke("demo", "--db", url, "--dir", str(tmp_path / "home"), "--json")
    assert demo.exit_code == 0, demo.stderr
    assert len(json.loads(invoke("runs", "--db", url, "--json").stdout)) == 1


def test_demo_creates_a_new_schema(pg_dsn: str, schema_name: str, tmp_path: Path) -> None:
    url = _with_schema(pg_dsn, schema_name)
    demo = invoke("demo", "--db", url, "--dir", str(tmp_path / "home"))
    assert demo.exit_code == 0, demo.stderr
    assert _schema_exists(pg_dsn, schema_name)


def test_an_unreachable_server_is_one_line(tmp_path: Path) -> None:
    result = invoke("runs", "--db", "postgresql://postgres@127.0.0.1:1/test")
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("ledger: error: cannot open the PostgreSQL ledger at ")
