"""Evidence through the decorator: evidence= on a decorated call, run.cite() for the
next call, and by default an action cites the run's earlier safe reads. A decorated
tool passed to run.call is gated once. A measured duration is never 0."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from ledger import AllowAll, Gate, Ref
from ledger.errors import CallNotFound
from ledger.model import Kind
from ledger.sinks import SQLiteSink

MEMO = Ref(source="memory", id="memo-7", hash="sha256:" + "cd" * 32)


def _gate(tmp_path: Path) -> tuple[Gate, SQLiteSink]:
    sink = SQLiteSink(tmp_path / "l.db")
    return Gate(sink, policy=AllowAll()), sink


def _cited(sink: SQLiteSink, run_id: str) -> dict[str, list[str]]:
    return {
        e.tool: [r.id for r in e.refs[1:]]  # refs[0] is the run's request
        for e in sink.events(run_id=run_id, kind="action")
    }


def test_an_action_cites_the_safe_reads_before_it_by_default(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool(safe=True)
    def read(path: str) -> str:
        return f"contents of {path}"

    @gate.tool()
    def write(path: str) -> int:
        return 1

    with gate.run("copy a to b") as run:
        read(path="a")
        read(path="b")
        write(path="c")
    reads = [str(e.event_id) for e in sink.events(run_id=run.run_id, kind="tool_result")][:2]
    assert _cited(sink, run.run_id)["write"] == reads
    chain = sink.chain(run.run_id)
    (action,) = chain.actions
    assert {r.id for r in action.evidence} >= set(reads)
    sink.close()


def test_evidence_through_the_decorator_and_cite(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool()
    def write(path: str) -> str:
        return path

    @gate.tool()
    def send(to: str) -> str:
        return to

    with gate.run("write and send") as run:
        assert write(path="a", evidence=[MEMO]) == "a"  # type: ignore[call-arg]  # not passed on
        run.cite(MEMO, run.last_call_id)  # a ref, and an earlier call by its id
        send(to="bob")
        send(to="carol")  # cite() held refs for one call only: the default again
    cited = [
        (e.tool, [r.id for r in e.refs[1:]]) for e in sink.events(run_id=run.run_id, kind="action")
    ]
    write_result = next(e for e in sink.events(run_id=run.run_id, kind="tool_result"))
    assert cited[0] == ("write", ["memo-7"])
    assert cited[1] == ("send", ["memo-7", str(write_result.event_id)])
    assert cited[2] == ("send", [])  # no safe read before it: only the request
    sink.close()


def test_a_tool_with_its_own_evidence_parameter_keeps_it(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool()
    def judge(evidence: list[str]) -> int:
        return len(evidence)

    with gate.run("judge"):
        assert judge(evidence=["x", "y"]) == 2
    sink.close()


def test_a_decorated_tool_in_run_call_is_gated_once(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool()
    def write(path: str) -> str:
        return path

    @gate.tool(safe=True)
    async def read(path: str) -> str:
        return path

    with gate.run("once") as run:
        assert run.call("write", {"path": "a"}, write) == "a"
    actions = list(sink.events(run_id=run.run_id, kind="action"))
    decisions = list(sink.events(run_id=run.run_id, kind="gate_decision"))
    assert len(actions) == 1 and len(decisions) == 1

    async def main() -> str:
        async with gate.run("async once") as arun:
            return await arun.acall("read", {"path": "b"}, read)

    assert asyncio.run(main()) == "b"
    sink.close()


def test_a_measured_duration_is_never_zero(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool()
    def quick() -> int:
        return 1

    with gate.run("fast") as run:
        for _ in range(5):
            quick()
    results = list(sink.events(run_id=run.run_id, kind=Kind.TOOL_RESULT))
    assert len(results) == 5 and all(e.duration_ms >= 1 for e in results)
    sink.close()


def test_citing_a_call_that_has_no_result_says_which_calls_do(tmp_path: Path) -> None:
    gate, sink = _gate(tmp_path)

    @gate.tool()
    def write(path: str) -> str:
        return path

    with gate.run("write twice") as run:
        write(path="a")
        first = run.last_call_id
        with pytest.raises(CallNotFound, match=r"no call 'c-typo'.*" + re.escape(repr(first))):
            run.cite("c-typo")
        with pytest.raises(LookupError):  # CallNotFound is a LookupError (and a LedgerError)
            run.ref("c-typo")
        run.cite(first)  # nothing half-cited by the refused call
        write(path="b")
    actions = list(sink.events(run_id=run.run_id, kind="action"))
    assert len(actions[1].refs) == 2  # the request and the first call's result
    sink.close()
