"""The downstream MCP server over stdio: an SDK transport with a direct lane for calls.

The gateway starts a stdio server through :class:`StdioLane`. To the SDK's ``Client``
it is a transport like ``mcp.client.stdio.stdio_client`` (the same process rules: the
SDK's default environment plus the server's own, a session of its own, stdin closed
then the process group terminated on exit), and the session runs over it as usual:
the handshake, ``tools/list``, notifications, the server's own requests. Beside it,
:meth:`StdioLane.request` sends one request straight to the server and returns the
raw ``result`` of its answer, read off the pipe with ``orjson``: no model of the
request or of the answer is built on the way, and no SDK stream sits between the
gateway and the pipe. The gateway forwards every ``tools/call`` this way; it is the
part of a call it passes on, so the SDK's own work per message (a model built and
dumped, three task hops per direction) was most of what the gateway added to a light
call. Requests of the lane carry the same ``_meta`` envelope the SDK puts on its own
requests (the protocol version, client info and capabilities of a 2026-07-28
connection; nothing on a handshake-era one) and ids of their own (``"ledger-N"``,
which the SDK's integer ids never are).

>>> import asyncio, sys
>>> from mcp import Client, StdioServerParameters
>>> server = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time"])
>>> async def main() -> None:  # doctest: +SKIP
...     lane = StdioLane(server)
...     async with Client(lane) as client:
...         await client.list_tools()
...         result = await lane.request(
...             "tools/call", {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
...         )
...         assert result["isError"] is False
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import re
import signal
import sys
from typing import Any, TextIO

import anyio
import mcp_types as types
import orjson
import pydantic_core
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

__all__ = ["StdioLane"]

log = logging.getLogger(__name__)

_ENVELOPE = (
    PROTOCOL_VERSION_META_KEY,
    CLIENT_INFO_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    LOG_LEVEL_META_KEY,
)
_STOP_WAIT = 2.0  # seconds after stdin closes, and again after SIGTERM (the SDK's own)
_CHUNK = 1 << 16
_EXIT_POLL = 0.2  # seconds between looks at whether the server has exited
_EXIT_GRACE = 1.0  # seconds the output of a server that exited has to arrive
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_UTF8 = frozenset({"utf-8", "utf8", "utf_8"})


class StdioLane:
    """The stdio connection to the MCP server ``params`` names (enter it, or give it to
    ``mcp.Client`` as its transport); :meth:`request` is the direct lane."""

    def __init__(self, params: StdioServerParameters, *, errlog: TextIO | None = None) -> None:
        self.params = params
        self._errlog = errlog
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._envelope: dict[str, Any] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._streams: tuple[Any, ...] = ()
        self._to_session: Any = None
        self._session_gone = False  # then the server's output is read and dropped
        self.closed = ""  # why the server cannot be reached, once it cannot

    @property
    def pid(self) -> int | None:
        """The server's process id once started (its process group has the same id)."""
        return self._proc.pid if self._proc is not None else None

    # --- the transport --------------------------------------------------------------

    async def __aenter__(self) -> tuple[Any, Any]:
        params = self.params
        env = get_default_environment() | (params.env or {})
        self._proc = await asyncio.create_subprocess_exec(
            params.command,
            *params.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=_fd(self._errlog if self._errlog is not None else sys.stderr),
            env=env,
            cwd=params.cwd,
            start_new_session=True,
        )
        to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](
            16
        )
        session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](16)
        self._to_session = to_session
        self._tasks = [
            asyncio.ensure_future(self._read(to_session)),
            asyncio.ensure_future(self._write(from_session)),
            asyncio.ensure_future(self._watch()),
        ]
        self._streams = (session_reads, session_writes, to_session, from_session)
        return session_reads, session_writes

    async def __aexit__(self, *exc: object) -> None:
        self._close("the downstream MCP server was stopped")
        # the session is done: what the server still writes (a server may write as its
        # stdin closes) is read and dropped, or a full pipe would keep it from exiting
        self._session_gone = True
        if self._streams:
            self._streams[0].close()  # a delivery waiting on the session gives up
        proc = self._proc
        if proc is not None:
            await _stop(proc)
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for stream in self._streams:
            stream.close()

    # --- the direct lane ------------------------------------------------------------

    async def request(
        self, method: str, params: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send ``method`` with ``params`` (``_meta`` gets the session's envelope) and
        return the ``result`` of the answer as the server wrote it.

        ``MCPError``: the server answered with an error (its code, message and data),
        did not answer within ``timeout`` seconds (``REQUEST_TIMEOUT``; the server is told
        the request is cancelled), or has exited (``CONNECTION_CLOSED``). A cancelled
        call tells the server too (``notifications/cancelled``)."""
        proc = self._proc
        if self.closed or proc is None or proc.stdin is None:
            raise MCPError(types.CONNECTION_CLOSED, self.closed or "the server is not started")
        request_id = f"ledger-{next(self._ids)}"
        if self._envelope:
            meta = params.get("_meta")
            params = {**params, "_meta": {**self._envelope, **(meta or {})}}
        line = orjson.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            proc.stdin.write(line + b"\n")
            async with asyncio.timeout(timeout):
                await proc.stdin.drain()
                reply = await answer
        except TimeoutError:
            self._cancel(request_id, "timed out")
            raise MCPError(
                types.REQUEST_TIMEOUT, f"no answer to {method} within {timeout}s"
            ) from None
        except asyncio.CancelledError:
            self._cancel(request_id, "cancelled by the client")
            raise
        except (ConnectionError, OSError) as exc:
            self._close(f"the downstream MCP server's stdin is closed ({exc})")
            raise MCPError(types.CONNECTION_CLOSED, self.closed) from None
        finally:
            self._pending.pop(request_id, None)
        return _result_of(reply)

    def _cancel(self, request_id: str, reason: str) -> None:
        """Tell the server a request of the lane is abandoned (best effort)."""
        proc = self._proc
        if self.closed or proc is None or proc.stdin is None:
            return
        params: dict[str, Any] = {"requestId": request_id, "reason": reason}
        if self._envelope:
            params["_meta"] = dict(self._envelope)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        with contextlib.suppress(Exception):
            proc.stdin.write(orjson.dumps(note) + b"\n")

    def _close(self, why: str) -> None:
        """The server can no longer be reached: every request waiting fails."""
        if not self.closed:
            self.closed = why
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(MCPError(types.CONNECTION_CLOSED, self.closed))
        self._pending.clear()

    # --- the pipes ------------------------------------------------------------------

    async def _read(self, to_session: Any) -> None:
        """Read the server's stdout a line at a time: an answer to the lane resolves its
        request; any other message goes to the SDK session, parsed as the SDK would."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        stdout = proc.stdout
        encoding, errors = self.params.encoding, self.params.encoding_error_handler
        parts: list[bytes] = []
        try:
            while True:
                chunk = await stdout.read(_CHUNK)
                if not chunk:
                    break
                if b"\n" not in chunk:
                    parts.append(chunk)
                    continue
                *lines, rest = chunk.split(b"\n")
                if parts:
                    lines[0] = b"".join((*parts, lines[0]))
                    parts = []
                if rest:
                    parts.append(rest)
                for line in lines:
                    if line.strip():
                        await self._deliver(line, to_session, encoding, errors)
        except (ConnectionError, OSError) as exc:
            log.info("mcp gateway: reading the downstream server's stdout failed: %s", exc)
        finally:
            self._close("the downstream MCP server has exited")
            to_session.close()

    async def _deliver(self, line: bytes, to_session: Any, encoding: str, errors: str) -> None:
        try:
            obj = _parse(line, encoding, errors)
        except ValueError as exc:
            if self._fail_answer(line, exc, encoding):
                return
            log.warning("mcp gateway: the downstream server wrote a malformed message: %s", exc)
            await self._pass_on(to_session, exc)
            return
        if type(obj) is dict and "method" not in obj and type(obj.get("id")) is str:
            answer = self._pending.pop(obj["id"], None)
            if answer is not None:
                if not answer.done():
                    answer.set_result(obj)
                return
        try:
            message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
        except ValueError as exc:
            log.warning("mcp gateway: the downstream server wrote a malformed message: %s", exc)
            await self._pass_on(to_session, exc)
            return
        await self._pass_on(to_session, SessionMessage(message))

    async def _pass_on(self, to_session: Any, item: SessionMessage | Exception) -> None:
        """Give the SDK session a message; once it is gone, drop it (the lane goes on)."""
        if self._session_gone:
            return
        try:
            await to_session.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._session_gone = True

    def _fail_answer(self, line: bytes, exc: ValueError, encoding: str) -> bool:
        """A line the SDK would refuse (bytes not in the encoding, a lone surrogate) that
        answers a request of the lane fails that request now, not at its timeout."""
        try:
            obj = json.loads(line.decode(encoding, "replace"))
        except ValueError:
            return False
        if type(obj) is not dict or "method" in obj or type(obj.get("id")) is not str:
            return False
        answer = self._pending.pop(obj["id"], None)
        if answer is None:
            return False
        if not answer.done():
            answer.set_exception(
                MCPError(types.PARSE_ERROR, f"the server wrote an answer that is not valid: {exc}")
            )
        return True

    async def _watch(self) -> None:
        """The server's exit, seen even when a process it started holds its stdout open
        (so no end of file comes): shortly after it, the lane and the session close."""
        proc = self._proc
        assert proc is not None
        while proc.returncode is None:
            await asyncio.sleep(_EXIT_POLL)
        await asyncio.sleep(_EXIT_GRACE)  # what it wrote before it exited is read meanwhile
        if not self.closed:
            self._close(f"the downstream MCP server has exited (status {proc.returncode})")
            if self._to_session is not None:
                self._to_session.close()  # the session sees the connection end

    async def _write(self, from_session: Any) -> None:
        """Write the SDK session's messages to the server's stdin; keep the ``_meta``
        envelope of its requests for the lane's."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        stdin = proc.stdin
        encoding, errors = self.params.encoding, self.params.encoding_error_handler
        try:
            async for item in from_session:
                message = item.message
                if isinstance(message, types.JSONRPCRequest):
                    # the latest request's: a handshake after a 2026-07-28 probe
                    # (``server/discover``) leaves none, as the SDK's own requests carry
                    meta = (message.params or {}).get("_meta")
                    self._envelope = (
                        {k: meta[k] for k in _ENVELOPE if k in meta}
                        if isinstance(meta, dict)
                        else {}
                    )
                text = message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write((text + "\n").encode(encoding, errors))
                await stdin.drain()
        except (anyio.ClosedResourceError, anyio.EndOfStream):
            pass
        except (ConnectionError, OSError) as exc:
            self._close(f"the downstream MCP server's stdin is closed ({exc})")
            if self._to_session is not None:
                self._to_session.close()  # the session sees the connection end


def _parse(line: bytes, encoding: str, errors: str) -> Any:
    """One line of JSON as the SDK reads it (``pydantic_core``'s parser: integers of any
    size exact, NaN and infinities allowed, lone surrogates and bytes the encoding does
    not allow refused, ``ValueError``), by ``orjson`` where it gives the same value: it
    turns an integer past 64 bits into a float, so a line with a run of 19 digits or more
    is left to the SDK's parser (and so is a server's other encoding)."""
    if encoding.lower() in _UTF8 and _LONG_DIGITS.search(line) is None:
        with contextlib.suppress(orjson.JSONDecodeError):
            return orjson.loads(line)
    return pydantic_core.from_json(line.decode(encoding, errors))


def _result_of(reply: dict[str, Any]) -> dict[str, Any]:
    """The ``result`` of a JSON-RPC answer; its ``error`` raised as ``MCPError``."""
    if "error" in reply:
        error = reply["error"]
        if isinstance(error, dict) and type(error.get("code")) is int:
            message = error.get("message")
            raise MCPError(
                error["code"], message if isinstance(message, str) else "", error.get("data")
            )
        raise MCPError(types.INTERNAL_ERROR, f"the server answered a malformed error: {error!r}")
    result = reply.get("result")
    if type(result) is not dict:
        raise MCPError(
            types.INTERNAL_ERROR,
            f"the server answered without a result object (got {type(result).__name__})",
        )
    return result


def _fd(errlog: TextIO) -> int | None:
    """The file descriptor the server's stderr goes to (inherited when there is none)."""
    try:
        return errlog.fileno()
    except (AttributeError, OSError, ValueError):
        return None


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Close stdin, wait; then SIGTERM the server's process group, wait; then SIGKILL."""
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        if await _exited(proc, _STOP_WAIT):
            break
    else:
        log.warning("mcp gateway: the downstream server %d is still alive; abandoning it", proc.pid)
    if proc.returncode is not None:
        await _end_group(proc.pid)
    if proc.returncode is not None:  # a survivor of the group may hold the pipes: not waited
        with contextlib.suppress(Exception):
            proc._transport.close()  # type: ignore[attr-defined]


async def _end_group(pgid: int) -> None:
    """Processes the server started that outlive it (its process group): SIGTERM, wait;
    then SIGKILL."""
    if not _group_alive(pgid):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _STOP_WAIT
    while _group_alive(pgid):
        if loop.time() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            return
        await asyncio.sleep(0.01)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs (a zombie, dead but not reaped, as an
    init that does not reap leaves it, does not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc: the group exists
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in b"ZX":
            return True
    return False


async def _exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process exits within ``timeout`` (its return code, not ``wait()``,
    which also waits for the pipes a child may have inherited)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while proc.returncode is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True
