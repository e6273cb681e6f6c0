"""`import ledger` (and the `ledger` command) never import an integration's package."""

from __future__ import annotations

import subprocess
import sys

INTEGRATIONS = [
    "mcp",
    "mcp_types",
    "agents",
    "langgraph",
    "langchain_core",
    "pydantic_ai",
    "opentelemetry",
    "uvicorn",
    "starlette",
]


def test_import_ledger_and_the_cli_load_no_integration() -> None:
    code = (
        "import sys, ledger, ledger.sinks, ledger.gate, ledger.cli.main, ledger.adapters, "
        "ledger.adapters.mcp, ledger.adapters.mcp.definitions, ledger.gate.policy_file\n"
        f"loaded = [m for m in {INTEGRATIONS!r} if m in sys.modules]\n"
        "print(loaded)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
