"""The gateway's stdio lane against a hostile downstream server (acceptance probes).

Every ``tools/call`` to a stdio server goes down the pipe by :class:`StdioLane`, not
through the SDK's session. Whatever the server writes back, each call must end with its
own answer or a clear error of its own (recorded as the call's error), never with the
answer of another call, a value changed on the way, a timeout for an answer that did
arrive, or the gateway crashing; and the gate's rule still holds: a non-safe call reaches
the server only after its ``action`` is committed, a denied one never does. The server is
``servers/lane_probe_server.py`` (a misbehaviour per tool) and, for the 2026-07-28
protocol, ``servers/flaky_server.py``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from ledger import AllowAll, AllowList, Gate, Kind, Verdict
from ledger.adapters.mcp import McpGateway
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, SERVERS, env, free_port

PROBE = SERVERS / "lane_probe_server.py"
ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"


def probe(state: Path, **extra: str) -> StdioServerParameters:
    state.mkdir(exist_ok=True)
    return StdioServerParameters(command=PY, args=[str(PROBE), str(state)], env=env() | extra)


def received(state: Path) -> list[dict[str, Any]]:
    path = state / "received.jsonl"
    lines = path.read_bytes().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def calls_of(state: Path, tool: str) -> list[dict[str, Any]]:
    return [
        m
        for m in received(state)
        if m.get("method") == "tools/call" and m["params"]["name"] == tool
    ]


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def results(db: Path, tool: str) -> list[Any]:
    with SQLiteSink(db) as sink:
        return list(sink.events(kind=Kind.TOOL_RESULT, tool=tool))


def assert_cancelled_downstream(state: Path, db: Path, count: int) -> None:
    """Each of the ``count`` ``hang`` calls was cancelled downstream (a
    ``notifications/cancelled`` for its id) and recorded with the error ``cancelled``."""
    cancelled = {
        m["params"]["requestId"]
        for m in received(state)
        if m.get("method") == "notifications/cancelled"
    }
    assert cancelled == {m["id"] for m in calls_of(state, "hang")}
    hung = results(db, "hang")
    assert len(hung) == count and all(r.err == "cancelled" for r in hung), hung


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


async def wait_for(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


HOSTILE = [
    "list_result",  # {"result": []}
    "no_result",  # neither result nor error
    "null_result",  # {"result": null}
    "bad_error",  # an error whose code is a string
    "non_utf8",  # an answer with bytes that are not UTF-8
    "surrogate",  # an answer with a lone surrogate (the SDK refuses it)
]


def test_a_malformed_answer_fails_its_call_at_once_and_the_gateway_goes_on(
    tmp_path: Path,
) -> None:
    """Each malformed answer is an MCP error for its own call straight away (not a
    timeout: the answer did arrive), recorded as the call's error; the next call works.
    A lone surrogate passed on used to crash the whole ``ledger mcp proxy``."""
    db = tmp_path / "l.db"

    async def main() -> tuple[dict[str, str], Any, float]:
        errors: dict[str, str] = {}
        with SQLiteSink(db) as sink:
            gate = Gate(sink, policy=AllowAll())
            started = time.monotonic()
            gw = McpGateway(gate, probe(tmp_path / "s"), call_timeout=60)
            async with gw, Client(gw.server, mode="legacy") as c:
                for tool in HOSTILE:
                    with pytest.raises(MCPError) as caught:
                        await c.call_tool(tool, {})
                    errors[tool] = caught.value.error.message
                after = await c.call_tool("echo", {"text": "still here"})
                await gw.settle()
            return errors, after, time.monotonic() - started

    errors, after, took = asyncio.run(main())
    assert took < 30, f"a malformed answer waited for the call timeout ({took:.0f}s)"
    for tool, message in errors.items():
        assert "did not answer" not in message, (tool, message)
    assert not after.is_error and text(after) == "still here"
    for tool in HOSTILE:
        (result,) = results(db, tool)
        assert result.err, tool


def test_answers_reach_their_own_call_unchanged(tmp_path: Path) -> None:
    """Out of order, duplicated, preceded by a number id equal to the lane's or by an
    answer to nobody, several MB on one line, in pieces with pauses, after a flood of
    notifications, with an integer past 64 bits: each call gets its own answer, exactly
    as the server wrote it (and so recorded)."""
    db = tmp_path / "l.db"
    delays = [900, 100, 500, 0, 300]

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        with SQLiteSink(db) as sink:
            gate = Gate(sink, policy=AllowAll())
            gw = McpGateway(gate, probe(tmp_path / "s"), call_timeout=60)
            async with gw, Client(gw.server, mode="legacy") as c:
                late = await asyncio.gather(*(c.call_tool("delay", {"ms": ms}) for ms in delays))
                got["delay"] = [text(r) for r in late]
                for tool, args in [
                    ("dup", {}),
                    ("echo", {"text": "after dup"}),
                    ("numeric_id", {}),
                    ("stranger_first", {}),
                    ("huge", {"size": 6_000_000}),
                    ("partial", {"pause": 0.5}),
                    ("chatty", {"n": 200}),
                    ("bigint", {}),
                ]:
                    got[tool] = await c.call_tool(tool, args)
                await gw.settle()
        return got

    got = asyncio.run(main())
    assert got["delay"] == [f"after {ms}" for ms in delays]
    assert text(got["dup"]) == "first" and text(got["echo"]) == "after dup"
    assert text(got["numeric_id"]) == "numeric real"
    assert text(got["stranger_first"]) == "real"
    assert text(got["huge"]) == "y" * 6_000_000
    assert text(got["partial"]) == "pieced"
    assert text(got["chatty"]) == "chatty done"
    n = got["bigint"].structured_content["n"]
    assert type(n) is int and n == 2**80, n  # not 1.2089258196146292e+24
    (big,) = results(db, "bigint")
    assert str(2**80) in (big.result or ""), big.result


@pytest.mark.parametrize("kind", ["ping", "elicitation/create", "sampling/createMessage"])
def test_a_server_request_in_the_middle_of_a_call_is_answered(tmp_path: Path, kind: str) -> None:
    """The server asks the client something while the call runs (and answers only after
    it has its answer): the SDK session beside the lane answers it, the call completes."""

    async def main() -> Any:
        with SQLiteSink(tmp_path / "l.db") as sink:
            gate = Gate(sink, policy=AllowAll())
            gw = McpGateway(gate, probe(tmp_path / "s"), call_timeout=30)
            async with gw, Client(gw.server, mode="legacy") as c:
                return await c.call_tool("ask", {"kind": kind})

    result = asyncio.run(main())
    assert text(result).startswith("client said: "), text(result)


def test_a_handshake_era_server_gets_no_2026_envelope(tmp_path: Path) -> None:
    """The SDK probes with ``server/discover`` (2026-07-28 ``_meta``) and falls back to
    the 2025-11-25 handshake: the lane's requests must then carry no 2026-07-28 envelope
    (the SDK's own handshake-era server loop refuses such requests), as the SDK's own
    requests on that connection carry none."""
    state = tmp_path / "s"

    async def main() -> tuple[Any, Any]:
        with SQLiteSink(tmp_path / "l.db") as sink:
            gate = Gate(sink, policy=AllowAll())
            server = probe(state, LANE_PROBE_STRICT="1")
            gw = McpGateway(gate, server, call_timeout=2)
            async with gw, Client(gw.server, mode="legacy") as c:
                echoed = await c.call_tool("echo", {"text": "hi"})
                with pytest.raises(MCPError) as timed_out:
                    await c.call_tool("hang", {})
                return echoed, timed_out.value

    echoed, timed_out = asyncio.run(main())
    assert not echoed.is_error and text(echoed) == "hi", text(echoed)
    assert "did not answer" in timed_out.error.message
    lane = [m for m in received(state) if str(m.get("id", "")).startswith("ledger-")]
    cancels = [m for m in received(state) if m.get("method") == "notifications/cancelled"]
    assert lane and cancels
    for message in lane + cancels:
        assert ENVELOPE_KEY not in (message["params"].get("_meta") or {}), message


def test_a_2026_server_gets_the_envelope_and_a_multi_round_trip_call_completes(
    tmp_path: Path,
) -> None:
    """On a 2026-07-28 connection the lane's requests carry the envelope (the server
    refuses them without it) and an ``InputRequiredResult`` round trip completes."""
    state = tmp_path / "s"
    state.mkdir()
    server = StdioServerParameters(
        command=PY, args=[str(SERVERS / "flaky_server.py"), str(state)], env=env()
    )

    async def elicit(context: Any, params: Any) -> Any:
        import mcp_types as types

        return types.ElicitResult(action="accept", content={"yes": True})

    async def main() -> tuple[Any, str]:
        with SQLiteSink(tmp_path / "l.db") as sink:
            gate = Gate(sink, policy=AllowList(["confirm"]), safe_tools={"echo"})
            async with McpGateway(gate, server) as gw:
                assert gw._down is not None
                version = gw._down.session.protocol_version or ""
                async with Client(gw.server, elicitation_callback=elicit) as c:
                    echoed = await c.call_tool("echo", {"text": "hi"})
                    assert text(echoed) == "hi"
                    return await c.call_tool("confirm", {}), version

    result, version = asyncio.run(main())
    assert version == "2026-07-28"
    assert text(result) == "confirmed: {'yes': True}"


def test_a_client_cancelling_mid_call_cancels_it_downstream(tmp_path: Path) -> None:
    """The client gives up on a call: the server is told (``notifications/cancelled``
    with the lane's id of the call), the call is recorded as cancelled, the next works."""
    state, db = tmp_path / "s", tmp_path / "l.db"

    async def main() -> Any:
        with SQLiteSink(db) as sink:
            gate = Gate(sink, policy=AllowAll())
            gw = McpGateway(gate, probe(state))
            async with gw, Client(gw.server, mode="legacy") as c:
                call = asyncio.ensure_future(c.call_tool("hang", {}))
                await wait_for(lambda: bool(calls_of(state, "hang")))
                call.cancel()
                await wait_for(lambda: bool(results(db, "hang")))
                after = await c.call_tool("echo", {"text": "next"})
                await gw.settle()
                return after

    after = asyncio.run(main())
    assert text(after) == "next"
    (sent,) = calls_of(state, "hang")
    cancels = [m for m in received(state) if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancels] == [sent["id"]]
    (result,) = results(db, "hang")
    assert result.err == "cancelled"


def _serving(proc: subprocess.Popen[str], port: int) -> None:
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None, "the proxy stopped"
        time.sleep(0.05)


def test_stopping_the_proxy_with_calls_in_flight_leaves_no_process(tmp_path: Path) -> None:
    """SIGTERM while calls wait on the server: they are cancelled downstream and recorded
    as cancelled, the run ends with an abort, and the server process is gone."""
    state, db, port = tmp_path / "s", tmp_path / "l.db", free_port()
    state.mkdir()
    proc = subprocess.Popen(
        _proxy(db, state, "--allow", "hang", "--http", f"127.0.0.1:{port}"),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        _serving(proc, port)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
                calls = [asyncio.ensure_future(c.call_tool("hang", {})) for _ in range(6)]
                await wait_for(lambda: len(calls_of(state, "hang")) == 6)
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 30)

        asyncio.run(main())
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert not alive(int((state / "pid").read_text()))
    assert_cancelled_downstream(state, db, 6)
    with SQLiteSink(db) as sink:
        assert list(sink.events(kind=Kind.ABORT))


def test_the_stdio_client_leaving_with_calls_in_flight_leaves_no_process(tmp_path: Path) -> None:
    """The upstream client closes the proxy's stdin while its calls wait on the server:
    the proxy stops, the calls are cancelled downstream and recorded as cancelled, and
    the server process is gone."""
    state, db = tmp_path / "s", tmp_path / "l.db"
    state.mkdir()
    proc = subprocess.Popen(
        _proxy(db, state, "--allow", "hang"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    }
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    messages += [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "hang"}}
        for i in range(1, 5)
    ]
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while len(calls_of(state, "hang")) < 4:
            assert time.monotonic() < deadline and proc.poll() is None, "calls not forwarded"
            time.sleep(0.05)
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    stderr = proc.stderr.read().decode()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert not alive(int((state / "pid").read_text()))
    assert_cancelled_downstream(state, db, 4)


