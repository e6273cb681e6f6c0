"""The flow of one tool call through the gate: ``Run.call`` and ``Run.acall`` are sync
and async drivers over the same steps (the steps do no I/O; the drivers do it).

1. Checks: the run is active, ``args`` is a mapping with string keys, the call id is new in
   the run, redaction works. A failure denies the call.
2. The policy decides (``adecide`` in ``acall`` when the policy has one). A policy that
   raises, or a ``needs_approval`` nobody answered, denies.
3. Denied: ``gate_decision`` and ``action(denied)`` are recorded (best-effort, one batch)
   and :class:`~ledger.errors.ToolDenied` is raised; the function never runs.
4. Allowed, non-safe: the sink must be a ``DurableSink`` and the run's request (chain head)
   must be recorded (it is retried once per call if it was not); the ``action`` is
   committed with ``commit_action``; any failure denies, with a best-effort
   ``action(denied)`` saying why. Only then does the function run.
5. The function is called with the args as keyword arguments and timed; its return value
   or exception passes through unchanged. Its ``tool_result`` is recorded best-effort.

Best-effort records never raise into the agent: failures are logged on ``ledger.gate``.
To keep one durable write per allowed non-safe call beyond the commit, its
``gate_decision`` is written in one batch with its ``tool_result`` after the call (so in
the store it follows the committed ``action``); a safe call's decision and result are one
batch too. Denials are written before ``ToolDenied`` is raised.

Call ids: given ones must be unique within the run; ``None`` mints ``"call_" + ULID``.

Async specifics: sink I/O runs on the gate's worker threads, so the event loop is never
blocked by an fsync. When the task is cancelled before the tool ran, a best-effort
``action(denied, "cancelled before the tool ran")`` is written; if the cancellation lands
while the commit is in flight, the outcome is written once the commit settles (a
``tool_result`` with the error "cancelled after the commit, before the tool ran" when the
action was stored). A tool cancelled while running gets a ``tool_result`` with ``err``
``"cancelled"``. ``CancelledError`` is always re-raised.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ulid import ULID

from ledger.drift import content_hash
from ledger.errors import ToolDenied
from ledger.gate_events import (
    CallState,
    action_event,
    decision_event,
    denial_event,
    redacted_args,
    result_event,
)
from ledger.gate_policy import Decision, ToolCall, adecide, decide
from ledger.gate_redact import PREVIEW_LIMIT, bounded
from ledger.ids import new_event_id
from ledger.model import Event, Ref, Verdict

if TYPE_CHECKING:
    from ledger.gate import Gate

__all__ = ["CallSteps", "denied_error", "in_thread", "new_call_id"]

log = logging.getLogger("ledger.gate")
T = TypeVar("T")


def new_call_id() -> str:
    """A fresh call id: ``"call_" + ULID``."""
    return f"call_{new_event_id()}"


class _Denied(Exception):
    """Internal: a call is refused; carries the events that record why. ``reason`` is
    what is recorded; the caller's :class:`ToolDenied` says ``action "<tool>" denied: ``
    before it."""

    def __init__(self, reason: str, events: list[Event]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.events = events

    def error(self, cs: CallState) -> ToolDenied:
        return denied_error(cs.tool, self.reason, cs.call_id)


def denied_error(tool: str, reason: str, call_id: str) -> ToolDenied:
    """The caller's exception: ``ToolDenied('action "<tool>" denied: <reason>')``."""
    return ToolDenied(f'action "{tool}" denied: {reason}', tool=tool, call_id=call_id)


