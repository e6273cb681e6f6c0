"""Bounded listings: the report lists at most :data:`MAX_LISTED` items of each kind and
counts the rest, so its memory does not grow with the ledger.

>>> kept = Capped[int](limit=3, key=lambda n: n)
>>> for n in (5, 1, 4, 2, 3):
...     kept.add(n)
>>> kept.items(), kept.total, kept.more
((1, 2, 3), 5, 2)

A year of a busy fleet holds hundreds of thousands of denials, approved actions and
runs; the report keeps their counts (and, for approved actions, the counts per approver,
tool and policy) and lists the first :data:`MAX_LISTED` of each in time order. The full
lists come from the same report with a larger ``listed`` (:func:`full_listing` names
the command).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from ledger.timefmt import format_time_us

__all__ = ["LISTINGS", "MAX_LISTED", "Capped", "full_listing"]

MAX_LISTED = 1000
"""The most items of one kind a report lists by default (the first in time order)."""

LISTINGS = {
    "runs": "runs",
    "denials": "denials",
    "missing_results": "missing_results",
    "unsafe_without_intent": "unsafe_without_intent.items",
    "approved": "approved_actions",
    "outside_runs": "outside_runs",
}
"""The report's listings, each with where its items stand in the report's JSON form."""

T = TypeVar("T")


class Capped(Generic[T]):
    """The ``limit`` smallest items by ``key`` of everything added, and how many were
    added (``total``); memory at most ``2 * limit`` items."""

    __slots__ = ("_items", "_key", "_sorted", "limit", "total")

    def __init__(self, *, limit: int = MAX_LISTED, key: Callable[[T], Any]) -> None:
        self.limit = limit
        self.total = 0
        self._key = key
        self._items: list[T] = []
        self._sorted = True

    def add(self, item: T) -> None:
        self.total += 1
        self._items.append(item)
        self._sorted = False
        if len(self._items) >= 2 * self.limit + 1:
            self._trim()

    def _trim(self) -> None:
        self._items.sort(key=self._key)
        del self._items[self.limit :]
        self._sorted = True

    def items(self) -> tuple[T, ...]:
        """The kept items, smallest first."""
        if not self._sorted or len(self._items) > self.limit:
            self._trim()
        return tuple(self._items)

    @property
    def more(self) -> int:
        """How many were added beyond the listed ones."""
        return self.total - min(self.total, self.limit)


def full_listing(
    name: str, since: datetime | None, until: datetime | None, total: int, ledger: str = ""
) -> str:
    """The command that lists every item of the listing ``name`` of a report over
    ``[since, until)`` (``total`` items): the same report, its listings holding
    ``total`` items each (``--listed``), as JSON, where the listing's items are at
    ``LISTINGS[name]``. The same build and rules, so exactly the items the report counted (a
    ``ledger events`` filter could not say "an allowed action with no result").

    ``ledger``: the report's ledger URL, given as ``--db`` (as the report shows it: a
    password in it is hidden).

    >>> full_listing("missing_results", None, None, 1200)
    'ledger report --listed 1200 --json'
    >>> full_listing("runs", None, None, 5, "sqlite:///ledger.db")
    'ledger report --db sqlite:///ledger.db --listed 5 --json'
    """
    if name not in LISTINGS:
        raise ValueError(f"no report listing {name!r}; listings are {', '.join(LISTINGS)}")
    window = f" --db {shlex.quote(ledger)}" if ledger else ""
    if since is not None:
        window += f" --since {format_time_us(since)}"
    if until is not None:
        window += f" --until {format_time_us(until)}"
    return f"ledger report{window} --listed {max(total, 1)} --json"
