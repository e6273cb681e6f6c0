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
from ledger.errors import CallNotFound, ValidationError
from ledger.gate.call import LARGE, CallSteps
from ledger.gate.events import end_event, request_event, request_ref
from ledger.gate.names import unique_name
from ledger.gate.recorder import Recorder, in_thread
from ledger.gate.redact import no_redaction
from ledger.gate.values import bounded
from ledger.ids import new_event_id
from ledger.model.erasure import ADMIN_RUN_PREFIX
from ledger.model.event import Event
from ledger.model.values import Actor, Kind, Ref, RefSource

__all__ = ["Run", "active_runs", "content_ref"]

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
        principal: str | None = None,
        agent_id: str = "",
        agent_version: str = "",
    ) -> None:
        if not isinstance(request, str):
            raise TypeError(f"request must be a string, got {type(request).__name__}")
        if not isinstance(agent_path, str):
            raise TypeError(f"agent_path must be a string, got {type(agent_path).__name__}")
        if run_id is not None and not isinstance(run_id, str):
            raise TypeError(f"run_id must be a string or None, got {type(run_id).__name__}")
        for name, value in (("principal", principal or ""), ("agent_id", agent_id),
                            ("agent_version", agent_version)):  # fmt: skip
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        self.recorder = recorder
        self.request = request
        who = Actor(
            principal=self._identity(principal or "", "principal"),
            agent_id=self._identity(agent_id, "agent id"),
            agent_version=self._identity(agent_version, "agent version"),
        )
        self.actor: Actor | None = who or None
        head_id = new_event_id()
        self.request_id = str(head_id)
        self._head_id = head_id
        self.run_id, self.agent_path = self._recorded_ids(run_id, agent_path)
        self._head: Event | None = None
        self._head_problem = ""
        self._request_quote = ""
        self._request_ref = request_ref(self.request_id)
        self.head_recorded = False
        if len(request) <= LARGE:  # else on entering (async: on a worker thread)
            self._build_head()
        self._state = "new"
        self._lock = threading.Lock()
        self._calls: set[str] = set()
        self._results: dict[str, tuple[ULID, str]] = {}
        self._safe_reads: list[Ref] = []
        self._cited: list[Ref] = []
        self.last_call_id = ""
        self._token: Token[tuple[Run, ...]] | None = None

    def _identity(self, text: str, what: str) -> str:
        """An identity as recorded: redacted and fitted like every other name."""
        if not text:
            return ""
        return self.recorder.name(text, what, key_field=False).value

    @property
    def principal(self) -> str:
        """Who the run acts for ("" when not given)."""
        return self.actor.principal if self.actor is not None else ""

    def __repr__(self) -> str:
        return f"Run(run_id={self.run_id!r}, state={self._state!r})"

    def _recorded_ids(self, run_id: str | None, agent_path: str) -> tuple[str, str]:
        """The run id and agent path as recorded (redacted; a redacted run id gets a
        suffix, so that two runs never share one). A value the sink cannot store
        refuses the run before it starts, after recording the attempt as far as the
        sink can hold it: no tool of it may run unrecorded."""
        recorded = run_id or str(new_event_id())
        refused = []
        if isinstance(run_id, str) and run_id.startswith(ADMIN_RUN_PREFIX):  # unstorable
            raise ValidationError(
                f"gate.run: run_id {run_id!r}: the prefix {ADMIN_RUN_PREFIX!r} is reserved "
                "for the ledger's own retention records; give another run id (the run is "
                "refused before it starts: no record, no action)"
            )
        if run_id:
            name = self.recorder.name(run_id, "run id")
            recorded = unique_name(name, self.recorder.limits)
            refused.append(name.refused)
        path = self.recorder.name(agent_path, "agent path", key_field=False)
        refused.append(path.refused)
        why = "; ".join(r for r in refused if r)
        if why:
            self._record_refusal(recorded, path.value, why)
            raise ValidationError(
                f"gate.run: {why}. The run is refused before it starts (no record, no "
                f"action); the attempt is recorded under run id {recorded!r}. Give a run "
                "id and agent path the ledger can store."
            )
        return recorded, path.value

    def _record_refusal(self, run_id: str, agent_path: str, why: str) -> None:
        try:
            head = request_event(
                run_id=run_id,
                agent_path=agent_path,
                text=self.request,
                redact=self.recorder.redact,
                event_id=self._head_id,
                actor=self.actor,
            )
            end = Event(
                kind=Kind.ABORT,
                run_id=run_id,
                agent_path=agent_path,
                reason=f"run refused before it started: {why}",
                err="run refused",
                actor=self.actor,
            )
        except Exception:
            log.exception("ledger: could not record the refused run %s", run_id)
            return
        self.recorder.write([head, end])

    def _build_head(self) -> None:
        if self._head is not None:
            return
        try:
            self._head = request_event(
                run_id=self.run_id,
                agent_path=self.agent_path,
                text=self.request,
                redact=self.recorder.redact,
                event_id=self._head_id,
                actor=self.actor,
            )
        except Exception as exc:  # never write an unredacted request: withhold it
            log.warning("ledger: the request of run %s could not be redacted: %r", self.run_id, exc)
            self._head_problem = "could not be redacted, so it was withheld"
            self._head = request_event(
                run_id=self.run_id,
                agent_path=self.agent_path,
                text=_WITHHELD,
                redact=no_redaction,
                event_id=self._head_id,
                actor=self.actor,
            )
        self._request_quote = orjson.dumps(bounded(self._head.preview)).decode()

    def _open_head(self) -> None:
        self._build_head()
        self._write_head()

    @property
    def active(self) -> bool:
        """True between entering and leaving the ``with`` block."""
        return self._state == "active"

    # --- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Run:
        self._start()
        try:
            self._open_head()
        except BaseException as exc:  # interrupted while the head was written
            self._finish_run(exc)
            raise
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
            await in_thread(self._open_head)
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
                run_id=self.run_id,
                agent_path=self.agent_path,
                exc=exc,
                redact=self.recorder.redact,
                actor=self.actor,
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
        return self._record_retrieved(self._refs(refs))

    async def aretrieved(self, refs: Iterable[Ref] | Ref) -> tuple[Ref, ...]:
        """The async twin of :meth:`retrieved` (the ids are redacted off the event loop)."""
        return await in_thread(self._record_retrieved, self._refs(refs))

    @staticmethod
    def _refs(refs: Iterable[Ref] | Ref) -> tuple[Ref, ...]:
        return (refs,) if isinstance(refs, Ref) else tuple(refs)

    def _record_retrieved(self, refs: tuple[Ref, ...]) -> tuple[Ref, ...]:
        """Record the refs, their ids redacted (the content hashes are kept); returns the
        refs as recorded."""
        if not refs:
            return ()
        event = Event(
            kind=Kind.RETRIEVED, run_id=self.run_id, agent_path=self.agent_path, refs=refs
        )
        event = event.replace(refs=tuple(map(self.recorder.ref, event.refs)))
        self.recorder.write([event])
        return event.refs

    def cite(self, *evidence: Ref | str) -> None:
        """Cite ``evidence`` in the next call of this run (a decorated tool too, which
        has no ``evidence`` argument of its own): refs, or the call ids of earlier calls
        whose results to cite (:meth:`ref`).

        >>> from ledger import Gate, Ref
        >>> from ledger.sinks import DiscardSink
        >>> run = Gate(DiscardSink()).run("tidy up")
        >>> run.cite(Ref(source="memory", id="style-guide", hash="sha256:ab"))

        Given nothing to cite, an action cites the results of the run's earlier safe
        reads; anything cited replaces that default for the call.
        """
        refs = [self.ref(e) if isinstance(e, str) else e for e in evidence]
        for ref in refs:
            if not isinstance(ref, Ref):
                raise TypeError(f"cite takes Ref objects or call ids, got {type(ref).__name__}")
        with self._lock:
            self._cited.extend(refs)

    def ref(self, call_id: str) -> Ref:
        """The ``tool`` ref to the recorded result of an earlier call of this run (its
        event id and content hash), to cite as ``evidence``; ``CallNotFound`` (a
        ``LookupError``) when no call of this run with that id has a recorded result.

        >>> from ledger import Gate
        >>> from ledger.sinks import DiscardSink
        >>> Gate(DiscardSink()).run("tidy up").ref("c9")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ledger.errors.CallNotFound: no call 'c9' of this run has a recorded result to cite ...
        """
        try:
            event_id, digest = self._results[call_id]
        except (KeyError, TypeError):
            known = ", ".join(repr(c) for c in list(self._results)[-5:]) or "none"
            raise CallNotFound(
                f"no call {call_id!r} of this run has a recorded result to cite (calls with "
                f"results so far: {known}); cite a call id after that call returned"
            ) from None
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
        may not run. An ``async def`` tool is refused here: use :meth:`acall`. A tool
        wrapped by ``@gate.tool`` is gated once: this call is the gate's record of it.
        """
        fn, safe = _ungated(fn)
        return self._call(tool, args, fn, call_id, evidence, safe)

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
        fn, safe = _ungated(fn)
        return await self._acall(tool, args, fn, call_id, evidence, safe)


def _ungated(fn: Any) -> tuple[Any, bool | None]:
    """A ``@gate.tool`` wrapper's own function (so a call through ``run.call`` is gated
    once), and ``True`` when the wrapper marked it safe (else None: the gate decides)."""
    inner = getattr(fn, "__ledger_gated__", None)
    if inner is None:
        return fn, None
    return inner, True if getattr(fn, "safe", False) else None
