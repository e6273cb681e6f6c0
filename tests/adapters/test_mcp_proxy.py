"""`ledger mcp proxy` as a subprocess, driven by the SDK's own Client over stdio and over
streamable HTTP, in front of the real mcp-server-git and mcp-server-time."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_git")

from mcp import Client, StdioServerParameters

from ledger import Kind, Verdict
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, SERVERS, env, free_port, git, repo_state

SAFE = ["git_status", "git_log", "git_diff", "git_show", "git_branch"]


def proxy_args(db: Path, *extra: str, server: list[str] | None = None) -> list[str]:
    safe = [a for t in SAFE for a in ("--safe", t)]
    downstream = server or [PY, "-m", "mcp_server_git"]
    return [
        "-m",
        "ledger",
        "mcp",
        "proxy",
        "--db",
        f"sqlite:///{db}",
        *safe,
        *extra,
        "--",
        *downstream,
    ]


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def test_stdio_proxy_serves_reads_and_a_denied_commit_leaves_the_repo_unchanged(
    repo: Path, tmp_path: Path
) -> None:
    db = tmp_path / "ledger.db"
    git(repo, "add", "new.txt")
    before = repo_state(repo)
    params = StdioServerParameters(command=PY, args=proxy_args(db), env=env())

    async def main() -> tuple[Any, Any, Any, Any]:
        async with Client(params) as c:
            listed = await c.list_tools()
            status = await c.call_tool("git_status", {"repo_path": str(repo)})
            log = await c.call_tool("git_log", {"repo_path": str(repo)})
            commit = await c.call_tool("git_commit", {"repo_path": str(repo), "message": "x"})
            return listed, status, log, commit

    listed, status, log, commit = asyncio.run(main())
    assert "git_commit" in {t.name for t in listed.tools}
    assert "new.txt" in text(status) and "first" in text(log)
    assert commit.is_error and text(commit).startswith("agentledger denied this call")
    assert repo_state(repo) == before
    with SQLiteSink(db) as sink:
        (run,) = list(sink.runs())  # the stdio session is one run
        assert run.ended
        (attempt,) = list(sink.events(kind=Kind.ACTION, tool="git_commit"))
        assert attempt.verdict is Verdict.DENIED
    chain = subprocess.run(
        [PY, "-m", "ledger", "chain", run.run_id, "--db", f"sqlite:///{db}", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert chain.returncode == 0, chain.stderr
    actions = json.loads(chain.stdout)["actions"]
    assert [(a["tool"], a["verdict"]) for a in actions] == [("git_commit", "denied")]


def test_stdio_proxy_allows_what_allow_names(repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    params = StdioServerParameters(command=PY, args=proxy_args(db, "--allow", "git_add"), env=env())

    async def main() -> Any:
        async with Client(params) as c:
            return await c.call_tool("git_add", {"repo_path": str(repo), "files": ["new.txt"]})

    added = asyncio.run(main())
    assert not added.is_error
    assert "A  new.txt" in git(repo, "status", "--porcelain")
    with SQLiteSink(db) as sink:
        (action,) = list(sink.events(kind=Kind.ACTION, tool="git_add"))
        assert action.verdict is Verdict.ALLOWED


def test_policy_file_drives_the_proxy(repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\ndefault: deny\nsafe: [git_status]\ntools:\n"
        "  git_add:\n    decision: allow\n    args:\n"
        f"      repo_path: {{path_prefix: {str(repo)!r}}}\n"
        "      files: {max_length: 1}\n"
    )
    params = StdioServerParameters(
        command=PY,
        args=[
            "-m",
            "ledger",
            "mcp",
            "proxy",
            "--db",
            f"sqlite:///{db}",
            "--policy",
            str(policy),
            "--",
            PY,
            "-m",
            "mcp_server_git",
        ],
        env=env(),
    )

    async def main() -> tuple[Any, Any, Any]:
        async with Client(params) as c:
            outside = await c.call_tool("git_add", {"repo_path": "/", "files": ["x"]})
            two = await c.call_tool("git_add", {"repo_path": str(repo), "files": ["a", "b"]})
            ok = await c.call_tool("git_add", {"repo_path": str(repo), "files": ["new.txt"]})
            return outside, two, ok

    outside, two, ok = asyncio.run(main())
    assert outside.is_error and "not under an allowed path" in text(outside)
    assert two.is_error and "longer than 1" in text(two)
    assert not ok.is_error


def test_a_policy_file_with_a_typo_stops_the_proxy_with_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("version: 1\ntools:\n  git_add: alow\n")
    done = subprocess.run(
        [
            PY,
            "-m",
            "ledger",
            "mcp",
            "proxy",
            "--db",
            f"sqlite:///{tmp_path / 'l.db'}",
            "--policy",
            str(policy),
            "--",
            PY,
            "-m",
            "mcp_server_git",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 3" in lines[0] and "'alow' is not a decision" in lines[0]
    assert done.stdout == ""


def test_a_missing_downstream_command_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            PY,
            "-m",
            "ledger",
            "mcp",
            "proxy",
            "--db",
            f"sqlite:///{tmp_path / 'l.db'}",
            "--",
            "no-such-mcp-server-xyz",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert "no-such-mcp-server-xyz" in done.stderr and "not found" in done.stderr


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"proxy exited: {proc.stderr.read() if proc.stderr else ''!r}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the proxy did not start listening")


def test_http_proxy_serves_the_real_servers_and_denies_on_127_0_0_1(
    repo: Path, tmp_path: Path
) -> None:
    db = tmp_path / "ledger.db"
    port = free_port()
    before = repo_state(repo)
    proc = subprocess.Popen(
        [PY, *proxy_args(db, "--http", f"127.0.0.1:{port}")],
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_port(port, proc)

        async def main() -> tuple[Any, Any, Any]:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url) as c:
                status = await c.call_tool("git_status", {"repo_path": str(repo)})
                branch = await c.call_tool(
                    "git_create_branch", {"repo_path": str(repo), "branch_name": "evil"}
                )
            async with Client(url, mode="legacy") as c:
                reset = await c.call_tool("git_reset", {"repo_path": str(repo)})
            return status, branch, reset

        status, branch, reset = asyncio.run(main())
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == b""  # nothing but the protocol would ever go to stdout
    assert not status.is_error and "new.txt" in text(status)
    assert branch.is_error and reset.is_error
    assert repo_state(repo) == before
    with SQLiteSink(db) as sink:
        denied = {e.tool for e in sink.events(kind=Kind.ACTION) if e.verdict is Verdict.DENIED}
        assert denied == {"git_create_branch", "git_reset"}
        assert all(r.ended for r in sink.runs())


def test_http_refuses_a_public_address_without_public(tmp_path: Path) -> None:
    done = subprocess.run(
        [PY, *proxy_args(tmp_path / "l.db", "--http", "0.0.0.0:8123")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "not a loopback address" in done.stderr


def test_a_call_in_flight_when_the_proxy_stops_is_recorded_as_aborted(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    state = tmp_path / "state"
    state.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [
            PY,
            *proxy_args(
                db,
                "--allow",
                "slow",
                "--http",
                f"127.0.0.1:{port}",
                server=[PY, str(SERVERS / "flaky_server.py"), str(state)],
            ),
        ],
        env=env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_port(port, proc)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
                call = asyncio.ensure_future(c.call_tool("slow", {"seconds": 60}))
                for _ in range(300):
                    if (state / "slow-started").exists():
                        break
                    await asyncio.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
                with pytest.raises(BaseException):  # noqa: B017 - the connection goes away
                    await asyncio.wait_for(call, 30)

        asyncio.run(main())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    with SQLiteSink(db) as sink:
        (action,) = list(sink.events(kind=Kind.ACTION, tool="slow"))
        assert action.verdict is Verdict.ALLOWED
        (result,) = list(sink.events(kind=Kind.TOOL_RESULT, tool="slow"))
        assert "cancel" in result.err
        aborts = list(sink.events(kind=Kind.ABORT, run_id=action.run_id))
        assert aborts and "GatewayStopped" in aborts[0].reason


@pytest.mark.parametrize("how", ["client disconnects", "SIGTERM"])
def test_a_call_in_flight_over_stdio_leaves_a_complete_record(tmp_path: Path, how: str) -> None:
    """While a call runs, the client (a raw JSON-RPC peer here) closes stdin, or the
    proxy gets SIGTERM: the proxy records the call's end and the run's end, and exits."""
    db = tmp_path / "ledger.db"
    state = tmp_path / "state"
    state.mkdir()
    proc = subprocess.Popen(
        [
            PY,
            *proxy_args(
                db, "--allow", "slow", server=[PY, str(SERVERS / "flaky_server.py"), str(state)]
            ),
        ],
        env=env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw-client", "version": "0"},
            },
        }
    )
    assert json.loads(proc.stdout.readline())["id"] == 1
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 60}},
        }
    )
    deadline = time.monotonic() + 30
    while not (state / "slow-started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (state / "slow-started").exists()
    if how == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    else:
        proc.stdin.close()  # the client goes away mid-call
    proc.wait(timeout=60)
    with SQLiteSink(db) as sink:
        (run,) = list(sink.runs())
        assert run.ended
        chain = sink.chain(run.run_id)
        assert chain.request is not None and chain.request.agent_path == "raw-client"
        (action,) = chain.actions
        assert action.intent.verdict is Verdict.ALLOWED
        assert action.result is not None and action.result.err  # cancelled, not lost
        if how == "SIGTERM":
            (abort,) = list(sink.events(kind=Kind.ABORT, run_id=run.run_id))
            assert "GatewayStopped" in abort.reason
    if how == "SIGTERM":
        assert proc.returncode == 0


@pytest.mark.postgres
def test_the_proxy_on_postgresql(repo: Path, pg_dsn: str) -> None:
    import uuid

    import sqlalchemy as sa

    schema = "mcp_" + uuid.uuid4().hex[:12]
    joiner = "&" if "?" in pg_dsn else "?"
    url = f"{pg_dsn}{joiner}ledger_schema={schema}"
    before = repo_state(repo)
    args = ["-m", "ledger", "mcp", "proxy", "--db", url, "--safe", "git_status",
            "--allow", "git_add", "--", PY, "-m", "mcp_server_git"]  # fmt: skip
    params = StdioServerParameters(command=PY, args=args, env=env())

    async def main() -> tuple[Any, Any]:
        async with Client(params) as c:
            commit = await c.call_tool("git_commit", {"repo_path": str(repo), "message": "x"})
            add = await c.call_tool("git_add", {"repo_path": str(repo), "files": ["new.txt"]})
            return commit, add

    try:
        commit, add = asyncio.run(main())
        assert commit.is_error and not add.is_error
        assert repo_state(repo)[0] == before[0]  # no commit was made
        runs = subprocess.run(
            [PY, "-m", "ledger", "runs", "--db", url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
        )
        assert runs.returncode == 0, runs.stderr
        (run,) = json.loads(runs.stdout)
        chain = subprocess.run(
            [PY, "-m", "ledger", "chain", run["run_id"], "--db", url, "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
        )
        verdicts = {a["tool"]: a["verdict"] for a in json.loads(chain.stdout)["actions"]}
        assert verdicts == {"git_commit": "denied", "git_add": "allowed"}
    finally:
        engine = sa.create_engine(sa.make_url(pg_dsn).set(drivername="postgresql+psycopg"))
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()
