"""``ix_events_tool_seq``: one tool's events are found in commit order, so a page of
``events(tool=...)`` walks the tool's index from where the page starts and stops after a
page of matches (revision 0007; before it, a page either sorted every match of the tool
or walked the primary key past every other tool's rows)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from alembic import command
from click.testing import CliRunner

from ledger.cli import cli
from ledger.sinks.sql import PAGE_SIZE

from .conftest import Store
from .test_time_high_water import T0, _alembic, _engine, _event, _url


def _ledger(store: Store, run_id: str) -> Any:
    """Three tools interleaved, times out of commit order, more than a page of each."""
    sink = store.open()
    tools = ("read", "write", "send")
    sink.record_many(
        [_event(run_id, i, (i * 37) % 1000, tools[i % 3]) for i in range(3 * PAGE_SIZE + 30)]
    )
    return sink


def _expected(sink: Any, tool: str, since_s: int) -> list[str]:
    since = T0 + timedelta(seconds=since_s)
    return [e.call_id for e in sink.events() if e.tool == tool and e.time >= since]


def _index_names(store: Store) -> set[str]:
    engine = _engine(store)
    try:
        found = sa.inspect(engine).get_indexes("events", schema=store.schema or None)
    finally:
        engine.dispose()
    return {str(i["name"]) for i in found}


def test_a_tools_events_since_a_time_are_every_match_in_commit_order(
    store: Store, run_id: str
) -> None:
    sink = _ledger(store, run_id)
    for tool, since_s in (("write", 0), ("write", 600), ("send", 990), ("none", 0)):
        got = [e.call_id for e in sink.events(tool=tool, since=T0 + timedelta(seconds=since_s))]
        assert got == _expected(sink, tool, since_s), (tool, since_s)
    last = list(sink.events(tool="read"))[-1]
    assert list(sink.events(tool="read", after=last.event_id)) == []


def test_the_page_query_of_one_tool_walks_its_index_without_a_sort(
    sqlite_store: Store, run_id: str
) -> None:
    sink = _ledger(sqlite_store, run_id)
    statements: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "ORDER BY" in statement:
            statements.append((statement, params))

    sa.event.listen(sink._engine, "before_cursor_execute", seen)
    page = list(sink.events(tool="write", since=T0 + timedelta(seconds=600), limit=10))
    sa.event.remove(sink._engine, "before_cursor_execute", seen)
    assert len(page) == 10 and statements
    statement, params = statements[-1]
    with sink._engine.connect() as conn:
        plan = " ".join(
            str(r[-1]) for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
        )
    assert "ix_events_tool_seq" in plan and "TEMP B-TREE" not in plan, plan


def test_the_upgrade_swaps_the_tool_index_and_the_answers_stay(store: Store, run_id: str) -> None:
    sink = _ledger(store, run_id)
    before = [e.call_id for e in sink.events(tool="send", since=T0 + timedelta(seconds=500))]
    store.close_all()
    engine = _engine(store)
    with engine.begin() as conn:
        command.downgrade(_alembic(store, conn), "0006_time_high_water")
    engine.dispose()
    names = _index_names(store)
    assert "ix_events_tool_time" in names and "ix_events_tool_seq" not in names
    result = CliRunner().invoke(cli, ["db", "upgrade", _url(store)])
    assert result.exit_code == 0, result.output
    names = _index_names(store)
    assert "ix_events_tool_seq" in names and "ix_events_tool_time" not in names
    again = store.open()
    assert [
        e.call_id for e in again.events(tool="send", since=T0 + timedelta(seconds=500))
    ] == before
    assert before == _expected(again, "send", 500)
