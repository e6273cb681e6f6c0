"""The provenance event: one recorded fact about a run.

>>> ev = Event(kind="action", run_id="r1", call_id="c1", tool="delete_file",
...            args='{"path":"/tmp/x"}', verdict="allowed",
...            refs=[Ref(source="tool", id="01J...", hash="")])
>>> Event.from_json(ev.to_json()) == ev
True

``args`` and ``result`` hold raw JSON text and are kept byte-exact: text given is checked
to be JSON and stored as given; any other Python value is serialized compactly. An
``Event`` is immutable; use :meth:`Event.replace` to derive another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ulid import ULID

from ledger.errors import ValidationError
from ledger.ids import coerce_event_id, new_event_id
from ledger.model.codec import event_from_json, event_to_json
from ledger.model.erasure import Erasure
from ledger.model.values import (
    INT64_MAX,
    Actor,
    Approval,
    Kind,
    Ref,
    Verdict,
    enum_value,
    raw_json,
    refs_value,
    text_value,
)
from ledger.timefmt import coerce_time, utc_now

__all__ = ["Event"]


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Event:
    """One recorded fact about a run. Fields that do not apply to a kind stay empty.

    The constructor is keyword-only and takes the plain strings as well as the enum
    members, a list of refs (or their dicts), and ``args``/``result`` as raw JSON text or
    as a Python value; attributes always hold the normalized forms.

    Beyond the reference's 16 fields, two optional ones say *who*: ``actor``
    (:class:`~ledger.model.values.Actor`: the principal the run acts for, the agent's id
    and version) and ``approval`` (:class:`~ledger.model.values.Approval`: who approved
    the call, when, why). Both are left out of the JSON when empty, so events written
    before them read back unchanged and the reference reads ours. A third, ``erased``
    (:class:`~ledger.model.erasure.Erasure`), is set only on an erased event (a
    tombstone, see :mod:`ledger.model.erasure`): which fields were removed, and why.
    """

    kind: Kind
    event_id: ULID
    run_id: str
    call_id: str
    refs: tuple[Ref, ...]
    time: datetime
    agent_path: str
    tool: str
    label: str
    preview: str
    args: str | None
    verdict: Verdict | None
    reason: str
    result: str | None
    err: str
    duration_ms: int
    actor: Actor | None
    approval: Approval | None
    erased: Erasure | None

    def __init__(
        self,
        *,
        kind: Kind | str,
        event_id: ULID | str | None = None,
        run_id: str = "",
        call_id: str = "",
        refs: Iterable[Ref | Mapping[str, str]] = (),
        time: datetime | str | None = None,
        agent_path: str = "",
        tool: str = "",
        label: str = "",
        preview: str = "",
        args: object = None,
        verdict: Verdict | str | None = None,
        reason: str = "",
        result: object = None,
        err: str = "",
        duration_ms: int = 0,
        actor: Actor | Mapping[str, str] | None = None,
        approval: Approval | Mapping[str, Any] | None = None,
        erased: Erasure | Mapping[str, Any] | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "kind", enum_value(Kind, kind, "kind"))
        set_(self, "event_id", new_event_id() if event_id is None else coerce_event_id(event_id))
        texts = {"run_id": run_id, "call_id": call_id, "agent_path": agent_path, "tool": tool,
                 "label": label, "preview": preview, "reason": reason, "err": err}  # fmt: skip
        for name, value in texts.items():
            set_(self, name, text_value(value, name))
        set_(self, "refs", refs_value(refs))
        set_(self, "time", utc_now() if time is None else coerce_time(time))
        set_(self, "args", raw_json(args, "args"))
        set_(self, "result", raw_json(result, "result"))
        set_(self, "verdict", None if verdict is None else enum_value(Verdict, verdict, "verdict"))
        if isinstance(duration_ms, bool) or not isinstance(duration_ms, int):
            raise ValidationError(f"duration_ms: expected an integer, got {duration_ms!r}")
        if not 0 <= duration_ms <= INT64_MAX:
            raise ValidationError(f"duration_ms: {duration_ms} is outside 0..2**63-1")
        set_(self, "duration_ms", duration_ms)
        who = None if actor is None else Actor.from_dict(actor)
        set_(self, "actor", who or None)  # an empty actor is no actor
        set_(self, "approval", None if approval is None else Approval.from_dict(approval))
        if erased is not None and not isinstance(erased, Erasure):
            erased = Erasure.from_dict(erased)
        set_(self, "erased", erased)

    @property
    def principal(self) -> str:
        """The principal the run acts for (``actor.principal``), "" when unknown."""
        return self.actor.principal if self.actor is not None else ""

    def to_json(self) -> str:
        """The reference's JSON (field order and omit-empty rules); ``args``/``result``
        are embedded byte-exact."""
        return event_to_json(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse one event's JSON; raise ``ValidationError`` naming the bad field."""
        return event_from_json(cls, text)

    def replace(self, **changes: Any) -> Event:
        """A copy with ``changes`` applied (validated like a new event)."""
        return dataclasses.replace(self, **changes)
