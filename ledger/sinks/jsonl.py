"""``JSONLSink``: one JSON line per event, appended; ``read_jsonl`` and
``JSONLReader`` read it back.

>>> with JSONLSink("run.jsonl") as sink:          # doctest: +SKIP
...     sink.record(Event(kind="request", run_id="r1", args='"hi"'))
>>> contents = read_jsonl("run.jsonl")             # doctest: +SKIP
>>> contents.events, contents.truncated_tail, contents.corrupt_lines  # doctest: +SKIP
>>> with JSONLReader("run.jsonl") as reader:       # doctest: +SKIP
...     chain = reader.chain("r1")

A crash can cut the last line short. A sink opened on such a file first ends that torn
line with a newline (one ``os.write``; the torn bytes stay, as evidence), so its own first
record starts on a line of its own and is never swallowed by the torn one. ``read_jsonl``
then lists the torn line in ``corrupt_lines`` and in ``torn_lines`` (a line that is the
start of a JSON text cut short), and a line still cut at the end of the file sets
``truncated_tail``.

Durability: each event is written as ``json + "\\n"`` with a single ``os.write`` on a file
descriptor opened with ``O_APPEND`` (mode 0600 when the file is created), under an
exclusive ``flock`` of the file, so lines from several threads or processes never
interleave and a crash leaves at worst one truncated last line. With ``fsync=False``
(the default) a returned ``record`` means "handed to the operating system": it survives
a crash of this process, not a power loss. With
``fsync=True`` each ``record`` also calls ``fsync`` before returning, so it survives a
power loss too (on storage that honours fsync). Either way this is an observation log,
not a ``DurableSink``: it has no ``commit_action`` and no index, so a gate will not trust
it with "no durable record, no action".
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ledger.errors import CorruptRecord, SinkClosed, StorageError, ValidationError
from ledger.fsync import fsync_path
from ledger.model.event import Event
from ledger.sinks.base import Closing, check_path, check_storable
from ledger.sinks.memory import MemoryReader

__all__ = ["JSONLContents", "JSONLReader", "JSONLSink", "cut_short", "read_jsonl"]

log = logging.getLogger(__name__)

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


class JSONLSink(Closing):
    """Append events to ``path`` as JSON lines; safe for threads and processes."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = check_path(path, "JSONLSink")
        if not isinstance(fsync, bool):
            raise ValidationError(f"fsync: expected True or False, got {type(fsync).__name__}")
        self.fsync = fsync
        existed = self.path.exists()
        try:
            self._fd: int | None = os.open(self.path, _FLAGS, 0o600)
        except OSError as exc:
            raise StorageError(
                f"cannot open JSONL ledger {self.path}: {_why(self.path, exc)}"
            ) from exc
        self._lock = threading.Lock()
        try:
            self._seal_torn_tail()
        except OSError as exc:
            os.close(self._fd)
            raise StorageError(f"cannot repair the torn last line of {self.path}: {exc}") from exc
        if fsync and not existed:
            fsync_path(self.path.parent, best_effort=True)

    def _seal_torn_tail(self) -> None:
        """End a last line cut short by a crash with a newline, so the next record starts
        on a fresh line; the torn bytes are kept (``read_jsonl`` reports them)."""
        fd = self._fd
        assert fd is not None
        fcntl.flock(fd, fcntl.LOCK_EX)  # writers hold it for each line: none is in flight
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                return
            reader = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                if os.pread(reader, 1, size - 1) == b"\n":
                    return
            finally:
                os.close(reader)
            log.warning("%s ends with a torn line (a writer was cut off); ending it", self.path)
            os.write(fd, b"\n")
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if self.fsync:
            os.fsync(fd)

    def record(self, event: Event) -> None:
        """Append ``event`` as one line (one ``os.write``); fsync first if asked.
        ``ValidationError`` for a run id of the reserved retention prefix, or a tombstone
        (:func:`~ledger.sinks.base.check_storable`)."""
        self._append(event, copied=False)

    def _record_copied(self, events: Iterable[Event]) -> None:
        """``record`` of each of ``events`` for ``ledger db copy``, which carries the
        source's retention runs as they are."""
        for event in events:
            self._append(event, copied=True)

    def _append(self, event: Event, *, copied: bool) -> None:
        if self._fd is None:  # checked again under the lock; closed comes first
            raise SinkClosed(f"JSONL sink {self.path} is closed; open a new one to write")
        if not isinstance(event, Event):
            raise ValidationError(f"event: expected an Event, got {type(event).__name__}")
        line = ((event if copied else check_storable(event)).to_json() + "\n").encode()
        with self._lock:
            fd = self._fd
            if fd is None:
                raise SinkClosed(f"JSONL sink {self.path} is closed; open a new one to write")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # see _seal_torn_tail: a reader of the tail
                try:  # must not take another process's write in flight for a torn line
                    written = os.write(fd, line)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                if self.fsync:
                    os.fsync(fd)
            except OSError as exc:
                raise StorageError(f"cannot append to {self.path}: {exc}") from exc
        if written != len(line):
            raise StorageError(
                f"short write to {self.path}: {written} of {len(line)} bytes "
                "(disk full?); the last line is truncated"
            )

    def close(self) -> None:
        """Close the file; later ``record`` calls raise ``SinkClosed``. Idempotent."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return self._fd is None

    def __repr__(self) -> str:
        return f"JSONLSink({str(self.path)!r}, fsync={self.fsync})"


def _why(path: Path, exc: OSError) -> str:
    """What went wrong opening ``path``, in the user's terms."""
    if path.is_dir():
        return "it is a directory; give a file path"
    if not path.parent.is_dir():
        return f"the folder {path.parent} does not exist; create it first"
    return str(exc)


