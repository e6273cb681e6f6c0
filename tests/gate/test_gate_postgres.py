"""The gate on a PostgreSQL ledger (skipped unless LEDGER_TEST_POSTGRES_DSN is set): the
scripted agent end to end, and a hundred concurrent allowed calls in tasks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from ledger.demo import run_scripted_agent
from ledger.gate import AllowAll, Gate
from ledger.sinks import PostgresSink
from ledger.sinks.url import parse_url


def engine_url(dsn: str) -> str:
    """The SQLAlchemy URL of a ledger's PostgreSQL URL."""
    found = parse_url(dsn).dsn
    assert found is not None
    return found


pytestmark = pytest.mark.postgres


def test_demo_on_postgres(pg_sink: PostgresSink, tmp_path: Path) -> None:
    result = run_scripted_agent(pg_sink, tmp_path)
    chain = pg_sink.chain(result.run_id)
    assert chain.action(result.write_call_id).outcome == "succeeded"
    assert chain.action(result.shell_call_id).denied
    assert result.written is not None and result.written.exists()


def test_concurrent_calls_on_postgres(pg_sink: PostgresSink) -> None:
    gate = Gate(pg_sink, policy=AllowAll())

    @gate.tool()
    async def write(n: int) -> int:
        return n

    async def agent() -> str:
        async with gate.run("many writes") as run:
            assert await asyncio.gather(*(write(n=i) for i in range(100))) == list(range(100))
            return run.run_id

    chain = pg_sink.chain(asyncio.run(agent()))
    assert len(chain.actions) == 100 and all(a.outcome == "succeeded" for a in chain.actions)
    assert chain.anomalies == ()


def test_a_sink_on_the_callers_connection_is_not_durable_for_the_gate(
    pg_sink: PostgresSink,
) -> None:
    """PostgresSink(connection) makes a record durable only when the caller commits,
    after the tool would have run: the gate denies non-safe calls, and says why."""
    from ledger.errors import ToolDenied

    engine: sa.Engine = pg_sink._engine
    ran: list[str] = []
    with engine.connect() as conn:
        borrowed = PostgresSink(conn, schema=pg_sink.schema)
        assert borrowed.joins_caller_transaction and not pg_sink.joins_caller_transaction
        gate = Gate(borrowed, policy=AllowAll(), safe_tools={"read"})
        assert not gate.durable
        with gate.run("send the mail") as run:
            with pytest.raises(ToolDenied, match="writes into your own transaction"):
                run.call("send_mail", {"to": "x"}, lambda to: ran.append(to))
            assert run.call("read", {}, lambda: "page") == "page"  # safe calls still run
        conn.commit()
    assert ran == []
    chain = pg_sink.chain(run.run_id)
    assert [a.call_id for a in chain.denied] == [chain.actions[0].call_id]
