"""The gate's invariant, on random call sequences against a real SQLite ledger:

for every non-safe tool that ran, an ``allowed`` action with its call id was committed
and precedes its ``tool_result``; every call that did not run left a denied action."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import ToolDenied
from ledger.gate import AllowList, Gate
from ledger.model import Event, Kind, Verdict
from ledger.sinks import SQLiteSink

from .conftest import FlakyCommits

TOOLS = ("read", "write_ok", "write_bad")  # safe, allowed non-safe, denied non-safe
Step = tuple[str, bool]  # (tool, raises)
steps = st.lists(st.tuples(st.sampled_from(TOOLS), st.booleans()), min_size=1, max_size=12)


@pytest.fixture(scope="module")
def sinks() -> Iterator[tuple[SQLiteSink, FlakyCommits]]:
    with tempfile.TemporaryDirectory() as tmp:
        sink = SQLiteSink(Path(tmp) / "p.db")
        yield sink, FlakyCommits(sink)
        sink.close()


def _tool(ran: list[str], call_id: str, raises: bool) -> Any:
    def fn(n: int) -> int:
        ran.append(call_id)
        if raises:
            raise ValueError(f"tool failed on {n}")
        return n

    return fn


def _drive_sync(gate: Gate, script: list[Step], ran: list[str]) -> str:
    with gate.run("property run") as run:
        for i, (tool, raises) in enumerate(script):
            call_id = f"c{i}"
            with contextlib.suppress(ToolDenied, ValueError):
                run.call(tool, {"n": i}, _tool(ran, call_id, raises), call_id=call_id)
        return run.run_id


async def _drive_async(gate: Gate, script: list[Step], ran: list[str]) -> str:
    async with gate.run("property run") as run:
        for i, (tool, raises) in enumerate(script):
            call_id = f"c{i}"
            with contextlib.suppress(ToolDenied, ValueError):
                await run.acall(tool, {"n": i}, _tool(ran, call_id, raises), call_id=call_id)
        return run.run_id


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(script=steps, flaky=st.booleans(), use_async=st.booleans())
def test_no_durable_record_no_action(
    sinks: tuple[SQLiteSink, FlakyCommits], script: list[Step], flaky: bool, use_async: bool
) -> None:
    sink, flaky_sink = sinks
    flaky_sink.failed.clear()
    gate = Gate(
        flaky_sink if flaky else sink,
        policy=AllowList(["write_ok"]),
        safe_tools={"read"},
    )
    ran: list[str] = []
    if use_async:
        run_id = asyncio.run(_drive_async(gate, script, ran))
    else:
        run_id = _drive_sync(gate, script, ran)
    events = list(sink.chain(run_id).events)
    position = {id(e): i for i, e in enumerate(events)}

    def find(kind: Kind, call_id: str, verdict: Verdict | None = None) -> list[Event]:
        return [
            e
            for e in events
            if e.kind is kind and e.call_id == call_id and (verdict is None or e.verdict is verdict)
        ]

    assert events[0].kind is Kind.REQUEST and events[-1].kind is Kind.RUN_END
    for i, (tool, _) in enumerate(script):
        call_id = f"c{i}"
        results = find(Kind.TOOL_RESULT, call_id)
        if call_id in ran:
            assert len(results) == 1
            if tool != "read":
                (action,) = find(Kind.ACTION, call_id, Verdict.ALLOWED)
                assert position[id(action)] < position[id(results[0])]
                assert find(Kind.ACTION, call_id, Verdict.DENIED) == []
        else:
            assert tool != "read"
            assert results == [] and find(Kind.ACTION, call_id, Verdict.ALLOWED) == []
            assert len(find(Kind.ACTION, call_id, Verdict.DENIED)) == 1
        assert len(find(Kind.GATE_DECISION, call_id)) == 1
    assert all(call_id not in ran for call_id in flaky_sink.failed)
