"""Fixtures for the adapter tests: a git repository, ledger files, the MCP servers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

SERVERS = Path(__file__).parent / "servers"
# the MCP servers the tests start are programs, not test modules (nor doctests)
collect_ignore_glob = ["servers/*"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one untracked file."""
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "T")
    (r / "README.md").write_text("hello\n")
    git(r, "add", "README.md")
    git(r, "commit", "-q", "-m", "first")
    (r / "new.txt").write_text("new\n")
    return r


def repo_state(repo: Path) -> tuple[str, str, str]:
    """What a commit, add, reset or checkout would change: HEAD, branches, index+tree."""
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "branch", "--list"),
        git(repo, "status", "--porcelain"),
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    return dict(os.environ)


PY = sys.executable


def one_error_line(cmd: list[str]) -> str:
    """Run ``cmd`` (stdin empty) and return its only stderr line, which must be the
    CLI's ``ledger: error:`` line, the exit status 1."""
    done = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env()
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ledger: error:"), done.stderr
    return lines[0]
