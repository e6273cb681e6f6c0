"""A hostile review of "no durable record, no action": every way found to make a
non-safe tool run without a committed action that says what it did, or to make the
record say something else than what ran. Each must fail closed."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ledger import AllowAll, Decision, Event, Gate, Kind, Ref, ToolCall, ToolDenied, Verdict
from ledger.sinks import SQLiteSink

from .test_acceptance import assert_no_action_without_record


def events_of(sink: SQLiteSink, run_id: str) -> list[Event]:
    return list(sink.chain(run_id).events)


class Ran:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> str:
        self.calls.append(kwargs)
        return "ran"


@pytest.mark.parametrize(
    ("policy_answer", "match"),
    [
        ("allowed", "not a Decision"),
        (True, "not a Decision"),
        (None, "not a Decision"),
        (Decision("needs_approval", "ask someone"), "no approver answered"),
    ],
)
def test_policy_answers_that_are_not_an_allowance(
    sqlite_sink: SQLiteSink, policy_answer: Any, match: str
) -> None:
    class Odd:
        def decide(self, call: ToolCall) -> Any:
            return policy_answer

    tool = Ran()
    with Gate(sqlite_sink, policy=Odd()).run("x") as run, pytest.raises(ToolDenied, match=match):
        run.call("write", {"a": 1}, tool, call_id="c1")
    assert tool.calls == [] and sqlite_sink.chain(run.run_id).action("c1").denied


@pytest.mark.parametrize(
    "redactor",
    [
        lambda v: {1: "non-string key"} if isinstance(v, dict) else v,
        lambda v: {"a": {1, 2}} if isinstance(v, dict) else v,
        lambda v: ["not", "an", "object"] if isinstance(v, dict) else v,
        lambda v: 42 if isinstance(v, str) else v,  # the preview
    ],
)
def test_redactors_that_break_the_json_shape_deny(sqlite_sink: SQLiteSink, redactor: Any) -> None:
    tool = Ran()
    gate = Gate(sqlite_sink, policy=AllowAll(), redact=redactor)
    with gate.run("x") as run, pytest.raises(ToolDenied, match="could not redact"):
        run.call("write", {"a": "secret"}, tool)
    assert tool.calls == []


def test_args_that_are_not_json_are_denied_and_recorded_with_placeholders(
    sqlite_sink: SQLiteSink,
) -> None:
    """The record must describe what would run: args that are not JSON are refused (they
    used to run while the record held their ``str``)."""
    tool = Ran()
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"obj": object(), "ok": 1}, "argument 'obj' is not JSON (object)"),
            ({"big": 2**70}, "argument 'big' is not JSON (an integer beyond 64 bits)"),
            ({"raw": b"\xff"}, "argument 'raw' is not JSON (bytes)"),
            ({"f": float("nan")}, "argument 'f' is not JSON (float nan)"),
            ({"deep": [1, {"x": {2}}]}, "argument 'deep' is not JSON (set at ['deep'][1]['x'])"),
        ]
        for args, where in cases:
            with pytest.raises(ToolDenied) as denied:
                run.call("write", args, tool, call_id=next(iter(args)))
            assert denied.value.reason.startswith(where)
            assert str(denied.value) == f'action "write" denied: {denied.value.reason}'
    assert tool.calls == []
    chain = sqlite_sink.chain(run.run_id)
    assert chain.action("obj").intent.args == '{"obj":"[not JSON: object]","ok":1}'
    assert chain.action("deep").intent.args == '{"deep":[1,{"x":"[not JSON: set]"}]}'
    assert chain.action("f").intent.preview == 'write {"f":"[not JSON: float nan]"}'
    # JSON-shaped subclasses and tuples are JSON; 64-bit integers are kept as numbers.
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        run.call("write", {"k": Kind.ACTION, "t": (1, 2), "n": 2**62}, tool, call_id="c1")
    assert sqlite_sink.chain(run.run_id).action("c1").intent.args == (
        '{"k":"action","t":[1,2],"n":4611686018427387904}'
    )


def test_results_that_are_not_json_are_kept_as_text(sqlite_sink: SQLiteSink) -> None:
    marker = object()
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        assert run.call("write", {}, lambda: marker, call_id="c1") is marker
    result = sqlite_sink.chain(run.run_id).action("c1").result
    assert result is not None and "object object" in (result.result or "") and not result.err


@pytest.mark.parametrize(
    ("tool_name", "call_id"), [("", None), ("  ", None), (None, None), ("t", 7)]
)
def test_unusable_tool_names_and_call_ids_deny(
    sqlite_sink: SQLiteSink, tool_name: Any, call_id: Any
) -> None:
    tool = Ran()
    gate = Gate(sqlite_sink, policy=AllowAll(), safe_tools={"", "  "})
    with gate.run("x") as run, pytest.raises(ToolDenied, match=r"tool name|call_id"):
        run.call(tool_name, {}, tool, call_id=call_id)
    assert tool.calls == []


def test_a_reused_call_id_is_denied_even_after_a_denial(sqlite_sink: SQLiteSink) -> None:
    tool = Ran()
    with Gate(sqlite_sink, policy=AllowAll()).run("x") as run:
        run.call("write", {}, tool, call_id="c1")
        for _ in range(2):
            with pytest.raises(ToolDenied, match="already used"):
                run.call("write", {}, tool, call_id="c1")
    assert len(tool.calls) == 1


def test_generator_tools_are_refused(sqlite_sink: SQLiteSink) -> None:
    body: list[str] = []

    def gen(**kw: Any) -> Iterator[int]:
        body.append("gen")
        yield 1

    async def agen(**kw: Any) -> AsyncIterator[int]:
        body.append("agen")
        yield 1

    def returns_generator(**kw: Any) -> Iterator[int]:
        return gen()

    gate = Gate(sqlite_sink, policy=AllowAll())

    async def main() -> None:
        async with gate.run("x") as run:
            with pytest.raises(ToolDenied, match="generator"):
                await run.acall("g", {}, agen)
            with pytest.raises(ToolDenied, match="generator"):
                await run.acall("g", {}, gen)

    asyncio.run(main())
    with gate.run("x") as run:
        with pytest.raises(ToolDenied, match="generator"):
            run.call("g", {}, gen)
        with pytest.raises(TypeError, match="not a value"):  # closed before it started
            run.call("g", {}, returns_generator, call_id="r1")
    assert body == []
    assert (
        "not a value"
        in (sqlite_sink.chain(run.run_id).action("r1").result or Event(kind="abort")).err
    )


def test_a_sync_tool_through_acall_and_a_tool_calling_a_tool(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())

    @gate.tool
    def inner(x: int) -> int:
        return x + 1

    @gate.tool
    async def outer(x: int) -> int:
        return inner(x=x) * 10

    @gate.tool
    def sync_outer(x: int) -> int:
        return inner(x=x) * 100

    async def main() -> str:
        async with gate.run("x") as run:
            assert await outer(x=1) == 20
            assert await run.acall("plain", {"x": 1}, lambda x: x) == 1
            assert sync_outer(x=1) == 200
        return run.run_id

    run_id = asyncio.run(main())
    events = events_of(sqlite_sink, run_id)
    allowed = [e.tool for e in events if e.kind is Kind.ACTION]
    assert allowed == ["outer", "inner", "plain", "sync_outer", "inner"]
    assert_no_action_without_record(events)


class RecordFails(SQLiteSink):
    """commit_action works; record raises for everything but the request."""

    def record(self, event: Event) -> None:
        if event.kind is not Kind.REQUEST:
            raise OSError("disk quota")
        super().record(event)

    def record_many(self, events: Any) -> None:
        raise OSError("disk quota")


class RecordAlwaysFails(SQLiteSink):
    def record(self, event: Event) -> None:
        raise OSError("disk quota")

    def record_many(self, events: Any) -> None:
        raise OSError("disk quota")


def test_a_sink_whose_record_raises(tmp_path: Path) -> None:
    tool = Ran()
    with RecordFails(tmp_path / "a.db") as first:
        with Gate(first, policy=AllowAll()).run("x") as run:
            assert run.call("write", {"a": 1}, tool, call_id="c1") == "ran"
        intent = first.chain(run.run_id).action("c1").intent  # committed before it ran
        assert intent.verdict is Verdict.ALLOWED
    with (  # no head: nothing may run
        RecordAlwaysFails(tmp_path / "b.db") as sink,
        Gate(sink, policy=AllowAll()).run("x") as run,
        pytest.raises(ToolDenied, match="chain head"),
    ):
        run.call("write", {"a": 1}, tool)
    assert len(tool.calls) == 1


class InterruptedCommit(SQLiteSink):
    """Ctrl-C lands inside ``commit_action``: after the record was stored (``after``), or
    before it was."""

    after = True

    def commit_action(self, event: Event) -> None:
        if self.after:
            super().commit_action(event)
        raise KeyboardInterrupt


@pytest.mark.parametrize("stored", [True, False], ids=["after-the-insert", "before-it"])
def test_keyboard_interrupt_during_the_commit(tmp_path: Path, stored: bool) -> None:
    """Whether or not the action got stored, the decision and the action agree, the tool
    does not run, and the record says which it was."""
    tool = Ran()
    with InterruptedCommit(tmp_path / "a.db") as sink:
        sink.after = stored
        with pytest.raises(KeyboardInterrupt), Gate(sink, policy=AllowAll()).run("x") as run:
            run.call("write", {"a": 1}, tool, call_id="c1")
        assert tool.calls == []
        events = events_of(sink, run.run_id)
        (decision,) = [e for e in events if e.kind is Kind.GATE_DECISION]
        (action,) = [e for e in events if e.kind is Kind.ACTION]  # one action: no duplicate
        assert decision.verdict is action.verdict
        results = [e for e in events if e.kind is Kind.TOOL_RESULT]
        if stored:
            assert action.verdict is Verdict.ALLOWED
            assert [r.err for r in results] == [
                "KeyboardInterrupt after the commit, before the tool ran; the tool did not run"
            ]
        else:
            assert action.verdict is Verdict.DENIED and results == []
            assert action.reason.startswith("KeyboardInterrupt before the tool ran")
            assert "denied: KeyboardInterrupt" in decision.reason
        assert events[-1].kind is Kind.ABORT


def test_threads_started_inside_a_run(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    ran: list[int] = []

    @gate.tool
    def write(n: int) -> None:
        ran.append(n)

    outcomes: list[str] = []

    def attempt(n: int) -> None:
        try:
            write(n=n)
            outcomes.append("ran")
        except ToolDenied as denied:
            outcomes.append(denied.reason)

    with gate.run("x") as run:
        bare = threading.Thread(target=attempt, args=(1,))
        bare.start()
        bare.join()
        ctx = contextvars.copy_context()
        copied = threading.Thread(target=ctx.run, args=(attempt, 2))
        copied.start()
        copied.join()
    assert ran == [2] and "no active run" in outcomes[0] and outcomes[1] == "ran"
    assert_no_action_without_record(events_of(sqlite_sink, run.run_id))


def test_the_record_holds_what_runs(sqlite_sink: SQLiteSink) -> None:
    """A policy mutating nested args, or a mapping whose values change between reads:
    the stored action must hold exactly the args the tool got."""

    class Mutating:
        def decide(self, call: ToolCall) -> Decision:
            call.args["paths"].append("/etc/passwd")
            return Decision("allowed", "ok")

    class Shifty(Mapping[str, Any]):
        reads = 0

        def __getitem__(self, key: str) -> Any:
            Shifty.reads += 1
            return "notes.txt" if Shifty.reads == 1 else "/etc/shadow"

        def __iter__(self) -> Iterator[str]:
            return iter(["path"])

        def __len__(self) -> int:
            return 1

    tool = Ran()
    with Gate(sqlite_sink, policy=Mutating()).run("x") as run:
        run.call("rm", {"paths": ["a"]}, tool, call_id="m1")
    with Gate(sqlite_sink, policy=AllowAll()).run("y") as run2:
        run2.call("rm", Shifty(), tool, call_id="s1")
    assert tool.calls == [{"paths": ["a", "/etc/passwd"]}, {"path": "notes.txt"}]
    assert sqlite_sink.chain(run.run_id).action("m1").intent.args == '{"paths":["a","/etc/passwd"]}'
    assert sqlite_sink.chain(run2.run_id).action("s1").intent.args == '{"path":"notes.txt"}'


def test_decorated_signatures(sqlite_sink: SQLiteSink) -> None:
    gate = Gate(sqlite_sink, policy=AllowAll())
    got: list[Any] = []

    @gate.tool
    def write(path: str, **options: Any) -> None:
        got.append((path, options))

    with pytest.raises(TypeError, match="positional-only"):

        @gate.tool
        def first(x: int, /) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):

        @gate.tool
        def many(*paths: str) -> None: ...

    with gate.run("x") as run:
        write("a.txt", mode="w")
        with pytest.raises(TypeError):  # as calling write() would; nothing is committed
            write(mode="w")  # type: ignore[call-arg]
    assert got == [("a.txt", {"mode": "w"})]
    actions = [e for e in events_of(sqlite_sink, run.run_id) if e.kind is Kind.ACTION]
    assert [a.args for a in actions] == ['{"path":"a.txt","mode":"w"}']


class MinimalDurable:
    """A user's own durable sink: just ``record`` and ``commit_action``."""

    def __init__(self) -> None:
        self.committed: list[Event] = []

    def record(self, event: Event) -> None:
        pass

    def commit_action(self, event: Event) -> None:
        self.committed.append(event)


