"""``ledger verify`` runs every per-row check in its pass, not the log's alone: a row
whose content hash, index columns or ``time_hi_us`` were changed by hand (bytes and
tree untouched, so the log still verifies) is a ``row`` finding, exit 1, on SQLite and
PostgreSQL alike."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.integrity import generate_key
from tests.sinks.factories import action

from .conftest import Store

_, VKEY = generate_key("test.example/log")


def _verify(store: Store) -> tuple[int, dict[str, object]]:
    run = CliRunner().invoke(cli, ["verify", "--db", store.url, "--vkey", VKEY, "--json"])
    return run.exit_code, json.loads(run.stdout)


@pytest.mark.parametrize(
    ("statement", "words"),
    [
        ("UPDATE {p}events SET content_hash = NULL WHERE seq = 3", "no content hash"),
        ("UPDATE {p}events SET content_hash = 'sha256:' || repeat('0', 64) WHERE seq = 3", ""),
        ("UPDATE {p}events SET tool = 'other_tool' WHERE seq = 3", "tool is 'other_tool'"),
        ("UPDATE {p}events SET run_id = 'r2' WHERE seq = 3", "run_id is 'r2'"),
        ("UPDATE {p}events SET time_hi_us = 0 WHERE seq = 4", "time_hi_us"),
    ],
)
def test_a_row_changed_beside_its_bytes_fails_verify(
    log_store: Store, statement: str, words: str
) -> None:
    if log_store.backend == "sqlite" and "repeat(" in statement:
        statement = statement.replace("repeat('0', 64)", "'" + "0" * 64 + "'")
    sink = log_store.open()
    sink.record_many([action("r1", call_id=f"c{i}") for i in range(6)])
    sink.close()
    code, before = _verify(log_store)
    assert code == 0 and before["ok"], before
    log_store.sql(statement)
    code, after = _verify(log_store)
    assert code == 1 and not after["ok"], after
    findings = after["findings"]
    assert isinstance(findings, list)
    rows = [f for f in findings if f["kind"] == "row"]
    assert len(rows) == 1 and rows[0]["severity"] == "error", findings
    assert words in rows[0]["message"]
