"""Without its extra, an adapter says what to install, and so does the `ledger` command.

A missing package is simulated honestly in a fresh interpreter: ``sys.modules[name] =
None`` makes every import of it fail as if it were not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ledger.adapters import MissingExtra, needs_extra
from tests.adapters.conftest import env

PY = sys.executable

ADAPTERS = [
    # (statement, package made missing, extra)
    ("import ledger.adapters.langgraph", "langgraph", "langgraph"),
    ("import ledger.adapters.langgraph", "langchain_core", "langgraph"),
    ("import ledger.adapters.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("import ledger.adapters.openai_agents", "agents", "openai-agents"),
    ("import ledger.adapters.otel", "opentelemetry", "otel"),
    ("from ledger.adapters.mcp import McpGateway", "mcp", "mcp"),
]

_PROBE = """\
import sys
sys.modules[{package!r}] = None
try:
    {statement}
except ImportError as exc:
    print(type(exc).__name__, isinstance(exc, ModuleNotFoundError), exc.name)
    print(exc)
    sys.exit(3)
print("imported")
"""


def _without(package: str, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-c", f"import sys\nsys.modules[{package!r}] = None\n{code}"],
        capture_output=True, text=True, timeout=120, env=env(), stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.parametrize(("statement", "package", "extra"), ADAPTERS)
def test_an_adapter_without_its_extra_names_the_package_and_the_install(
    statement: str, package: str, extra: str
) -> None:
    code = _PROBE.format(package=package, statement=statement)
    done = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120, env=env())
    assert done.returncode == 3, done.stdout + done.stderr
    kind, message = done.stdout.splitlines()
    assert kind == f"MissingExtra True {package}"
    module = statement.split()[1]
    assert message == (
        f"{module} needs the {extra} extra ({package} is not installed): "
        f"pip install 'agentledger[{extra}]'"
    )


def test_the_mcp_definitions_need_no_sdk() -> None:
    """Pins and the definition resolver work without the MCP SDK, as documented."""
    done = _without("mcp", "from ledger.adapters.mcp import Pins, DefinitionResolver\n")
    assert done.returncode == 0, done.stderr


def test_export_otel_without_the_extra_is_one_ledger_error_line() -> None:
    done = _without(
        "opentelemetry",
        "from ledger.cli import main\nmain(['export', 'otel', '--db', 'sqlite:///:memory:'])\n",
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "ledger: error: ledger.adapters.otel needs the otel extra (opentelemetry is not "
        "installed): pip install 'agentledger[otel]'"
    ]


def test_mcp_proxy_without_the_sdk_is_one_ledger_error_line() -> None:
    done = _without(
        "mcp",
        "from ledger.cli import main\n"
        f"main(['mcp', 'proxy', '--db', 'sqlite:///:memory:', '--', {PY!r}, '-V'])\n",
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ledger: error: "), done.stderr
    assert "pip install 'agentledger[mcp]'" in lines[0]


def test_a_missing_module_outside_the_extra_is_not_disguised() -> None:
    """A bug or a broken install (some other module missing) keeps its own error."""
    with (
        pytest.raises(ModuleNotFoundError) as raised,
        needs_extra("ledger.adapters.x", "x", ("langgraph",)),
    ):
        import ledger_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert not isinstance(raised.value, MissingExtra)
    assert raised.value.name == "ledger_no_such_module"
