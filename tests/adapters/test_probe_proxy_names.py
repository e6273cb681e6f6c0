"""Tool names given to ``ledger mcp proxy`` that the downstream server does not list
(acceptance probe): a typo in ``--safe``/``--allow`` or the policy file fails closed
(the tool is denied), but the operator must be told at start, not left to wonder why
every ``git_status`` is denied."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_git")

from tests.adapters.conftest import PY, env


def test_names_the_downstream_does_not_list_are_reported_at_start(
    repo: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ndefault: deny\ntools:\n  git_comit: allow\n")
    cmd = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{tmp_path / 'l.db'}"]
    cmd += ["--safe", "git_stauts", "--safe", "git_log", "--allow", "git_ad", "--allow", "git_add"]
    cmd += ["--policy", str(policy), "--", PY, "-m", "mcp_server_git", "--repository", str(repo)]
    done = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env()
    )
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "git_stauts" in line]
    assert len(warning) == 1, done.stderr
    named, _, listed = warning[0].partition("It lists:")
    assert "'git_ad'" in named and "'git_comit'" in named
    assert "git_log" not in named and "'git_add'" not in named
    assert "git_status" in listed
