"""Fixtures of the viewer tests: filled ledgers and a viewer serving each over real HTTP
on 127.0.0.1 (an ephemeral port)."""

from __future__ import annotations

import http.client
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from ledger.viewer import Viewer, serve

from .ledgers import Filled, fill


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def fetch(
    viewer: Viewer,
    path: str,
    params: dict[str, str] | None = None,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> Answer:
    """One request over a fresh connection."""
    target = path + ("?" + urlencode(params) if params else "")
    parts = urlsplit(viewer.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        answer = conn.getresponse()
        return Answer(answer.status, answer.headers, answer.read())
    finally:
        conn.close()


def sqlite_url(path: Path) -> str:
    return "sqlite:///" + str(path.resolve())


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    root = tmp_path_factory.mktemp("viewer")
    return fill(sqlite_url(root / "ledger.db"), root / "work")


@pytest.fixture(scope="module")
def viewer(filled: Filled) -> Iterator[Viewer]:
    with serve(filled.url) as v:
        yield v


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:
    """A fresh PostgreSQL schema's ledger URL (dropped afterwards)."""
    import sqlalchemy as sa

    schema = f"viewer_{uuid.uuid4().hex[:12]}"
    yield f"{pg_dsn}?ledger_schema={schema}"
    engine = sa.create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()
