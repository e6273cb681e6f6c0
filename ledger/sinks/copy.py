"""Copying a ledger from one store to another, and proving the copy whole.

>>> result = copy_ledger("sqlite:///ledger.db", "postgresql://ledger@db/prod")  # doctest: +SKIP
>>> result.copied, result.verified                                            # doctest: +SKIP
(15230, True)

Every event is read from the source in commit order (``events()``) and written to the
destination in that order, in batches through ``record_many`` where the sink has it.
The destination must hold no events yet (a copy never mixes two ledgers). Then the
destination is read back and compared, event by event, with the source: same ids, same
order, the same events. A source record that does not read back (a damaged SQL row, a
corrupt JSONL line) stops the copy with its :class:`~ledger.errors.CorruptRecord`, unless
``skip_unreadable=True``, which leaves it out and lists it in the result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field

from ledger.errors import CorruptRecord, StorageError, ValidationError
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
        if dst.path is not None and dst.path.exists() and dst.path.stat().st_size:
            _require_empty_file(destination)
        created = dst.path is not None and not dst.path.exists()
        with closing(open_sink(destination)) as sink:
            if isinstance(sink, Reader) and next(iter(sink.events(limit=1)), None) is not None:
                raise StorageError(
                    f"destination {dst.shown} already holds events; copy into an empty ledger"
                )
            try:
                copied = _write(sink, _readable(reader, skipped, skip_unreadable), progress)
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
    log.info("copied %d events from %s to %s", copied, src.shown, dst.shown)
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


def _write(sink: Sink, events: Iterator[Event], progress: Callable[[int], None] | None) -> int:
    many = getattr(sink, "record_many", None)
    count = 0
    batch: list[Event] = []
    for event in events:
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
