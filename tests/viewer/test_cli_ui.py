"""``ledger ui`` as a user runs it: a real subprocess serving a real ledger."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import sqlite_url
from .ledgers import fill


def _start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ui", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_ledger_ui_serves_until_interrupted(tmp_path: Path, stop: signal.Signals) -> None:
    import urllib.request

    filled = fill(sqlite_url(tmp_path / "l.db"), tmp_path / "work", paged=3)
    proc = _start("--db", filled.url, "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert found, line + (proc.stderr.read() if proc.stderr else "")
        assert "read-only" in line
        with urllib.request.urlopen(found.group(1), timeout=30) as answer:
            page = answer.read().decode()
        assert answer.status == 200 and filled.demo_run in page
    finally:
        proc.send_signal(stop)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err


def test_ledger_ui_refuses_a_public_address_and_says_why(tmp_path: Path) -> None:
    filled = fill(sqlite_url(tmp_path / "l.db"), tmp_path / "work", paged=1)
    proc = _start("--db", filled.url, "--host", "0.0.0.0", "--port", "0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == ""
    assert err.count("\n") == 1, err
    assert "not a loopback address" in err and "no accounts" in err and "--allow-remote" in err


def test_ledger_ui_names_a_port_in_use(tmp_path: Path) -> None:
    filled = fill(sqlite_url(tmp_path / "l.db"), tmp_path / "work", paged=1)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _start("--db", filled.url, "--port", str(port))
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert f"port {port} is in use" in err and "Traceback" not in err


def test_ledger_ui_refuses_a_missing_ledger(tmp_path: Path) -> None:
    proc = _start("--db", sqlite_url(tmp_path / "none.db"), "--port", "0")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no ledger" in err
    assert not (tmp_path / "none.db").exists()


def test_ledger_ui_stops_on_sigint_when_started_with_it_ignored(tmp_path: Path) -> None:
    """A parent that ignores SIGINT (a shell's background job, say) passes that on
    across exec; Ctrl-C (or ``kill -INT``) must still stop the viewer."""
    filled = fill(sqlite_url(tmp_path / "l.db"), tmp_path / "work", paged=3)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "ui", "--db", filled.url, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert "http://127.0.0.1:" in proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped" in err
