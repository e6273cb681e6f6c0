"""The MCP gateway: an MCP server in front of another one, with every tool call gated.

>>> gate = Gate(SQLiteSink("ledger.db"), policy=AllowList(["git_add"]),   # doctest: +SKIP
...             safe_tools={"git_status", "git_log"})
>>> downstream = StdioServerParameters(command="uvx", args=["mcp-server-git"])  # doctest: +SKIP
>>> async with McpGateway(gate, downstream) as gateway:                   # doctest: +SKIP
...     async with Client(gateway.server) as client:                      # the SDK's own client
...         await client.call_tool("git_status", {"repo_path": "."})

``ledger mcp proxy`` is this class behind a command line (:func:`serve_stdio`,
:func:`serve_http`). What it guarantees:

- **Every** ``tools/call`` goes through the gate. A safe tool is forwarded and recorded;
  any other tool is forwarded only after the policy allowed it and its ``action`` is
  durably committed. A denial is returned as a ``CallToolResult`` with ``isError: true``
  and the reason as text (the model can read it); the downstream server never sees the
  call. Results, structured content and output schemas pass through unchanged; a
  tool's error result (``isError: true``) reaches the client unchanged and is recorded
  as the call's error (``ToolError: <its text>``), not as a success; a
  result's structured content is checked against the tool's output schema while the
  call is recorded (not before the answer goes out: the client's SDK checks it too), and
  a mismatch is recorded as the call's error.
- **Resources and prompts** the downstream server offers pass through ungated (they
  are reads); each resource read is recorded in the run as a ``retrieved`` ref
  ``mcp-resource:<server>/<uri>`` with the RFC 8785 hash of the contents.
- **Unknown tools**: a name the downstream server did not list (or listed twice) is
  denied and recorded, whatever the policy says.
- **Tool definitions are evidence** (:mod:`ledger.adapters.mcp.definitions`): each run
  records the definitions it saw, with their RFC 8785 hashes, and each call cites the
  definition it was allowed under. The first definition seen of a tool is accepted
  (trust on first use, kept in the pins file when there is one). When the downstream
  server later lists a different definition (a "rug pull"), the change is recorded,
  upstream clients keep being shown the accepted definition, and calls of the tool are
  denied until the operator accepts the new one (:meth:`McpGateway.accept`, or
  ``ledger mcp accept --pins FILE TOOL`` while the proxy runs); ``ledger drift RUN``
  shows the calls made under the old definition as drifted. The downstream server is
  listed again at every upstream ``tools/list``, the moment a definition reaches the
  model, so a changed definition is caught before a model is shown it, and at once when
  it announces a change (``notifications/tools/list_changed``, or a 2026-07-28
  ``subscriptions/listen`` event), so calls are refused from then on. Without a pins
  file the accepted definitions live as long as the process (a restart trusts what the
  server lists then); annotations such as ``readOnlyHint`` are never taken as "safe".
- **Sessions are runs**: a client session (a stdio connection, a handshake-era HTTP
  session, an in-process legacy connection) is one run, ended when the session ends.
  The 2026-07-28 protocol has no sessions: such a request is its own exchange and so its
  own run, unless it names a session in its ``_meta`` (``"io.agentledger/session":
  "<any id>"``): requests naming the same session are one run, ended after
  ``session_idle`` seconds without a call or when the gateway stops. The run's
  ``agent_path`` is the client's name.
- **Faults**: a downstream server that exits, hangs (``call_timeout``) or answers with
  something that is not a tool result fails the call with an MCP error, recorded as the
  call's error; once it has exited, every call is denied with the reason. A ledger that
  stops accepting writes denies every non-safe call (the gate's rule) while safe calls
  are still served. Calls in flight when the gateway stops get a ``tool_result`` error
  ``cancelled`` and their run ends with ``abort`` ("GatewayStopped: ..."); when their
  client leaves (the gateway still serving), the same with "ClientLeft: ...".
- **Multi-round-trip results**: an ``InputRequiredResult`` is passed to the client and
  recorded as the call's error ``input required`` (not as its result); the client's
  retry is a new call of the run (call id ``mcp:<request id>``) with its own record.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.methods import SERVER_RESULTS, is_input_required, validate_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace as otel_trace
from pydantic import TypeAdapter

from ledger.adapters.mcp.definitions import (
    Pins,
    definition_event,
    definition_hash,
    definition_of,
    definition_ref,
)
from ledger.adapters.mcp.stdio import StdioLane
from ledger.canonical import sha256_of
from ledger.errors import LedgerError, ToolDenied
from ledger.gate import AllowList, Decision, Gate, Policy, Run, ToolCall
from ledger.model.values import Ref, RefSource, Verdict

__all__ = [
    "DENIED_PREFIX",
    "SESSION_META_KEY",
    "ClientLeft",
    "GatewayError",
    "GatewayStopped",
    "McpGateway",
    "ToolError",
    "proxy_policy",
    "serve_http",
    "serve_stdio",
]

log = logging.getLogger(__name__)

DENIED_PREFIX = "agentledger denied this call: "
POLICY_ID = "mcp-gateway"
SESSION_META_KEY = "io.agentledger/session"
LATEST_HANDSHAKE = "2025-11-25"  # the version the SDK checks results at before a handshake
# the client closed the pipe the gateway answers on: it left, nothing failed here
_PIPE_GONE = (BrokenPipeError, ConnectionResetError, anyio.BrokenResourceError)
_YIELDS = 3  # event-loop turns a forwarded answer gets before its record is built
_Downstream = StdioServerParameters | str | Server[Any] | Client
# A tools/call answer is passed on as the SDK received it: checked against the
# protocol version's own schema of a tools/call result by the SDK (`send_request`), not
# parsed into a model and dumped again on its way out (the upstream side checks it once
# more). When the client speaks another protocol version than the downstream server,
# it is parsed (the SDK writes it in the client's version). What a tools/call may answer:
_CALL_RESULT: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)
_CONTINUATION = ("inputResponses", "requestState")  # a multi-round-trip call's own params
_AS_RECEIVED: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
_Answer = dict[str, Any]  # a tool result or an input-required result, as received
_Reply = types.CallToolResult | types.InputRequiredResult | _Answer


class GatewayError(LedgerError):
    """The gateway cannot start or serve: the message says why and what to do."""


class GatewayStopped(Exception):
    """Ends the runs that had calls in flight when the gateway stopped (their ``abort``)."""


class ToolError(Exception):
    """A tool's own error result (``isError: true``): passed to the client unchanged and
    recorded as the call's error (its text), not as a successful result."""