@dataclass(frozen=True, slots=True, kw_only=True)
class JSONLContents:
    """What :func:`read_jsonl` found.

    ``events``: every complete line that parses, in file order. ``truncated_tail``: the
    file does not end with a newline, i.e. the last line was cut (the crash evidence);
    that partial line is not in ``events``. ``corrupt_lines``: 1-based numbers of
    complete lines that do not parse as an event. ``torn_lines``: those of them that are
    the start of a JSON text cut short (a writer killed mid-line, whose line a later sink
    ended). ``records``: every line in file order (the last, cut line included), an
    unreadable one (an empty line too) as a :class:`~ledger.errors.CorruptRecord` naming
    its line, whose ``seq`` is its line number.
    """

    events: list[Event] = field(default_factory=list)
    truncated_tail: bool = False
    corrupt_lines: list[int] = field(default_factory=list)
    torn_lines: list[int] = field(default_factory=list)
    records: list[Event | CorruptRecord] = field(default_factory=list)


def read_jsonl(path: str | os.PathLike[str]) -> JSONLContents:
    """Read a JSONL ledger, tolerating and reporting a cut last line and corrupt lines.

    >>> read_jsonl("run.jsonl").truncated_tail  # doctest: +SKIP
    False
    """
    file = check_path(path, "read_jsonl")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise StorageError(f"cannot read JSONL ledger {file}: {exc}") from exc
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    events: list[Event] = []
    corrupt: list[int] = []
    torn: list[int] = []
    records: list[Event | CorruptRecord] = []
    for number, line in enumerate(lines, start=1):
        try:
            event = Event.from_json(line)
        except (ValidationError, RecursionError) as exc:  # nesting beyond the parser
            log.warning("%s line %d does not parse as an event: %s", path, number, exc)
            corrupt.append(number)
            if cut_short(line):
                torn.append(number)
                exc = ValidationError(f"the line is cut short ({len(line)} bytes): {exc}")
            records.append(CorruptRecord(f"{file} line {number}: {exc}", seq=number))
            continue
        events.append(event)
        records.append(event)
    if tail:
        log.warning("%s ends with a truncated line (%d bytes)", path, len(tail))
        number = len(lines) + 1
        records.append(
            CorruptRecord(
                f"{file} line {number}: the last line is cut short ({len(tail)} bytes, no "
                "newline): a writer was cut off, or the file is not a JSONL ledger",
                seq=number,
            )
        )
    return JSONLContents(
        events=events,
        truncated_tail=bool(tail),
        corrupt_lines=corrupt,
        torn_lines=torn,
        records=records,
    )


def cut_short(line: bytes) -> bool:
    """True when ``line`` is the start of a JSON object whose text ends too soon (a
    writer cut off mid-line: what ``read_jsonl`` calls a torn line).

    >>> cut_short(b'{"event_id":"01'), cut_short(b'{"a":1}'), cut_short(b"garbage")
    (True, False, False)
    """
    if not line.startswith(b"{"):
        return False
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return exc.pos >= len(line) - 1 or "unexpected end" in str(exc).lower()
    return False


class JSONLReader(MemoryReader):
    """A read-only :class:`~ledger.sinks.Reader` over one JSONL ledger file, read once.

    Positions (``after`` as an integer, ``CorruptRecord.seq``) are line numbers. An
    unreadable line (corrupt, torn, or the cut last line) is stepped over by reads
    filtered on run, kind, tool or verdict and raised, as a
    :class:`~ledger.errors.CorruptRecord` naming the line, by any other read.
    ``truncated_tail``, ``corrupt_lines`` and ``torn_lines`` are :func:`read_jsonl`'s.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        contents = read_jsonl(path)
        self.path = check_path(path, "JSONLReader")
        self.truncated_tail = contents.truncated_tail
        self.corrupt_lines = tuple(contents.corrupt_lines)
        self.torn_lines = tuple(contents.torn_lines)
        super().__init__(contents.records, where=str(self.path))
