"""`ledger mcp proxy` under faults a new user met: a ledger another process keeps locked
(non-safe calls denied within the lock timeout, not stalled; safe calls served; allowed
again once the lock goes), and a client that stops reading the proxy's answers."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from ledger import Kind
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, SERVERS, env


def proxy(db: Path, state: Path, *extra: str) -> list[str]:
    state.mkdir(exist_ok=True)
    return [
        "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{db}", "--safe", "echo",
        "--allow", "write_note", "--allow", "slow", *extra,
        "--", PY, str(SERVERS / "flaky_server.py"), str(state),
    ]  # fmt: skip


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_a_locked_ledger_denies_non_safe_calls_within_the_lock_timeout(tmp_path: Path) -> None:
    db, state = tmp_path / "l.db", tmp_path / "s"
    params = StdioServerParameters(
        command=PY, args=proxy(db, state), env=env() | {"LEDGER_LOCK_TIMEOUT": "1"}
    )

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with Client(params, mode="legacy") as c:
            out["before"] = await c.call_tool("write_note", {"line": "one"})
            lock = sqlite3.connect(db, isolation_level=None)
            lock.execute("BEGIN EXCLUSIVE")  # another process holds the ledger
            try:
                start = time.monotonic()
                out["locked"] = await c.call_tool("write_note", {"line": "two"})
                out["took"] = time.monotonic() - start
                out["safe"] = await c.call_tool("echo", {"text": "still served"})
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            out["after"] = await c.call_tool("write_note", {"line": "three"})
        return out

    out = asyncio.run(main())
    assert not out["before"].is_error
    assert out["locked"].is_error and "record not durable" in text(out["locked"])
    assert out["took"] < 15  # the lock timeout, not minutes
    assert text(out["safe"]) == "still served"
    assert not out["after"].is_error
    assert (state / "notes.txt").read_text().splitlines() == ["one", "three"]


def test_a_client_that_stops_reading_ends_the_proxy_cleanly(tmp_path: Path) -> None:
    """The client closes its end of the proxy's stdout while a call runs: the answer
    cannot be written, and the proxy ends (exit 0, no internal error) after recording
    the call, leaving no process behind."""
    db, state = tmp_path / "l.db", tmp_path / "s"
    proc = subprocess.Popen(
        [PY, *proxy(db, state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    hello = {"protocolVersion": "2025-11-25", "capabilities": {},
             "clientInfo": {"name": "t", "version": "0"}}  # fmt: skip
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "slow", "arguments": {"seconds": 1}}},
    ]  # fmt: skip
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        proc.stdout.readline()  # the initialize answer
        deadline = time.monotonic() + 30
        while not (state / "slow-started").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the call did not start"
            time.sleep(0.05)
        proc.stdout.close()  # the client stops reading (it gave up)
        proc.wait(timeout=60)
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stderr.close()
    assert proc.returncode == 0, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    with SQLiteSink(db) as sink:
        (result,) = list(sink.events(kind=Kind.TOOL_RESULT, tool="slow"))
        assert result.err == ""  # the call ran; only its answer could not be delivered
        assert list(sink.events(kind=Kind.RUN_END)) or list(sink.events(kind=Kind.ABORT))


@pytest.mark.parametrize(
    ("rule", "warned"),
    [("deny", True), ("ask", True),
     ("{decision: allow, args: {path: {path_prefix: /srv}}}", True), ("allow", False)],
)  # fmt: skip
def test_allow_over_a_stricter_policy_file_rule_is_warned_of(
    caplog: pytest.LogCaptureFixture, rule: str, warned: bool
) -> None:
    """``--allow git_commit`` beside a policy file that denies it (or asks, or checks its
    arguments) allows every call: the operator is told at start."""
    from ledger.adapters.mcp.gateway import proxy_policy
    from ledger.gate.policy_file import parse_policy

    text = f"version: 1\ndefault: deny\ntools:\n  git_commit: {rule}\n"
    if rule == "ask":
        text += "approval:\n  command: ['true']\n"
    with caplog.at_level("WARNING", logger="ledger.adapters.mcp.gateway"):
        proxy_policy(parse_policy(text), allow=["git_commit", "git_add"])
    said = [r.getMessage() for r in caplog.records if "overrides the policy file" in r.getMessage()]
    assert bool(said) is warned
    if warned:
        assert "--allow git_commit " in said[0] and "git_add" not in said[0]