def test_a_minimal_durable_sink_is_enough() -> None:
    sink = MinimalDurable()
    with Gate(sink, policy=AllowAll()).run("x") as run:  # type: ignore[arg-type]
        assert run.call("write", {"a": 1}, lambda a: a, call_id="c1") == 1
    assert [e.call_id for e in sink.committed] == ["c1"]


def test_denial_messages_name_the_sink() -> None:
    class Plain:
        def record(self, event: Event) -> None:
            pass

    gate = Gate(Plain(), policy=AllowAll())  # type: ignore[arg-type]
    with gate.run("x") as run, pytest.raises(ToolDenied, match="Plain has no commit_action"):
        run.call("write", {}, lambda: None)


def test_a_policy_reason_quoting_a_secret_is_redacted(sqlite_sink: SQLiteSink) -> None:
    class Quoting:
        def decide(self, call: ToolCall) -> Decision:
            return Decision("denied", f"refused: {call.args['cmd']}", "quoting")

    secret = "ghp_" + "A" * 36
    with Gate(sqlite_sink, policy=Quoting()).run("x") as run, pytest.raises(ToolDenied) as info:
        run.call("sh", {"cmd": f"curl -H 'Authorization: token {secret}'"}, Ran())
    assert secret not in info.value.reason
    stored = [e.to_json() for e in events_of(sqlite_sink, run.run_id)]
    assert stored and not [s for s in stored if secret in s]


def test_an_async_decide(sqlite_sink: SQLiteSink) -> None:
    class AsyncPolicy:
        async def decide(self, call: ToolCall) -> Decision:
            return Decision("allowed", "async yes")

    gate = Gate(sqlite_sink, policy=AsyncPolicy())  # type: ignore[arg-type]
    tool = Ran()

    async def main() -> None:
        async with gate.run("x") as run:
            assert await run.acall("write", {"a": 1}, tool) == "ran"

    asyncio.run(main())
    with gate.run("x") as run, pytest.raises(ToolDenied, match="decide is async"):
        run.call("write", {"a": 2}, tool)
    assert tool.calls == [{"a": 1}]


def test_small_conveniences(sqlite_sink: SQLiteSink) -> None:
    ref = Ref(source="memory", id="m1", hash="sha256:" + "0" * 64)
    with Gate(sqlite_sink).run("x") as run:
        assert run.retrieved(ref) == (ref,)  # one Ref on its own
    assert ref in sqlite_sink.chain(run.run_id).available
    with pytest.raises(TypeError, match="no_redaction"):
        Gate(sqlite_sink, redact=None)  # type: ignore[arg-type]
