"""The flow of one tool call through the gate: ``Run.call`` and ``Run.acall`` are sync
and async drivers over the same steps (the steps do no I/O; the drivers do it).

1. Checks: the tool name and call id are usable, the run is active, the function can be
   gated (not a generator function; not ``async`` in ``call``), ``args`` is a mapping with
   string keys (snapshotted: the policy, the record and the function see the same
   values), the call id is new in the run. A failure denies the call.
2. The policy decides (``adecide`` in ``acall`` when the policy has one). A policy that
   raises, or a ``needs_approval`` nobody answered, denies. Then the args are redacted
   for the record (after the decision, so it holds what will run); a failure denies.
3. Denied: ``gate_decision`` and ``action(denied)`` are recorded (best-effort, one batch)
   and :class:`~ledger.errors.ToolDenied` is raised; the function never runs.
4. Allowed, non-safe: the sink must be a ``DurableSink`` and the run's request (chain head)
   must be recorded (it is retried once per call if it was not); the ``action`` is
   committed with ``commit_action``; any failure denies, with a best-effort
   ``action(denied)`` saying why. Only then does the function run.
5. The function is called with the args as keyword arguments and timed; its return value
   or exception passes through unchanged. Its ``tool_result`` is recorded best-effort.

Best-effort records never raise into the agent: failures are logged on ``ledger.gate.gate``.
To keep one durable write per allowed non-safe call beyond the commit, its
``gate_decision`` is written in one batch with its ``tool_result`` after the call (so in
the store it follows the committed ``action``); a safe call's decision and result are one
batch too. Denials are written before ``ToolDenied`` is raised.

Call ids: given ones must be unique within the run; ``None`` mints ``"call_" + ULID``.

Async specifics: sink I/O runs on the gate's worker threads, so the event loop is never
blocked by an fsync; so does the redaction of args over :data:`LARGE` characters and of
every result. When the task is cancelled before the tool ran, a best-effort
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
from types import MappingProxyType
from typing import Any, TypeVar

import orjson
from ulid import ULID

from ledger.drift import content_hash
from ledger.gate.checks import not_a_value, not_json, refs_of, unusable_fn
from ledger.gate.denial import Denied, denied_error, overruled, policy_failed
from ledger.gate.events import (
    CallState,
    action_event,
    args_preview,
    decision_event,
    denial_event,
    describe_attempt,
    held,
    hold_decision,
    new_call_id,
    redacted_args,
    result_event,
)
from ledger.gate.interrupt import after_commit_interrupted, interruption, record_interrupted
from ledger.gate.names import unique_name
from ledger.gate.policy import Decision, ToolCall, adecide, decide
from ledger.gate.recorder import Recorder, in_thread, submit_waited
from ledger.gate.values import PREVIEW_LIMIT, NotJSON, bounded, json_value
from ledger.model.event import Event
from ledger.model.values import Actor, Ref, RefSource, Verdict

__all__ = ["CallSteps"]

log = logging.getLogger("ledger.gate")
T = TypeVar("T")
LARGE = 8192
"""Args (as JSON) or a policy reason longer than this many characters are redacted on a
worker thread in ``acall``, never on the event loop; results always are."""


class CallSteps:
    """The call flow, as a base of :class:`~ledger.gate.run.Run` (which owns the state)."""

    recorder: Recorder
    run_id: str
    agent_path: str
    actor: Actor | None
    head_recorded: bool
    last_call_id: str
    _head: Event | None  # built on entering when the request is large
    _head_problem: str
    _state: str
    _lock: threading.Lock
    _calls: set[str]
    _results: dict[str, tuple[ULID, str]]
    _safe_reads: list[Ref]  # refs to the results of this run's safe reads, in order
    _cited: list[Ref]  # refs run.cite() holds for the next call
    _request_ref: Ref
    _request_quote: str

    def _write_head(self) -> None:
        if self._head is not None:
            self.head_recorded = self.recorder.write([self._head], head=True)

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
        cs = self._named_state(tool, call_id, safe)
        try:
            call = self._prepare(cs, args, fn, sync=True)
            decision = self._decide(call)
            action = self._judge(cs, decision, evidence)
            if action is not None:
                self._ensure_head_for(cs)
                self._commit(cs, action)
        except Exception as exc:
            denied = self._as_denied(cs, exc)
            self.recorder.write(denied.events)
            raise denied_error(cs.asked, denied.reason, cs.call_id) from None
        except BaseException as exc:  # KeyboardInterrupt while an approver waited...
            record_interrupted(self.recorder, cs, exc)
            raise
        start = time.perf_counter_ns()
        try:
            result = fn(**cs.kwargs)
            problem = not_a_value(cs.asked, result, sync=True)
            if problem is not None:  # a coroutine or generator: closed, it never ran
                raise problem
        except BaseException as exc:
            self.recorder.write(self._outcome(cs, None, exc, start))
            raise
        self.recorder.write(self._outcome(cs, result, None, start))
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
        cs = self._named_state(tool, call_id, safe)
        try:
            call = self._prepare(cs, args, fn, sync=False)
            decision = await self._adecide(call)
            if cs.size > LARGE or len(decision.reason) > LARGE:  # redaction off the loop
                action = await in_thread(self._judge, cs, decision, evidence)
            else:
                action = self._judge(cs, decision, evidence)
            if action is not None:
                if not self.head_recorded:
                    await in_thread(self._ensure_head)
                self._ensure_head_for(cs, retry=False)
                await self._acommit(cs, action)
        except Exception as exc:
            denied = self._as_denied(cs, exc)
            await in_thread(lambda: self.recorder.write(denied.events))
            raise denied_error(cs.asked, denied.reason, cs.call_id) from None
        except BaseException as exc:  # cancelled: written inline, the task must not await
            record_interrupted(self.recorder, cs, exc)
            raise
        start = time.perf_counter_ns()
        try:
            result = fn(**cs.kwargs)
            if inspect.isawaitable(result):
                result = await result
            problem = not_a_value(cs.asked, result, sync=False)
            if problem is not None:  # an async generator: it never ran
                raise problem
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError | GeneratorExit):
                # inline: a cancelled or closed task must not await again
                self.recorder.write(self._outcome(cs, None, exc, start))
            else:
                await in_thread(self._record_outcome, cs, None, exc, start)
            raise
        # the result is redacted on a worker thread, with its write: it can be large
        await in_thread(self._record_outcome, cs, result, None, start)
        return result

    # --- steps shared by call and acall ----------------------------------------------

    def _named_state(self, tool: object, call_id: object, safe: bool | None) -> CallState:
        """``_state_for``; interrupted while the redactor looked at the names, the attempt
        is still recorded (the names withheld) before the exception goes on."""
        try:
            return self._state_for(tool, call_id, safe)
        except BaseException as exc:
            cs = CallState(
                run_id=self.run_id,
                agent_path=self.agent_path,
                tool=f"[tool name withheld: {type(exc).__name__}]",
                call_id=new_call_id(),
                safe=False,
                request_quote=self._request_quote,
                refs=(self._request_ref,),
                args_done=True,  # nothing of the call was redacted: record no args
                actor=self.actor,
            )
            record_interrupted(self.recorder, cs, exc)
            raise

    def _state_for(self, tool: object, call_id: object, safe: bool | None) -> CallState:
        """The call's state; a tool name or call id of the wrong type (callers are not
        always typed), or one the sink cannot store, is kept as ``problem``, which
        denies the call in ``_prepare`` (its record holds what the sink can store)."""
        problem = ""
        if not isinstance(tool, str):
            problem = f"the tool name must be a string, got {type(tool).__name__}"
            tool = f"<{type(tool).__name__}>"
        elif not tool.strip():
            problem = "the tool name is empty"
        if call_id is not None and not isinstance(call_id, str):
            problem = problem or f"call_id must be a string or None, got {type(call_id).__name__}"
            call_id = None
        if safe is None:
            safe = not problem and tool in self.recorder.safe_tools
        name = self.recorder.name(tool, "tool name")
        key = call_id if call_id else new_call_id()
        recorded_id = key
        if call_id:  # a given id is redacted and fitted like a name; a minted one is clean
            given = self.recorder.name(call_id, "call id")
            problem = problem or given.refused
            # a redacted id gets a suffix: two ids redacted alike stay two calls
            recorded_id = unique_name(given, self.recorder.limits)
        return CallState(
            run_id=self.run_id,
            agent_path=self.agent_path,
            tool=name.value,
            asked=tool,
            call_id=recorded_id,
            key=key,
            safe=safe,
            request_quote=self._request_quote,
            redact=self.recorder.redact,
            refs=(self._request_ref,),
            preview=bounded(name.value),
            problem=problem or name.refused,
            actor=self.actor,
        )

    def _as_denied(self, cs: CallState, exc: Exception) -> Denied:
        if isinstance(exc, Denied):
            return exc
        log.exception("ledger: the gate failed on call %s; denying", cs.call_id)
        reason = f"gate error ({type(exc).__name__})"
        return self._deny(cs, reason, *held(cs))

    def _deny(self, cs: CallState, reason: str, *pending: Event) -> Denied:
        """The refusal of the call; its events (the attempt's args redacted) are built when
        they are written (``acall``: on a worker thread)."""

        def events() -> list[Event]:
            describe_attempt(cs)
            try:
                denial = denial_event(cs, reason)
            except Exception:  # e.g. unusable evidence: keep the record, drop the refs
                cs.refs = (self._request_ref,)
                denial = denial_event(cs, reason)
            return [*(overruled(e, cs.call_id, reason) for e in pending), denial]

        return Denied(reason, events)

    def _prepare(
        self, cs: CallState, args: Mapping[str, Any], fn: Callable[..., Any], *, sync: bool
    ) -> ToolCall:
        """Check the call and snapshot its args: the policy sees, the record holds and the
        function gets the same top-level values, whatever the caller's mapping does later.
        Args that are not JSON are refused here, before any policy or approver sees them."""
        kwargs = dict(args) if isinstance(args, Mapping) else None
        cs.kwargs = kwargs or {}  # what was attempted: a denial records it
        if cs.problem:
            raise self._deny(cs, cs.problem)
        if self._state != "active":
            state = "has ended" if self._state == "ended" else "was not entered"
            raise self._deny(cs, f"run {self.run_id} {state}")
        problem = unusable_fn(fn, sync=sync)
        if problem:
            raise self._deny(cs, problem)
        if kwargs is None or not all(isinstance(k, str) for k in kwargs):
            raise self._deny(cs, "args must be a mapping of keyword arguments (string keys)")
        try:
            json_value(kwargs)
        except NotJSON as exc:
            raise self._deny(cs, not_json(exc, cs.redact)) from None
        with self._lock:
            if cs.key in self._calls:
                raise self._deny(cs, f"call id {cs.call_id!r} was already used in this run")
            self._calls.add(cs.key)
            self.last_call_id = cs.call_id
        cs.size = len(orjson.dumps(kwargs))
        view = MappingProxyType(kwargs)
        return ToolCall(tool=cs.asked, args=view, call_id=cs.key, run_id=self.run_id, safe=cs.safe)

    def _evidence_for(self, cs: CallState, given: list[Ref]) -> list[Ref]:
        """What the call cites: the refs given to it and those ``run.cite()`` held for
        it; when neither names any, an action cites the results of the run's earlier
        safe reads (what the agent had read before it acted). Each ref once."""
        with self._lock:
            held, self._cited = self._cited, []
            # copied only when cited: a long run holds many reads, and every call came here
            cite_reads = not given and not held and not cs.safe
            reads = list(self._safe_reads) if cite_reads else []
        chosen = [*given, *held]
        if cite_reads:
            chosen = reads
        seen: set[tuple[str, str, str]] = set()
        out = []
        for ref in chosen:
            key = (str(ref.source), ref.id, ref.hash)
            if key not in seen:
                seen.add(key)
                out.append(ref)
        return out

    def _record_args(self, cs: CallState, evidence: Iterable[Ref]) -> None:
        """Redact the args (after the policy decided, so the record holds what will run)
        and build the preview and refs; a failure denies without showing the values."""
        try:
            cs.args_json = redacted_args(cs.kwargs, cs.redact)
            cs.preview = args_preview(cs.tool, cs.args_json, self.recorder.redacted_text)
            cited = self._evidence_for(cs, list(refs_of(evidence)))
            cs.refs = (self._request_ref, *map(self.recorder.ref, cited))
            cs.args_done = True
        except Exception as exc:  # NotJSON: the policy changed a nested value
            cs.args_done = not isinstance(exc, NotJSON)  # else: placeholders are recorded
            cs.args_json, cs.preview = "{}", bounded(cs.tool)
            cs.refs = (self._request_ref,)
            raise self._deny(  # the message could hold what was to be redacted: not shown
                cs,
                not_json(exc, cs.redact)
                if isinstance(exc, NotJSON)
                else f"could not redact or record its arguments ({type(exc).__name__})",
            ) from None

    def _decide(self, call: ToolCall) -> Decision:
        try:
            return decide(self.recorder.policy, call)
        except Exception as exc:
            return policy_failed(exc, self.recorder.redact)

    async def _adecide(self, call: ToolCall) -> Decision:
        try:
            return await adecide(self.recorder.policy, call)
        except Exception as exc:
            return policy_failed(exc, self.recorder.redact)

    def _judge(self, cs: CallState, decision: Decision, evidence: Iterable[Ref]) -> Event | None:
        """Turn the policy's decision into the gate's: raise ``Denied``, or return the
        action to commit (``None`` for a safe call), queueing the decision event."""
        self._record_args(cs, evidence)
        verdict, reason = decision.verdict, decision.reason
        cs.approval = decision.approval
        pid = self.recorder.name(decision.policy_id, "policy id", key_field=False).value
        if reason:  # a policy may quote the args it judged: its reason is redacted too
            try:
                reason = self.recorder.redacted_text(reason)
                if not isinstance(reason, str):
                    raise TypeError("the redactor did not return text for the reason")
            except Exception as exc:
                raise self._deny(
                    cs, f"could not redact the policy's reason ({type(exc).__name__})"
                ) from None
        if verdict is Verdict.NEEDS_APPROVAL:
            verdict = Verdict.DENIED
            reason = f"{reason}; no approver answered (fail-closed)"
        if verdict is not Verdict.ALLOWED:
            recorded = decision_event(cs, verdict, reason, pid, with_args=False)
            raise Denied(reason, [recorded, denial_event(cs, reason, pid)])
        # the allowed decision is taken now (its id and time) and built when it is written
        hold_decision(cs, reason, pid, with_args=cs.safe)
        if cs.safe:
            return None
        if not self.recorder.durable:
            raise self._deny(cs, self.recorder.not_durable, *held(cs))
        return action_event(cs, reason, pid)

    def _ensure_head_for(self, cs: CallState, *, retry: bool = True) -> None:
        if retry and not self.head_recorded:
            self._ensure_head()
        problem = self._head_problem or ("" if self.head_recorded else "could not be recorded")
        if problem:
            raise self._deny(
                cs,
                f"the run's request (chain head) {problem} (no record, no action)",
                *held(cs),
            )

    def _commit(self, cs: CallState, action: Event) -> None:
        try:
            self.recorder.commit(action)
        except Exception as exc:
            raise self._commit_failed(cs, exc) from None
        except BaseException:  # interrupted inside the commit: stored or not?
            cs.in_flight = action  # record_interrupted settles it
            raise
        cs.committed = True

    async def _acommit(self, cs: CallState, action: Event) -> None:
        waiter, future = submit_waited(self.recorder.commit, action)
        try:
            await waiter
        except Exception as exc:
            raise self._commit_failed(cs, exc) from None
        except BaseException as exc:  # cancelled, closed or interrupted while it commits
            if isinstance(exc, asyncio.CancelledError):  # as asyncio.wrap_future did:
                future.cancel()  # not started yet, it never runs (recorded as denied)
            what = interruption(exc)
            future.add_done_callback(lambda f: after_commit_interrupted(self.recorder, cs, f, what))
            cs.committed = True  # the callback records the outcome
            raise
        cs.committed = True

    def _commit_failed(self, cs: CallState, exc: Exception) -> Denied:
        detail = bounded(f"{type(exc).__name__}: {exc}", 4 * PREVIEW_LIMIT)
        try:
            detail = str(cs.redact(detail))
        except Exception:
            detail = type(exc).__name__
        reason = f"record not durable: {detail}"
        return self._deny(cs, reason, *held(cs))

    def _outcome(
        self, cs: CallState, result: Any, exc: BaseException | None, start_ns: int
    ) -> list[Event]:
        # rounded up: a measured duration is at least 1 ms, so 0 always means "not measured"
        duration = -(-(time.perf_counter_ns() - start_ns) // 1_000_000)
        try:
            event = result_event(cs, result, exc, duration)
        except Exception:
            log.exception("ledger: could not build the result of call %s", cs.call_id)
            return held(cs)
        if event.result is not None:
            found = (event.event_id, content_hash(event.result))
            self._results[cs.call_id] = self._results[cs.key] = found
            if cs.safe and not event.err:
                ref = Ref(source=RefSource.TOOL, id=str(event.event_id), hash=found[1])
                with self._lock:
                    self._safe_reads.append(ref)
        return [*held(cs), event]

    def _record_outcome(
        self, cs: CallState, result: Any, exc: BaseException | None, start_ns: int
    ) -> None:
        self.recorder.write(self._outcome(cs, result, exc, start_ns))