class CallSteps:
    """The call flow, as a base of :class:`~ledger.gate_run.Run` (which owns the state)."""

    gate: Gate
    run_id: str
    agent_path: str
    head_recorded: bool
    last_call_id: str
    _head: Event
    _head_problem: str
    _state: str
    _lock: threading.Lock
    _calls: set[str]
    _results: dict[str, tuple[ULID, str]]
    _request_ref: Ref
    _request_quote: str

    def _write_head(self) -> None:
        self.head_recorded = self.gate._write([self._head], head=True)

    def _ensure_head(self) -> None:
        if not self.head_recorded:
            self._write_head()

    def _call(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., T],
        call_id: str | None,
        evidence: Iterable[Ref],
        safe: bool | None,
    ) -> T:
        cs = self._state_for(tool, call_id, safe)
        try:
            if inspect.iscoroutinefunction(fn):
                raise self._deny(cs, "the tool is async; call it with acall")
            call = self._prepare(cs, args, evidence)
            decision = self._decide(call)
            action = self._judge(cs, decision)
            if action is not None:
                self._ensure_head_for(cs)
                self._commit(cs, action)
        except Exception as exc:
            denied = self._as_denied(cs, exc)
            self.gate._write(denied.events)
            raise denied.error(cs) from None
        except BaseException as exc:  # KeyboardInterrupt while an approver waited...
            self._interrupted(cs, exc)
            raise
        start = time.perf_counter_ns()
        try:
            result = fn(**args)
            if inspect.iscoroutine(result):  # an async tool behind a sync callable
                result.close()
                raise TypeError(f'tool "{tool}" returned a coroutine; call it with acall')
        except BaseException as exc:
            self.gate._write(self._outcome(cs, None, exc, start))
            raise
        self.gate._write(self._outcome(cs, result, None, start))
        return result

    async def _acall(
        self,
        tool: str,
        args: Mapping[str, Any],
        fn: Callable[..., T | Awaitable[T]],
        call_id: str | None,
        evidence: Iterable[Ref],
        safe: bool | None,
    ) -> T:
        cs = self._state_for(tool, call_id, safe)
        try:
            call = self._prepare(cs, args, evidence)
            decision = await self._adecide(call)
            action = self._judge(cs, decision)
            if action is not None:
                if not self.head_recorded:
                    await in_thread(self._ensure_head)
                self._ensure_head_for(cs, retry=False)
                await self._acommit(cs, action)
        except Exception as exc:
            denied = self._as_denied(cs, exc)
            await in_thread(self.gate._write, denied.events)
            raise denied.error(cs) from None
        except BaseException as exc:  # cancelled: written inline, the task must not await
            self._interrupted(cs, exc)
            raise
        start = time.perf_counter_ns()
        try:
            result = fn(**args)
            if inspect.isawaitable(result):
                result = await result
        except BaseException as exc:
            events = self._outcome(cs, None, exc, start)
            if isinstance(exc, asyncio.CancelledError):
                self.gate._write(events)  # inline: a cancelled task must not await again
            else:
                await in_thread(self.gate._write, events)
            raise
        await in_thread(self.gate._write, self._outcome(cs, result, None, start))
        return result

    # --- steps shared by call and acall ----------------------------------------------

    def _state_for(self, tool: str, call_id: str | None, safe: bool | None) -> CallState:
        tool = str(tool)
        if safe is None:
            safe = tool in self.gate.safe_tools
        return CallState(
            run_id=self.run_id,
            agent_path=self.agent_path,
            tool=tool,
            call_id=call_id if call_id else new_call_id(),
            safe=safe,
            request_quote=self._request_quote,
            redact=self.gate.redact,
            refs=(self._request_ref,),
            preview=bounded(str(tool)),
        )

    def _interrupted(self, cs: CallState, exc: BaseException) -> None:
        if cs.committed:  # the commit's own callback, or the result, tells the outcome
            return
        what = "cancelled" if isinstance(exc, asyncio.CancelledError) else type(exc).__name__
        self.gate._write([*cs.pending, denial_event(cs, f"{what} before the tool ran")])

    def _as_denied(self, cs: CallState, exc: Exception) -> _Denied:
        if isinstance(exc, _Denied):
            return exc
        log.exception("ledger: the gate failed on call %s; denying", cs.call_id)
        reason = f"gate error ({type(exc).__name__})"
        return self._deny(cs, reason, *cs.pending)

    def _deny(self, cs: CallState, reason: str, *pending: Event) -> _Denied:
        try:
            denial = denial_event(cs, reason)
        except Exception:  # e.g. unusable evidence: keep the record, drop the refs
            cs.refs = (self._request_ref,)
            denial = denial_event(cs, reason)
        return _Denied(reason, [*pending, denial])

    def _prepare(self, cs: CallState, args: Mapping[str, Any], evidence: Iterable[Ref]) -> ToolCall:
        if self._state != "active":
            state = "has ended" if self._state == "ended" else "was not entered"
            raise self._deny(cs, f"run {self.run_id} {state}")
        if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
            raise self._deny(
                cs,
                "args must be a mapping of keyword arguments (string keys)",
            )
        with self._lock:
            if cs.call_id in self._calls:
                raise self._deny(
                    cs,
                    f"call id {cs.call_id!r} was already used in this run",
                )
            self._calls.add(cs.call_id)
            self.last_call_id = cs.call_id
        try:
            cs.args_json = redacted_args(args, cs.redact)
            cs.preview = bounded(cs.redact(bounded(f"{cs.tool} {cs.args_json}", 4 * PREVIEW_LIMIT)))
            if not isinstance(cs.preview, str):
                raise TypeError("the redactor did not return text for the preview")
            cs.refs = (self._request_ref, *_refs(evidence))
        except Exception as exc:
            cs.args_json, cs.preview = "{}", bounded(cs.tool)
            cs.refs = (self._request_ref,)
            raise self._deny(  # the message could hold what was to be redacted: not shown
                cs,
                f"could not redact or record its arguments ({type(exc).__name__})",
            ) from None
        return ToolCall(
            tool=cs.tool, args=args, call_id=cs.call_id, run_id=self.run_id, safe=cs.safe
        )

    def _decide(self, call: ToolCall) -> Decision:
        try:
            return decide(self.gate.policy, call)
        except Exception as exc:
            return _policy_failed(exc, self.gate.redact)

    async def _adecide(self, call: ToolCall) -> Decision:
        try:
            return await adecide(self.gate.policy, call)
        except Exception as exc:
            return _policy_failed(exc, self.gate.redact)

    def _judge(self, cs: CallState, decision: Decision) -> Event | None:
        """Turn the policy's decision into the gate's: raise ``_Denied``, or return the
        action to commit (``None`` for a safe call), queueing the decision event."""
        verdict, reason, pid = decision.verdict, decision.reason, decision.policy_id
        if verdict is Verdict.NEEDS_APPROVAL:
            verdict = Verdict.DENIED
            reason = f"{reason}; no approver answered (fail-closed)"
        allowed = verdict is Verdict.ALLOWED
        recorded = decision_event(cs, verdict, reason, pid, with_args=allowed and cs.safe)
        if not allowed:
            raise _Denied(reason, [recorded, denial_event(cs, reason, pid)])
        if cs.safe:
            cs.pending.append(recorded)
            return None
        if not self.gate.durable:
            raise self._deny(
                cs,
                "ledger not durable (no record, no action)",
                recorded,
            )
        cs.pending.append(recorded)
        return action_event(cs, reason, pid)

    def _ensure_head_for(self, cs: CallState, *, retry: bool = True) -> None:
        if retry and not self.head_recorded:
            self._ensure_head()
        problem = self._head_problem or ("" if self.head_recorded else "could not be recorded")
        if problem:
            raise self._deny(
                cs,
                f"the run's request (chain head) {problem} (no record, no action)",
                *cs.pending,
            )

    def _commit(self, cs: CallState, action: Event) -> None:
        try:
            self.gate._commit(action)
        except Exception as exc:
            raise self._commit_failed(cs, exc) from None
        cs.committed = True

    async def _acommit(self, cs: CallState, action: Event) -> None:
        future = _executor().submit(self.gate._commit, action)
        try:
            await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(lambda f: self._after_cancelled_commit(cs, f))
            cs.committed = True  # the callback records the outcome
            raise
        except Exception as exc:
            raise self._commit_failed(cs, exc) from None
        cs.committed = True

    def _after_cancelled_commit(self, cs: CallState, future: Future[None]) -> None:
        if not future.cancelled() and future.exception() is None:
            note = result_event(cs, None, _CancelledBeforeRun(), 0)
            self.gate._write([*cs.pending, note])
        else:
            self.gate._write([*cs.pending, denial_event(cs, "cancelled before the tool ran")])

    def _commit_failed(self, cs: CallState, exc: Exception) -> _Denied:
        detail = bounded(f"{type(exc).__name__}: {exc}", 4 * PREVIEW_LIMIT)
        try:
            detail = str(cs.redact(detail))
        except Exception:
            detail = type(exc).__name__
        reason = f"record not durable: {detail}"
        return self._deny(cs, reason, *cs.pending)

    def _outcome(
        self, cs: CallState, result: Any, exc: BaseException | None, start_ns: int
    ) -> list[Event]:
        duration = (time.perf_counter_ns() - start_ns) // 1_000_000
        try:
            event = result_event(cs, result, exc, duration)
        except Exception:
            log.exception("ledger: could not build the result of call %s", cs.call_id)
            return cs.pending
        if event.result is not None:
            self._results[cs.call_id] = (event.event_id, content_hash(event.result))
        return [*cs.pending, event]


class _CancelledBeforeRun(Exception):
    def __str__(self) -> str:
        return "cancelled after the commit, before the tool ran; the tool did not run"


def _refs(evidence: Iterable[Ref]) -> tuple[Ref, ...]:
    if isinstance(evidence, Ref):
        return (evidence,)
    refs = tuple(evidence)
    for ref in refs:
        if not isinstance(ref, Ref):
            raise TypeError(f"evidence must be Ref values, got {type(ref).__name__}")
    return refs


def _policy_failed(exc: Exception, redact: Callable[[Any], Any]) -> Decision:
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


def _executor() -> ThreadPoolExecutor:
    """The gate's worker threads for sink I/O from async code (created on first use)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="ledger-gate")
    return _pool


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.wrap_future(_executor().submit(fn, *args))
