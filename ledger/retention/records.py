"""How retention changes are recorded in the log itself.

Every change (a policy set, a hold added or released, an erasure) is one *retention
run* appended to the ledger in the transaction that makes the change: four events of
the reference's kinds, so every reader, chain and report handles them as it handles any
run, and the Merkle log covers them like any event::

    request       args: what was asked, as text ("erase run r1: GDPR request 42")
    action        tool ledger.retention.set | ledger.hold.add | ledger.hold.release |
                  ledger.erase; args: the change record (JSON object); verdict allowed;
                  reason: the operator's reason; actor.principal: by whom
    tool_result   result: what it did ({"erased": 1000})
    run_end

The run id is :data:`ADMIN_RUN_PREFIX` + a ULID, the agent path ``ledger``. The action's
event id is the record's id: a tombstone names the erasure record that made it
(``erased.records``), and ``ledger verify`` checks the record's ``events`` and
``digest`` against the tombstones that name it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ulid import ULID

from ledger.ids import new_event_id
from ledger.model.erasure import (
    ADMIN_RUN_PREFIX,
    ERASE_TOOL,
    HOLD_ADD_TOOL,
    HOLD_RELEASE_TOOL,
    POLICY_TOOL,
)
from ledger.model.event import Event
from ledger.model.values import Actor, Ref

__all__ = [
    "ADMIN_RUN_PREFIX",
    "ERASE_TOOL",
    "HOLD_ADD_TOOL",
    "HOLD_RELEASE_TOOL",
    "POLICY_TOOL",
    "RetentionRun",
    "is_admin_run",
]

AGENT_PATH = "ledger"


def is_admin_run(run_id: str) -> bool:
    """True for a run that records a retention change (never erasable)."""
    return run_id.startswith(ADMIN_RUN_PREFIX)


class RetentionRun:
    """The ids of one retention run, minted up front so that the record's id is known
    before the change is made (the tombstones name it); :meth:`events` builds the four
    events once the outcome is known."""

    __slots__ = ("record_id", "request_id", "run_id")

    def __init__(self) -> None:
        self.run_id = f"{ADMIN_RUN_PREFIX}{ULID()}"
        self.request_id: ULID = new_event_id()
        self.record_id: ULID = new_event_id()

    def events(
        self,
        *,
        tool: str,
        asked: str,
        record: Mapping[str, Any],
        outcome: Mapping[str, Any],
        reason: str,
        by: str,
        at: datetime,
    ) -> list[Event]:
        """The request, the action (the record), its result and the run's end."""
        actor = Actor(principal=by) if by else None
        call = f"retention-{self.record_id}"
        request = Event(
            kind="request",
            event_id=self.request_id,
            run_id=self.run_id,
            time=at,
            agent_path=AGENT_PATH,
            args=_json_text(asked),
            actor=actor,
        )
        action = Event(
            kind="action",
            event_id=self.record_id,
            run_id=self.run_id,
            call_id=call,
            time=at,
            agent_path=AGENT_PATH,
            tool=tool,
            args=dict(record),
            verdict="allowed",
            reason=reason,
            refs=[Ref(source="tool", id=str(self.request_id))],
            actor=actor,
        )
        result = Event(
            kind="tool_result",
            run_id=self.run_id,
            call_id=call,
            time=at,
            agent_path=AGENT_PATH,
            tool=tool,
            result=dict(outcome),
            actor=actor,
        )
        end = Event(kind="run_end", run_id=self.run_id, time=at, agent_path=AGENT_PATH, actor=actor)
        return [request, action, result, end]


def _json_text(text: str) -> str:
    import orjson

    return orjson.dumps(text).decode()
