"""The ledger a viewer shows: one reader for the server's life, opened read-only.

>>> with LedgerSource("sqlite:///ledger.db") as source:      # doctest: +SKIP
...     reader = source.reader()

A SQL ledger is read through one :func:`~ledger.sinks.open_reader` reader (its queries
see new events as they commit). A JSONL file is read whole when opened, so the source
opens it again when the file's size or modification time changes: a page always shows
what the file holds. :func:`readable_events` steps over rows that do not read back,
keeping them as findings.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Self

from ledger.errors import CorruptRecord
from ledger.model.event import Event
from ledger.sinks.base import Reader
from ledger.sinks.opening import open_reader
from ledger.sinks.url import parse_url

__all__ = ["LedgerSource", "readable_events"]

log = logging.getLogger(__name__)


class LedgerSource:
    """Opens the ledger at ``url`` for reading (never for writing) and hands out its
    reader; thread-safe."""

    def __init__(self, url: str) -> None:
        parsed = parse_url(url)
        self.shown = parsed.shown
        self._url = url
        self._file = parsed.path if parsed.scheme == "jsonl" else None
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._reader: Reader | None = open_reader(url)
        self._old: list[Reader] = []

    def _stat(self) -> tuple[int, int] | None:
        if self._file is None:
            return None
        try:
            st = os.stat(self._file)
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def reader(self) -> Reader:
        """The reader (a JSONL file is read again when it changed on disk)."""
        with self._lock:
            if self._reader is None:
                raise RuntimeError("the ledger source was closed")
            if self._file is not None:
                stamp = self._stat()
                if stamp != self._stamp and stamp is not None:
                    log.info("%s changed on disk: reading it again", self.shown)
                    fresh = open_reader(self._url)
                    self._old.append(self._reader)  # a page may still be reading it
                    self._reader, self._stamp = fresh, stamp
            return self._reader

    def close(self) -> None:
        """Close the reader; idempotent."""
        with self._lock:
            readers = [r for r in (self._reader, *self._old) if r is not None]
            self._reader, self._old = None, []
        for r in readers:
            r.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def readable_events(
    reader: Reader, skipped: list[CorruptRecord], **filters: Any
) -> Iterator[Event]:
    """``reader.events(**filters)``, stepping over a stored row that does not read back
    as an event: it is appended to ``skipped`` and reading goes on after it (by its
    ``seq``). A row without a position ends the read (it is still reported)."""
    events = reader.events(**filters)
    while True:
        try:
            yield from events
            return
        except CorruptRecord as exc:
            skipped.append(exc)
            if exc.seq is None:
                log.warning("unreadable record without a position ends the read: %s", exc)
                return
            log.warning("unreadable record skipped: %s", exc)
            events = reader.events(**filters, after=exc.seq)
