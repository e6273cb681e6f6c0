"""The events a gate writes, built without I/O (the sans-I/O half of the gate).

>>> ev = request_event(run_id="r1", agent_path="a", text="tidy the notes", redact=no_redaction)
>>> ev.kind, ev.args, ev.preview
(<Kind.REQUEST: 'request'>, '"tidy the notes"', 'tidy the notes')

Shapes (every event gets a fresh ULID ``event_id`` and the current time):

- ``request``: ``args`` = the request text as a JSON string, ``preview`` = the same text
  bounded to :data:`PREVIEW_LIMIT`, both after redaction; ``agent_path``.
- ``retrieved``: ``refs`` as given (content hashes are the caller's, of unredacted content).
- ``gate_decision``: ``call_id``, ``tool``, ``verdict`` and ``reason`` of the decision,
  ``label`` = the deciding ``policy_id``, prefixed ``safe:`` for a tool marked safe (so a
  report can tell a safe read from a non-safe call whatever the policy; under an
  :class:`~ledger.gate_policy.Approver` that is the approver's name, the policy the user
  configured, not the wrapped policy's id); ``args``
  (redacted JSON object) and ``preview`` only for an allowed safe call, since every other
  call's ``action`` carries them (args are stored once, which also halves the sink's
  hashing work per call).
- ``action``: as the decision, ``verdict`` ``allowed`` (committed durably) or ``denied``
  (best-effort), ``reason`` = the why (policy reason, policy id, the request), ``refs`` =
  the request ref then the caller's evidence. ``args`` = the redacted JSON object of the
  call's arguments, also for a denied attempt whenever they can be serialized (a value
  that is not JSON shows there as ``"[not JSON: <type>]"``; such a call is denied);
  ``preview`` = ``"<tool> <args>"``, bounded.
- ``tool_result``: ``result`` (redacted JSON) or ``err``, ``duration_ms``, ``preview``.
  A result need not be JSON: it is recorded as :func:`~ledger.gate_redact.to_jsonable`
  makes it (an unknown object as its ``str``, a tuple or set as a list; NaN as ``null``),
  since the tool has already run and the record then reports, not authorizes.
- ``run_end`` (``reason`` ``"completed"``) or ``abort`` (``reason`` ``"cancelled"`` or
  ``"<ExceptionType>: <message>"``, also in ``err``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from ulid import ULID

from ledger.errors import ValidationError
from ledger.gate.redact import Redactor, no_redaction
from ledger.gate.values import PREVIEW_LIMIT, bounded, json_value, marked_jsonable, to_jsonable
from ledger.ids import new_event_id
from ledger.model.event import Event
from ledger.model.values import Actor, Approval, Kind, Ref, RefSource, Verdict, raw_json, text_value
from ledger.timefmt import utc_now

log = logging.getLogger("ledger.gate")

__all__ = [
    "CallState",
    "CancelledBeforeRun",
    "action_event",
    "args_preview",
    "decision_event",
    "denial_event",
    "describe_attempt",
    "dump_json",
    "end_event",
    "held",
    "hold_decision",
    "new_call_id",
    "redacted_args",
    "request_event",
    "result_event",
]


def new_call_id() -> str:
    """A fresh call id: ``"call_" + ULID``."""
    return f"call_{new_event_id()}"


class CancelledBeforeRun(Exception):
    """The error a ``tool_result`` records for a call whose action was committed and
    whose task was cancelled or interrupted (``what``) before the tool ran."""

    def __init__(self, what: str = "cancelled") -> None:
        super().__init__(what)
        self.what = what

    def __str__(self) -> str:
        return f"{self.what} after the commit, before the tool ran; the tool did not run"


def dump_json(value: Any) -> str:
    """Compact JSON text of JSON-shaped ``value``; ``ValidationError`` if it is not."""
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError as exc:
        raise ValidationError(f"value cannot be written as JSON ({exc})") from None


def _redacted_text(text: str, redact: Redactor) -> str:
    out = redact(text)
    if not isinstance(out, str):
        raise ValidationError(f"the redactor turned text into {type(out).__name__}")
    return out


def redacted_args(args: Mapping[str, Any], redact: Redactor, *, marked: bool = False) -> str:
    """The JSON object text of ``args`` after ``redact``. The args must be JSON
    (:class:`~ledger.gate_redact.NotJSON` otherwise), or, ``marked``, what is not JSON is
    shown as a placeholder (for the record of a denied attempt)."""
    clean = redact(marked_jsonable(dict(args)) if marked else json_value(dict(args)))
    if not isinstance(clean, dict):
        raise ValidationError(f"the redactor turned args into {type(clean).__name__}")
    return dump_json(clean)


def args_preview(tool: str, args_json: str, redact: Redactor) -> str:
    """The ``preview`` of a call: ``"<tool> <args JSON>"``, bounded. ``args_json`` is
    already redacted, so only the tool name goes through the redactor: redacting the JSON
    text again would let a ``key=value`` pattern run over an escape (``\\n``) and eat
    the word after a masked value."""
    return bounded(f"{_redacted_text(tool, redact)} {args_json}")


@dataclass(slots=True, kw_only=True)
class CallState:
    """Everything the gate knows about one call while it runs (mutable, one call)."""

    run_id: str
    agent_path: str
    tool: str  # as recorded: redacted, fitted to the sink
    call_id: str  # as recorded
    safe: bool
    asked: str = ""  # the tool name as the caller gave it (the policy sees this one)
    key: str = ""  # the call id as given (or minted): unique within the run
    args_json: str = "{}"
    preview: str = ""
    refs: tuple[Ref, ...] = ()
    request_quote: str = ""
    redact: Redactor = no_redaction
    pending: list[Event] = field(default_factory=list)  # read through held(cs)
    decision: _HeldDecision | None = None  # the allowed decision, built when it is written
    committed: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)
    args_done: bool = False  # args_json and preview describe the call (or cannot)
    problem: str = ""
    in_flight: Event | None = None  # the action whose commit was interrupted
    size: int = 0  # the length of the args as JSON
    actor: Actor | None = None  # who the run acts for, on every event of the call
    approval: Approval | None = None  # who approved it (an approver's answer)


def describe_attempt(cs: CallState) -> None:
    """Best-effort, for a denial: record the attempted args (redacted, anything not JSON
    as a placeholder) and their preview in ``cs``, unless that was done or failed."""
    if cs.args_done:
        return
    cs.args_done = True
    try:
        args_json = redacted_args(cs.kwargs, cs.redact, marked=True)
        cs.args_json, cs.preview = args_json, args_preview(cs.tool, args_json, cs.redact)
    except Exception:  # the denial is still recorded, with "{}"
        log.warning("ledger: could not record the args of denied call %s", cs.call_id)


def request_event(
    *,
    run_id: str,
    agent_path: str,
    text: str,
    redact: Redactor,
    event_id: ULID | None = None,
    actor: Actor | None = None,
) -> Event:
    """The chain head: the request text, redacted, as JSON string and bounded preview
    (``event_id`` given when the run announced its request id before building it)."""
    clean = _redacted_text(text, redact)
    return Event(
        kind=Kind.REQUEST,
        event_id=event_id if event_id is not None else new_event_id(),
        run_id=run_id,
        agent_path=agent_path,
        args=dump_json(clean),
        preview=bounded(clean),
        actor=actor,
    )


def request_ref(request_id: str) -> Ref:
    """The ref every action carries to its run's request (hash empty, as the reference:
    the request event has no result text for :class:`~ledger.drift.EventResolver`)."""
    return Ref(source=RefSource.TOOL, id=request_id, hash="")


def decision_event(
    cs: CallState, verdict: Verdict, reason: str, policy_id: str, *, with_args: bool
) -> Event:
    """The ``gate_decision`` of one call (with its call id, unlike the reference).

    It carries ``args`` and ``preview`` only when no ``action`` of the same call will
    (``with_args``: an allowed safe call); otherwise the action holds them once. (The
    held decision of a safe call, :func:`held`, carries its refs the same way.)
    """
    return Event(
        kind=Kind.GATE_DECISION,
        run_id=cs.run_id,
        call_id=cs.call_id,
        agent_path=cs.agent_path,
        tool=cs.tool,
        label=f"safe:{policy_id}" if cs.safe else policy_id,
        preview=cs.preview if with_args else "",
        args=cs.args_json if with_args else None,
        verdict=verdict,
        reason=reason,
        actor=cs.actor,
        approval=cs.approval,
    )


@dataclass(frozen=True, slots=True)
class _HeldDecision:
    """An allowed decision as it was taken (its id and time minted then), built as an
    event only when it is written: after the call, off the answer's path."""

    event_id: ULID
    time: datetime
    reason: str
    policy_id: str
    preview: str
    args_json: str
    approval: Approval | None
    with_args: bool


