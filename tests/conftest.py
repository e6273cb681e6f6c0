"""Shared fixtures for the whole test tree (keep small and generic).

``pg_dsn``: the PostgreSQL server named by ``LEDGER_TEST_POSTGRES_DSN`` (for example
``postgresql://postgres@127.0.0.1:5432/test``). When it is unset the test is skipped,
except under CI (``CI=true``), where a missing server is a failure.
"""

from __future__ import annotations

import os

import pytest

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
