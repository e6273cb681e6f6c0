"""``ledger mcp proxy`` started with standard input that is not a pipe (acceptance probe).

A supervisor or a shell often starts a stdio server with standard input on /dev/null (or
a file). The proxy must see the end of its input and stop, as any stdio MCP server does,
not hang forever printing an event-loop traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_time")

from tests.adapters.conftest import PY, env


@pytest.mark.parametrize("stdin", ["devnull", "file"])
def test_the_proxy_stops_at_the_end_of_a_non_pipe_stdin(tmp_path: Path, stdin: str) -> None:
    source = Path("/dev/null") if stdin == "devnull" else tmp_path / "empty.txt"
    if stdin == "file":
        source.write_text("")
    cmd = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{tmp_path / 'l.db'}"]
    with source.open("rb") as handle:
        done = subprocess.run(
            [*cmd, "--", PY, "-m", "mcp_server_time"],
            stdin=handle,
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
        )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
