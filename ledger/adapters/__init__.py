"""Where agents run: the MCP gateway, framework adapters and OpenTelemetry export.

Each adapter is an optional extra over the same :class:`~ledger.gate.Gate`, and nothing
here is imported by ``import ledger``:

- :mod:`ledger.adapters.mcp`: ``ledger mcp proxy``, a gateway in front of any MCP server
  (``agentledger[mcp]``).
- :mod:`ledger.adapters.langgraph`: ``gate_tool_node(gate, tools)`` (``[langgraph]``).
- :mod:`ledger.adapters.pydantic_ai`: ``GatedToolset`` (``[pydantic-ai]``).
- :mod:`ledger.adapters.openai_agents`: ``gate_tools`` / ``GatedAgentHooks`` (``[openai-agents]``).
- :mod:`ledger.adapters.otel`: ``export_runs`` and ``TracingSink`` (``[otel]``).

Without its extra, importing an adapter raises :class:`MissingExtra` (an ``ImportError``)
naming the missing package and the ``pip install`` command. See ``docs/adapters.md``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager

from ledger.errors import LedgerError

__all__ = ["MissingExtra", "needs_extra"]


class MissingExtra(LedgerError, ModuleNotFoundError):
    """An adapter's optional extra is not installed; the message names the missing
    package and the ``pip install`` command that brings it (``name``: that package)."""


@contextmanager
def needs_extra(module: str, extra: str, packages: Collection[str]) -> Iterator[None]:
    """Imports made inside the block come from ``extra``: a ``ModuleNotFoundError`` for
    one of ``packages`` (top-level names) becomes :class:`MissingExtra`, naming it and
    ``pip install 'agentledger[EXTRA]'``. A missing module of any other package (a
    broken install, a bug) is raised unchanged. Every adapter imports its extra so::

        with needs_extra(__name__, "langgraph", ("langgraph", "langchain_core")):
            from langgraph.prebuilt import ToolNode
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if isinstance(exc, MissingExtra) or missing not in packages:
            raise
        raise MissingExtra(
            f"{module} needs the {extra} extra ({missing} is not installed): "
            f"pip install 'agentledger[{extra}]'",
            name=missing,
        ) from exc
