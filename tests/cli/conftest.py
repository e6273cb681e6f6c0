"""Fixtures for the ``ledger`` command tests: real ledgers filled by the scripted agent.

``sqlite_ledger`` is a SQLite file holding one demo run; ``pg_ledger`` the same in a
fresh PostgreSQL schema (``pg_dsn`` from ``tests/conftest.py``: skipped without a server,
failed under CI). ``run_cli`` runs ``python -m ledger`` as a real subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result

from ledger.cli import cli
from ledger.demo import run_scripted_agent
from ledger.sinks import open_sink

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ledger:
    """A ledger holding one scripted run: its URL and the ids of what happened."""

    url: str
    run_id: str
    read_call: str
    shell_call: str
    write_call: str


def fill(url: str, workdir: Path) -> Ledger:
    """Run the scripted agent once into ``url``."""
    with open_sink(url) as sink:
        result = run_scripted_agent(sink, workdir)
    return Ledger(
        url=url,
        run_id=result.run_id,
        read_call=result.read_call_id,
        shell_call=result.shell_call_id,
        write_call=result.write_call_id,
    )


def sqlite_url(path: Path) -> str:
    """``sqlite:///`` URL of an absolute path."""
    return "sqlite:///" + str(path.resolve())


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> Ledger:
    return fill(sqlite_url(tmp_path / "ledger.db"), tmp_path / "work")


@pytest.fixture
def pg_ledger(pg_dsn: str, tmp_path: Path) -> Iterator[Ledger]:
    schema = "cli_" + uuid.uuid4().hex[:12]
    joiner = "&" if "?" in pg_dsn else "?"
    url = f"{pg_dsn}{joiner}ledger_schema={schema}"
    yield fill(url, tmp_path / "work")
    engine = sa.create_engine(sa.make_url(pg_dsn).set(drivername="postgresql+psycopg"))
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run the command in-process through click's runner (stderr kept apart)."""
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ledger ARGS`` as a real process in ``cwd``."""
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), full.get("PYTHONPATH")) if p)
    full.pop("LEDGER_DB", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ledger", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
