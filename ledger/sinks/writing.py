"""The write API the SQL sinks share, over two hooks each sink provides.

>>> class MySink(Writing):                                 # doctest: +SKIP
...     def _row(self, event): return event_row(event)       # the row, or refuse it
...     def _write(self, make): store(make())                # durably, then return

``record`` stores an event as it is, ``commit_action`` validates it first
(:func:`ledger.sinks.base.validate_action`), ``record_many`` stores a batch whole or not
at all. A closed sink raises ``SinkClosed`` before it looks at the event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ledger.errors import SinkClosed
from ledger.model.event import Event
from ledger.sinks.base import check_events, check_storable, validate_action

__all__ = ["Row", "Writing"]

Row = tuple[Any, ...]


class Writing:
    """Mixin: ``record``, ``commit_action`` and ``record_many`` over ``_row`` and
    ``_write`` (``make`` builds the rows; the sink calls it once, when it writes)."""

    __slots__ = ()
    _closed: bool

    def _row(self, event: Event) -> Row:
        """``event``'s stored row; ``ValidationError`` for what the store cannot hold."""
        raise NotImplementedError

    def _write(self, make: Callable[[], list[Row]]) -> None:
        """Store the rows ``make()`` builds in one transaction; return once durable."""
        raise NotImplementedError

    def record(self, event: Event) -> None:
        """Store ``event`` durably (no validation). ``DuplicateEvent`` if its id exists;
        ``ValidationError`` for a run id of the reserved retention prefix, or a tombstone
        (:func:`~ledger.sinks.base.check_storable`)."""
        self._check_writable()
        self._write(lambda: [self._row(check_storable(event))])

    def commit_action(self, event: Event) -> None:
        """Validate ``event`` as a self-explaining action, then store it durably."""
        self._check_writable()
        validate_action(event)
        self._write(lambda: [self._row(check_storable(event))])

    def record_many(self, events: Iterable[Event]) -> None:
        """Store ``events`` in one transaction: all of them, or none when one is bad."""
        self._check_writable()
        self._record_rows([self._row(check_storable(e)) for e in check_events(events)])

    def _record_copied(self, events: Iterable[Event]) -> None:
        """``record_many`` for ``ledger db copy``, which carries the source's retention
        runs (the records behind the policy and holds it copies too) as they are."""
        self._check_writable()
        self._record_rows([self._row(e) for e in check_events(events)])

    def _record_rows(self, rows: list[Row]) -> None:
        if rows:
            self._write(lambda: rows)

    def _check_writable(self) -> None:
        if self._closed:
            raise SinkClosed(f"{self!r} is closed; open a new one to write")
