"""Copying a ledger from one store to another, and proving the copy whole.

>>> result = copy_ledger("sqlite:///ledger.db", "postgresql://ledger@db/prod")  # doctest: +SKIP
>>> result.copied, result.verified                                            # doctest: +SKIP
(15230, True)

Every event is read from the source in commit order (``events()``) and written to the
destination in that order, in batches through ``record_many`` where the sink has it.
The destination must hold no events yet (a copy never mixes two ledgers). Then the
destination is read back and compared, event by event, with the source: same ids, same
order, the same events; and the copy's own tamper-evident log (a SQL destination's)
verifies. A source whose events were erased (tombstones) is refused before anything is
written: its rows keep the leaves of the events as committed, which a new log cannot
carry. Between SQL ledgers the retention policy and the legal holds come along (their
table rows, which index policy and hold records the copy carries as events). A source
record that does not read back (a damaged SQL row, a corrupt JSONL
line) stops the copy with its :class:`~ledger.errors.CorruptRecord`, unless
``skip_unreadable=True``, which leaves it out and lists it in the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field

from ledger.errors import CorruptRecord, StorageError, ValidationError
from ledger.model.erasure import tombstone_of
from ledger.model.event import Event
from ledger.sinks.base import Reader, Sink
from ledger.sinks.opening import open_reader, open_sink
from ledger.sinks.url import parse_url

__all__ = ["CopyResult", "copy_ledger"]

log = logging.getLogger(__name__)

BATCH = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyResult:
    """What :func:`copy_ledger` did: events copied, whether the read-back matched, and
    the source records it had to leave out (``skip_unreadable=True`` only)."""

    source: str
    destination: str
    copied: int
    verified: bool
    skipped: tuple[str, ...] = field(default=())


def copy_ledger(
    source: str,
    destination: str,
    *,
    skip_unreadable: bool = False,
    progress: Callable[[int], None] | None = None,
) -> CopyResult:
    """Copy every event of the ledger at ``source`` into the empty ledger at
    ``destination`` (any URL :func:`~ledger.sinks.open_sink` takes but ``discard:``),
    then verify the copy; ``StorageError`` when it does not verify."""
    src, dst = parse_url(source), parse_url(destination)
    if dst.scheme == "discard":
        raise ValidationError("destination: discard: keeps nothing; give a ledger to copy into")
    if (
        src.path is not None and dst.path is not None and src.path.resolve() == dst.path.resolve()
    ) or (src.dsn is not None and (src.dsn, src.schema) == (dst.dsn, dst.schema)):
        raise ValidationError("destination: it is the source ledger; give another file or schema")
    from ledger.sinks.shred import shredding  # SQLAlchemy and cryptography: only when copying

    skipped: list[str] = []
    with closing(open_reader(source)) as reader:
        if shredding(reader):
            raise ValidationError(
                f"source {src.shown} keeps args and result encrypted under per-run keys "
                "(crypto-shredding); copying it is not supported: a copy would either "
                "store the payloads in clear or keep envelopes bound to this ledger, and "
                "shredded runs would arrive without their erasure records. Keep the "
                "database itself (a file copy or pg_dump)"
            )
        erased = _first_erased(reader, source)
        if erased is not None:
            _refuse_erased(erased, src.shown)
        if dst.path is not None and dst.path.exists() and dst.path.stat().st_size:
            _require_empty_file(destination)
        created = dst.path is not None and not dst.path.exists()
        with closing(open_sink(destination)) as sink:
            if isinstance(sink, Reader) and next(iter(sink.events(limit=1)), None) is not None:
                raise StorageError(
                    f"destination {dst.shown} already holds events; copy into an empty ledger"
                )
            try:
                copied = _write(
                    sink, _readable(reader, skipped, skip_unreadable), progress, src.shown
                )
                carried = _carry_tables(reader, sink)
            except Exception as exc:
                sink.close()
                _abandon(destination, created, exc)
                raise
        verified = _verify(reader, destination, copied, skip_unreadable)
    if not verified:
        raise StorageError(
            f"the copy at {dst.shown} does not match {src.shown}: it holds other events "
            "than were read; do not use it"
        )
    try:
        _verify_log(destination, src.shown)
    except StorageError as exc:
        _abandon(destination, created, exc)
        raise
    log.info(
        "copied %d events (and %d retention rows) from %s to %s",
        copied,
        carried,
        src.shown,
        dst.shown,
    )
    return CopyResult(
        source=src.shown, destination=dst.shown, copied=copied, verified=True,
        skipped=tuple(skipped),
    )  # fmt: skip


def _abandon(destination: str, created: bool, exc: Exception) -> None:
    """After a copy failed midway: remove the destination file when the copy created
    it, else say (as a note on ``exc``) that it holds a partial copy."""
    dst = parse_url(destination)
    if created and dst.path is not None:
        for extra in ("", "-wal", "-shm", "-journal"):
            dst.path.with_name(dst.path.name + extra).unlink(missing_ok=True)
        log.info("copy failed; removed the partial copy %s", dst.shown)
        return
    try:
        with closing(open_reader(destination)) as left:
            partial = next(iter(left.events(limit=1)), None) is not None
    except Exception:  # cannot tell: say what to check
        partial = True
    if partial:
        exc.add_note(
            f"the destination {dst.shown} now holds part of the copy: empty it (or give a "
            "new file or schema) before copying again"
        )
        log.warning("copy failed; %s holds a partial copy", dst.shown)


def _require_empty_file(destination: str) -> None:
    with closing(open_reader(destination)) as existing:
        if next(iter(existing.events(limit=1)), None) is not None:
            raise StorageError(
                f"destination {parse_url(destination).shown} already holds events; "
                "copy into an empty ledger"
            )


def _readable(reader: Reader, skipped: list[str], skip: bool) -> Iterator[Event]:
    """Every event in commit order; an unreadable record raises, or is left out and
    named in ``skipped`` when ``skip``."""
    events = reader.events()
    while True:
        try:
            yield from events
            return
        except CorruptRecord as exc:
            if not skip or exc.seq is None:
                raise
            log.warning("copy: %s; left out", exc)
            skipped.append(str(exc))
            events = reader.events(after=exc.seq)


def _refuse_erased(event_id: str, source: str) -> None:
    """An erased event (a tombstone) cannot be copied into a new log: its row keeps the
    leaf of the event as it was before the erasure, which a new log would recompute from
    the tombstone's bytes, so the copy would not verify (it would read as tampered)."""
    raise ValidationError(
        f"source {source} holds erased events (the first: {event_id}); their rows keep "
        "the leaf of the event as committed, which a copy into a new log cannot carry "
        "(the copy would not verify). Keep the database itself instead (a file copy, or "
        "pg_dump of its schema)"
    )