def test_sigterm_while_the_server_starts_leaves_no_process(tmp_path: Path) -> None:
    """A server slow to start (``uvx`` fetching it, or stuck): a SIGTERM to the proxy
    meanwhile stops the proxy and the server it started."""
    state, db = tmp_path / "s", tmp_path / "l.db"
    state.mkdir()
    proc = subprocess.Popen(
        _proxy(db, state),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env() | {"LANE_PROBE_MUTE": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while not (state / "pid").exists():
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        server = int((state / "pid").read_text())
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = alive(server)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if (state / "pid").exists() and alive(int((state / "pid").read_text())):
            os.kill(int((state / "pid").read_text()), signal.SIGKILL)
        if proc.stdin is not None:
            proc.stdin.close()
    assert not left, "the downstream server outlived the proxy"


@pytest.mark.parametrize("how", ["exit", "close_stdout", "orphan_exit"])
def test_a_server_gone_mid_calls_fails_every_one_then_denies(tmp_path: Path, how: str) -> None:
    """The server exits (or closes its stdout and keeps running, or exits leaving a child
    that holds its stdout open, so no end of file comes) with calls in flight: every one
    fails at once as an MCP error, recorded; later calls are denied; the process, and
    the child it left, are gone once the gateway stops."""
    state, db = tmp_path / "s", tmp_path / "l.db"

    async def main() -> tuple[list[Any], Any, int, float]:
        with SQLiteSink(db) as sink:
            gate = Gate(sink, policy=AllowAll())
            gw = McpGateway(gate, probe(state), call_timeout=60)
            async with gw, Client(gw.server, mode="legacy") as c:
                assert gw._lane is not None and gw._lane.pid is not None
                pid = gw._lane.pid
                calls = [asyncio.ensure_future(c.call_tool("hang", {})) for _ in range(5)]
                await wait_for(lambda: len(calls_of(state, "hang")) == 5)
                started = time.monotonic()
                calls.append(asyncio.ensure_future(c.call_tool(how, {})))
                done = await asyncio.gather(*calls, return_exceptions=True)
                took = time.monotonic() - started
                later = await c.call_tool("echo", {"text": "x"})
                await gw.settle()
            return done, later, pid, took

    done, later, pid, took = asyncio.run(main())
    assert took < 20, took
    assert all(isinstance(d, MCPError) for d in done), done
    assert later.is_error and "has exited" in text(later)
    assert not alive(pid)
    if how == "orphan_exit":
        assert not alive(int((state / "child.pid").read_text()))
    assert len(results(db, "hang")) == 5 and all(r.err for r in results(db, "hang"))
    with SQLiteSink(db) as sink:
        (denied,) = list(sink.events(kind=Kind.ACTION, tool="echo"))
        assert denied.verdict is Verdict.DENIED


def test_calls_written_to_a_server_that_stops_reading_all_get_through(tmp_path: Path) -> None:
    """Large concurrent calls fill the pipe while the server does not read: each waits
    its turn and gets its own answer."""
    payloads = [f"{i}:" + "z" * 200_000 for i in range(8)]

    async def main() -> list[str]:
        with SQLiteSink(tmp_path / "l.db") as sink:
            gate = Gate(sink, policy=AllowAll())
            gw = McpGateway(gate, probe(tmp_path / "s"), call_timeout=60)
            async with gw, Client(gw.server, mode="legacy") as c:
                deaf = asyncio.ensure_future(c.call_tool("deaf", {"seconds": 1.5}))
                echoed = await asyncio.gather(*(c.call_tool("echo", {"text": p}) for p in payloads))
                assert text(await deaf) == "heard"
                return [text(r) for r in echoed]

    assert asyncio.run(main()) == payloads


def test_a_server_writing_as_its_stdin_closes_exits_on_its_own(tmp_path: Path) -> None:
    """The server says a lot once its stdin closes: that output is read (and dropped)
    while the gateway stops, so the server finishes its own shutdown instead of being
    stuck on a full pipe until it is terminated (as the SDK's own transport drains it)."""
    state = tmp_path / "s"

    async def main() -> float:
        with SQLiteSink(tmp_path / "l.db") as sink:
            gw = McpGateway(Gate(sink, policy=AllowAll()), probe(state, LANE_PROBE_FAREWELL="1"))
            async with gw, Client(gw.server, mode="legacy") as c:
                assert text(await c.call_tool("echo", {"text": "hi"})) == "hi"
                started = time.monotonic()
            return time.monotonic() - started

    took = asyncio.run(main())
    assert (state / "clean-exit").exists(), "the server was terminated mid-shutdown"
    assert took < 1.5, took


def _proxy(db: Path, state: Path, *extra: str) -> list[str]:
    head = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{db}", "--safe", "echo"]
    return [
        *head,
        "--allow",
        "audited",
        "--allow",
        "stderr",
        *extra,
        "--",
        PY,
        str(PROBE),
        str(state),
    ]


async def _exercise(c: Client) -> dict[str, Any]:
    return {
        "echo": await c.call_tool("echo", {"text": "hi"}),
        "audited": await c.call_tool("audited", {}),
        "denied": await c.call_tool("write_anything", {}),
        "unlisted": await c.call_tool("hang", {}),
        "stderr": await c.call_tool("stderr", {}),
    }


def _check(got: dict[str, Any], db: Path, state: Path, stderr: str) -> None:
    assert text(got["echo"]) == "hi"
    # the server, reading the ledger when the call reached it, saw the allowed action
    rows = json.loads(text(got["audited"]))
    assert ["action", "allowed"] in rows, rows
    for key in ("denied", "unlisted"):
        assert got[key].is_error and text(got[key]).startswith("agentledger denied"), key
    assert not calls_of(state, "write_anything") and not calls_of(state, "hang")
    assert text(got["stderr"]) == "wrote stderr"
    assert "lane-probe stderr marker" in stderr, stderr
    with SQLiteSink(db) as sink:
        actions = {e.tool: e.verdict for e in sink.events(kind=Kind.ACTION)}
    assert actions["audited"] is Verdict.ALLOWED and actions["hang"] is Verdict.DENIED


def test_the_stdio_proxy_keeps_the_gate_rule_and_the_servers_stderr(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "s"
    state.mkdir()
    cmd = _proxy(db, state)
    params = StdioServerParameters(
        command=cmd[0], args=cmd[1:], env=env() | {"LANE_PROBE_DB": str(db)}
    )
    errors = tmp_path / "proxy.err"

    async def main() -> dict[str, Any]:
        with errors.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as c:
                return await _exercise(c)

    got = asyncio.run(main())
    _check(got, db, state, errors.read_text())


def test_the_http_proxy_keeps_the_gate_rule_and_the_servers_stderr(tmp_path: Path) -> None:
    db, state, port = tmp_path / "l.db", tmp_path / "s", free_port()
    state.mkdir()
    proc = subprocess.Popen(
        _proxy(db, state, "--http", f"127.0.0.1:{port}"),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env() | {"LANE_PROBE_DB": str(db)},
    )
    try:
        _serving(proc, port)

        async def main() -> dict[str, Any]:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
                return await _exercise(c)

        got = asyncio.run(main())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    _check(got, db, state, stderr)
