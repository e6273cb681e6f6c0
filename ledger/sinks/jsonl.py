"""``JSONLSink``: one JSON line per event, appended; ``read_jsonl`` reads it back.

>>> with JSONLSink("run.jsonl") as sink:          # doctest: +SKIP
...     sink.record(Event(kind="request", run_id="r1", args='"hi"'))
>>> contents = read_jsonl("run.jsonl")             # doctest: +SKIP
>>> contents.events, contents.truncated_tail, contents.corrupt_lines  # doctest: +SKIP

Durability: each event is written as ``json + "\\n"`` with a single ``os.write`` on a file
descriptor opened with ``O_APPEND`` (mode 0600 when the file is created), so lines from
several threads or processes never interleave and a crash leaves at worst one truncated
last line. With ``fsync=False`` (the default) a returned ``record`` means "handed to the
operating system": it survives a crash of this process, not a power loss. With
``fsync=True`` each ``record`` also calls ``fsync`` before returning, so it survives a
power loss too (on storage that honours fsync). Either way this is an observation log,
not a ``DurableSink``: it has no ``commit_action`` and no index, so a gate will not trust
it with "no durable record, no action".
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import SinkClosed, StorageError, ValidationError
from ledger.fsync import fsync_path
from ledger.model.event import Event
from ledger.sinks.base import Closing, check_path

__all__ = ["JSONLContents", "JSONLSink", "read_jsonl"]

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
        if fsync and not existed:
            fsync_path(self.path.parent, best_effort=True)

    def record(self, event: Event) -> None:
        """Append ``event`` as one line (one ``os.write``); fsync first if asked."""
        if self._fd is None:  # checked again under the lock; closed comes first
            raise SinkClosed(f"JSONL sink {self.path} is closed; open a new one to write")
        if not isinstance(event, Event):
            raise ValidationError(f"event: expected an Event, got {type(event).__name__}")
        line = (event.to_json() + "\n").encode("utf-8")
        with self._lock:
            fd = self._fd
            if fd is None:
                raise SinkClosed(f"JSONL sink {self.path} is closed; open a new one to write")
            try:
                written = os.write(fd, line)
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
    complete lines that do not parse as an event.
    """

    events: list[Event] = field(default_factory=list)
    truncated_tail: bool = False
    corrupt_lines: list[int] = field(default_factory=list)


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
    for number, line in enumerate(lines, start=1):
        try:
            events.append(Event.from_json(line))
        except (ValidationError, RecursionError) as exc:  # nesting beyond the parser
            log.warning("%s line %d does not parse as an event: %s", path, number, exc)
            corrupt.append(number)
    if tail:
        log.warning("%s ends with a truncated line (%d bytes)", path, len(tail))
    return JSONLContents(events=events, truncated_tail=bool(tail), corrupt_lines=corrupt)