def _first_erased(reader: Reader, source: str) -> str | None:
    """The id of the first erased row of the ledger at ``source``, by its stored bytes (a
    byte search per row or line: no event is decoded), or None; a JSONL file is read as
    its lines (else a copy into an existing ledger would stop midway, part written)."""
    rows = getattr(reader, "leaf_rows", None)
    if rows is None:
        found = parse_url(source)
        if found.scheme != "jsonl" or found.path is None:
            return None
        from ledger.integrity.verify import JSONLLeaves  # only when copying

        rows = JSONLLeaves(found.path).leaf_rows
    for _seq, event_id, _index, data in rows():  # LeafRow, or a cursor's plain tuple
        if tombstone_of(data) is not None:
            return str(event_id)
    return None


def _write(
    sink: Sink, events: Iterator[Event], progress: Callable[[int], None] | None, source: str
) -> int:
    # the source's retention runs are carried as they are (a writer may not make one)
    many = getattr(sink, "_record_copied", None) or getattr(sink, "record_many", None)
    count = 0
    batch: list[Event] = []
    for event in events:
        if event.erased is not None:
            _refuse_erased(str(event.event_id), source)
        if many is None:
            sink.record(event)
            count += 1
        else:
            batch.append(event)
            if len(batch) >= BATCH:
                many(batch)
                count += len(batch)
                batch = []
        if progress is not None and count and count % BATCH == 0:
            progress(count)
    if batch:
        assert many is not None
        many(batch)
        count += len(batch)
    if progress is not None:
        progress(count)
    return count


_CARRIED = ("retention_policy", "legal_holds")  # erasures and payload keys: refused above


def _carry_tables(reader: Reader, sink: Sink) -> int:
    """Copy the rows of the retention policy and legal holds (the index of the policy
    and hold records, which the copy carries as events with the same ids) from a SQL
    source to a SQL destination, in one write transaction; how many rows. Nothing for a
    JSONL side (no tables: a copy made from JSONL refuses to erase until they are set)."""
    import sqlalchemy as sa  # only when copying between SQL ledgers

    source = getattr(reader, "_engine", None)
    writing = getattr(sink, "_tree_writing", None)
    if source is None or writing is None:
        return 0
    src_schema, dst_schema = getattr(reader, "schema", None), getattr(sink, "schema", None)
    carried = 0
    with source.connect() as src, writing() as dst:
        for name in _CARRIED:
            if not sa.inspect(src).has_table(name, schema=src_schema):
                continue
            table = sa.Table(name, sa.MetaData(schema=src_schema), autoload_with=src)
            rows = [dict(r._mapping) for r in src.execute(sa.select(table))]
            if rows:
                target = sa.Table(name, sa.MetaData(schema=dst_schema), autoload_with=dst)
                dst.execute(target.insert(), rows)
                carried += len(rows)
    return carried


def _verify_log(destination: str, source: str) -> None:
    """The copy's own tamper-evident log (a SQL destination keeps one) verifies: a copy
    is called verified only when ``ledger verify`` would say so too."""
    from ledger.integrity.verify import verify_stored  # cryptography: only when copying

    with closing(open_reader(destination)) as copy:
        result = verify_stored(copy)
    if result is not None and not result.ok:
        raise StorageError(
            f"the copy at {parse_url(destination).shown} holds the same events, but its "
            f"tamper-evident log does not verify ({result.errors[0].message}): the source "
            f"holds events the ledger would not have written (check it with `ledger verify --db "
            f"{source}`), or this is a bug to report; do not use the copy"
        )


def _verify(reader: Reader, destination: str, copied: int, skip: bool) -> bool:
    """Read the copy back beside the source: the same events in the same order."""
    mine: list[str] = []
    with closing(open_reader(destination)) as copy:
        theirs = copy.events()
        for original in _readable(reader, mine, skip):
            again = next(theirs, None)
            if again != original:
                return False
        return next(theirs, None) is None and copied >= 0
