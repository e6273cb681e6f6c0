"""Small helpers of the gate's call flow (see :mod:`ledger.gate.call`): call ids, the
internal denial carrier, argument and function checks, policy failures and the worker
threads that keep sink I/O off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ledger.errors import ToolDenied
from ledger.gate.policy import Decision
from ledger.gate.redact import PREVIEW_LIMIT, NotJSON, bounded
from ledger.ids import new_event_id
from ledger.model.event import Event, Ref, Verdict

__all__ = [
    "CancelledBeforeRun",
    "Denied",
    "denied_error",
    "in_thread",
    "new_call_id",
    "not_a_value",
    "not_json",
    "policy_failed",
    "refs_of",
    "unusable_fn",
]

log = logging.getLogger("ledger.gate")
T = TypeVar("T")


def new_call_id() -> str:
    """A fresh call id: ``"call_" + ULID``."""
    return f"call_{new_event_id()}"


class Denied(Exception):
    """Internal: a call is refused; carries the events that record why. ``reason`` is
    what is recorded; the caller's :class:`ToolDenied` says ``action "<tool>" denied: ``
    before it."""

    def __init__(self, reason: str, events: list[Event]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.events = events


def denied_error(tool: str, reason: str, call_id: str) -> ToolDenied:
    """The caller's exception: ``str(exc)`` is ``'action "<tool>" denied: <reason>'``;
    ``exc.reason`` is the why alone (the policy's or the gate's reason, as recorded), and
    ``exc.tool`` and ``exc.call_id`` name the call."""
    exc = ToolDenied(f'action "{tool}" denied: {reason}', tool=tool, call_id=call_id)
    exc.reason = reason  # ToolDenied(message) sets reason = message; keep the why alone
    return exc


_DEFERRED = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR | inspect.CO_COROUTINE


def unusable_fn(fn: Any, *, sync: bool) -> str:
    """Why ``fn`` cannot be gated (``""`` when it can): a tool's effect must happen
    inside the call, between the commit and the recorded result."""
    code = getattr(fn, "__code__", None)  # a plain function: one flag test decides
    if code is not None and not code.co_flags & _DEFERRED and callable(fn):
        return ""
    if not callable(fn):
        return f"the tool function is not callable ({type(fn).__name__})"
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        return (
            "the tool is a generator function: its body would run after the gate recorded "
            "its result; return a value (for example a list) instead"
        )
    if sync and inspect.iscoroutinefunction(fn):
        return "the tool is async; call it with acall"
    return ""


def not_a_value(tool: str, result: Any, *, sync: bool) -> TypeError | None:
    """The error for a result that is a deferred computation rather than a value (a
    coroutine in a sync call, a generator): it is closed unstarted, so it never runs."""
    if inspect.isgenerator(result) or (sync and inspect.iscoroutine(result)):
        result.close()
    elif not inspect.isasyncgen(result):
        return None
    how = "call it with acall" if inspect.iscoroutine(result) else "return a value instead"
    return TypeError(f'tool "{tool}" returned {type(result).__name__}, not a value; {how}')


def not_json(exc: NotJSON, redact: Callable[[Any], Any]) -> str:
    """The reason a call whose args are not JSON is denied: it names the argument and
    what was found (redacted: a nested dict key in the path could be anything)."""
    path = exc.path
    arg = path[0] if path else "?"
    inner = f" at {exc.where}" if len(path) > 1 else ""
    reason = (
        f"argument {arg!r} is not JSON ({exc.what}{inner}); args must be a JSON object (str, "
        "int, finite float, bool, None, list, dict with string keys) so that the record "
        "describes what would run"
    )
    try:
        return str(redact(reason))
    except Exception:
        return f"argument {arg!r} is not JSON ({exc.what})"


class CancelledBeforeRun(Exception):
    def __str__(self) -> str:
        return "cancelled after the commit, before the tool ran; the tool did not run"


def refs_of(evidence: Iterable[Ref]) -> tuple[Ref, ...]:
    """The caller's evidence as a tuple of refs (one ``Ref`` is accepted as is)."""
    if isinstance(evidence, Ref):
        return (evidence,)
    refs = tuple(evidence)
    for ref in refs:
        if not isinstance(ref, Ref):
            raise TypeError(f"evidence must be Ref values, got {type(ref).__name__}")
    return refs


def policy_failed(exc: Exception, redact: Callable[[Any], Any]) -> Decision:
    """The denial that stands in for a policy that raised."""
    log.warning("ledger: the gate policy raised %s; denying", type(exc).__name__)
    detail = bounded(f"{type(exc).__name__}: {exc}", PREVIEW_LIMIT)
    try:
        detail = str(redact(detail))
    except Exception:
        detail = type(exc).__name__
    return Decision(
        verdict=Verdict.DENIED, reason=f"policy error ({detail}); fail-closed", policy_id="gate"
    )


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


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on the gate's worker threads, awaited."""
    return await asyncio.wrap_future(executor().submit(fn, *args))
