"""The canonical replay order of a ledger: topological waves, SHA-256 order in a wave.

The reference computes waves by rescanning every pending record each round (quadratic).
This module computes the same waves with Kahn's algorithm by levels, in O(n log n)::

    ordered = replay_order(records)          # list[Record]
    ordering = order_records(records)        # + missing parents, cycles, heads

A record's wave is 0 when none of its parents is in the set, else one more than the
latest wave of a parent in the set. Inside a wave records are sorted by ``sha`` as
strings. Parents absent from the set do not hold a record back (they are reported as
``missing``); records on or behind a cycle never become ready (reported as ``cycle``).
For A (sha …1), B (sha …9) and C (sha …0, parent A) the order is A, B, C.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ledger.errors import RecordError
from ledger.typed.records import Record

__all__ = ["Ordering", "order_records", "replay_order"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ordering:
    """The result of :func:`order_records`.

    ``records`` is the replay order; ``missing`` pairs each record with the parents it
    names that are not in the set; ``cycle`` holds the records that never became ready,
    sorted by sha; ``heads`` are the sorted shas that are no record's parent.
    """

    records: tuple[Record, ...]
    missing: tuple[tuple[Record, tuple[str, ...]], ...]
    cycle: tuple[Record, ...]
    heads: tuple[str, ...]


def order_records(records: Iterable[Record]) -> Ordering:
    """Order ``records`` (deduplicated by sha, first one kept) into replay waves."""
    by_sha: dict[str, Record] = {}
    for record in records:
        if not isinstance(record, Record):
            raise RecordError(
                f"replay order takes Record objects (from ShardStore.read or Record.from_line), "
                f"not {type(record).__name__}"
            )
        by_sha.setdefault(record.sha, record)
    children: dict[str, list[str]] = {}
    waiting: dict[str, int] = {}
    missing: list[tuple[Record, tuple[str, ...]]] = []
    named_parents: set[str] = set()
    for sha, record in by_sha.items():
        present = 0
        absent: list[str] = []
        for parent in record.parents:
            named_parents.add(parent)
            if parent in by_sha:
                children.setdefault(parent, []).append(sha)
                present += 1
            else:
                absent.append(parent)
        waiting[sha] = present
        if absent:
            missing.append((record, tuple(absent)))
    ordered = _waves(by_sha, children, waiting)
    done = {record.sha for record in ordered}
    cycle = tuple(by_sha[sha] for sha in sorted(by_sha) if sha not in done)
    missing.sort(key=lambda item: item[0].sha)
    heads = tuple(sorted(sha for sha in by_sha if sha not in named_parents))
    return Ordering(records=tuple(ordered), missing=tuple(missing), cycle=cycle, heads=heads)


def _waves(
    by_sha: dict[str, Record], children: dict[str, list[str]], waiting: dict[str, int]
) -> list[Record]:
    wave = sorted(sha for sha, count in waiting.items() if count == 0)
    ordered: list[Record] = []
    while wave:
        ordered.extend(by_sha[sha] for sha in wave)
        following: list[str] = []
        for sha in wave:
            for child in children.get(sha, ()):
                waiting[child] -= 1
                if waiting[child] == 0:
                    following.append(child)
        following.sort()
        wave = following
    return ordered


def replay_order(records: Iterable[Record]) -> list[Record]:
    """The records in canonical replay order (records on a cycle are left out).

    >>> [r.sha[-1] for r in replay_order([c, b, a])]  # doctest: +SKIP
    ['1', '9', '0']
    """
    return list(order_records(records).records)