def hold_decision(cs: CallState, reason: str, policy_id: str, *, with_args: bool) -> None:
    """Take the allowed decision of ``cs`` now (id, time, the values it records, each
    checked as the event would check it, so a value the event refuses still fails here,
    before the tool runs) and build its event later (:func:`held`)."""
    text_value(reason, "reason")
    if with_args:
        text_value(cs.preview, "preview")
        raw_json(cs.args_json, "args")
    cs.decision = _HeldDecision(
        event_id=new_event_id(),
        time=utc_now(),
        reason=reason,
        policy_id=policy_id,
        preview=cs.preview,
        args_json=cs.args_json,
        approval=cs.approval,
        with_args=with_args,
    )


def held(cs: CallState) -> list[Event]:
    """The events ``cs`` holds for its batch, a held decision built first (once)."""
    d = cs.decision
    if d is not None:
        cs.decision = None
        event = Event(
            kind=Kind.GATE_DECISION,
            event_id=d.event_id,
            time=d.time,
            run_id=cs.run_id,
            call_id=cs.call_id,
            agent_path=cs.agent_path,
            tool=cs.tool,
            label=f"safe:{d.policy_id}" if cs.safe else d.policy_id,
            preview=d.preview if d.with_args else "",
            args=d.args_json if d.with_args else None,
            verdict=Verdict.ALLOWED,
            reason=d.reason,
            # a safe call has no action: its decision cites what the call was allowed
            # under (the run's request, the evidence given, e.g. a tool's definition)
            refs=cs.refs if d.with_args else (),
            actor=cs.actor,
            approval=d.approval,
        )
        cs.pending.insert(0, event)
    return cs.pending


