"""``Recorder``: the write and commit core a gate's runs and calls share.

>>> from ledger.gate.policy import AllowAll
>>> from ledger.sinks import DiscardSink
>>> rec = Recorder(DiscardSink(), policy=AllowAll())
>>> rec.durable, rec.write([])
(False, True)

A :class:`~ledger.gate.gate.Gate` owns one ``Recorder`` and hands it to each of its
:class:`~ledger.gate.run.Run` objects; the call flow (:mod:`ledger.gate.call`) reaches the
sink, the policy, the redactor and the safe-tool names only through it. So the modules of
the gate form a line, ``recorder`` ← ``call`` ← ``run`` ← ``gate``, with no way back.

What it holds and decides:

- **Durable** means able to commit: the sink has a callable ``commit_action`` (the one
  :class:`~ledger.sinks.DurableSink` method the gate uses) and does not write into its
  caller's transaction (``PostgresSink(connection)``: a record there is durable only once
  the caller commits, after the tool would have run). :attr:`not_durable` is the reason
  a non-safe call is denied otherwise.
- :meth:`write` is the best-effort path: it never raises an ``Exception`` into the agent
  (failures are logged on the ``ledger.gate`` logger) and says whether every event was
  stored; a batch the sink refuses is retried one event at a time, so one bad event
  does not cost the others. :meth:`store` is the same for one event, telling apart
  ``"stored"``, ``"duplicate"`` and ``"failed"``.
- :meth:`commit` is the durable path: it raises whatever the sink raises.
- The gate's worker threads (:func:`executor`, :func:`in_thread`) keep sink I/O and the
  redaction of large values off the asyncio event loop. A write handed to them finishes
  even when the awaiting task is cancelled: a record is never dropped for a cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal, TypeVar, cast

from ledger.errors import DuplicateEvent, ToolDenied
from ledger.gate.names import RecordedName, recorded_name
from ledger.gate.policy import DenyNonSafe, Policy
from ledger.gate.redact import Redactor, redact_secrets
from ledger.model.event import Event
from ledger.model.values import Ref
from ledger.sinks.base import KeyLimits, Sink, key_limits

__all__ = ["Recorder", "executor", "in_thread", "submit_waited"]

log = logging.getLogger("ledger.gate")
T = TypeVar("T")
_JSON_ONLY = KeyLimits()


class Recorder:
    """The sink, policy, redactor and safe-tool names of one gate, and its writes.

    ``Recorder(sink, *, policy=DenyNonSafe(), safe_tools=(), redact=redact_secrets)``
    checks its arguments as ``Gate`` documents them (``TypeError`` naming the one that
    is wrong).
    """

    __slots__ = (
        "_commit_action",
        "_names",
        "_record_many",
        "_texts",
        "durable",
        "limits",
        "not_durable",
        "policy",
        "redact",
        "safe_tools",
        "sink",
    )

    def __init__(
        self,
        sink: Sink,
        *,
        policy: Policy | None = None,
        safe_tools: Iterable[str] = (),
        redact: Redactor = redact_secrets,
    ) -> None:
        if not hasattr(sink, "record"):
            raise TypeError(f"sink must have record(event), got {type(sink).__name__}")
        if policy is not None and not callable(getattr(policy, "decide", None)):
            raise TypeError(f"policy must have decide(call), got {type(policy).__name__}")
        if isinstance(safe_tools, str):
            raise TypeError("safe_tools: give a collection of tool names, not one string")
        if not callable(redact):
            raise TypeError(
                "redact must be a callable value -> value (to turn redaction off, pass "
                "ledger.no_redaction)"
            )
        self.sink = sink
        self.policy: Policy = policy if policy is not None else DenyNonSafe()
        self.safe_tools: frozenset[str] = frozenset(safe_tools)
        self.redact: Redactor = redact
        self.limits: KeyLimits = key_limits(sink)
        self._names: dict[tuple[str, str], RecordedName] = {}
        self._texts: dict[str, str] = {}
        commit = getattr(sink, "commit_action", None)
        joins = getattr(sink, "joins_caller_transaction", False) is True
        self._commit_action: Callable[[Event], None] | None = (
            commit if callable(commit) and not joins else None
        )
        self.durable = self._commit_action is not None
        self.not_durable = (
            f"ledger not durable: {type(sink).__name__} has no commit_action, and a non-safe "
            "tool runs only after its action is committed to a DurableSink "
            "(no record, no action)"
        )
        if joins:
            self.not_durable = (
                f"ledger not durable: {sink!r} writes into your own transaction, so a record "
                "is durable only when you commit it, after the tool would have run; give "
                "the gate PostgresSink.open(dsn) or PostgresSink(engine) (no record, no action)"
            )
        self._record_many: Callable[[list[Event]], None] | None = getattr(sink, "record_many", None)

    def __repr__(self) -> str:
        return f"Recorder({self.sink!r}, policy={self.policy!r})"

    def name(self, value: str, what: str, *, key_field: bool = True) -> RecordedName:
        """``value`` (a tool name, run id, call id or agent path) as it is recorded:
        redacted, then fitted to the sink (:func:`~ledger.gate.names.recorded_name`).
        Tool names repeat, so the answers are remembered (a bounded number of them).
        ``key_field=False`` for a value stored in the event's JSON only (agent path):
        only valid Unicode is required of it."""
        limits = self.limits if key_field else _JSON_ONLY
        if len(value) > 256:
            return recorded_name(value, what, self.redact, limits)
        key = (value, what)
        found = self._names.get(key)
        if found is None:
            found = recorded_name(value, what, self.redact, limits)
            if len(self._names) >= 4096:
                self._names.clear()
            self._names[key] = found
        return found

    def ref(self, ref: Ref) -> Ref:
        """``ref`` with its id redacted (an id can be a URL holding a password); the
        content hash is kept. A redactor that fails withholds the id."""
        try:
            clean = self.redacted_text(ref.id)
        except Exception:
            clean = "[ref id withheld: redaction failed]"
        if not isinstance(clean, str):
            clean = "[ref id withheld: the redactor did not return text]"
        return ref if clean == ref.id else Ref(source=ref.source, id=clean, hash=ref.hash)

    def redacted_text(self, text: str) -> Any:
        """``redact(text)``, what the redactor answers (it raises what the redactor
        raises). Short texts repeat (a tool's name in each preview, a policy's reason,
        the definition ref each call cites), so, as for :meth:`name`, the text answers
        are remembered (a bounded number of them)."""
        found = self._texts.get(text)
        if found is not None:
            return found
        clean = self.redact(text)
        if isinstance(clean, str) and len(text) <= 256:
            if len(self._texts) >= 4096:
                self._texts.clear()
            self._texts[text] = clean
        return clean

    def commit(self, action: Event) -> None:
        """Commit ``action`` durably; raises whatever the sink raises."""
        if self._commit_action is None:
            raise ToolDenied(self.not_durable, tool=action.tool)
        self._commit_action(action)

    def write(self, events: list[Event], *, head: bool = False) -> bool:
        """Best-effort: store ``events`` (one batch when the sink has ``record_many``).
        Never raises an ``Exception``; returns whether all were stored (a duplicate of the
        run's head, ``head=True``, counts as stored)."""
        if not events:
            return True
        try:
            if self._record_many is not None and len(events) > 1:
                self._record_many(events)
            else:
                for event in events:
                    self.sink.record(event)
            return True
        except DuplicateEvent:
            if head:
                return True
            ok = len(events) > 1 and self._write_each(events)
        except Exception as exc:
            ok = len(events) > 1 and self._write_each(events)
            if not ok:
                log.warning(
                    "ledger: could not record %s for run %s: %s",
                    "/".join(str(e.kind) for e in events),
                    events[0].run_id,
                    exc,
                )
        return ok

    def store(self, event: Event) -> Literal["stored", "duplicate", "failed"]:
        """Best-effort: ``record`` one event and say what happened. A ``"duplicate"``
        means the sink already holds an event with this id (and kept it)."""
        try:
            self.sink.record(event)
        except DuplicateEvent:
            return "duplicate"
        except Exception as exc:
            log.warning(
                "ledger: could not record %s %s of run %s: %s",
                event.kind,
                event.call_id,
                event.run_id,
                exc,
            )
            return "failed"
        return "stored"

    def _write_each(self, events: list[Event]) -> bool:
        return all([self.store(event) != "failed" for event in events])


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def executor() -> ThreadPoolExecutor:
    """The gate's worker threads for sink I/O from async code (created on first use)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="ledger-gate")
    return _pool


async def in_thread(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` on the gate's worker threads, awaited. Cancelling the awaiting task
    does not cancel ``fn``: once handed over, it runs to its end (a write is not lost)."""
    waiter, _ = submit_waited(fn, *args)
    return await waiter


def submit_waited(fn: Callable[..., T], *args: object) -> tuple[asyncio.Future[T], Future[T]]:
    """``fn(*args)`` handed to the gate's worker threads: an asyncio future the running
    loop can await (cancelling it leaves ``fn`` alone) and the worker's own future. The
    worker wakes the loop once, when ``fn`` has returned or raised: leaner than
    ``asyncio.wrap_future``, which chains the two futures through the loop (and on a
    cancellation would try to cancel ``fn``)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = loop.create_future()

    def run() -> T:
        try:
            value = fn(*args)
        except BaseException as exc:
            _wake(loop, waiter, None, exc)
            raise
        _wake(loop, waiter, value, None)
        return value

    return waiter, executor().submit(run)


def _wake(
    loop: asyncio.AbstractEventLoop,
    waiter: asyncio.Future[T],
    value: T | None,
    exc: BaseException | None,
) -> None:
    def settle() -> None:
        if waiter.done():  # the awaiting task was cancelled meanwhile
            return
        if exc is None:
            waiter.set_result(cast(T, value))
        else:
            waiter.set_exception(exc)

    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(settle)
