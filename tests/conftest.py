"""Shared fixtures for the whole test tree (keep small and generic).

``pg_dsn``: the PostgreSQL server named by ``LEDGER_TEST_POSTGRES_DSN`` (for example
``postgresql://postgres@127.0.0.1:5432/test``). When it is unset the test is skipped,
except under CI (``CI=true``), where a missing server is a failure. ``pg_sink``: a
``PostgresSink`` in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ledger

PG_ENV = "LEDGER_TEST_POSTGRES_DSN"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The test PostgreSQL DSN; skips (or fails under CI) when it is not configured."""
    dsn = os.environ.get(PG_ENV, "").strip()
    if not dsn:
        message = f"PostgreSQL tests need {PG_ENV}=postgresql://user@host:port/db"
        if _in_ci():
            pytest.fail(f"{message} (CI is set, so this is a failure, not a skip)")
        pytest.skip(message)
    return dsn


@pytest.fixture
def pg_sink(pg_dsn: str) -> Iterator[Any]:
    """A ``PostgresSink`` in a new schema of its own, closed and dropped afterwards."""
    import sqlalchemy as sa

    from ledger.ids import new_event_id
    from ledger.sinks import PostgresSink
    from ledger.sinks.url import parse_url

    schema = f"ledger_t_{str(new_event_id()).lower()}"
    sink = PostgresSink.open(pg_dsn, schema=schema)
    try:
        yield sink
    finally:
        sink.close()
        url = parse_url(pg_dsn).dsn
        assert url is not None
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


MypySnippet = Callable[[str], tuple[int, str]]


@pytest.fixture
def mypy_snippet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MypySnippet:
    """Type-check a snippet of user code against this checkout with ``mypy --strict``:
    ``status, report = mypy_snippet(source)`` (status 0 when it type-checks)."""
    api = pytest.importorskip("mypy.api")
    monkeypatch.setenv("MYPYPATH", str(Path(ledger.__file__).resolve().parent.parent))

    def run(source: str) -> tuple[int, str]:
        (tmp_path / "mypy.ini").write_text("[mypy]\n")
        (tmp_path / "snippet.py").write_text(textwrap.dedent(source))
        out, err, status = api.run(
            [
                "--strict",
                "--no-incremental",
                "--cache-dir=/dev/null",
                f"--config-file={tmp_path / 'mypy.ini'}",
                str(tmp_path / "snippet.py"),
            ]
        )
        return status, out + err

    return run
