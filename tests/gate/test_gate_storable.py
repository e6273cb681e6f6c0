"""Every attempt leaves a record, also when a name cannot be stored as given: a tool name
or call id the database refuses (NUL on PostgreSQL, longer than an index entry, a lone
surrogate anywhere) is denied and recorded escaped or cut, marked with its hash; a run
whose id or agent path cannot be stored is refused at ``Gate.run``, and the attempt is
recorded. On the real PostgreSQL server and on SQLite."""

from __future__ import annotations

import hashlib
import random
import string
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.errors import StorageError, ToolDenied, ValidationError
from ledger.gate import AllowAll, Gate
from ledger.model import Event, Kind, Verdict
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.base import key_limits

NUL = "\x00"
SURROGATE = "\udcff"


def _random(n: int) -> str:  # incompressible, so PostgreSQL cannot squeeze it into an index
    rnd = random.Random()
    return "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(n))


@pytest.fixture
def pg(pg_sink: PostgresSink) -> PostgresSink:
    return pg_sink


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[SQLiteSink]:
    with SQLiteSink(tmp_path / "l.db") as sink:
        yield sink


def ran() -> list[str]:
    return []


def _denial(sink: PostgresSink | SQLiteSink, run_id: str) -> Event:
    (denied,) = [
        e for e in sink.events(run_id=run_id, kind=Kind.ACTION) if e.verdict is Verdict.DENIED
    ]
    return denied


@pytest.mark.postgres
@pytest.mark.parametrize(
    "tool",
    [f"rm{NUL}rf", _random(3000), "é" * 1500 + _random(10)],
    ids=["nul", "over-long", "multibyte-over-long"],
)
def test_a_tool_name_postgres_refuses_is_denied_and_recorded(pg: PostgresSink, tool: str) -> None:
    done: list[str] = []
    gate = Gate(pg, policy=AllowAll(), safe_tools={tool})
    with gate.run("tidy") as run:
        with pytest.raises(ToolDenied) as caught:
            run.call(tool, {"path": "a"}, lambda path: done.append(path))
        run.call("ok", {}, lambda: done.append("ok"))  # the run goes on
    assert done == ["ok"]  # even a safe tool with that name did not run
    assert caught.value.tool == tool  # the caller's own name
    denied = _denial(pg, run.run_id)
    assert denied.call_id == caught.value.call_id
    assert key_limits(pg).problem(denied.tool) == ""  # what was stored fits
    assert denied.tool != tool and denied.tool[:2] == tool[:2]
    assert "sha256 of the tool name: " + hashlib.sha256(tool.encode()).hexdigest() in denied.reason
    assert "tool name" in caught.value.reason


@pytest.mark.postgres
def test_a_call_id_postgres_refuses_is_denied_and_recorded(pg: PostgresSink) -> None:
    gate = Gate(pg, policy=AllowAll())
    with gate.run("tidy") as run, pytest.raises(ToolDenied) as caught:
        run.call("write", {}, lambda: None, call_id=f"c{NUL}1")
    denied = _denial(pg, run.run_id)
    assert denied.call_id == "c\\x00" + "1" == caught.value.call_id
    assert "the call id holds a NUL" in denied.reason


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("run_id", "agent_path"),
    [(f"run{NUL}1", ""), (_random(4000), ""), ("r-ok", f"planner{SURROGATE}")],
    ids=["nul-run-id", "over-long-run-id", "surrogate-agent-path"],
)
def test_a_run_postgres_cannot_record_is_refused_up_front(
    pg: PostgresSink, run_id: str, agent_path: str
) -> None:
    done: list[str] = []
    gate = Gate(pg, policy=AllowAll(), safe_tools={"read"})
    with (
        pytest.raises(ValidationError) as caught,
        gate.run("tidy the notes", run_id=run_id, agent_path=agent_path) as run,
    ):
        run.call("read", {}, lambda: done.append("read"))  # never reached
    assert done == []
    assert "refused before it starts" in str(caught.value)
    events = list(pg.events())  # a fresh schema: only the refused attempt is in it
    assert [e.kind for e in events] == [Kind.REQUEST, Kind.ABORT]
    assert events[0].run_id == events[1].run_id and events[0].preview == "tidy the notes"
    assert repr(events[0].run_id) in str(caught.value)
    assert "run refused before it started" in events[1].reason and "sha256" in events[1].reason


@pytest.mark.postgres
def test_outside_a_run_a_refused_tool_name_is_still_recorded(pg: PostgresSink) -> None:
    gate = Gate(pg, policy=AllowAll())

    @gate.tool(name=f"bad{NUL}tool")
    def tool() -> None: ...

    with pytest.raises(ToolDenied):
        tool()
    (denied,) = pg.events(kind=Kind.ACTION)
    assert denied.tool == "bad\\x00tool" and "no active run" in denied.reason


@pytest.mark.postgres
def test_what_the_sink_refuses_and_what_it_holds(pg: PostgresSink) -> None:
    """A NUL is refused before sending; a length only the server can judge: what does not
    compress is refused, what does is stored. The gate keeps under the advertised limit."""
    with pytest.raises(ValidationError, match="tool holds a NUL"):
        pg.record(Event(kind=Kind.PROMPT, run_id="r", tool=f"a{NUL}b"))
    with pytest.raises(StorageError):
        pg.record(Event(kind=Kind.PROMPT, run_id="r", tool=_random(3000)))
    pg.record(Event(kind=Kind.PROMPT, run_id="r", tool="a" * 100_000))  # it compresses
    pg.record(Event(kind=Kind.PROMPT, run_id="r", tool=_random(2048)))  # the limit


def test_sqlite_stores_nul_and_long_names_as_given(lite: SQLiteSink) -> None:
    done: list[str] = []
    gate = Gate(lite, policy=AllowAll())
    long = _random(5000)
    with gate.run("x", run_id=f"run{NUL}1") as run:
        run.call(f"rm{NUL}rf", {}, lambda: done.append("a"))
        run.call(long, {}, lambda: done.append("b"))
    assert done == ["a", "b"] and run.run_id == f"run{NUL}1"
    tools = [e.tool for e in lite.events(run_id=run.run_id, kind=Kind.ACTION)]
    assert tools == [f"rm{NUL}rf", long]


def test_a_lone_surrogate_is_refused_everywhere(lite: SQLiteSink) -> None:
    gate = Gate(lite, policy=AllowAll())
    with gate.run("x") as run, pytest.raises(ToolDenied):
        run.call(f"tool{SURROGATE}", {}, lambda: None)
    denied = _denial(lite, run.run_id)
    assert denied.tool == "tool\\udcff" and "not valid Unicode" in denied.reason
    with pytest.raises(ValidationError, match="run id"):
        gate.run("x", run_id=f"r{SURROGATE}")


@pytest.mark.postgres
def test_a_redacted_run_id_near_the_limit_still_fits_with_its_suffix(pg: PostgresSink) -> None:
    done: list[str] = []
    with Gate(pg, policy=AllowAll()).run("x", run_id=_random(2020) + " token=abc") as run:
        run.call("w", {}, lambda: done.append("w"))
    assert done == ["w"] and "token=abc" not in run.run_id  # (the random part may hold "abc")
    assert key_limits(pg).problem(run.run_id) == ""
    assert len(pg.chain(run.run_id).actions) == 1
