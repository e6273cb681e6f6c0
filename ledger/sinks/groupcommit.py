"""Group commit by leader and followers, without a dedicated thread.

A caller submits its item and waits. If no write is in progress it becomes the leader:
it takes every item waiting at that moment (its own included), writes them in one
transaction with ``write_batch``, then wakes everyone. Callers arriving meanwhile queue
up and the next leader takes them all together. One caller alone pays no thread handoff;
many callers share a transaction and an fsync::

    committer = GroupCommitter(write_batch)   # write_batch(items) -> [error or None, ...]
    committer.submit(lambda: make_row(event)) # returns once the commit holding it is done

A queued caller hands over the callable, not the item: the leader builds the items of
its batch one after the other just before writing them, so a caller joins the queue at
once and the batch's Python runs in one thread, not in turns of the interpreter lock.
The leader waits (at most ``gather`` seconds) for as many callers as its previous batch
held, since under steady concurrency they are on their way back. A lone caller never
waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ledger.errors import LedgerError, SinkClosed, StorageError

__all__ = ["GroupCommitter"]

T = TypeVar("T")
WriteBatch = Callable[[list[T]], Sequence[BaseException | None]]


class _Ticket(Generic[T]):
    """One caller's item, built by the leader that writes it (``make``); ``wake`` is
    released once: when it is done, or when it must lead the next batch."""

    __slots__ = ("done", "error", "make", "wake")

    def __init__(self, make: Callable[[], T]) -> None:
        self.make = make
        self.done = False
        self.error: BaseException | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class GroupCommitter(Generic[T]):
    """Batch concurrent submissions into shared transactions.

    ``write_batch(items)`` writes all items in one transaction and returns one entry per
    item: None when it is committed, or the exception for that item alone (its part was
    rolled back). If ``write_batch`` raises, every item of the batch fails.

    One caller leads at a time. A follower sleeps on its own ticket's lock; the leader
    releases it when its item is done, or hands it the leadership when it is first in
    line for the next batch, so no thread is woken for nothing.
    """

    def __init__(
        self, write_batch: WriteBatch[T], *, max_batch: int = 512, gather: float = 0.0005
    ) -> None:
        self._write = write_batch
        self._max = max_batch
        self._gather = gather
        self._lock = threading.Lock()
        self._arrival_cv = threading.Condition(self._lock)
        self._idle_cv = threading.Condition(self._lock)
        self._pending: list[_Ticket[T]] = []
        self._last_batch = 1
        self._wanted = 0  # how many pending items the waiting leader waits for (0: none)
        self._leading = False
        self._closed = False

    def submit(self, make: Callable[[], T]) -> None:
        """Build the item with ``make()``, write it in the next group commit, and raise
        its error if it failed (errors of ``make`` itself propagate, nothing written).

        A caller alone builds its item and writes it itself; a caller that finds others
        queues ``make`` at once, and the leader of its batch builds every item in turn
        just before writing them (one thread doing the batch's Python in a row, where
        each caller building its own would take the interpreter lock in turn)."""
        with self._lock:
            if self._closed:
                raise SinkClosed("the sink is closed; open a new one to write")
            # Alone, with no concurrency lately: lead a batch of one without a ticket.
            solo = self._last_batch == 1 and not (self._leading or self._pending)
            if solo:
                self._leading = True
            else:
                ticket = _Ticket(make)
                self._pending.append(ticket)
                lead = not self._leading
                if lead:
                    self._leading = True
                elif self._wanted and len(self._pending) >= self._wanted:
                    self._arrival_cv.notify()  # the leader's batch is full: wake it once
        if solo:
            self._solo(make)
            return
        if not lead:
            ticket.wake.acquire()  # done, or our turn to lead
        while not ticket.done:
            self._lead()
        if ticket.error is not None:
            raise ticket.error

    def _solo(self, make: Callable[[], T]) -> None:
        """The lone caller's path: build, write, hand the leadership on; callers that
        arrived meanwhile are queued and the first of them leads the next batch."""
        try:
            errors = self._write([make()])
        finally:
            self._hand_over()
        if len(errors) != 1:  # pragma: no cover - a write_batch bug
            raise StorageError("group commit lost track of a record")
        if errors[0] is not None:
            raise errors[0]

    def _hand_over(self) -> None:
        """Give the leadership to the first waiting caller, or give it up."""
        with self._lock:
            successor = self._pending[0] if self._pending else None
            if successor is None:
                self._leading = False
                self._wake_closer()
        if successor is not None:
            successor.wake.release()

    def _lead(self) -> None:
        """Write one batch (this thread holds the leadership), then wake its callers and
        hand the leadership to the first caller still waiting, if any."""
        with self._lock:
            # Wait (briefly) for as many callers as the last batch held: under steady
            # concurrency they are on their way back, and one fsync for all beats one
            # each. A lone caller never waits.
            target = min(self._max, max(self._last_batch, len(self._pending)))
            deadline = time.monotonic() + self._gather
            self._wanted = target
            while len(self._pending) < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrival_cv.wait(left)
            self._wanted = 0
            batch, self._pending = self._pending[: self._max], self._pending[self._max :]
            self._last_batch = len(batch)
        try:
            self._run(batch)
        finally:
            with self._lock:
                successor = self._pending[0] if self._pending else None
                if successor is None:
                    self._leading = False
                    self._wake_closer()
            for t in batch:  # every wake is still held: each is released exactly once
                t.wake.release()
            if successor is not None:
                successor.wake.release()

    def _run(self, batch: list[_Ticket[T]]) -> None:
        """Build each caller's item (a caller whose item cannot be built gets that error,
        and nothing of it is written), then write the rest in one transaction."""
        built: list[_Ticket[T]] = []
        items: list[T] = []
        try:
            for t in batch:
                try:
                    items.append(t.make())
                except Exception as exc:
                    t.error, t.done = exc, True
                else:
                    built.append(t)
            errors = self._write(items) if items else []
        except BaseException as exc:  # the whole transaction failed: every caller hears
            for i, t in enumerate(t for t in batch if not t.done):
                t.error, t.done = exc if i == 0 else _copy(exc), True
            if not isinstance(exc, Exception):
                raise
            return
        if len(errors) != len(built):  # pragma: no cover - a write_batch bug
            errors = [StorageError("group commit lost track of a record")] * len(built)
        for t, err in zip(built, errors, strict=True):
            t.error, t.done = err, True

    def _wake_closer(self) -> None:
        """Tell a waiting :meth:`close` that the committer may be idle (lock held)."""
        if self._closed:
            self._idle_cv.notify_all()

    def close(self) -> None:
        """Refuse new submissions and let the writes already queued finish."""
        with self._lock:
            self._closed = True
            while self._leading or self._pending:
                self._idle_cv.wait(0.05)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed


def _copy(exc: BaseException) -> BaseException:
    """A separate exception per waiting thread (one instance must not be raised twice):
    of the same class when it is one of the ledger's errors made from a message (a
    ``PayloadKeyError`` stays one, so a caller that catches it catches it), else a
    ``StorageError`` naming it."""
    copy: BaseException | None = None
    if isinstance(exc, LedgerError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        try:
            copy = type(exc)(exc.args[0])
        except TypeError:  # a constructor that takes more than the message
            copy = None
    if copy is None or str(copy) != str(exc):
        copy = StorageError(f"the group commit holding this record failed: {exc}")
    copy.__cause__ = exc
    return copy
