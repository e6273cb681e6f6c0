"""``ledger mcp proxy --http`` on a port that is taken (acceptance probe): one error line
that says so and what to do, exit status 1, and no "serving" line before it."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_time")

from tests.adapters.conftest import PY, env, one_error_line


def proxy_cmd(db: Path, port: int) -> list[str]:
    head = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{db}"]
    return [*head, "--http", f"127.0.0.1:{port}", "--", PY, "-m", "mcp_server_time"]


def test_a_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error_line(proxy_cmd(tmp_path / "l.db", port))
    assert str(port) in line and "in use" in line and "--http" in line


def test_sigterm_stops_the_http_proxy_without_a_traceback(tmp_path: Path) -> None:
    import signal
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        proxy_cmd(tmp_path / "l.db", port),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "ERROR" not in err, err
