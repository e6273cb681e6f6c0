"""Every per-row check of a ledger in one streaming pass: content hashes and the Merkle log.

>>> hashes, log = verify_rows(reader)                    # doctest: +SKIP
>>> hashes.mismatch_count, log.ok                        # doctest: +SKIP
(0, True)

The content-hash check (:mod:`ledger.report.hashes`) and the tamper-evident log's check
(:func:`ledger.integrity.verify.verify_ledger`) both read every row as stored. On a SQL
ledger this reads each row once: one paged query in commit order hands each row to both
checks (the log's check gets the row's bytes and leaf index, the hash check its JSON,
content hash and filter columns). Memory is that of one page. A reader that is not a SQL
sink gets the content-hash check alone (:func:`~ledger.report.hashes.check_hashes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from hashlib import sha256
from typing import Any

from ledger.integrity.checkpoint import TreeHead
from ledger.integrity.note import NoteVerifier
from ledger.integrity.verify import LeafRow, LeafSource, VerifyResult, verify_ledger
from ledger.report.hashes import HashCheck, HashTally, check_hashes, verify_row
from ledger.sinks.base import Reader
from ledger.sinks.rows import FILTER_COLUMNS, TimeHighWater
from ledger.sinks.sql import SQLReader

__all__ = ["verify_rows"]

_TIME = 4 + FILTER_COLUMNS.index("time_us")  # in the rows of _CheckedLeaves.leaf_rows


class _CheckedLeaves:
    """A SQL sink as a :class:`LeafSource` whose rows are content-hash checked as the
    log's check reads them."""

    def __init__(self, reader: SQLReader, source: LeafSource) -> None:
        self._reader = reader
        self._source = source
        self.tally = HashTally()
        self._read = False
        self.head_lags = bool(getattr(source, "head_lags", False))

    def leaf_rows(self) -> Iterator[LeafRow]:
        """The rows in commit order; the first reading checks their content hashes (a
        second one, to name a finding, reads them plainly)."""
        if self._read:
            yield from self._source.leaf_rows()
            return
        self._read = True
        from ledger.report.aggregate import stream_rows

        t = self._reader._table
        sqlite = self._reader._dialect == "sqlite"
        text = "CAST(event_json AS BLOB)" if sqlite else "event_json"
        name = f'"{t.schema}".events' if t.schema else "events"
        sql = (
            f"SELECT seq, event_id, leaf_index, time_hi_us, {', '.join(FILTER_COLUMNS)}, "
            f"{text}, content_hash, substr(nodes, 1, 32) FROM {name} ORDER BY seq"
        )
        tally = self.tally
        high = TimeHighWater()
        for row in stream_rows(self._reader, sql, ()):
            seq, event_id, index, stated_high = row[0], row[1], row[2], row[3]
            raw, stored, leaf = row[-3], row[-2], row[-1]
            data = raw if type(raw) is bytes else str(raw).encode("utf-8")
            # the bytes the log committed were an event the sink validated: no decode
            committed = leaf is not None and bytes(leaf) == sha256(b"\x00" + data).digest()
            obj, computed, problem = verify_row(event_id, raw, stored, row[4:-3], committed)
            wrong = high.check(row[_TIME], obj, not problem, stated_high)  # every row
            problem = problem or wrong
            if problem:
                tally.add(event_id, row[4], stored, computed, problem)
            else:
                tally.checked += 1
            yield LeafRow(
                seq=int(seq),
                event_id=str(event_id),
                leaf_index=None if index is None else int(index),
                data=data,
            )

    def stored_head(self) -> tuple[str, TreeHead] | None:
        return self._source.stored_head()

    def stored_leaf_hashes(self) -> Iterator[tuple[int, bytes]]:
        return self._source.stored_leaf_hashes()

    def checkpoint_notes(self) -> list[str]:
        return self._source.checkpoint_notes()

    def stored_consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...] | None:
        return self._source.stored_consistency_proof(old_size, new_size)

    def count_rows(self) -> int:
        return self._source.count_rows()


def verify_rows(
    reader: Reader,
    verifiers: Iterable[NoteVerifier] | None = None,
    checkpoints: Iterable[str] = (),
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> tuple[HashCheck, VerifyResult | None]:
    """``(content-hash check, log check)`` of every row of ``reader``, in one pass over
    the rows of a SQL ledger; the log check is None for a reader that keeps no log.

    ``verifiers``, ``checkpoints``, ``progress`` and ``options`` (``labels``,
    ``origin``) are :func:`~ledger.integrity.verify.verify_ledger`'s.
    """
    if isinstance(reader, SQLReader) and isinstance(reader, LeafSource):
        leaves = _CheckedLeaves(reader, reader)
        result = verify_ledger(leaves, verifiers, checkpoints, progress=progress, **options)
        return leaves.tally.result(), result
    return check_hashes(reader), None
