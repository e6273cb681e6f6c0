"""The values a chain is made of, and the one rule for results that ran without intent.

>>> from ledger.model import Event
>>> decision = Event(kind="gate_decision", call_id="c1", verdict="allowed", label="safe:ro")
>>> decision_mark(decision)
<DecisionMark.SAFE: 'safe'>
>>> unintended_reason(call_id="c1", allowed_intent=False, denied_intent=False, decision=None)
'no action was committed and the gate recorded no decision for it'

:func:`unintended_reason` is the single place that decides whether a ``tool_result`` had a
committed intent or was a safe read; :func:`~ledger.chain.assemble.assemble_chain` and the
compliance report both ask it, so ``ledger chain`` and ``ledger report`` cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ledger.model.event import Event
from ledger.model.marks import failed, marked_safe
from ledger.model.values import Ref, Verdict

__all__ = [
    "DENIED",
    "UNINTENDED",
    "Action",
    "Anomaly",
    "AnomalyCode",
    "DecisionMark",
    "decision_mark",
    "made_action",
    "unintended_reason",
]

DENIED = (Verdict.DENIED, Verdict.NEEDS_APPROVAL)
"""Verdicts under which the tool did not run."""


class DecisionMark(StrEnum):
    """What a call's ``gate_decision`` says about it, as far as intent goes."""

    SAFE = "safe"  # allowed and marked safe: a safe read
    DENIED = "denied"  # denied or needing an approval nobody gave: the tool did not run
    NOT_SAFE = "not_safe"  # allowed, but not marked safe: it needs a committed action


def decision_mark(decision: Event) -> DecisionMark:
    """Classify a ``gate_decision``. It marks a safe read when its verdict is ``allowed``
    and it is marked safe (:func:`ledger.model.marks.marked_safe`: label ``safe`` or
    ``safe:<policy>``, or a reason starting ``safe tool``, or, their text erased, what
    the tombstone kept of that)."""
    if decision.verdict in DENIED:
        return DecisionMark.DENIED
    if decision.verdict is Verdict.ALLOWED and marked_safe(decision):
        return DecisionMark.SAFE
    return DecisionMark.NOT_SAFE


def unintended_reason(
    *, call_id: str, allowed_intent: bool, denied_intent: bool, decision: DecisionMark | None
) -> str | None:
    """Why a ``tool_result`` ran without a committed intent, or None when it had one.

    A result is covered when its call has an ``action`` with verdict ``allowed`` (an
    action recorded without a verdict is not one) or, having no action at
    all, a first ``gate_decision`` marked :attr:`DecisionMark.SAFE` (a safe read).
    Anything else is a violation, fail-safe as in the reference (unclassified means
    non-safe): no call id, only denied actions, a denial, a decision not marked safe, or
    no decision at all.
    """
    if not call_id:
        return "the result has no call id: it cannot be tied to a committed intent"
    if allowed_intent:
        return None
    if denied_intent:
        return "its only actions were not allowed (denied, or recorded without a verdict)"
    if decision is None:
        return "no action was committed and the gate recorded no decision for it"
    if decision is DecisionMark.DENIED:
        return "the gate denied it"
    if decision is DecisionMark.NOT_SAFE:
        return "the gate did not mark it safe and no action was committed"
    return None


class AnomalyCode(StrEnum):
    """The oddities a chain reports instead of hiding."""

    NO_REQUEST = "no_request"
    MULTIPLE_REQUESTS = "multiple_requests"
    MIXED_RUNS = "mixed_runs"
    DENIED_ATTEMPT = "denied_attempt"
    ACTION_WITHOUT_CALL_ID = "action_without_call_id"
    DUPLICATE_ACTION = "duplicate_action"
    ACTION_WITHOUT_RESULT = "action_without_result"
    DUPLICATE_RESULT = "duplicate_result"
    RESULT_WITHOUT_CALL_ID = "result_without_call_id"
    RESULT_BEFORE_INTENT = "result_before_intent"
    RESULT_WITHOUT_INTENT = "result_without_intent"


UNINTENDED = frozenset(
    (
        AnomalyCode.RESULT_WITHOUT_INTENT,
        AnomalyCode.RESULT_WITHOUT_CALL_ID,
        AnomalyCode.RESULT_BEFORE_INTENT,
    )
)
"""The anomalies of a result that ran without a committed intent (what the compliance
report counts as ``unsafe_without_intent``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    """One oddity in a run, with the events it concerns."""

    code: AnomalyCode
    detail: str
    event_ids: tuple[str, ...] = ()
    call_id: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """One effectful call: its intent (target, verdict, embedded why), its result, and
    the evidence it rested on. A denied attempt is an action whose outcome is a denial."""

    intent: Event
    result: Event | None = None
    evidence: tuple[Ref, ...] = ()

    @property
    def call_id(self) -> str:
        return self.intent.call_id

    @property
    def tool(self) -> str:
        return self.intent.tool

    @property
    def verdict(self) -> Verdict | None:
        return self.intent.verdict

    @property
    def denied(self) -> bool:
        """True when the intent was refused (the tool did not run)."""
        return self.intent.verdict in (Verdict.DENIED, Verdict.NEEDS_APPROVAL)

    @property
    def outcome(self) -> str:
        """``denied``, ``failed`` (the tool raised; also when its ``err`` was erased
        since, as the tombstone keeps), ``succeeded``, ``no_result``, or ``erased`` (the
        result's ``err`` was erased by a tombstone that did not keep whether it failed,
        one written before that was kept: it is not called a success)."""
        if self.denied:
            return "denied"
        if self.result is None:
            return "no_result"
        if failed(self.result):
            return "failed"
        gone = self.result.erased
        unknown = gone is not None and "err" in gone.fields and gone.had_err is None
        return "erased" if unknown else "succeeded"


class _ActionSlots:
    __slots__ = ("evidence", "intent", "result")


def _swappable() -> bool:
    probe: Any = object.__new__(_ActionSlots)
    try:
        probe.__class__ = Action
    except TypeError:
        return False
    return True


_SWAPPABLE = _swappable()


def made_action(intent: Event, result: Event | None) -> Action:
    """``Action(intent=intent, result=result, evidence=intent.refs)`` for a chain being
    assembled (one per action event, so made without the dataclass's frozen
    ``__init__``): filled through plain slots, then made an ``Action`` (Python allows
    assigning ``__class__`` between classes of one layout).

    >>> made_action(Event(kind="action", call_id="c1"), None).call_id
    'c1'
    """
    if not _SWAPPABLE:
        return Action(intent=intent, result=result, evidence=intent.refs)
    made: Any = object.__new__(_ActionSlots)
    made.intent, made.result, made.evidence = intent, result, intent.refs
    made.__class__ = Action
    return made  # type: ignore[no-any-return]