def _error_text(result: _Answer) -> str:
    """The text blocks of an error result, joined (what the model reads)."""
    content = result.get("content")
    blocks = content if isinstance(content, list) else []
    texts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(texts).strip() or "the tool returned an error result (isError) without text"


class ClientLeft(Exception):
    """Ends a run whose client left (disconnected, or cancelled its request) while its
    calls were in flight, the gateway still serving (its ``abort``)."""


class _InputRequired(Exception):
    def __init__(self, result: _Answer) -> None:
        super().__init__("input required: the server asked the client for more input")
        self.result = result


@dataclass(slots=True)
class _Tool:
    name: str
    listed: types.Tool  # as the downstream lists it now
    definition: dict[str, Any]
    digest: str
    state: str = "accepted"  # accepted | pending | duplicate
    served: types.Tool | None = None  # what upstream clients are shown
    accepted_digest: str = ""
    ref: Ref | None = None  # the ref its calls cite (hashed once, when listed)


@dataclass(slots=True, eq=False)
class _Session:
    run: Run
    key: object
    recorded: set[str] = field(default_factory=set)  # definition hashes recorded in the run
    call_ids: set[str] = field(default_factory=set)
    pending: set[asyncio.Future[Any]] = field(default_factory=set)  # calls of the run
    inflight: int = 0
    used: float = 0.0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    interrupted: bool = False
    ended: bool = False


def proxy_policy(
    policy: Policy | None = None, *, allow: Iterable[str] = (), safe: Iterable[str] = ()
) -> tuple[Policy, frozenset[str]]:
    """The policy and safe tools of ``ledger mcp proxy``: ``--allow`` tools allowed, the
    rest decided by ``policy`` (a policy file) or, without one, denied.

    >>> p, safe = proxy_policy(allow=["git_add"], safe=["git_status"])
    >>> sorted(safe)
    ['git_status']
    """
    allowed = frozenset(allow)
    safe_tools = frozenset(safe) | frozenset(getattr(policy, "safe_tools", ()))
    if policy is None:
        return AllowList(allowed, policy_id="mcp-proxy"), safe_tools
    if not allowed:
        return policy, safe_tools
    rules = getattr(policy, "rules", None)
    overridden = sorted(t for t in allowed if isinstance(rules, dict) and _stricter(rules.get(t)))
    if overridden:
        log.warning(
            "mcp gateway: --allow %s overrides the policy file, which denies, asks for "
            "approval or checks the arguments of %s; every call of %s is allowed as it is",
            ", ".join(overridden),
            "them" if len(overridden) > 1 else "it",
            "them" if len(overridden) > 1 else "it",
        )
    return _AllowFirst(allowed, policy), safe_tools


def _stricter(rule: object) -> bool:
    """True when a policy file's rule for a tool would not simply allow every call."""
    if rule is None:
        return False
    return getattr(rule, "verdict", None) is not Verdict.ALLOWED or bool(getattr(rule, "args", ()))


class _AllowFirst:
    """``--allow`` names allowed, every other call decided by the wrapped policy."""

    def __init__(self, allowed: frozenset[str], inner: Policy) -> None:
        self.allowed, self.inner = allowed, inner

    def decide(self, call: ToolCall) -> Decision:
        if call.tool in self.allowed:
            return Decision(Verdict.ALLOWED, f"{call.tool!r} allowed by --allow", "mcp-proxy")
        return self.inner.decide(call)

    async def adecide(self, call: ToolCall) -> Decision:
        if call.tool in self.allowed:
            return self.decide(call)
        return await _ask(self.inner, call)


async def _ask(policy: Policy, call: ToolCall) -> Decision:
    adecide = getattr(policy, "adecide", None)
    answer: object = await adecide(call) if adecide is not None else policy.decide(call)
    if inspect.isawaitable(answer):
        answer = await answer
    if not isinstance(answer, Decision):
        raise TypeError(f"policy {type(policy).__name__} returned {type(answer).__name__}")
    return answer


class _GatewayPolicy:
    """The gateway's own refusals first (unknown tool, changed definition, downstream
    gone), then the user's policy."""

    def __init__(self, gateway: McpGateway, inner: Policy) -> None:
        self.gateway, self.inner = gateway, inner

    def _refusal(self, call: ToolCall) -> Decision | None:
        why = self.gateway._refusal(call.tool)
        return None if not why else Decision(Verdict.DENIED, why, POLICY_ID)

    def decide(self, call: ToolCall) -> Decision:
        return self._refusal(call) or self.inner.decide(call)

    async def adecide(self, call: ToolCall) -> Decision:
        refused = self._refusal(call)
        if refused is not None:
            return refused
        # _ask inlined: one coroutine less per call
        adecide = getattr(self.inner, "adecide", None)
        answer: object = await adecide(call) if adecide is not None else self.inner.decide(call)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, Decision):
            raise TypeError(f"policy {type(self.inner).__name__} returned {type(answer).__name__}")
        return answer


