"""A call stopped by a ``BaseException`` (KeyboardInterrupt, SystemExit, GeneratorExit,
CancelledError) at any step before its tool ran: the exception reaches the caller
unchanged, the tool does not run, and the stored decision and action of the call agree."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ledger.gate import AllowAll, Decision, Gate, ToolCall, redact_secrets
from ledger.model import Event, Kind, Verdict
from ledger.sinks import SQLiteSink
from tests.gate.conftest import Wrapped

STOPS = [KeyboardInterrupt, SystemExit, GeneratorExit]


def assert_agree(events: Iterable[Event], call_id: str) -> list[Event]:
    """The call's decision and its one action say the same; returns the call's events."""
    mine = [e for e in events if e.call_id == call_id]
    decisions = [e for e in mine if e.kind is Kind.GATE_DECISION]
    actions = [e for e in mine if e.kind is Kind.ACTION]
    assert len(actions) == 1, [str(e.kind) for e in mine]
    assert all(d.verdict is actions[0].verdict for d in decisions)
    return mine


class Stopping:
    """A policy that raises ``stop`` after allowing nothing."""

    def __init__(self, stop: type[BaseException]) -> None:
        self.stop = stop

    def decide(self, call: ToolCall) -> Decision:
        raise self.stop()


@pytest.mark.parametrize("stop", STOPS)
def test_the_policy_raises(sqlite_sink: SQLiteSink, stop: type[BaseException]) -> None:
    done: list[int] = []
    with pytest.raises(stop), Gate(sqlite_sink, policy=Stopping(stop)).run("x") as run:
        run.call("write", {"a": 1}, lambda a: done.append(a), call_id="c")
    assert done == []
    (action,) = [e for e in assert_agree(sqlite_sink.events(), "c") if e.kind is Kind.ACTION]
    assert action.verdict is Verdict.DENIED
    assert action.reason == f"{stop.__name__} before the tool ran"
    assert action.args == '{"a":1}'


@pytest.mark.parametrize("stop", STOPS)
def test_the_redactor_raises(sqlite_sink: SQLiteSink, stop: type[BaseException]) -> None:
    """Interrupted while redacting: the record is still written, without the value the
    redactor never finished with."""

    def redact(value: Any) -> Any:
        if isinstance(value, dict) and value.get("secret") == "hunter2":
            raise stop()
        return redact_secrets(value)

    done: list[int] = []
    gate = Gate(sqlite_sink, policy=AllowAll(), redact=redact)
    with pytest.raises(stop), gate.run("x") as run:
        run.call("write", {"secret": "hunter2"}, lambda secret: done.append(1), call_id="c")
    assert done == []
    mine = assert_agree(sqlite_sink.events(), "c")
    assert all("hunter2" not in e.to_json() for e in mine)


class StopOnRecord(Wrapped):
    """``record`` raises ``stop`` for events of ``kind`` (the first time)."""

    def __init__(self, inner: SQLiteSink, kind: Kind, stop: type[BaseException]) -> None:
        super().__init__(inner)
        self.kind, self.stop, self.fired = kind, stop, False

    def record(self, event: Event) -> None:
        if event.kind is self.kind and not self.fired:
            self.fired = True
            raise self.stop()
        self.inner.record(event)


@pytest.mark.parametrize("stop", STOPS)
def test_the_sink_raises_while_the_head_is_written(
    sqlite_sink: SQLiteSink, stop: type[BaseException]
) -> None:
    sink = StopOnRecord(sqlite_sink, Kind.REQUEST, stop)
    with pytest.raises(stop), Gate(sink, policy=AllowAll()).run("x"):
        pytest.fail("the block must not run")
    assert [e.kind for e in sqlite_sink.events()] == [Kind.ABORT]  # the attempt is recorded


class StopInCommit(SQLiteSink):
    stop: type[BaseException] = KeyboardInterrupt
    after = False

    def commit_action(self, event: Event) -> None:
        if self.after:
            super().commit_action(event)
        raise self.stop()


@pytest.mark.parametrize("stop", STOPS)
@pytest.mark.parametrize("after", [False, True], ids=["before-the-insert", "after-it"])
def test_the_commit_raises(tmp_path: Path, stop: type[BaseException], after: bool) -> None:
    done: list[int] = []
    with StopInCommit(tmp_path / "l.db") as sink:
        sink.stop, sink.after = stop, after
        with pytest.raises(stop), Gate(sink, policy=AllowAll()).run("x") as run:
            run.call("write", {}, lambda: done.append(1), call_id="c")
        assert done == []
        mine = assert_agree(sink.events(), "c")
        action = next(e for e in mine if e.kind is Kind.ACTION)
        assert action.verdict is (Verdict.ALLOWED if after else Verdict.DENIED)
        results = [e.err for e in mine if e.kind is Kind.TOOL_RESULT]
        assert results == ([f"{stop.__name__} after the commit, before the tool ran; "
                            "the tool did not run"] if after else [])  # fmt: skip


def test_cancelled_while_the_async_policy_decides(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    started = asyncio.Event()

    class Slow:
        def decide(self, call: ToolCall) -> Decision:
            raise AssertionError("adecide is used")

        async def adecide(self, call: ToolCall) -> Decision:
            started.set()
            await asyncio.sleep(60)
            raise AssertionError("cancelled first")

    gate = Gate(sqlite_sink, policy=Slow())

    async def main() -> str:
        async with gate.run("x") as run:
            task = asyncio.create_task(run.acall("write", {}, lambda: None, call_id="c"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return run.run_id

    asyncio.run(main())
    (action,) = [e for e in assert_agree(sqlite_sink.events(), "c") if e.kind is Kind.ACTION]
    assert action.reason == "cancelled before the tool ran"


@pytest.mark.parametrize("stop", STOPS)
def test_the_redactor_raises_on_the_tool_name(
    sqlite_sink: SQLiteSink, stop: type[BaseException]
) -> None:
    def redact(value: Any) -> Any:
        if value == "deploy_prod":
            raise stop()
        return redact_secrets(value)

    done: list[int] = []
    gate = Gate(sqlite_sink, policy=AllowAll(), redact=redact)
    with pytest.raises(stop), gate.run("x") as run:
        run.call("deploy_prod", {"secret": "hunter2"}, lambda secret: done.append(1))
    assert done == []
    (action,) = [e for e in sqlite_sink.events(run_id=run.run_id) if e.kind is Kind.ACTION]
    assert action.verdict is Verdict.DENIED
    assert action.tool == f"[tool name withheld: {stop.__name__}]"
    assert "hunter2" not in action.to_json() and action.args == "{}"
