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

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from hashlib import sha256
from typing import Any

from ledger.errors import ValidationError
from ledger.integrity.checkpoint import TreeHead
from ledger.integrity.note import NoteVerifier
from ledger.integrity.verify import (
    Finding,
    FindingKind,
    LeafRow,
    LeafSource,
    VerifyResult,
    verify_ledger,
)
from ledger.model.event import Event
from ledger.report.hashes import HashCheck, HashTally, check_hashes, verify_row
from ledger.sinks.base import Reader
from ledger.sinks.jsonl import cut_short
from ledger.sinks.rows import FILTER_COLUMNS, TimeHighWater
from ledger.sinks.sql import SQLReader

__all__ = ["verify_all", "verify_lines", "verify_rows"]

_TIME = 4 + FILTER_COLUMNS.index("time_us")  # in the rows of _CheckedLeaves.leaf_rows


class _Passing:
    """A :class:`LeafSource` over ``source`` whose subclass checks each row as the log's
    check reads it (:meth:`leaf_rows`); all else is the source's."""

    def __init__(self, source: LeafSource) -> None:
        self._source = source

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


class _CheckedLeaves(_Passing):
    """A SQL sink as a :class:`LeafSource` whose rows are content-hash checked as the
    log's check reads them."""

    def __init__(self, reader: SQLReader, source: LeafSource) -> None:
        super().__init__(source)
        self._reader = reader
        self.tally = HashTally()
        self._read = False
        # what verify_ledger asks of a source beyond the protocol, as the sink answers it
        # (not its batched readers: every row must pass through leaf_rows)
        self.head_lags = bool(getattr(source, "head_lags", False))
        self.keeps_head = bool(getattr(source, "keeps_head", False))
        self.tree_root: Callable[[int], bytes] | None = getattr(source, "tree_root", None)

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
        # SQLite keeps any type in any column: a leaf read as text might not decode
        leaf = "substr(CAST(nodes AS BLOB), 1, 32)" if sqlite else "substr(nodes, 1, 32)"
        name = f'"{t.schema}".events' if t.schema else "events"
        sql = (
            f"SELECT seq, event_id, leaf_index, time_hi_us, {', '.join(FILTER_COLUMNS)}, "
            f"{text}, content_hash, {leaf} FROM {name} ORDER BY seq"
        )
        tally = self.tally
        high = TimeHighWater()
        for row in stream_rows(self._reader, sql, ()):
            seq, event_id, index, stated_high = row[0], row[1], row[2], row[3]
            raw, stored, leaf = row[-3], row[-2], row[-1]
            data = raw if type(raw) is bytes else str(raw).encode("utf-8")
            # the bytes the log committed were an event the sink validated: no decode
            committed = (  # a leaf of another type (SQLite keeps any) is checked in full
                isinstance(leaf, bytes | memoryview)
                and bytes(leaf) == sha256(b"\x00" + data).digest()
            )
            obj, computed, problem = verify_row(event_id, raw, stored, row[4:-3], committed)
            wrong = high.check(row[_TIME], obj, not problem, stated_high)  # every row
            problem = problem or wrong
            if problem:
                tally.add(event_id, row[4], stored, computed, problem)
            else:
                tally.intact(stored)
            yield LeafRow(
                seq=int(seq),
                event_id=str(event_id),
                leaf_index=None if index is None else int(index),
                data=data,
            )


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
        snapshot = getattr(reader, "snapshot", None)  # one state of the ledger (PostgreSQL)
        with snapshot() if callable(snapshot) else contextlib.nullcontext():
            result = verify_ledger(leaves, verifiers, checkpoints, progress=progress, **options)
        return leaves.tally.result(), result
    return check_hashes(reader), None


