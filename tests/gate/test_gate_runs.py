"""Runs: the request head, run_end/abort, context variables across threads and tasks,
nesting, a head that cannot be recorded, and cancellation (defects 1, 15, 17)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

from ledger.drift import content_hash
from ledger.errors import ToolDenied
from ledger.gate import AllowAll, Approver, Gate, content_ref
from ledger.gate.values import PREVIEW_LIMIT
from ledger.model import Kind, Ref, RefSource, Verdict
from ledger.sinks import DiscardSink, SQLiteSink

from .conftest import FailingRecords, SlowCommits, kinds, of_call


def test_a_run_records_its_head_and_end(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink)
    text = "summarize the report " * 30
    with gate.run(text, agent_path="planner/writer", run_id="r-1") as run:
        assert run.run_id == "r-1" and run.head_recorded and gate.current_run() is run
    assert gate.current_run() is None
    events = list(sqlite_sink.events(run_id="r-1"))
    assert kinds(events) == ["request", "run_end"]
    head, end = events
    assert str(head.event_id) == run.request_id and head.agent_path == "planner/writer"
    assert orjson.loads(head.args or "") == text
    assert len(head.preview) == PREVIEW_LIMIT and head.preview.endswith("…")
    assert end.reason == "completed" and end.event_id > head.event_id
    summary = next(s for s in sqlite_sink.runs() if s.run_id == "r-1")
    assert summary.ended


def test_a_raising_block_records_abort_and_reraises(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink)
    with pytest.raises(KeyError), gate.run("x") as run:
        raise KeyError("api_key=sk-abcdefghijklmnopqrstuvwx")
    abort = list(sqlite_sink.events(run_id=run.run_id))[-1]
    assert abort.kind is Kind.ABORT and abort.reason.startswith("KeyError")
    assert "sk-abc" not in abort.reason and abort.err == abort.reason


def test_run_ids_are_fresh_and_runs_single_use(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, safe_tools={"t"})
    first, second = gate.run("a"), gate.run("b")
    assert first.run_id != second.run_id and len(first.run_id) == 26
    with first:
        pass
    with pytest.raises(RuntimeError, match="already entered"), first:
        pass
    with pytest.raises(ToolDenied, match="has ended"):
        first.call("t", {}, lambda: None)


def test_retrieved_records_refs_with_hashes(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink)
    memory = content_ref("memory", "m1", "prefers tabs")
    assert memory == Ref(source=RefSource.MEMORY, id="m1", hash=content_hash("prefers tabs"))
    with gate.run("x") as run:
        assert run.retrieved([]) == ()
        assert run.retrieved([memory]) == (memory,)
    chain = sqlite_sink.chain(run.run_id)
    assert chain.available == (memory,)
    assert kinds(chain.events) == ["request", "retrieved", "run_end"]


def test_nested_runs_are_separate_and_the_outer_one_comes_back(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    @gate.tool(safe=True)
    def probe() -> str:
        run = gate.current_run()
        assert run is not None
        return run.run_id

    with gate.run("outer") as outer:
        assert probe() == outer.run_id
        with gate.run("inner") as inner:
            assert probe() == inner.run_id != outer.run_id
        assert gate.current_run() is outer and probe() == outer.run_id
    outer_chain = sqlite_sink.chain(outer.run_id)
    assert len(outer_chain.available) == 2 and outer_chain.anomalies == ()
    assert len(sqlite_sink.chain(inner.run_id).available) == 1


def test_many_runs_in_threads_at_once(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    barrier = threading.Barrier(8)

    @gate.tool()
    def write(n: int, i: int) -> int:
        return n * 100 + i

    def agent(n: int) -> str:
        with gate.run(f"agent {n}", agent_path=f"a{n}") as run:
            barrier.wait()
            for i in range(5):
                assert write(n=n, i=i) == n * 100 + i
            return run.run_id

    with ThreadPoolExecutor(8) as pool:
        run_ids = list(pool.map(agent, range(8)))
    assert len(set(run_ids)) == 8
    for n, run_id in enumerate(run_ids):
        chain = sqlite_sink.chain(run_id)
        assert [a.outcome for a in chain.actions] == ["succeeded"] * 5
        assert {a.intent.agent_path for a in chain.actions} == {f"a{n}"}
        assert chain.anomalies == ()


def test_many_runs_in_tasks_at_once(sqlite_sink: SQLiteSink) -> None:
    async def approve(call: Any) -> bool:
        await asyncio.sleep(0)
        return True

    gate = Gate(sqlite_sink, policy=Approver(approve))

    @gate.tool()
    async def write(n: int) -> int:
        await asyncio.sleep(0.001)
        return n

    async def agent(n: int) -> str:
        async with gate.run(f"task {n}") as run:
            results = await asyncio.gather(*(write(n=n * 10 + i) for i in range(3)))
            assert results == [n * 10 + i for i in range(3)]
            return run.run_id

    async def main() -> list[str]:
        return await asyncio.gather(*(agent(n) for n in range(12)))

    run_ids = asyncio.run(main())
    for n, run_id in enumerate(run_ids):
        chain = sqlite_sink.chain(run_id)
        assert sorted(int(a.intent.args[5:-1]) for a in chain.actions if a.intent.args) == [
            n * 10 + i for i in range(3)
        ]
        assert all(a.outcome == "succeeded" for a in chain.actions)


def test_a_head_that_cannot_be_recorded_blocks_non_safe_calls(sqlite_sink: SQLiteSink) -> None:
    sink = FailingRecords(sqlite_sink, failing={Kind.REQUEST})
    gate = Gate(sink, policy=AllowAll(), safe_tools={"read"})
    ran: list[str] = []
    with gate.run("x") as run:
        assert run.head_recorded is False
        assert run.call("read", {}, lambda: "safe still runs") == "safe still runs"
        with pytest.raises(ToolDenied, match="chain head"):
            run.call("write", {}, lambda: ran.append("w"))
        sink.failing = set()  # the ledger recovers: the next non-safe call retries the head
        run.call("write", {}, lambda: ran.append("w2"), call_id="late")
        assert getattr(run, "head_recorded") is True  # noqa: B009 (mypy narrowed it)
    assert ran == ["w2"]
    chain = sqlite_sink.chain(run.run_id)
    assert chain.request is not None and chain.action("late").outcome == "succeeded"


def test_best_effort_failures_never_reach_the_agent(sqlite_sink: SQLiteSink) -> None:
    sink = FailingRecords(sqlite_sink, failing={Kind.TOOL_RESULT, Kind.GATE_DECISION})
    gate = Gate(sink, policy=AllowAll())
    with gate.run("x") as run:
        assert run.call("write", {}, lambda: 7, call_id="c") == 7
    chain = sqlite_sink.chain(run.run_id)
    assert chain.action("c").outcome == "no_result"
    assert [a.code for a in chain.anomalies] == ["action_without_result"]


def test_cancelling_a_task_mid_call(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    started = asyncio.Event()

    async def slow(path: str) -> None:
        started.set()
        await asyncio.sleep(30)

    holder: dict[str, str] = {}

    async def agent() -> None:
        async with gate.run("x") as run:
            holder["run"] = run.run_id
            await run.acall("write", {"path": "a"}, slow, call_id="c")

    async def main() -> None:
        task = asyncio.create_task(agent())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    events = list(sqlite_sink.events(run_id=holder["run"]))
    assert kinds(events) == ["request", "action", "gate_decision", "tool_result", "abort"]
    assert events[3].err == "cancelled" and events[-1].reason == "cancelled"


def test_cancelling_while_the_approver_waits(sqlite_sink: SQLiteSink) -> None:
    waiting = asyncio.Event()

    async def slow_human(call: Any) -> bool:
        waiting.set()
        await asyncio.sleep(30)
        return True

    gate = Gate(sqlite_sink, policy=Approver(slow_human))
    holder: dict[str, str] = {}

    async def agent() -> None:
        async with gate.run("x") as run:
            holder["run"] = run.run_id
            await run.acall("write", {}, lambda: None, call_id="c")

    async def main() -> None:
        task = asyncio.create_task(agent())
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    events = list(sqlite_sink.events(run_id=holder["run"]))
    (denial,) = of_call(events, "c")
    assert denial.verdict is Verdict.DENIED and "cancelled" in denial.reason
    assert events[-1].kind is Kind.ABORT


def test_context_never_leaks_between_threads() -> None:
    gate = Gate(DiscardSink(), safe_tools={"t"})
    errors: list[str] = []

    def worker(n: int) -> None:
        for i in range(100):
            with gate.run(f"{n}/{i}") as run:
                if gate.current_run() is not run:
                    errors.append(f"{n}/{i}: saw another run")
            if gate.current_run() is not None:
                errors.append(f"{n}/{i}: a run outlived its block")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_sync_callable_returning_a_coroutine_fails_cleanly(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    async def later() -> int:
        return 1

    with gate.run("x") as run, pytest.raises(TypeError, match="acall"):
        _ = run.call("t", {}, lambda: later(), call_id="c")
    result = sqlite_sink.chain(run.run_id).action("c").result
    assert result is not None and "coroutine" in result.err


def test_cancelling_during_the_commit(sqlite_sink: SQLiteSink) -> None:
    sink = SlowCommits(sqlite_sink)
    gate = Gate(sink, policy=AllowAll())
    ran: list[int] = []
    holder: dict[str, str] = {}

    async def agent() -> None:
        async with gate.run("x") as run:
            holder["run"] = run.run_id
            await run.acall("write", {}, lambda: ran.append(1), call_id="c")

    async def main() -> None:
        task = asyncio.create_task(agent())
        await asyncio.to_thread(sink.entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        sink.release.set()

    asyncio.run(main())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the outcome is written when the commit settles
        chain = sqlite_sink.chain(holder["run"])
        if any(e.kind is Kind.TOOL_RESULT for e in chain.events):
            break
        time.sleep(0.01)
    assert ran == []
    action = chain.action("c")
    assert action.intent.verdict is Verdict.ALLOWED and action.result is not None
    assert "before the tool ran" in action.result.err


def test_interrupted_while_the_approver_waits(sqlite_sink: SQLiteSink) -> None:
    def operator_pressed_ctrl_c(call: Any) -> bool:
        raise KeyboardInterrupt

    gate = Gate(sqlite_sink, policy=Approver(operator_pressed_ctrl_c))
    with pytest.raises(KeyboardInterrupt), gate.run("x") as run:
        run.call("write", {}, lambda: None, call_id="c")
    chain = sqlite_sink.chain(run.run_id)
    assert chain.action("c").denied
    assert chain.action("c").intent.reason == "KeyboardInterrupt before the tool ran"
    assert chain.events[-1].kind is Kind.ABORT


def test_a_new_thread_does_not_inherit_the_run(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, safe_tools={"lookup"})

    @gate.tool()
    def lookup(key: str) -> str:
        return key

    with gate.run("x"), ThreadPoolExecutor(1) as pool:
        with pytest.raises(ToolDenied, match="no active run"):
            pool.submit(lookup, key="a").result()  # a plain thread starts a fresh context
        assert lookup(key="b") == "b"


def test_nested_tool_calls_in_one_thread_and_task(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    @gate.tool(safe=True)
    def lookup(key: str) -> str:
        return key.upper()

    @gate.tool()
    def deploy(service: str) -> str:
        return f"{service}@{lookup(key=service)}"  # the inner call finds the same run

    @gate.tool()
    async def adeploy(service: str) -> str:
        return await asyncio.create_task(asyncio.to_thread(deploy, service=service))

    async def agent() -> str:
        async with gate.run("deploy") as run:
            assert await adeploy(service="web") == "web@WEB"  # to_thread copies the context
            return run.run_id

    run_id = asyncio.run(agent())
    chain = sqlite_sink.chain(run_id)
    assert [a.tool for a in chain.actions] == ["adeploy", "deploy"]
    assert all(a.outcome == "succeeded" for a in chain.actions)
    assert len(chain.available) == 1 and chain.anomalies == ()
