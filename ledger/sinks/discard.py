"""``DiscardSink``: the explicit "recording off" switch.

>>> with DiscardSink() as sink:
...     sink.record(Event(kind="prompt"))

It drops every event and promises nothing. It is deliberately not a ``DurableSink`` (it
has no ``commit_action``), so a gate in front of it denies every non-safe action.
"""

from __future__ import annotations

from ledger.errors import ValidationError
from ledger.model.event import Event
from ledger.sinks.base import Closing

__all__ = ["DiscardSink"]


class DiscardSink(Closing):
    """A sink that drops every event; ``record`` never fails for one, even after ``close``."""

    __slots__ = ()

    def record(self, event: Event) -> None:
        """Drop ``event`` (anything but an ``Event`` is refused: a caller's bug)."""
        if not isinstance(event, Event):
            raise ValidationError(f"event: expected an Event, got {type(event).__name__}")

    def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "DiscardSink()"