def verify_all(
    reader: Reader,
    verifiers: Iterable[NoteVerifier] | None = None,
    checkpoints: Iterable[str] = (),
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> VerifyResult:
    """:func:`verify_rows` as one result (what ``ledger verify`` runs on a SQL ledger):
    the log's findings, and a :attr:`~ledger.integrity.verify.FindingKind.ROW` finding
    for each row the content-hash check refuses (its content hash, its event id or a
    filter column disagrees with its JSON, or its ``time_hi_us`` is below the time
    stored before it: what a filtered read trusts) that no finding of the log names
    already. ``reader`` must be a SQL sink (a :class:`LeafSource`)."""
    hashes, result = verify_rows(reader, verifiers, checkpoints, progress=progress, **options)
    if result is None:
        raise TypeError(f"verify_all needs a SQL sink, not {type(reader).__name__}")
    named = {f.event_id for f in result.findings if f.severity == "error"}
    rows = [
        Finding(
            kind=FindingKind.ROW,
            message=f"event {m.event_id} of run {m.run_id}: {m.detail}",
            event_id=m.event_id,
        )
        for m in hashes.mismatches
        if m.event_id not in named
    ]
    unlisted = hashes.mismatch_count - len(hashes.mismatches)
    if unlisted > 0:
        rows.append(
            Finding(
                kind=FindingKind.ROW,
                message=f"{unlisted} more row(s) disagree with their JSON (only the first "
                f"{len(hashes.mismatches)} are named); run `ledger db check`",
            )
        )
    if not rows:
        return result
    return replace(result, findings=(*result.findings, *rows))


_LISTED = 1000  # unreadable lines named one by one; the rest counted


class _DecodedLines(_Passing):
    """A JSONL file's lines as a :class:`LeafSource` whose first reading also decodes
    each line as every reader does, keeping those that do not read back as events."""

    keeps_head = False

    def __init__(self, source: LeafSource) -> None:
        super().__init__(source)
        self._read = False
        self.unreadable: list[tuple[int, str]] = []
        self.count = 0
        self.lines = 0
        self.torn = 0

    def leaf_rows(self) -> Iterator[LeafRow]:
        if self._read:
            yield from self._source.leaf_rows()
            return
        self._read = True
        decode = Event.from_json
        for row in self._source.leaf_rows():
            self.lines += 1
            try:
                decode(row.data)
            except (ValidationError, RecursionError) as exc:
                self.count += 1
                why = str(exc)
                if cut_short(row.data):
                    self.torn += 1
                    why = (
                        f"it is cut short ({len(row.data)} bytes): a writer was cut off "
                        "mid-line, and the event it was writing is not in the file"
                    )
                if len(self.unreadable) < _LISTED:
                    self.unreadable.append((row.seq, why))
            yield row

    def origin_guess(self) -> str | None:
        guess = getattr(self._source, "origin_guess", None)
        return guess() if callable(guess) else None


def _unended(source: LeafSource) -> bool:
    """True when ``source``'s file does not end with a newline (its last line is then
    one the readers take as cut short)."""
    path = getattr(source, "path", None)
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) != b"\n"
    except OSError:
        return False


def verify_lines(
    source: LeafSource,
    verifiers: Iterable[NoteVerifier] | None = None,
    checkpoints: Iterable[str] = (),
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> VerifyResult:
    """:func:`~ledger.integrity.verify.verify_ledger` of a JSONL file's lines
    (``source``: a :class:`~ledger.integrity.verify.JSONLLeaves`), with a
    :attr:`~ledger.integrity.verify.FindingKind.ROW` finding for each line that does not
    read back as an event (what ``ledger verify`` runs on a ``jsonl:///`` ledger): the
    tree over its lines may agree with a checkpoint, but a line no reader can read is
    not a record. Options are :func:`verify_ledger`'s."""
    lines = _DecodedLines(source)
    result = verify_ledger(lines, verifiers, checkpoints, progress=progress, **options)
    if _unended(source):  # what read_jsonl drops as a cut line, though it may parse
        result = replace(
            result,
            findings=(
                *result.findings,
                Finding(
                    kind=FindingKind.ROW,
                    message=f"line {lines.lines} has no newline: the readers take it as cut "
                    "short (a writer cut off) and do not read its event",
                ),
            ),
        )
    if lines.count and lines.count == lines.lines and not lines.torn:  # something else
        seq, why = lines.unreadable[0]
        found = Finding(
            kind=FindingKind.ROW,
            message=f"none of the file's {lines.lines} line(s) reads back as an event, so it "
            f"is not a JSONL ledger (line {seq}: {why}); for a SQLite file give sqlite:///",
        )
        return replace(result, findings=(*result.findings, found))
    rows = [
        Finding(kind=FindingKind.ROW, message=f"line {seq} does not read back as an event: {why}")
        for seq, why in lines.unreadable
    ]
    if lines.count > len(lines.unreadable):
        rows.append(
            Finding(
                kind=FindingKind.ROW,
                message=f"{lines.count - len(lines.unreadable)} more line(s) do not read back "
                f"as events (only the first {len(lines.unreadable)} are named)",
            )
        )
    return replace(result, findings=(*result.findings, *rows)) if rows else result
