"""``Run``: one agent run under a gate, and the flow of every tool call in it.

>>> import asyncio, pathlib, tempfile
>>> from ledger.gate import AllowAll, Gate
>>> from ledger.sinks import SQLiteSink
>>> sink = SQLiteSink(pathlib.Path(tempfile.mkdtemp()) / "ledger.db")
>>> gate = Gate(sink, policy=AllowAll(), safe_tools={"read_file"})
>>> read_file = lambda path: "buy milk"
>>> write_file = lambda path, text: len(text)
>>> with gate.run("tidy the notes", agent_path="planner") as run:
...     text = run.call("read_file", {"path": "notes.txt"}, read_file)      # safe
...     run.call("write_file", {"path": "out.txt", "text": text}, write_file,
...              evidence=[run.ref(run.last_call_id)])
8
>>> async def awrite_file(path: str, text: str) -> int:
...     return len(text)
>>> async def agent() -> int:
...     async with gate.run("tidy the notes") as run:
...         return await run.acall("write_file", {"path": "out.txt", "text": "x"}, awrite_file)
>>> asyncio.run(agent())
1
>>> sink.close()

The flow of each call is in :mod:`ledger.gate.call`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, TypeVar, overload

import orjson
from ulid import ULID

from ledger.drift import content_hash
from ledger.gate.call import CallSteps
from ledger.gate.events import end_event, new_call_id, request_event, request_ref
from ledger.gate.recorder import Recorder, in_thread
from ledger.gate.redact import bounded, no_redaction
from ledger.ids import new_event_id
from ledger.model.event import Event, Kind, Ref, RefSource

__all__ = ["Run", "active_runs", "content_ref", "new_call_id"]  # new_call_id: re-export

log = logging.getLogger("ledger.gate")
T = TypeVar("T")
_WITHHELD = "[request withheld: redaction failed]"

_ACTIVE: ContextVar[tuple[Run, ...]] = ContextVar("ledger_gate_active_runs", default=())


def active_runs() -> tuple[Run, ...]:
    """The runs active in this context (thread or task), innermost last."""
    return _ACTIVE.get()


def content_ref(source: RefSource | str, id: str, content: str | bytes) -> Ref:
    """A ref to an item with the hash of its content, for :meth:`Run.retrieved`:

    >>> content_ref("memory", "m1", "prefers tabs").hash[:7]
    'sha256:'
    """
    return Ref(source=source, id=id, hash=content_hash(content))


class Run(CallSteps):
    """One run: ``with gate.run(request) as run`` or ``async with`` (made by
    :meth:`Gate.run <ledger.gate.gate.Gate.run>`, which passes its :class:`Recorder`).

    ``run_id`` (given, or a fresh ULID string), ``request_id`` (the request event's id, as
    a string), ``agent_path`` and ``head_recorded`` (false while the request event could
    not be written; non-safe calls are refused until a retry succeeds). A run is used
    once; nested runs are separate runs, and the outer one is active again on exit.
    """

    def __init__(
        self,
        recorder: Recorder,
        request: str,
        *,
        agent_path: str = "",
        run_id: str | None = None,
    ) -> None:
        if not isinstance(request, str):
            raise TypeError(f"request must be a string, got {type(request).__name__}")
        self.recorder = recorder
        self.request = request
        self.agent_path = agent_path
        self.run_id = run_id if run_id else str(new_event_id())
        self._head_problem = ""
        try:
            self._head = request_event(
                run_id=self.run_id, agent_path=agent_path, text=request, redact=recorder.redact
            )
        except Exception as exc:  # never write an unredacted request: withhold it
            log.warning("ledger: the request of run %s could not be redacted: %r", run_id, exc)
            self._head_problem = "could not be redacted, so it was withheld"
            self._head = request_event(
                run_id=self.run_id, agent_path=agent_path, text=_WITHHELD, redact=no_redaction
            )
        self.request_id = str(self._head.event_id)
        self.head_recorded = False
        self._request_ref = request_ref(self._head)
        self._request_quote = orjson.dumps(bounded(self._head.preview)).decode()
        self._state = "new"
        self._lock = threading.Lock()
        self._calls: set[str] = set()
        self._results: dict[str, tuple[ULID, str]] = {}
        self.last_call_id = ""
        self._token: Token[tuple[Run, ...]] | None = None

    def __repr__(self) -> str:
        return f"Run(run_id={self.run_id!r}, state={self._state!r})"

    @property
    def active(self) -> bool:
        """True between entering and leaving the ``with`` block."""
        return self._state == "active"

    # --- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Run:
        self._start()
        self._write_head()
        self._activate()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._finish_run(exc)

    async def __aenter__(self) -> Run:
        self._start()
        try:
            await in_thread(self._write_head)
        except BaseException as exc:  # cancelled while the head was written
            self._finish_run(exc)
            raise
        self._activate()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Written inline, not in a thread: a cancelled task must not await again.
        self._finish_run(exc)

    def _start(self) -> None:
        with self._lock:
            if self._state != "new":
                raise RuntimeError(f"run {self.run_id} was already entered; start a new run")
            self._state = "active"

    def _activate(self) -> None:
        self._token = _ACTIVE.set((*_ACTIVE.get(), self))

    def _finish_run(self, exc: BaseException | None) -> None:
        self._state = "ended"
        if self._token is not None:
            try:
                _ACTIVE.reset(self._token)
            except ValueError:  # left in another context than it was entered in
                _ACTIVE.set(tuple(r for r in _ACTIVE.get() if r is not self))
            self._token = None
        try:
            end = end_event(
                run_id=self.run_id, agent_path=self.agent_path, exc=exc, redact=self.recorder.redact
            )
        except Exception:
            log.exception("ledger: could not build the end event of run %s", self.run_id)
            return
        self.recorder.write([end])

    # --- what the model saw ------------------------------------------------------------

    def retrieved(self, refs: Iterable[Ref] | Ref) -> tuple[Ref, ...]:
        """Record one ``retrieved`` event: what was put in front of the model, by ref.

        >>> from ledger.gate import Gate
        >>> from ledger.sinks import DiscardSink
        >>> with Gate(DiscardSink()).run("tidy the notes") as run:
        ...     refs = run.retrieved([content_ref("memory", "m1", "prefers tabs")])
        >>> refs[0].id
        'm1'

        Returns the refs (to pass on as ``evidence``). Nothing is recorded for none; one
        ``Ref`` on its own is taken as a list of one.
        Best-effort, like every observation: a storage failure is logged; refs that are
        not :class:`~ledger.model.Ref` values raise ``ValidationError`` (a caller bug).
        """
        event = self._retrieved_event(refs)
        if event is not None:
            self.recorder.write([event])
        return event.refs if event is not None else ()

    async def aretrieved(self, refs: Iterable[Ref] | Ref) -> tuple[Ref, ...]:
        """The async twin of :meth:`retrieved`."""
        event = self._retrieved_event(refs)
        if event is not None:
            await in_thread(self.recorder.write, [event])
        return event.refs if event is not None else ()

    def _retrieved_event(self, refs: Iterable[Ref] | Ref) -> Event | None:
        refs = (refs,) if isinstance(refs, Ref) else tuple(refs)
        if not refs:
            return None
        return Event(kind=Kind.RETRIEVED, run_id=self.run_id, agent_path=self.agent_path, refs=refs)

    def ref(self, call_id: str) -> Ref:
        """The ``tool`` ref to the recorded result of an earlier call of this run (its
        event id and content hash), to cite as ``evidence``; ``KeyError`` if none."""
        event_id, digest = self._results[call_id]
        return Ref(source=RefSource.TOOL, id=str(event_id), hash=digest)

    # --- tool calls --------------------------------------------------------------------

    def call(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., T],
        *,
        call_id: str | None = None,
        evidence: Iterable[Ref] = (),
    ) -> T:
        """Run ``fn(**args)`` under the gate; return its result or raise its exception.

        Raises :class:`~ledger.errors.ToolDenied` (and ``fn`` does not run) when the call
        may not run. An ``async def`` tool is refused here: use :meth:`acall`.
        """
        return self._call(tool, args, fn, call_id, evidence, None)

    @overload
    async def acall(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., Awaitable[T]],
        *,
        call_id: str | None = None,
        evidence: Iterable[Ref] = (),
    ) -> T: ...
    @overload
    async def acall(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., T],
        *,
        call_id: str | None = None,
        evidence: Iterable[Ref] = (),
    ) -> T: ...

    async def acall(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        call_id: str | None = None,
        evidence: Iterable[Ref] = (),
    ) -> Any:
        """The async twin of :meth:`call`; ``fn`` may be sync or ``async def``."""
        return await self._acall(tool, args, fn, call_id, evidence, None)
