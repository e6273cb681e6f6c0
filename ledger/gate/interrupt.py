"""What a call interrupted before its tool ran leaves in the record: a ``KeyboardInterrupt``,
``SystemExit``, ``GeneratorExit``, ``asyncio.CancelledError`` or any other
``BaseException`` raised at any step of the call flow (by an approver, the policy, the
redactor, the sink) before the tool started.

>>> interruption(KeyboardInterrupt()), interruption(asyncio.CancelledError())
('KeyboardInterrupt', 'cancelled')

The rule: the stored decision and action of one call never disagree, and the record says
whether the action was committed.

- Interrupted before the commit: the decision (if the policy allowed the call) is stored
  overruled, ``denied``, beside an ``action(denied)`` saying what interrupted it.
- Interrupted inside a synchronous commit (``commit_action`` did not return), the gate
  cannot know whether the sink stored the action, or will (a group commit may still hold
  it). It settles the question with the action's own event id: it records the denial
  under that id. If the sink accepts it, the allowed action can never be stored (event
  ids are unique), so the decision is stored overruled. If the sink answers
  ``DuplicateEvent``, the action was stored: the decision is stored as it was, allowed,
  with a ``tool_result`` whose ``err`` says the tool did not run.
- Interrupted while an asynchronous commit runs on a worker thread: the outcome is
  recorded once that commit settles, the same way.

Writing these records never raises into the caller: the original exception is re-raised
unchanged; a second ``BaseException`` while recording is logged and dropped.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future

from ledger.gate.denial import overruled
from ledger.gate.events import (
    CallState,
    CancelledBeforeRun,
    denial_event,
    describe_attempt,
    held,
    result_event,
)
from ledger.gate.recorder import Recorder
from ledger.model.event import Event

__all__ = ["after_commit_interrupted", "interruption", "record_interrupted"]

log = logging.getLogger("ledger.gate")


def interruption(exc: BaseException) -> str:
    """How the record names what stopped the call."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return type(exc).__name__


def record_interrupted(recorder: Recorder, cs: CallState, exc: BaseException) -> None:
    """Record the call stopped by ``exc`` before its tool ran (see the module notes)."""
    if cs.committed:  # the commit's own callback, or the result, tells the outcome
        return
    why = f"{interruption(exc)} before the tool ran"
    try:
        _describe(cs)
        if cs.in_flight is not None:
            _settle(recorder, cs, cs.in_flight, why)
        else:
            _denied(recorder, cs, why)
    except BaseException as again:
        log.warning("ledger: could not record interrupted call %s: %r", cs.call_id, again)


def after_commit_interrupted(
    recorder: Recorder, cs: CallState, future: Future[None], what: str
) -> None:
    """Once an asynchronous commit stopped waiting for settles: record its outcome."""
    try:
        if not future.cancelled() and future.exception() is None:
            note = result_event(cs, None, CancelledBeforeRun(what), 0)
            recorder.write([*held(cs), note])
        else:
            _denied(recorder, cs, f"{what} before the tool ran")
    except BaseException as again:
        log.warning("ledger: could not record interrupted call %s: %r", cs.call_id, again)


def _describe(cs: CallState) -> None:
    try:
        describe_attempt(cs)
    except BaseException:
        cs.args_done = True
        cs.args_json = "{}"


def _denied(recorder: Recorder, cs: CallState, why: str) -> None:
    pending = [overruled(e, cs.call_id, why) for e in held(cs)]
    recorder.write([*pending, denial_event(cs, why)])


def _settle(recorder: Recorder, cs: CallState, action: Event, why: str) -> None:
    """Decide whether the interrupted commit stored ``action``, by recording the denial
    under the action's own event id."""
    denial = denial_event(cs, f"{why}; the commit did not return").replace(
        event_id=action.event_id, time=action.time
    )
    outcome = recorder.store(denial)
    if outcome == "duplicate":  # the action was committed; the tool did not run
        what = why.removesuffix(" before the tool ran")
        note = result_event(cs, None, CancelledBeforeRun(what), 0)
        recorder.write([*held(cs), note])
        return
    if outcome == "failed":
        log.warning(
            "ledger: call %s was interrupted inside its commit and its outcome could not be "
            "recorded; the tool did not run",
            cs.call_id,
        )
    recorder.write([overruled(e, cs.call_id, why) for e in held(cs)])