class McpGateway:
    """A gated MCP server in front of ``downstream``.

    ``McpGateway(gate, downstream, *, name=None, pins=None, call_timeout=None,
    list_timeout=30.0, session_idle=600.0)``; use it as ``async with``. ``downstream`` is a
    ``StdioServerParameters`` (a command), a streamable-HTTP URL, an in-process MCP
    ``Server``, or an entered ``mcp.Client`` the caller owns (a handshake-era server's
    change notifications then go to that client's own ``message_handler``, not to the
    gateway; tools are still listed again at every ``tools/list``). ``gate`` supplies the sink,
    policy, safe tools and redaction (the gateway puts its own refusals in front of the
    policy, in a gate of its own; ``gate`` itself is not changed). ``pins`` is a
    :class:`~ledger.adapters.mcp.definitions.Pins` or a path to a pins file.
    ``server`` is the upstream MCP server to serve (``serve_stdio``, ``serve_http``,
    or ``mcp.Client(gateway.server)`` in process).
    """

    def __init__(
        self,
        gate: Gate,
        downstream: _Downstream,
        *,
        name: str | None = None,
        pins: Pins | str | os.PathLike[str] | None = None,
        call_timeout: float | None = None,
        list_timeout: float = 30.0,
        session_idle: float = 600.0,
    ) -> None:
        if not isinstance(gate, Gate):
            raise TypeError(f"gate must be a ledger Gate, got {type(gate).__name__}")
        self.user_gate = gate
        self.gate = Gate(
            gate.sink,
            policy=_GatewayPolicy(self, gate.policy),
            safe_tools=gate.safe_tools,
            redact=gate.redact,
        )
        self._downstream_spec = downstream
        self.name = name or ""
        self.pins = pins if isinstance(pins, Pins) else Pins.load(pins)
        self.call_timeout = call_timeout
        self.list_timeout = list_timeout
        self.tools: dict[str, _Tool] = {}
        self.down_error = ""  # why the downstream server cannot be used, once it cannot
        self._down: Client | None = None
        self._lane: StdioLane | None = None  # a stdio server's direct lane for tools/call
        self._stack: AsyncExitStack | None = None
        self._sessions: dict[object, _Session] = {}
        self._named: dict[object, _Session] = {}  # sessions named in `_meta`
        self._swept = 0.0
        self.session_idle = session_idle
        self._list_lock = asyncio.Lock()
        self._fixed_key: object | None = None
        self._stopping = False
        self.signalled = False  # SIGTERM/SIGINT arrived: the runs it cuts short say so
        self._tasks: set[asyncio.Future[Any]] = set()  # calls not yet answered
        self._background: set[asyncio.Future[Any]] = set()  # records still being written
        self._server: Server[Any] | None = None
        self._watcher: asyncio.Future[None] | None = None  # the tool-change subscription

    # --- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> McpGateway:
        stack = AsyncExitStack()
        try:
            spec = self._downstream_spec
            if isinstance(spec, Client):
                self._down = spec
            else:
                if isinstance(spec, StdioServerParameters):  # calls go by the direct lane
                    self._lane = StdioLane(spec)
                client = Client(self._lane or spec, message_handler=self._on_downstream_message)
                try:  # asyncio's timeout: the client's task groups outlive this block
                    async with asyncio.timeout(self.list_timeout):
                        self._down = await stack.enter_async_context(client)
                except TimeoutError:
                    raise GatewayError(
                        f"could not start the downstream MCP server {_shown(spec)}: it did not "
                        f"answer the MCP handshake within {self.list_timeout:g}s"
                    ) from None
            info = self._down.server_info
            if not self.name:
                self.name = info.name if info is not None and info.name else "mcp"
            with anyio.fail_after(self.list_timeout):
                await self.refresh()
            self._check_pins()
            self._warn_unlisted()
            self._watch_tool_changes()
        except BaseException as exc:
            await stack.aclose()
            if isinstance(exc, Exception) and not isinstance(exc, LedgerError):
                raise GatewayError(
                    f"could not start the downstream MCP server {_shown(spec)}: {_describe(exc)}"
                ) from exc
            raise
        self._stack = stack
        return self

    def _check_pins(self) -> None:
        """A pins file that cannot be written stops the gateway before it serves: without
        it every restart would trust whatever the server lists (no rug-pull protection)."""
        if self.pins.path is None:
            return
        try:
            self.pins.save()
        except LedgerError as exc:
            raise GatewayError(
                f"{exc}; the gateway keeps the accepted tool definitions there: give a "
                "--pins path it can write (its folder must exist)"
            ) from None

    def _warn_unlisted(self) -> None:
        """Say which tools the safe set or the policy names that the downstream server
        does not list (a typo, or the wrong server): their calls are denied."""
        named = set(self.gate.safe_tools) | _named_tools(self.user_gate.policy)
        missing = sorted(named - set(self.tools))
        if missing:
            log.warning(
                "mcp gateway: the MCP server %s does not list %s, named as safe, allowed or in "
                "the policy (a typo?); calls of them are denied. It lists: %s",
                self.name,
                ", ".join(repr(m) for m in missing),
                ", ".join(sorted(self.tools)) or "no tools",
            )

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End every open run (``abort`` for those with calls in flight) and stop the
        downstream server (when the gateway started it)."""
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.wait([self._watcher], timeout=10)
        await self._cancel_inflight()
        for session in list(self._sessions.values()):
            await self._end(session)
        self._sessions.clear()
        for _ in range(3):  # runs ended in the background (per-request runs) end too
            waiting = [t for t in self._background if not t.done()]
            if not waiting:
                break
            await asyncio.wait(waiting, timeout=10)
        if self._stack is not None:
            stack, self._stack = self._stack, None
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def settle(self, timeout: float = 60.0) -> None:
        """Wait until the records of the calls answered so far are written (a call's
        answer goes out before its ``tool_result`` is recorded)."""
        waiting = [t for s in self._sessions.values() for t in s.pending if not t.done()] + [
            t for t in self._background if not t.done()
        ]
        if waiting:
            await asyncio.wait(waiting, timeout=timeout)

    async def _cancel_inflight(self, timeout: float = 10.0) -> None:
        """Cancel the calls still running (each records ``cancelled``) and let them and
        the records still being written settle."""
        tasks = [t for t in self._tasks if not t.done()]
        for task in tasks:
            task.cancel()
        waiting = [t for t in (*tasks, *self._background) if not t.done()]
        if waiting:
            await asyncio.wait(waiting, timeout=timeout)

    # --- the upstream server -----------------------------------------------------------

    @property
    def server(self) -> Server[Any]:
        """The upstream MCP server (built once)."""
        if self._server is None:
            down = self._down
            info = down.server_info if down is not None else None
            caps = down.server_capabilities if down is not None else None
            extra: dict[str, Any] = {}
            if caps is not None and caps.resources is not None:
                extra.update(
                    on_list_resources=self._on_list_resources,
                    on_list_resource_templates=self._on_list_resource_templates,
                    on_read_resource=self._on_read_resource,
                )
            if caps is not None and caps.prompts is not None:
                extra.update(
                    on_list_prompts=self._on_list_prompts, on_get_prompt=self._on_get_prompt
                )
            self._server = Server(
                self.name or "mcp",
                version=(info.version if info is not None else "") or "",
                instructions=down.instructions if down is not None else None,
                on_list_tools=self._on_list_tools,
                on_call_tool=cast(Any, self._on_call_tool),  # it may answer a dict (the SDK's
                **extra,  # HandlerResult), which the SDK's signature does not spell out
            )
            self._server.middleware = [_TracedOnly.wrap(m) for m in self._server.middleware]
        return self._server

    # --- resources and prompts: passed through; a resource read is recorded as evidence --

    def _client(self) -> Client:
        if self._down is None:
            raise GatewayError("the gateway is not started")
        if self.down_error:
            raise MCPError(types.CONNECTION_CLOSED, self.down_error)
        return self._down

    async def _on_list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await self._client().session.list_resources(params=params)

    async def _on_list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await self._client().session.list_resource_templates(params=params)

    async def _on_read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        result = await self._client().session.read_resource(
            str(params.uri),
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
        )
        if isinstance(result, types.ReadResourceResult):
            session, ephemeral = await self._session(ctx, create=True)
            if session is not None:
                body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                ref = Ref(
                    source=RefSource.TOOL,
                    id=f"mcp-resource:{self.name}/{params.uri}",
                    hash=sha256_of(body.get("contents", []), profile="rfc8785"),
                )
                await session.run.aretrieved([ref])
                if ephemeral:
                    self._later(self._end(session))
        return result

    async def _on_list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await self._client().session.list_prompts(params=params)

    async def _on_get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        return await self._client().session.get_prompt(
            params.name,
            params.arguments,
            input_responses=params.input_responses,
            request_state=params.request_state,
            allow_input_required=True,
        )

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            changes = await self.refresh()
        except Exception as exc:
            log.warning("mcp gateway: could not list the downstream tools: %s", exc)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"the downstream MCP server {self.name} did not list its tools: {_describe(exc)}",
            ) from None
        session, _ = await self._session(ctx, create=self._keyed(ctx) is not None)
        if session is not None:
            await self._record_definitions(session, [t.name for t in self.tools.values()])
        elif changes:
            await self._record_changes_alone(changes)
        served = [t.served for t in self.tools.values() if t.served is not None]
        return types.ListToolsResult(tools=served)

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> _Reply:
        name = params.name
        args = params.arguments or {}  # the gate snapshots the args it records and forwards
        tool = self.tools.get(name)
        if tool is not None and tool.state == "pending":
            self._reload_pins(name)
            tool = self.tools.get(name)
        session, ephemeral = await self._session(ctx, create=True)
        assert session is not None
        call_id = self._call_id(session, ctx)
        evidence: tuple[Ref, ...] = ()
        if tool is not None and tool.state != "duplicate" and tool.ref is not None:
            if tool.digest not in session.recorded:
                await self._record_definitions(session, [name])
            evidence = (tool.ref,)
        answer: asyncio.Future[_Reply] = asyncio.get_running_loop().create_future()
        down = self._down
        as_received = down is not None and ctx.protocol_version == down.session.protocol_version

        def reply(result: _Answer) -> _Reply:
            return result if as_received else _CALL_RESULT.validate_python(result, by_name=False)

        async def forward(**kwargs: Any) -> Any:
            result = await self._forward(name, kwargs, params)
            if not answer.done():
                answer.set_result(reply(result))  # the client gets its answer now
                # let the answer go out before the gate records it (the record is written
                # meanwhile, and the run's end waits for it)
                try:
                    for _ in range(_YIELDS):
                        await asyncio.sleep(0)
                except asyncio.CancelledError:
                    pass  # answered already: record the result, not a cancellation
            if result.get("isError") is True:  # the tool failed: its error is the record
                raise ToolError(_error_text(result))
            await self._check_output(name, result)  # off the answer's path; the client checks too
            return result  # recorded as received (the SDK hands the upstream side a copy)

        call = asyncio.ensure_future(
            session.run.acall(name, args, forward, call_id=call_id, evidence=evidence)
        )
        self._tasks.add(call)
        session.pending.add(call)
        tasks = self._tasks

        def done(finished: asyncio.Future[Any]) -> None:  # one callback, not four
            session.pending.discard(finished)
            tasks.discard(finished)
            _retrieve(finished)
            if not answer.done():
                answer.cancel()

        call.add_done_callback(done)
        session.inflight += 1
        try:
            try:
                result = await answer
            except asyncio.CancelledError:
                if not call.done() or call.cancelled():
                    raise  # this handler was cancelled (else: the call ended without a result)
        except BaseException:  # the client left or the gateway stops: the call is cancelled
            call.cancel()
            session.interrupted = True
            raise
        finally:
            session.inflight -= 1
            if ephemeral:
                self._later(self._end(session))
        if answer.done() and not answer.cancelled():
            self._tasks.discard(call)  # forwarded: only its record is still being written
            return result
        try:
            call.result()
        except ToolDenied as denied:
            text = DENIED_PREFIX + denied.reason
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], is_error=True
            )
        except _InputRequired as more:
            return reply(more.result)
        except MCPError:
            raise
        except asyncio.CancelledError:
            session.interrupted = True
            raise
        except Exception as exc:
            raise MCPError(
                types.INTERNAL_ERROR,
                f"the downstream MCP server {self.name} failed on {name!r}: {_describe(exc)}",
            ) from None
        raise GatewayError(f"call {call_id} of {name!r} ended without a result")  # unreachable

    def _later(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_retrieve)

    async def _forward(
        self, name: str, args: dict[str, Any], params: types.CallToolRequestParams
    ) -> _Answer:
        down = self._down
        if down is None:
            raise GatewayError("the gateway is not started")
        lane = self._lane
        try:
            if lane is not None:
                result = await self._forward_by_lane(lane, down, name, args, params)
            else:
                result = await self._forward_by_session(down, name, args, params)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                self.down_error = f"the downstream MCP server {self.name} has exited"
            if exc.code == types.REQUEST_TIMEOUT:
                raise MCPError(
                    types.REQUEST_TIMEOUT,
                    f"the downstream MCP server {self.name} did not answer {name!r} within "
                    f"{self.call_timeout}s",
                ) from None
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            self.down_error = f"the downstream MCP server {self.name} has exited"
            raise MCPError(types.CONNECTION_CLOSED, self.down_error) from None
        except TimeoutError:
            raise MCPError(
                types.REQUEST_TIMEOUT,
                f"the downstream MCP server {self.name} did not answer {name!r} within "
                f"{self.call_timeout}s",
            ) from None
        if is_input_required(result):
            raise _InputRequired(result)
        return result

    async def _forward_by_lane(
        self,
        lane: StdioLane,
        down: Client,
        name: str,
        args: dict[str, Any],
        params: types.CallToolRequestParams,
    ) -> _Answer:
        """``tools/call`` straight down the stdio pipe (:class:`StdioLane`); the answer
        checked against the protocol version's schema of a tools/call result, as the
        SDK's ``send_request`` checks it."""
        sent: dict[str, Any] = {"name": name, "arguments": args}
        if params.input_responses is not None or params.request_state is not None:
            more = params.model_dump(by_alias=True, mode="json", exclude_none=True)
            sent.update((k, v) for k, v in more.items() if k in _CONTINUATION)
        result = await lane.request("tools/call", sent, timeout=self.call_timeout)
        version = down.session.protocol_version or LATEST_HANDSHAKE
        if ("tools/call", version) in SERVER_RESULTS:
            validate_server_result("tools/call", version, result)
        else:
            _CALL_RESULT.validate_python(result, by_name=False)
        return result

    async def _forward_by_session(
        self,
        down: Client,
        name: str,
        args: dict[str, Any],
        params: types.CallToolRequestParams,
    ) -> _Answer:
        # built without validating again: every value was validated already (the SDK
        # checked the upstream request's params; the gate snapshotted the args as JSON)
        request = types.CallToolRequest.model_construct(
            params=types.CallToolRequestParams.model_construct(
                name=name,
                arguments=args,
                input_responses=params.input_responses,
                request_state=params.request_state,
            )
        )
        # `send_request`, not `call_tool`: the answer is passed on as soon as the SDK
        # has checked it is a tools/call result; its structured content is checked
        # against the output schema while the call is recorded (`_check_output`)
        result: _Answer = await down.session.send_request(
            request, cast(Any, _AS_RECEIVED), request_read_timeout_seconds=self.call_timeout
        )
        if ("tools/call", down.session.protocol_version or LATEST_HANDSHAKE) not in SERVER_RESULTS:
            _CALL_RESULT.validate_python(result, by_name=False)  # the SDK did not check it
        return result

    async def _check_output(self, name: str, result: _Answer) -> None:
        """Check a forwarded result's structured content against the tool's output
        schema (the SDK's own check); a mismatch is recorded as the call's error."""
        down = self._down
        if down is None:
            return
        parsed = types.CallToolResult.model_validate(result, by_name=False)
        await down.session.validate_tool_result(name, parsed)

    # --- tools and their definitions ---------------------------------------------------

    def _watch_tool_changes(self) -> None:
        """On a 2026-07-28 connection to a server that announces tool changes, subscribe
        to them (``subscriptions/listen``); a handshake-era server's
        ``notifications/tools/list_changed`` reaches :meth:`_on_downstream_message`."""
        down = self._down
        caps = down.server_capabilities if down is not None else None
        if down is None or caps is None or caps.tools is None or not caps.tools.list_changed:
            return
        if down.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return
        self._watcher = asyncio.ensure_future(self._listen(down))
        self._watcher.add_done_callback(_retrieve)

    async def _listen(self, down: Client) -> None:
        try:
            async with down.listen(tools_list_changed=True) as events:
                if not events.honored.tools_list_changed:
                    return
                async for _ in events:
                    await self._tools_changed()
        except Exception as exc:  # tools are still listed again at every tools/list
            log.info("mcp gateway: no tool change events from %s: %s", self.name, _describe(exc))

    async def _on_downstream_message(self, message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification) and not self._stopping:
            self._later(self._tools_changed())  # not inline: the session's reader waits

    async def _tools_changed(self) -> None:
        """The downstream server announced that its tools changed: list them again now,
        so a changed definition is refused from this moment, not from the next
        ``tools/list``; what changed is recorded in a run of its own."""
        try:
            with anyio.fail_after(self.list_timeout):
                changes = await self.refresh()
        except Exception as exc:
            log.warning(
                "mcp gateway: %s announced changed tools but could not list them: %s",
                self.name,
                _describe(exc),
            )
            return
        if changes:
            await self._record_changes_alone(changes)

    async def refresh(self) -> list[_Tool]:
        """List the downstream tools again; returns the tools whose definition is new or
        changed (the changed ones are now ``pending``)."""
        down = self._down
        if down is None:
            raise GatewayError("the gateway is not started")
        async with self._list_lock:
            listed: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(100):
                page = await down.list_tools(cursor=cursor, cache_mode="bypass")
                listed.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            return self._update(listed)

    def _update(self, listed: Sequence[types.Tool]) -> list[_Tool]:
        counts: dict[str, int] = {}
        for t in listed:
            counts[t.name] = counts.get(t.name, 0) + 1
        fresh: dict[str, _Tool] = {}
        changes: list[_Tool] = []
        pins_changed = False
        for t in listed:
            if t.name in fresh:
                continue
            definition = definition_of(t.model_dump(by_alias=True, mode="json", exclude_none=True))
            digest = definition_hash(definition)
            entry = _Tool(
                name=t.name,
                listed=t,
                definition=definition,
                digest=digest,
                ref=definition_ref(self.name, t.name, digest),
            )
            old = self.tools.get(t.name)
            if counts[t.name] > 1:
                log.warning(
                    "mcp gateway: %s lists tool %r %d times", self.name, t.name, counts[t.name]
                )
                entry.state, entry.served = "duplicate", t
                fresh[t.name] = entry
                continue
            accepted = self.pins.accepted.get(t.name)
            if accepted is None:
                self.pins.accepted[t.name] = entry.digest
                pins_changed = True
                accepted = entry.digest
                changes.append(entry)
            if accepted == entry.digest:
                entry.state, entry.served, entry.accepted_digest = "accepted", t, accepted
                if self.pins.pending.pop(t.name, None) is not None:
                    pins_changed = True
            else:
                entry.state, entry.accepted_digest = "pending", accepted
                same = old is not None and old.accepted_digest == accepted
                entry.served = old.served if same and old is not None else None
                if self.pins.pending.get(t.name) != entry.digest:
                    self.pins.pending[t.name] = entry.digest
                    pins_changed = True
                if old is None or old.digest != entry.digest:
                    log.warning(
                        "mcp gateway: the definition of tool %r changed (%s, accepted %s); "
                        "its calls are denied until it is accepted",
                        t.name,
                        entry.digest,
                        accepted,
                    )
                    changes.append(entry)
            fresh[t.name] = entry
        self.tools = fresh
        if pins_changed:
            try:
                self.pins.save()
            except LedgerError as exc:
                log.warning("mcp gateway: %s", exc)
        return changes

    def accept(self, tools: Iterable[str] = ()) -> list[tuple[str, str]]:
        """Accept the changed definitions of ``tools`` (all pending ones when empty)."""
        done = self.pins.accept(list(tools))
        self.pins.save()
        for name, digest in done:
            t = self.tools.get(name)
            if t is not None and t.digest == digest:
                t.state, t.served, t.accepted_digest = "accepted", t.listed, digest
        return done

    def _reload_pins(self, name: str) -> None:
        try:
            self.pins.reload()
        except LedgerError as exc:
            log.warning("mcp gateway: %s", exc)
            return
        t = self.tools.get(name)
        if t is not None and self.pins.accepted.get(name) == t.digest:
            t.state, t.served, t.accepted_digest = "accepted", t.listed, t.digest

    def _refusal(self, tool: str) -> str:
        if self.down_error:
            return self.down_error + "; restart the proxy"
        t = self.tools.get(tool)
        if t is None:
            return (
                f"unknown tool {tool!r}: the MCP server {self.name} does not list it "
                "(no record of what it does, no call)"
            )
        if t.state == "duplicate":
            return f"the MCP server {self.name} lists the tool {tool!r} more than once"
        if t.state == "pending":
            path = self.pins.path
            how = (
                f"accept it with `ledger mcp accept --pins {path} {tool}` (or "
                "McpGateway.accept) before calling it"
                if path is not None
                else "this gateway keeps no pins file (ledger mcp proxy --pins FILE), so "
                "accept it with McpGateway.accept, or restart the proxy to trust the "
                "definitions the server lists then"
            )
            return (
                f"the definition of tool {tool!r} changed since it was accepted "
                f"({t.accepted_digest} -> {t.digest}); {how}"
            )
        return ""

    # --- sessions and runs -------------------------------------------------------------

    def _keyed(self, ctx: ServerRequestContext[Any]) -> object | None:
        if self._fixed_key is not None:
            return self._fixed_key
        meta = ctx.meta if isinstance(ctx.meta, dict) else {}
        named = meta.get(SESSION_META_KEY)
        if isinstance(named, str) and named:
            return ("meta", named)
        conn = getattr(ctx.session, "_connection", None)
        if conn is None or getattr(conn, "protocol_version", "") in MODERN_PROTOCOL_VERSIONS:
            return None  # a 2026-07-28 exchange: no session, its own run
        key: object = conn
        return key

    async def _session(
        self, ctx: ServerRequestContext[Any], *, create: bool
    ) -> tuple[_Session | None, bool]:
        key = self._keyed(ctx)
        now = time.monotonic()
        if self._named and now - self._swept > 1.0:
            self._swept = now
            for idle in [s for s in self._named.values() if now - s.used > self.session_idle]:
                self._named.pop(idle.key, None)
                self._later(self._end(idle))
        if key is not None and key in self._sessions:
            session = self._sessions[key]
            session.used = now
            if not session.ready.is_set():
                await session.ready.wait()  # its run may still be writing its request
            return session, False
        if not create:
            return None, False
        agent = _client_name(ctx)
        request = f"MCP client session of {agent} via ledger mcp proxy ({self.name})"
        session = _Session(run=self.gate.run(request, agent_path=agent), key=key)
        if key is not None:  # registered before the first await: one run per session
            self._sessions[key] = session
            if isinstance(key, tuple):
                session.used = now
                self._named[key] = session
            stack = getattr(key, "exit_stack", None)
            if isinstance(stack, AsyncExitStack):
                stack.push_async_callback(self._end, session)
        try:
            await session.run.__aenter__()
        finally:
            session.ready.set()
        return session, key is None

    async def _end(self, session: _Session) -> None:
        if session.ended:
            return
        session.ended = True
        if session.pending:  # the run ends after the records of its calls
            await asyncio.wait(list(session.pending), timeout=60)
        if session.key is not None:
            self._sessions.pop(session.key, None)
            self._named.pop(session.key, None)
        if session.interrupted or (self._stopping and session.inflight):
            count = max(session.inflight, 1)
            exc: Exception = (
                GatewayStopped(f"the gateway stopped with {count} call(s) in flight")
                if self._stopping or self.signalled
                else ClientLeft(f"the MCP client left with {count} call(s) in flight")
            )
            await session.run.__aexit__(type(exc), exc, None)
        else:
            await session.run.__aexit__(None, None, None)

    def _call_id(self, session: _Session, ctx: ServerRequestContext[Any]) -> str | None:
        rid = ctx.request_id
        if rid is None:
            return None
        cid = f"mcp:{rid}"
        if cid in session.call_ids:
            return None  # a reused request id: the gate mints a fresh call id
        session.call_ids.add(cid)
        return cid

    async def _record_definitions(self, session: _Session, names: Iterable[str]) -> None:
        events = []
        for name in names:
            t = self.tools.get(name)
            if t is None or t.digest in session.recorded:
                continue
            session.recorded.add(t.digest)
            note = ""
            if t.state == "pending":
                note = f"changed: not accepted (accepted {t.accepted_digest})"
            elif t.state == "duplicate":
                note = "listed more than once"
            events.append(
                definition_event(
                    run_id=session.run.run_id,
                    agent_path=session.run.agent_path,
                    server=self.name,
                    definition=t.definition,
                    digest=t.digest,
                    note=note,
                )
            )
        if events:
            await asyncio.to_thread(self._write, events)

    async def _record_changes_alone(self, changes: list[_Tool]) -> None:
        """A change seen by a listing outside any session: recorded in a run of its own."""
        names = ", ".join(t.name for t in changes)
        async with self.gate.run(
            f"MCP gateway {self.name}: tool definitions seen ({names})", agent_path="mcp-gateway"
        ) as run:
            await self._record_definitions(_Session(run=run, key=None), [t.name for t in changes])

    def _write(self, events: list[Any]) -> None:
        sink = self.gate.sink
        for event in events:
            try:
                sink.record(event)
            except Exception as exc:
                log.warning("mcp gateway: could not record a tool definition: %s", exc)

    # --- serving -----------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve the upstream client on this process's stdin/stdout: one session, one run.

        Standard input is read on the event loop (not in a thread), so a cancellation
        (SIGTERM in ``ledger mcp proxy``) stops the gateway at once, even while the
        client sends nothing."""
        from mcp.server.stdio import stdio_server

        self._fixed_key = object()
        server = self.server
        lines = _StdinLines()
        stdin: Any = lines if await lines.open() else None
        try:
            async with stdio_server(stdin=stdin) as (read, write):
                await server.run(read, write, server.create_initialization_options())
        except BaseExceptionGroup as group:  # the SDK's task groups raise groups
            _gone, rest = group.split(_PIPE_GONE)
            if rest is not None:
                raise rest from None
            log.info("mcp gateway: the MCP client closed its end of the pipe")
        except _PIPE_GONE:
            log.info("mcp gateway: the MCP client closed its end of the pipe")
        finally:
            lines.close()
        if not self.signalled:  # the client left (not stopped by a signal): say so
            for session in list(self._sessions.values()):
                await self._end(session)

    async def serve_http(
        self,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        on_listening: Callable[[str], None] | None = None,
    ) -> None:
        """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled.

        The address is bound first: one that cannot be (a port in use) raises
        :class:`GatewayError`; ``on_listening(url)`` is called once it is bound."""
        import socket

        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(2048)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise GatewayError(
                f"--http {host}:{port}: cannot listen there ({exc.strerror or exc}); "
                "the port may be in use: choose another one"
            ) from None
        try:
            app = _RefusedOnceStopped(
                self.server.streamable_http_app(host=host),
                lambda: self.signalled or self._stopping,
            )
            config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
            url = f"http://{host if family == socket.AF_INET else f'[{host}]'}:{port}/mcp"
            if on_listening is not None:
                on_listening(url)
            # kept: uvicorn's lifespan task logs its cancellation after serve() has ended
            logging.getLogger("uvicorn.error").addFilter(_QUIET_CANCEL)
            logging.getLogger("asyncio").addFilter(_QUIET_CLOSED_ACCEPT)
            await uvicorn.Server(config).serve(sockets=[sock])
        finally:
            sock.close()


class _StdinLines:
    """The lines of standard input, read on the event loop: unlike a thread blocked in
    ``readline``, a cancelled read stops at once. Falls back (``open()`` is false) when
    standard input is not a pipe, socket or terminal (a file, /dev/null): the SDK's own
    reader then sees its end."""

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._flags: int | None = None

    async def open(self) -> bool:
        import fcntl
        import stat

        loop = asyncio.get_running_loop()
        try:
            mode = os.fstat(0).st_mode
        except OSError:
            return False
        # Only what the event loop can wait on: a character device that is not a terminal
        # (/dev/null) is accepted by connect_read_pipe but then refused by epoll, which
        # left the proxy hanging with a traceback in the log instead of seeing the end.
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(0)):
            return False
        try:
            fd = os.dup(0)
        except OSError:
            return False
        self._flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        try:
            pipe = os.fdopen(fd, "rb", buffering=0)
            self._transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except (OSError, ValueError):  # a regular file: the SDK's own reader handles it
            with contextlib.suppress(OSError):
                os.close(fd)
            self._flags = None
            return False
        self._reader = reader
        return True

    def __aiter__(self) -> _StdinLines:
        return self

    async def __anext__(self) -> str:
        assert self._reader is not None
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._flags is not None:  # the event loop made stdin non-blocking: undo it
            import fcntl

            with contextlib.suppress(OSError):
                fcntl.fcntl(0, fcntl.F_SETFL, self._flags)
            self._flags = None


class _RefusedOnceStopped:
    """The HTTP app, answering ``503`` to requests that arrive once the gateway stops.

    After SIGTERM the SDK's session manager tears down its task group while uvicorn
    still reads open connections; a request reaching it then (a client's cancellation
    notice, its session ``DELETE``) raised "Task group is not initialized" and uvicorn
    logged a traceback. Such a request now gets a plain ``503``: the gateway is going;
    one cut off by the stop after its answer began is logged at debug level."""

    def __init__(self, app: Any, stopped: Callable[[], bool]) -> None:
        self._app = app
        self._stopped = stopped

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = False

        async def sending(message: Any) -> None:
            nonlocal started
            started = started or message.get("type") == "http.response.start"
            await send(message)

        if not self._stopped():
            try:
                await self._app(scope, receive, sending)
                return
            except Exception:
                if not self._stopped():
                    raise
                # cut off by the stop: not an error of the gateway's
                log.debug("HTTP request cut off by the gateway's stop", exc_info=True)
                if started:
                    return
        body = b"the gateway is stopping"
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]
        with contextlib.suppress(OSError, RuntimeError):
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})


class _QuietCancel(logging.Filter):
    """Drops uvicorn's log of its lifespan task being cancelled: that is how the gateway
    stops serving HTTP (SIGTERM), not an error, and it printed a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError):
            return False
        # starlette hands uvicorn the formatted traceback as the message text
        text = record.getMessage().rstrip()
        return not (text.startswith("Traceback") and text.endswith("CancelledError"))


