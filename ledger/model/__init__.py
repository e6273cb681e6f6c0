"""The provenance data model: :class:`Event`, :class:`Ref` and their enums.

>>> from ledger.model import Event, Kind
>>> Event.from_json(Event(kind=Kind.REQUEST, run_id="r1").to_json()).run_id
'r1'

:mod:`ledger.model.values` holds the enums, :class:`Ref` and the field validators,
:mod:`ledger.model.codec` the one JSON codec, :mod:`ledger.model.event` the event itself.
"""

from __future__ import annotations

from ledger.ids import new_event_id
from ledger.model.event import Event
from ledger.model.values import MAX_NESTING, Actor, Approval, Kind, Ref, RefSource, Verdict

__all__ = [
    "MAX_NESTING",
    "Actor",
    "Approval",
    "Event",
    "Kind",
    "Ref",
    "RefSource",
    "Verdict",
    "new_event_id",
]