def why(cs: CallState, reason: str, policy_id: str) -> str:
    """The reason an allowed action carries: the policy's reason and the run's request."""
    by = f" (policy {policy_id})" if policy_id else ""
    return f"{reason}{by} | request: {cs.request_quote}"


def _action(cs: CallState, verdict: Verdict, reason: str, policy_id: str) -> Event:
    return Event(
        kind=Kind.ACTION,
        run_id=cs.run_id,
        call_id=cs.call_id,
        agent_path=cs.agent_path,
        tool=cs.tool,
        label=policy_id,
        preview=cs.preview,
        args=cs.args_json,
        verdict=verdict,
        reason=reason,
        refs=cs.refs,
        actor=cs.actor,
        approval=cs.approval,
    )


def action_event(cs: CallState, reason: str, policy_id: str) -> Event:
    """The allowed ``action`` to commit durably before the tool runs."""
    return _action(cs, Verdict.ALLOWED, why(cs, reason, policy_id), policy_id)


def denial_event(cs: CallState, reason: str, policy_id: str = "gate") -> Event:
    """A best-effort ``action`` with verdict ``denied``: the attempt stays visible."""
    return _action(cs, Verdict.DENIED, reason, policy_id)


def result_event(cs: CallState, result: Any, exc: BaseException | None, duration_ms: int) -> Event:
    """The ``tool_result``: the redacted result, or the error text. If the result cannot
    be redacted or written it is withheld and the reason goes into ``err``."""
    result_json: str | None = None
    err = ""
    if exc is not None:
        err = _error_text(exc, cs.redact)
    else:
        try:
            result_json = dump_json(cs.redact(to_jsonable(result)))
        except Exception as failure:  # never write an unredacted result
            err = f"result withheld: redaction or encoding failed ({type(failure).__name__})"
    preview = bounded(result_json or err)
    return Event(
        kind=Kind.TOOL_RESULT,
        run_id=cs.run_id,
        call_id=cs.call_id,
        agent_path=cs.agent_path,
        tool=cs.tool,
        preview=preview,
        result=result_json,
        err=err,
        duration_ms=max(0, duration_ms),
        actor=cs.actor,
    )


def _error_text(exc: BaseException, redact: Redactor) -> str:
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, CancelledBeforeRun):  # the gate's own note, not a tool's error
        return str(exc)
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # a broken __str__ must not cost the record
        text = f"{type(exc).__name__} (message withheld: str() failed)"
    # Cut before redacting too, so that a huge message costs bounded time wherever it is
    # built (a cancelled task writes its record on the event loop); far past the final
    # bound, so every secret inside what is kept is whole when it is redacted.
    text = text[: 40 * PREVIEW_LIMIT]
    try:
        return bounded(_redacted_text(text, redact), 4 * PREVIEW_LIMIT)
    except Exception:
        return f"{type(exc).__name__} (message withheld: redaction failed)"


def end_event(
    *,
    run_id: str,
    agent_path: str,
    exc: BaseException | None,
    redact: Redactor,
    actor: Actor | None = None,
) -> Event:
    """``run_end`` for a block that finished, ``abort`` for one that raised or was
    cancelled (reason ``"cancelled"``)."""
    if exc is None:
        return Event(
            kind=Kind.RUN_END, run_id=run_id, agent_path=agent_path, reason="completed",
            actor=actor,
        )  # fmt: skip
    text = _error_text(exc, redact)
    err = "" if isinstance(exc, asyncio.CancelledError) else text
    return Event(
        kind=Kind.ABORT, run_id=run_id, agent_path=agent_path, reason=text, err=err, actor=actor
    )