_QUIET_CANCEL = _QuietCancel()


class _QuietClosedAccept(logging.Filter):
    """Drops asyncio's log of an accept that found the listening socket closed
    (``EBADF`` in ``_accept_connection``): a client connecting just as SIGTERM stops the
    gateway, whose socket is closed with the connection still queued. Not an error of
    the gateway's, and it printed a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (
            isinstance(exc, OSError)
            and exc.errno == errno.EBADF
            and "_accept_connection" in record.getMessage()
        )


_QUIET_CLOSED_ACCEPT = _QuietClosedAccept()


class _TracedOnly:
    """The SDK's OpenTelemetry middleware (a span per request), run only while a tracer
    provider is set: without one its spans are no-ops that still cost every call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @classmethod
    def wrap(cls, middleware: Any) -> Any:
        traces = type(middleware).__name__ == "OpenTelemetryMiddleware"
        return cls(middleware) if traces else middleware

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: Any) -> Any:
        provider = otel_trace.get_tracer_provider()
        if isinstance(provider, otel_trace.ProxyTracerProvider | otel_trace.NoOpTracerProvider):
            return await call_next(ctx)
        return await self.inner(ctx, call_next)


def _named_tools(policy: object, depth: int = 0) -> set[str]:
    """The tool names a policy names itself (``--allow``, an allow-list, a policy file's
    ``tools`` and ``safe``), looking through the proxy's own wrapper."""
    names: set[str] = set()
    if depth > 4:
        return names
    for attr in ("allowed", "tools", "rules", "safe_tools"):
        value = getattr(policy, attr, None)
        if isinstance(value, dict | set | frozenset | list | tuple):
            names |= {n for n in value if isinstance(n, str)}
    inner = getattr(policy, "inner", None)
    if inner is not None:
        names |= _named_tools(inner, depth + 1)
    return names


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Consume a finished background task's outcome (its errors are recorded or logged)."""
    if not future.cancelled() and future.exception() is not None:
        log.debug("mcp gateway: a call task ended with %r", future.exception())


