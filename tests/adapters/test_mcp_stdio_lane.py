"""The gateway's stdio connection (``StdioLane``): the SDK session over it, and calls
sent straight down the pipe beside the session, against a real server process."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from ledger.adapters.mcp.stdio import StdioLane
from tests.adapters.conftest import PY, SERVERS, env


def flaky(tmp_path: Path) -> StdioServerParameters:
    state = tmp_path / "s"
    state.mkdir(exist_ok=True)
    return StdioServerParameters(
        command=PY, args=[str(SERVERS / "flaky_server.py"), str(state)], env=env()
    )


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_concurrent_calls_get_their_own_answers_whole(tmp_path: Path, mode: str) -> None:
    """Answers are matched to requests by id, whatever order they come back in; one
    far larger than a pipe read (and not ASCII) arrives whole; the SDK session keeps
    working beside the lane."""
    texts = [f"call {i} \u00e9\u4e2d" for i in range(16)] + ["x\u00e9" * 200_000]

    async def main() -> tuple[list[dict[str, Any]], list[str]]:
        lane = StdioLane(flaky(tmp_path))
        async with Client(lane, mode=mode) as client:  # type: ignore[arg-type]
            answers = await asyncio.gather(
                *(lane.request("tools/call", call("echo", text=t)) for t in texts)
            )
            listed = [t.name for t in (await client.list_tools()).tools]
        return answers, listed

    answers, listed = asyncio.run(main())
    assert [a["structuredContent"]["text"] for a in answers] == texts
    assert all(a["isError"] is False for a in answers)
    assert "echo" in listed


def test_an_error_answer_is_an_mcp_error_with_the_servers_code(tmp_path: Path) -> None:
    async def main() -> MCPError:
        lane = StdioLane(flaky(tmp_path))
        async with Client(lane):  # type: ignore[arg-type]
            with pytest.raises(MCPError) as caught:
                await lane.request("no/such/method", {})
            return caught.value

    error = asyncio.run(main())
    assert error.error.code == types.METHOD_NOT_FOUND


def test_a_timed_out_call_is_cancelled_and_the_lane_goes_on(tmp_path: Path) -> None:
    async def main() -> tuple[MCPError, dict[str, Any]]:
        lane = StdioLane(flaky(tmp_path))
        async with Client(lane):  # type: ignore[arg-type]
            with pytest.raises(MCPError) as caught:
                await lane.request("tools/call", call("hang"), timeout=0.5)
            after = await lane.request("tools/call", call("echo", text="after"), timeout=10)
            return caught.value, after

    timed_out, after = asyncio.run(main())
    assert timed_out.error.code == types.REQUEST_TIMEOUT
    assert after["structuredContent"] == {"text": "after"}


def test_a_server_that_exits_fails_the_waiting_call_and_every_later_one(tmp_path: Path) -> None:
    async def main() -> tuple[MCPError, MCPError, str]:
        lane = StdioLane(flaky(tmp_path))
        async with Client(lane):  # type: ignore[arg-type]
            with pytest.raises(MCPError) as crashed:
                await lane.request("tools/call", call("crash"), timeout=10)
            with pytest.raises(MCPError) as later:
                await lane.request("tools/call", call("echo", text="x"), timeout=10)
            return crashed.value, later.value, lane.closed

    crashed, later, why = asyncio.run(main())
    assert crashed.error.code == later.error.code == types.CONNECTION_CLOSED
    assert "exited" in why


def test_the_server_and_its_children_are_stopped_when_the_lane_closes(tmp_path: Path) -> None:
    """A server that ignores the end of its stdin is terminated with its process group
    (here: a child it started), as the SDK's own stdio transport does."""
    pids = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
        "print('not json', flush=True)\n"
        "time.sleep(60)\n"
    )

    async def main() -> int:
        lane = StdioLane(StdioServerParameters(command=sys.executable, args=["-c", script]))
        async with lane as (read, _write):
            first = await read.receive()  # a line that is no JSON-RPC message
            assert isinstance(first, Exception)
            assert lane.pid is not None
            return lane.pid

    pid = asyncio.run(main())
    child = int(pids.read_text())
    assert not alive(pid)
    for _ in range(100):  # the signal may take a moment to land
        if not alive(child):
            break
        time.sleep(0.05)
    assert not alive(child)


def test_a_server_that_never_answers_the_handshake_is_a_clear_error(tmp_path: Path) -> None:
    """Starting the gateway gives up after ``list_timeout`` with one clear error, and the
    silent server is stopped."""
    from ledger import AllowAll, Gate
    from ledger.adapters.mcp import GatewayError, McpGateway
    from ledger.sinks import SQLiteSink

    pids = tmp_path / "pid"
    script = f"import os, time; open({str(pids)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    silent = StdioServerParameters(command=sys.executable, args=["-c", script])

    async def main() -> float:
        with SQLiteSink(tmp_path / "l.db") as sink:
            start = time.monotonic()
            with pytest.raises(GatewayError, match="did not answer the MCP handshake within 1s"):
                async with McpGateway(Gate(sink, policy=AllowAll()), silent, list_timeout=1.0):
                    pass
            return time.monotonic() - start

    took = asyncio.run(main())
    assert took < 10
    assert not alive(int(pids.read_text()))
