"""The MCP gateway in front of the real mcp-server-git: reads served, a commit denied.

    pip install 'agentledger[mcp]' mcp-server-git
    python examples/mcp_gateway.py

It makes a throwaway git repository, starts ``mcp-server-git`` behind an in-process
:class:`~ledger.adapters.mcp.McpGateway` (the same gateway ``ledger mcp proxy`` runs) and
drives it with the MCP SDK's own ``Client``: ``git_status`` and ``git_log`` are safe and
served, ``git_add`` is allowed (committed to the ledger before it runs), ``git_commit``
is denied by the policy and never reaches the server. Then it prints the run's chain.
The command-line equivalent::

    ledger mcp proxy --db sqlite:///ledger.db --safe git_status --safe git_log \\
        --allow git_add -- python -m mcp_server_git
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client, StdioServerParameters

from ledger import AllowList, Gate
from ledger.adapters.mcp import McpGateway
from ledger.sinks import SQLiteSink


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


async def main(workdir: Path) -> None:
    repo = workdir / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-q",
        "--allow-empty", "-m", "first")  # fmt: skip
    (repo / "notes.txt").write_text("hello\n")
    with SQLiteSink(workdir / "ledger.db") as sink:
        gate = Gate(sink, policy=AllowList(["git_add"]), safe_tools={"git_status", "git_log"})
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_server_git"], env=dict(os.environ)
        )
        async with McpGateway(gate, server) as gateway, Client(gateway.server, mode="legacy") as c:
            calls: list[tuple[str, dict[str, Any]]] = [
                ("git_status", {}),
                ("git_log", {"max_count": 1}),
                ("git_add", {"files": ["notes.txt"]}),
                ("git_commit", {"message": "sneaky"}),
            ]
            for tool, args in calls:
                result = await c.call_tool(tool, {"repo_path": str(repo), **args})
                text = "".join(getattr(b, "text", "") for b in result.content)
                print(f"{tool:<12} {'ERROR ' if result.is_error else ''}{text.splitlines()[0]}")
        print("commits in the repository:", git(repo, "rev-list", "--count", "HEAD").strip())
        (run,) = list(sink.runs())
        chain = sink.chain(run.run_id)
        for action in chain.actions:
            print(f"  action {action.tool}: {action.verdict} ({action.intent.reason})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp)))