def _client_name(ctx: ServerRequestContext[Any]) -> str:
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", "") or ""
    return name or "mcp-client"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return exc.message
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _shown(spec: object) -> str:
    if isinstance(spec, StdioServerParameters):
        return " ".join([spec.command, *spec.args])
    if isinstance(spec, str):
        return spec
    return type(spec).__name__


async def _until_signalled(gateway: McpGateway, run: Callable[[], Awaitable[None]]) -> None:
    """Run ``run`` until it returns or SIGTERM/SIGINT arrives (then it is cancelled)."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(run())

    def stop() -> None:
        gateway.signalled = True  # before the cancellation reaches the sessions
        task.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop)
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


async def serve_stdio(gateway: McpGateway) -> None:
    """Serve ``gateway`` over stdio until the client leaves or a signal stops it (from
    its start: a signal while the downstream server starts stops that server too)."""

    async def run() -> None:
        async with gateway:
            await gateway.serve_stdio()

    await _until_signalled(gateway, run)


async def serve_http(
    gateway: McpGateway,
    host: str,
    port: int,
    *,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve ``gateway`` over streamable HTTP until a signal stops it (from its start,
    as :func:`serve_stdio`)."""

    async def run() -> None:
        async with gateway:
            await gateway.serve_http(host, port, on_listening=on_listening)

    await _until_signalled(gateway, run)
