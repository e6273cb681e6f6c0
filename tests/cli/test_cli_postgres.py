"""The commands against PostgreSQL (needs ``LEDGER_TEST_POSTGRES_DSN``; see conftest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Ledger, fill, invoke

pytestmark = pytest.mark.postgres


def test_forensics_on_postgres(pg_ledger: Ledger) -> None:
    url = pg_ledger.url
    (run,) = json.loads(invoke("runs", "--db", url, "--json").stdout)
    assert run["run_id"] == pg_ledger.run_id and run["denials"] == 1
    chain = json.loads(invoke("chain", pg_ledger.run_id, "--db", url, "--json").stdout)
    assert {a["outcome"] for a in chain["actions"]} == {"denied", "succeeded"}
    why = invoke("why", pg_ledger.run_id, pg_ledger.write_call, "--db", url)
    assert why.exit_code == 0 and "write_file" in why.stdout
    actions = invoke("events", "--db", url, "--kind", "action", "--nl").stdout.splitlines()
    assert len(actions) == 2
    drift = json.loads(invoke("drift", pg_ledger.run_id, "--db", url, "--json").stdout)
    assert sum(r["state"] == "intact" for r in drift) >= 1


def test_report_and_db_on_postgres(pg_ledger: Ledger, tmp_path: Path) -> None:
    fill(pg_ledger.url, tmp_path / "work2")  # a second run
    data = json.loads(invoke("report", "--db", pg_ledger.url, "--format", "json").stdout)
    assert data["totals"]["runs"] == 2 and data["compliant"] is True
    assert data["hash_check"]["checked"] == 20
    assert invoke("db", "upgrade", pg_ledger.url).exit_code == 0
    check = json.loads(invoke("db", "check", pg_ledger.url, "--json").stdout)
    assert check["ok"] and check["dialect"] == "postgresql" and check["rows"]["runs"] == 2
    html = invoke("report", "--db", pg_ledger.url, "--format", "html").stdout
    assert '<svg id="timeline-chart"' in html


def test_demo_into_postgres(pg_ledger: Ledger, tmp_path: Path) -> None:
    result = invoke("demo", "--db", pg_ledger.url, "--dir", str(tmp_path / "home"), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["report"]["compliant"] is True
    assert len(json.loads(invoke("runs", "--db", pg_ledger.url, "--json").stdout)) == 2
