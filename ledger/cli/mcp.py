"""``ledger mcp proxy``, ``ledger mcp accept`` and ``ledger mcp pins``: the MCP gateway.

::

    ledger mcp proxy --db sqlite:///ledger.db --safe git_status --allow git_add \\
        -- uvx mcp-server-git --repository .
    ledger mcp proxy --db URL --policy policy.yaml --http 127.0.0.1:8808 -- CMD ARGS...
    ledger mcp accept --pins pins.json git_commit     # accept a changed tool definition

``proxy`` is a thin layer over :class:`ledger.adapters.mcp.gateway.McpGateway` (needs the
``agentledger[mcp]`` extra). It serves over stdio unless ``--http`` is given; with
``--http`` it serves streamable HTTP at ``http://HOST:PORT/mcp`` (HOST defaults to
127.0.0.1, and only loopback addresses are accepted unless ``--public`` is given).
SIGTERM or SIGINT stops it; calls in flight are recorded as cancelled and their runs
end with ``abort``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from ledger.cli.common import db_option, emit_json, json_option, stdout
from ledger.errors import ValidationError
from ledger.model.shown import one_line

__all__ = ["mcp", "register"]

log = logging.getLogger(__name__)
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _need_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise click.ClickException(
            "the MCP gateway needs the MCP SDK: pip install 'agentledger[mcp]'"
        ) from None


def parse_listen(text: str, *, public: bool = False) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1) for ``--http``."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise ValidationError(f"--http {text!r}: give HOST:PORT, e.g. 127.0.0.1:8808") from None
    if not 0 < port < 65536:
        raise ValidationError(f"--http {text!r}: the port must be 1-65535")
    if host not in _LOOPBACK and not public:
        raise ValidationError(
            f"--http {text!r}: {host} is not a loopback address; the gateway serves "
            "127.0.0.1 by default (add --public to listen on another address)"
        )
    return host, port


@click.group(short_help="The MCP gateway: proxy, accept, pins.")
def mcp() -> None:
    """The MCP gateway: put the gate in front of an MCP server (agentledger[mcp])."""


@mcp.command(
    short_help="Serve an MCP server's tools with every call gated and recorded.",
    context_settings={"ignore_unknown_options": True},
)
@db_option
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A YAML policy file (see docs/adapters.md); without it, unnamed tools are denied.",
)
@click.option("--safe", "safe", multiple=True, metavar="TOOL", help="A read-only tool.")
@click.option("--allow", "allow", multiple=True, metavar="TOOL", help="A non-safe tool to allow.")
@click.option(
    "--pins",
    "pins_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Keep accepted tool definitions in this JSON file (see `ledger mcp accept`).",
)
@click.option("--http", "listen", metavar="HOST:PORT", help="Serve streamable HTTP, not stdio.")
@click.option("--public", is_flag=True, help="Allow --http on a non-loopback address.")
@click.option(
    "--timeout",
    "timeout",
    metavar="SECONDS",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the downstream server to answer one call.",
)
@click.option("--name", "name", help="The server name shown upstream (default: the downstream's).")
@click.option(
    "--otel-endpoint",
    "otel_endpoint",
    metavar="URL",
    help="Also send spans live to this OTLP/HTTP traces URL (agentledger[otel]).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def proxy(
    db: str,
    policy_path: Path | None,
    safe: tuple[str, ...],
    allow: tuple[str, ...],
    pins_path: Path | None,
    listen: str | None,
    public: bool,
    timeout: float,
    name: str | None,
    otel_endpoint: str | None,
    command: tuple[str, ...],
) -> None:
    """Start the MCP server COMMAND (after --) and serve its tools through the gate.

    \b
    ledger mcp proxy --db sqlite:///ledger.db --safe git_status -- uvx mcp-server-git
    """
    _need_sdk()
    from mcp import StdioServerParameters

    from ledger.adapters.mcp.gateway import McpGateway, proxy_policy, serve_http, serve_stdio
    from ledger.gate import Gate
    from ledger.gate.policy_file import policy_from_file
    from ledger.sinks import open_sink
    from ledger.sinks.opening import lock_timeout

    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ValidationError("give the MCP server command after --, e.g. -- uvx mcp-server-git")
    if shutil.which(command[0]) is None:
        raise ValidationError(f"the MCP server command {command[0]!r} was not found on PATH")
    address = parse_listen(listen, public=public) if listen else None
    file_policy = policy_from_file(policy_path) if policy_path is not None else None
    policy, safe_tools = proxy_policy(file_policy, allow=allow, safe=safe)
    provider: Any = None
    # a tool call waits for a ledger another process keeps locked no longer than a
    # reader does ($LEDGER_LOCK_TIMEOUT, 10 s): then it is denied, not stalled
    sink: Any = open_sink(db, lock_wait=lock_timeout())
    if otel_endpoint:
        try:
            from ledger.adapters.otel import TracingSink, otlp_tracer_provider
        except ImportError:
            sink.close()
            raise click.ClickException(
                "--otel-endpoint needs the OpenTelemetry extra: pip install 'agentledger[otel]'"
            ) from None
        provider = otlp_tracer_provider(otel_endpoint)
        sink = TracingSink(sink, provider)
    try:
        gate = Gate(sink, policy=policy, safe_tools=safe_tools)
        if not gate.durable:  # stdout is the protocol: the note goes to stderr
            click.echo(
                f"ledger: warning: {db} cannot commit durably, so every non-safe call will "
                "be denied (use sqlite:///FILE or postgresql://...)",
                err=True,
            )
        downstream = StdioServerParameters(
            command=command[0], args=list(command[1:]), env=dict(os.environ)
        )
        gateway = McpGateway(gate, downstream, name=name, pins=pins_path, call_timeout=timeout)
        if address is None:
            asyncio.run(serve_stdio(gateway))
        else:
            asyncio.run(
                serve_http(
                    gateway,
                    *address,
                    on_listening=lambda url: click.echo(f"ledger: serving MCP at {url}", err=True),
                )
            )
    finally:
        sink.close()  # a TracingSink drains its queue first
        if provider is not None:
            provider.shutdown()


@mcp.command(short_help="Accept changed tool definitions (after a rug pull was reported).")
@click.option(
    "--pins",
    "pins_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The pins file the proxy runs with.",
)
@click.argument("tools", nargs=-1)
@json_option
def accept(pins_path: Path, tools: tuple[str, ...], as_json: bool) -> None:
    """Accept the pending definitions of TOOLS (all pending ones when none are named).

    A running proxy picks the acceptance up at the next call of the tool."""
    from ledger.adapters.mcp.definitions import Pins

    if not pins_path.exists():
        raise ValidationError(f"pins file {pins_path} does not exist")
    pins = Pins.load(pins_path)
    if not pins.pending:
        named = f" (not for {', '.join(tools)})" if tools else ""
        raise ValidationError(f"pins file {pins_path}: no tool definition is pending{named}")
    done = pins.accept(tools)
    pins.save()
    if as_json:
        emit_json([{"tool": t, "hash": h} for t, h in done])
        return
    for tool, digest in done:
        click.echo(f"accepted {tool} {digest}")


@mcp.command(short_help="Show the accepted and pending tool definitions of a pins file.")
@click.option(
    "--pins",
    "pins_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@json_option
def pins(pins_path: Path, as_json: bool) -> None:
    """List the pins: each tool, accepted or pending, and its definition hash."""
    from ledger.adapters.mcp.definitions import Pins

    loaded = Pins.load(pins_path)
    rows = list(loaded.items())
    if as_json:
        emit_json([{"tool": t, "state": s, "hash": h} for t, s, h in rows])
        return
    out = stdout()
    for tool, state, digest in rows:
        style = "red" if state == "pending" else "green"
        out.print(f"{escape(one_line(tool))}  [{style}]{state}[/]  {digest}", soft_wrap=True)


def register(group: click.Group) -> None:
    """Add the ``mcp`` group to ``group``."""
    group.add_command(mcp)
