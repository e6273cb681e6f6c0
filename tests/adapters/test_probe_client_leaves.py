"""A client that leaves while its call runs (acceptance probe): the record must say the
client left, not that the gateway stopped (it is still serving), and the call's result
is recorded as cancelled; a SIGTERM afterwards still says the gateway stopped."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp import Client

from ledger import Kind
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, SERVERS, env, free_port


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_client_leaving_mid_call_is_not_recorded_as_the_gateway_stopping(
    tmp_path: Path, mode: str
) -> None:
    db, state, port = tmp_path / "l.db", tmp_path / "state", free_port()
    state.mkdir()
    head = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{db}", "--allow", "slow"]
    server = [PY, str(SERVERS / "flaky_server.py"), str(state)]
    proc = subprocess.Popen(
        [*head, "--http", f"127.0.0.1:{port}", "--", *server],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as c:
                call = asyncio.ensure_future(c.call_tool("slow", {"seconds": 30}))
                for _ in range(300):
                    if (state / "slow-started").exists():
                        break
                    await asyncio.sleep(0.05)
                call.cancel()

        with contextlib.suppress(Exception):  # the client's own teardown may complain
            asyncio.run(main())
        for _ in range(100):  # the proxy keeps serving and writes the run's end
            with SQLiteSink(db) as sink:
                aborts = list(sink.events(kind=Kind.ABORT))
            if aborts:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the proxy stopped"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    (abort,) = aborts
    assert "GatewayStopped" not in abort.reason and "client" in abort.reason, abort.reason
    with SQLiteSink(db) as sink:
        (result,) = list(sink.events(kind=Kind.TOOL_RESULT, tool="slow"))
    assert result.err == "cancelled"
