"""Crypto-shredding: ``args`` and ``result`` stored encrypted under a per-run data key.

>>> wrapper = FileKeyWrapper.create("payload.key")        # doctest: +SKIP
>>> sink = SQLiteSink("ledger.db", payload_key=wrapper)   # doctest: +SKIP
>>> sink.commit_action(action)    # a new ledger: shredding  # doctest: +SKIP

A ledger chooses the mode when it is created, and stores it (table ``payload_mode``):

* In shredding mode every run gets a random 256-bit *data key* the first time one of its
  events is written, kept in ``run_keys`` wrapped by the operator's key (a
  :class:`KeyWrapper`: :class:`FileKeyWrapper` for a key file, or anything with the
  same three members, such as a KMS client). Each event's ``args`` and ``result`` are
  stored as an *envelope*, JSON text the event carries in their place::

      {"encrypted":"aes-256-gcm","nonce":"<base64, 12 bytes>","ciphertext":"<base64>"}

  AES-256-GCM of the field's JSON text, with the associated data
  ``agentledger payload v1 \\n origin \\n run id \\n event id \\n field``, so a ciphertext
  moved to another event, field, run or ledger does not decrypt. The stored event JSON
  holds the envelope, so the leaf of the Merkle log covers the ciphertext.
* Erasing a run (``ledger erase --run``, its ``args`` and ``result`` among the fields)
  destroys its data key: the wrapped key is overwritten (``ledger db vacuum`` reclaims the
  space it held) and the rows stay exactly as they are, so the tree, every checkpoint and
  every proof verify before and after; readers show those payloads as erased.
* A reader with the operator's key sees the payloads decrypted; without it, the
  envelopes as stored (encrypted, never a crash); with another key, a clear error.
* A writer without the key is refused at its first event with a payload (nothing of
  the write stored), so the ledger's own maintenance (erase, checkpoints, vacuum) needs
  no payload key. A ledger created in clear cannot be switched to shredding (its stored
  payloads are in clear): opening it for writing with a key is refused.

The key comes from ``payload_key=`` of :class:`~ledger.sinks.SQLiteSink` and
:class:`~ledger.sinks.PostgresSink`, else from ``$LEDGER_PAYLOAD_KEY`` (the path of a key
file), so ``open_sink`` and every command find it. Retention runs (the records of
erasures) are never encrypted: ``ledger verify`` reads them.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson
import sqlalchemy as sa
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ledger.errors import CorruptRecord, IntegrityError, PayloadKeyError, StorageError
from ledger.model.erasure import ADMIN_RUN_PREFIX, ALL_FIELDS, Erasure
from ledger.model.event import Event
from ledger.model.sealed import ENVELOPE_HEAD, ENVELOPE_HEAD_IN_TEXT, is_envelope
from ledger.sinks.rows import parse_row

__all__ = [
    "ENV_KEY",
    "SCHEME",
    "SEALED_FIELDS",
    "FileKeyWrapper",
    "KeyWrapper",
    "Payloads",
    "ShredTables",
    "attach_payloads",
    "check_still_clear",
    "shows_sealed",
    "shred_tables",
    "shredding",
    "writer_events",
]

log = logging.getLogger(__name__)

ENV_KEY = "LEDGER_PAYLOAD_KEY"
"""The environment variable naming the payload key file when ``payload_key`` is not given."""
SCHEME = "aes-256-gcm/v1"
SEALED_FIELDS = ("args", "result", "preview")  # preview: the gate's clip of args or result
_FILE_HEAD = "agentledger-payload-key v1 "
_CACHE_SECONDS = 2.0  # how long a reader trusts a run key's state before reading it again


@runtime_checkable
class KeyWrapper(Protocol):
    """Wraps and unwraps the per-run data keys (the operator's key, or a KMS).

    ``key_id`` names the wrapping key (stored with the ledger's mode, so another key is
    refused by name); ``context`` binds a wrapped key to its ledger and run, and must be
    given back to ``unwrap`` unchanged. ``unwrap`` raises ``PayloadKeyError`` when the
    wrapped bytes do not open under this key and context.
    """

    @property
    def key_id(self) -> str: ...

    def wrap(self, key: bytes, context: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes: ...


class FileKeyWrapper:
    """A :class:`KeyWrapper` over a 256-bit key kept in a file (mode 0600).

    The file holds one line: ``agentledger-payload-key v1 <base64 of 32 bytes>``. A data
    key is wrapped as ``nonce (12 bytes) || AES-256-GCM(key, data key, context)``.
    """

    __slots__ = ("_aead", "_key_id", "path")

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            raise PayloadKeyError(
                f"payload key file {self.path} does not exist; make one with "
                "`ledger payload-key --out FILE`"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PayloadKeyError(f"cannot read the payload key file {self.path}: {exc}") from None
        try:
            if not text.startswith(_FILE_HEAD):
                raise ValueError("no header")
            secret = base64.b64decode(text[len(_FILE_HEAD) :], validate=True)
            if len(secret) != 32:
                raise ValueError("not 32 bytes")
        except ValueError:
            raise PayloadKeyError(
                f"{self.path} is not a payload key file (expected one line "
                f"'{_FILE_HEAD}<base64 of 32 bytes>', as `ledger payload-key` writes)"
            ) from None
        if os.name == "posix" and self.path.stat().st_mode & 0o077:
            log.warning("payload key file %s is readable by others; chmod 600 it", self.path)
        self._aead = AESGCM(secret)
        self._key_id = hashlib.sha256(b"agentledger payload key id\n" + secret).hexdigest()[:16]

    @classmethod
    def create(cls, path: str | Path) -> FileKeyWrapper:
        """Write a new random key to ``path`` (created with mode 0600; an existing file
        is never overwritten) and return its wrapper."""
        target = Path(path)
        line = _FILE_HEAD + base64.b64encode(os.urandom(32)).decode() + "\n"
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise PayloadKeyError(f"{target} exists; a payload key is never overwritten") from None
        except OSError as exc:
            raise PayloadKeyError(f"cannot create the payload key file {target}: {exc}") from None
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return cls(target)

    @property
    def key_id(self) -> str:
        """16 hex digits of SHA-256 over the key (never the key itself)."""
        return self._key_id

    def wrap(self, key: bytes, context: bytes) -> bytes:
        """``nonce || ciphertext`` of ``key`` bound to ``context``."""
        nonce = os.urandom(12)
        return nonce + self._aead.encrypt(nonce, key, context)

    def unwrap(self, wrapped: bytes, context: bytes) -> bytes:
        """The data key; ``PayloadKeyError`` when it does not open."""
        try:
            return self._aead.decrypt(wrapped[:12], wrapped[12:], context)
        except (InvalidTag, ValueError):
            raise PayloadKeyError(
                f"a wrapped run key does not open with payload key {self._key_id} (another "
                "key, or the row was changed outside the ledger)"
            ) from None

    def __repr__(self) -> str:
        return f"FileKeyWrapper({str(self.path)!r}, key_id={self._key_id!r})"


class ShredTables:
    """``payload_mode`` and ``run_keys`` (revision ``0005_payload_keys``)."""

    __slots__ = ("keys", "mode")

    def __init__(self, schema: str | None = None) -> None:
        md = sa.MetaData(schema=schema)
        self.mode = sa.Table(
            "payload_mode",
            md,
            sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
            sa.Column("scheme", sa.Text(), nullable=False),
            sa.Column("key_id", sa.Text(), nullable=False),
            sa.Column("created_us", sa.BigInteger(), nullable=False),
        )
        self.keys = sa.Table(
            "run_keys",
            md,
            sa.Column("run_id", sa.Text(), primary_key=True),
            sa.Column("wrapped", sa.LargeBinary(), nullable=True),
            sa.Column("key_id", sa.Text(), nullable=False),
            sa.Column("created_us", sa.BigInteger(), nullable=False),
            sa.Column("destroyed_us", sa.BigInteger(), nullable=True),
            sa.Column("destroyed_by", sa.Text(), nullable=True),
            sa.Column("record_id", sa.String(26), nullable=True),
            sa.Column("reason", sa.Text(), nullable=True),
        )


@functools.cache
def shred_tables(schema: str | None = None) -> ShredTables:
    """The tables of ``schema``, made once per process (SQLAlchemy compiles a statement
    once per table object: tables made afresh for each reader or erasure would compile
    theirs every time)."""
    return ShredTables(schema)


def sealed_row(row: Sequence[Any]) -> bool:
    """True when a stored row (its JSON ninth) holds a sealed payload: an envelope as
    ``args`` or ``result`` (raw JSON) or as the ``preview`` (a JSON string, escaped)."""
    text = row[8]
    return ENVELOPE_HEAD in text or ENVELOPE_HEAD_IN_TEXT in text


def refusal(rows: Sequence[Any], gone: dict[str, str]) -> PayloadKeyError | None:
    """The error of a caller whose ``rows`` hold a sealed row of a run in ``gone``
    (:meth:`Payloads.erased_runs`; one error object for each caller), else None."""
    found = next((gone[r[1]] for r in rows if r[1] in gone and sealed_row(r)), None)
    return None if found is None else PayloadKeyError(found)


def without_erased(
    items: list[list[Any]],
    gone: dict[str, str],
    write: Callable[[list[list[Any]]], list[BaseException | None]],
) -> list[BaseException | None]:
    """A group commit's per-caller outcome when the runs ``gone`` were erased while
    its rows were sealed (:meth:`Payloads.erased_runs`): each caller with a sealed row
    of such a run gets its error; the others' rows are written by ``write``."""
    refused = [refusal(item, gone) for item in items]
    rest = [item for item, error in zip(items, refused, strict=True) if error is None]
    done = iter(write(rest) if rest else [])
    return [error if error is not None else next(done) for error in refused]


def sealed_fields(event: Event) -> tuple[str, ...]:
    """The names of ``event``'s :data:`SEALED_FIELDS` that hold an envelope, in that order;
    ``()`` for most events, found with three ``startswith`` and no list (the readers'
    hooks ask it of every row they decode).

    >>> sealed_fields(Event(kind="request", args={"q": 1}))
    ()
    """
    args, result = event.args, event.result
    if not (
        event.preview.startswith(ENVELOPE_HEAD)
        or (args is not None and args.startswith(ENVELOPE_HEAD))
        or (result is not None and result.startswith(ENVELOPE_HEAD))
    ):
        return ()
    return tuple(n for n in SEALED_FIELDS if is_envelope(getattr(event, n)))


class _Destroyed:
    """A run key an erasure destroyed: which record, why."""

    __slots__ = ("reason", "record_id")

    def __init__(self, record_id: str, reason: str) -> None:
        self.record_id, self.reason = record_id, reason


_RunKey = AESGCM | _Destroyed | None  # None: no key stored for the run


class Payloads:
    """The payload mode of one sink: seals events for writing, reveals rows read."""

    def __init__(self, sink: Any, wrapper: KeyWrapper | None, *, origin: str, key_id: str) -> None:
        self._sink = sink
        self._wrapper = wrapper
        self._origin = origin
        self.key_id = key_id
        self._t = shred_tables(getattr(sink, "schema", None))
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[float, _RunKey]] = {}
        # without the operator's key, rows read as a keyless reader's: an erased run's
        # payloads erased, the others' envelopes as stored
        self._blind = None if wrapper is not None else _KeylessDecode(sink)

    # --- the write path -------------------------------------------------------------

    def seal(self, event: Event) -> Event:
        """``event`` with ``args`` and ``result`` replaced by their envelopes (the run's
        data key is made and stored first, once per run). ``PayloadKeyError`` without
        the operator's key, or for a run whose key an erasure destroyed."""
        if not (event.args or event.result or event.preview):
            return event
        self.require_key()
        key = self._writable_key(event.run_id)
        changes: dict[str, str] = {}
        for name in SEALED_FIELDS:
            value = getattr(event, name)
            if value:  # None or "" stays as it is
                changes[name] = self._encrypt(key, event, name, value)
        sealed: Event = event.replace(**changes)
        return sealed

    def require_key(self) -> None:
        """``PayloadKeyError`` unless the operator's key was given: what a writer checks
        before its first payload (or, like ``ledger demo``, before it starts a run)."""
        if self._wrapper is None:
            raise PayloadKeyError(
                "this ledger stores args and result encrypted (crypto-shredding), and no "
                f"payload key was given, so nothing was written: pass payload_key= or set "
                f"${ENV_KEY} to the key file (key id {self.key_id})"
            )

    def _encrypt(self, key: AESGCM, event: Event, name: str, text: str) -> str:
        nonce = os.urandom(12)
        data = key.encrypt(nonce, text.encode("utf-8"), self._aad(event, name))
        return (
            ENVELOPE_HEAD
            + base64.b64encode(nonce).decode()
            + '","ciphertext":"'
            + base64.b64encode(data).decode()
            + '"}'
        )

    def _aad(self, event: Event, name: str) -> bytes:
        return (
            f"agentledger payload v1\n{self._origin}\n{event.run_id}\n{event.event_id}\n{name}"
        ).encode()

    def _context(self, run_id: str) -> bytes:
        return f"agentledger run key v1\n{self._origin}\n{run_id}".encode()

    def _writable_key(self, run_id: str) -> AESGCM:
        # On the caller's connection (PostgresSink(connection)) the key row is part of
        # the caller's transaction, which may roll back: read it again every time.
        found = self._cached(run_id, fresh=bool(self._sink._borrowed()))
        if isinstance(found, AESGCM):
            return found
        if isinstance(found, _Destroyed):
            raise PayloadKeyError(
                f"run {run_id!r} was erased (its data key destroyed by erasure record "
                f"{found.record_id}); write its events under a new run id"
            )
        assert self._wrapper is not None
        wrapped = self._wrapper.wrap(os.urandom(32), self._context(run_id))
        k = self._t.keys
        writing: AbstractContextManager[sa.Connection] = self._sink._tree_writing()
        with writing as conn:
            # the mode row may have gone with a transaction of the caller's that rolled
            # back after the sink was opened (PostgresSink(connection)): record it again
            # with the first run key, or refuse, so no envelope is stored without it
            _, recorded = _record_mode(conn, self._sink, self._t, self.key_id, created=False)
            if recorded != self._wrapper.key_id:  # another sink made the ledger meanwhile
                raise PayloadKeyError(
                    f"the payload key {self._wrapper.key_id} is not this ledger's (it was "
                    f"created with key {recorded} meanwhile); nothing was written: open it "
                    "with that key"
                )
            exists = conn.execute(sa.select(k.c.run_id).where(k.c.run_id == run_id)).first()
            if exists is None:
                conn.execute(
                    k.insert().values(
                        run_id=run_id,
                        wrapped=wrapped,
                        key_id=self._wrapper.key_id,
                        created_us=time.time_ns() // 1000,
                    )
                )
        found = self._cached(run_id, fresh=True)
        if not isinstance(found, AESGCM):
            raise PayloadKeyError(f"run {run_id!r}: its data key could not be stored or read")
        return found

    def erased_runs(
        self, fetch: Callable[[str, Sequence[Any]], Sequence[Any]], mark: str, rows: Sequence[Any]
    ) -> dict[str, str]:
        """Of the runs whose ``rows`` (stored rows: the run id second, the JSON ninth)
        hold a sealed payload, those an erasure destroyed the data key of, each with the
        message of the ``PayloadKeyError`` its writers get (:func:`refusal`): read by
        the writer inside its write transaction (``fetch(sql, params)``, ``mark`` the
        driver's parameter mark), since the key a run was sealed with may have been
        destroyed by another process after it was read. Those runs' cached keys are
        forgotten."""
        runs = sorted({row[1] for row in rows if sealed_row(row)})
        if not runs:
            return {}
        k = f'"{self._t.keys.schema}".run_keys' if self._t.keys.schema else "run_keys"
        found = fetch(
            f"SELECT run_id, record_id FROM {k} WHERE run_id IN ({', '.join([mark] * len(runs))}) "
            "AND (destroyed_us IS NOT NULL OR wrapped IS NULL)",
            runs,
        )
        gone = {str(r[0]): str(r[1] or "") for r in found}
        with self._lock:
            for run_id in gone:
                self._keys.pop(run_id, None)
        return {
            run_id: (
                f"run {run_id!r} was erased (its data key destroyed by erasure record "
                f"{record}) while this event was being written; nothing of it was stored: "
                "write its events under a new run id"
            )
            for run_id, record in gone.items()
        }

    # --- the read path --------------------------------------------------------------

    def decode_row(self, row: Any) -> Event:
        """A stored row as its event, ``args`` and ``result`` decrypted (the reader's
        hook). Without the operator's key the envelopes are left as stored; a run whose
        key was destroyed has them erased (``Event.erased`` says by which record)."""
        event = parse_row(row)
        sealed = sealed_fields(event)
        if not sealed:
            return event
        if self._blind is not None:
            return self._blind.shown(event, sealed, row[-1])
        key = self._cached(event.run_id, fresh=False)
        if key is None:
            raise CorruptRecord(
                f"events row seq={row[0]} (event {event.event_id}): its payload is encrypted "
                f"but run {event.run_id!r} has no data key stored; the rows were changed "
                "outside the ledger. Run `ledger verify`",
                seq=row[0],
                event_id=str(event.event_id),
            )
        if isinstance(key, _Destroyed):
            return _shredded(event, sealed, key, row[-1])
        changes: dict[str, str] = {}
        for name in sealed:
            changes[name] = self._decrypt(key, event, name, getattr(event, name), row[0])
        revealed: Event = event.replace(**changes)
        return revealed

    def _decrypt(self, key: AESGCM, event: Event, name: str, text: str, seq: Any) -> str:
        try:
            obj = orjson.loads(text)
            nonce = base64.b64decode(obj["nonce"], validate=True)
            data = base64.b64decode(obj["ciphertext"], validate=True)
            return key.decrypt(nonce, data, self._aad(event, name)).decode("utf-8")
        except (InvalidTag, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            raise CorruptRecord(
                f"events row seq={seq} (event {event.event_id}): its encrypted {name} does "
                "not decrypt; it was changed outside the ledger. Run `ledger verify`",
                seq=seq,
                event_id=str(event.event_id),
            ) from None

    def _cached(self, run_id: str, *, fresh: bool) -> _RunKey:
        now = time.monotonic()
        with self._lock:
            hit = self._keys.get(run_id)
        if hit is not None and not fresh and now - hit[0] < _CACHE_SECONDS:
            return hit[1]
        found = self._load(run_id)
        with self._lock:
            if len(self._keys) > 10_000:
                self._keys.clear()
            self._keys[run_id] = (now, found)
        return found

    def _load(self, run_id: str) -> _RunKey:
        k = self._t.keys
        reading: AbstractContextManager[sa.Connection] = self._sink._reading()
        with reading as conn:
            row = conn.execute(
                sa.select(k.c.wrapped, k.c.record_id, k.c.reason, k.c.destroyed_us).where(
                    k.c.run_id == run_id
                )
            ).first()
        if row is None:
            return None
        if row.destroyed_us is not None or row.wrapped is None:
            return _Destroyed(str(row.record_id or ""), str(row.reason or "erased"))
        assert self._wrapper is not None
        return AESGCM(self._wrapper.unwrap(bytes(row.wrapped), self._context(run_id)))

    def unopenable(self, conn: sa.Connection) -> str | None:
        """The first run (by id) whose standing data key in ``run_keys`` the operator's
        key does not open (a wrapped key changed outside the ledger: the run's payloads
        are lost without an erasure), or None; None also without the operator's key,
        which nothing can be checked with. What ``ledger verify`` checks."""
        if self._wrapper is None:
            return None
        k = self._t.keys
        standing = conn.execute(
            sa.select(k.c.run_id, k.c.wrapped)
            .where(k.c.destroyed_us.is_(None), k.c.wrapped.is_not(None))
            .order_by(k.c.run_id)
        )
        for run_id, wrapped in standing:
            try:
                AESGCM(self._wrapper.unwrap(bytes(wrapped), self._context(str(run_id))))
            except (PayloadKeyError, InvalidTag, ValueError, TypeError):
                return str(run_id)
        return None

    # --- erasure ----------------------------------------------------------------------

    def destroyed(self, conn: sa.Connection, run_id: str) -> bool:
        """True when ``run_id``'s data key was destroyed already (or it has none)."""
        k = self._t.keys
        row = conn.execute(sa.select(k.c.destroyed_us).where(k.c.run_id == run_id)).first()
        return row is None or row[0] is not None

    def destroy(
        self, conn: sa.Connection, run_id: str, *, record_id: str, reason: str, by: str, at_us: int
    ) -> bool:
        """Destroy ``run_id``'s data key inside the erasure's transaction ``conn``: the
        wrapped key is overwritten with NULL (SQLite's ``secure_delete`` zeroes the
        bytes it held). False when the run has no key, or it was destroyed already."""
        k = self._t.keys
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA secure_delete = ON")
        done = conn.execute(
            k.update()
            .where(k.c.run_id == run_id, k.c.destroyed_us.is_(None))
            .values(
                wrapped=None,
                destroyed_us=at_us,
                destroyed_by=by,
                record_id=record_id,
                reason=reason,
            )
        ).rowcount
        with self._lock:
            self._keys.pop(run_id, None)
        return bool(done)


def _shredded(event: Event, sealed: tuple[str, ...], key: _Destroyed, stored: Any) -> Event:
    """``event`` with its sealed fields shown erased by the record that destroyed the key."""
    from ledger.integrity.merkle import leaf_hash

    data = stored if isinstance(stored, bytes) else str(stored).encode("utf-8")
    before = event.erased
    fields = set(sealed) | (set(before.fields) if before else set())
    records = (*before.records, key.record_id) if before else (key.record_id,)
    erasure = Erasure(
        fields=tuple(f for f in ALL_FIELDS if f in fields),
        leaf_hash=before.leaf_hash if before else leaf_hash(data).hex(),
        records=records,
        reason=key.reason,
        had_err=before.had_err if before else None,
        marked_safe=before.marked_safe if before else None,
    )
    shown: Event = event.replace(
        **{n: "" if n == "preview" else None for n in sealed}, erased=erasure
    )
    return shown


def attach_payloads(sink: Any, payload_key: KeyWrapper | None, *, writer: bool) -> None:
    """Read the ledger's payload mode and set ``sink._payloads`` (None in clear mode)
    and, in shredding mode, the reader's hook ``sink._decode``. Called by the SQL sinks
    once their schema is current.

    ``payload_key`` (else ``$LEDGER_PAYLOAD_KEY``) on a new, empty ledger opened by a
    writer makes it a shredding ledger (empty of events: a retention policy or hold set
    first, whose records are always in clear, leaves the choice open).
    ``PayloadKeyError``: another key than the ledger's, or a key given to a writer of a
    ledger created in clear that holds events.
    """
    wrapper = payload_key
    if wrapper is None and os.environ.get(ENV_KEY, "").strip():
        wrapper = FileKeyWrapper(os.environ[ENV_KEY].strip())
    sink._payloads = None
    sink._mode_open = False
    if wrapper is None and not writer:
        # a reader without the key shows envelopes as stored, and a shredded run's as
        # erased: the run keys' table is read at the first envelope (opening reads nothing)
        sink._decode = _KeylessDecode(sink)
        # a sink opened without migrating (a "reader") can still write: its first write
        # checks that the ledger is not a shredding one, whose payloads it would store
        # in clear
        sink._mode_open = True
        return
    t = shred_tables(getattr(sink, "schema", None))
    reading: AbstractContextManager[sa.Connection] = sink._reading()
    with reading as conn:
        row = conn.execute(sa.select(t.mode.c.scheme, t.mode.c.key_id)).first()
        mode = None if row is None else (str(row[0]), str(row[1]))
        empty = mode is not None or not _holds_events(conn, sink._table)
        if mode is None:
            mode = _lost_mode(sink, conn, t, writer=writer)
    if mode is None:
        if wrapper is None:
            # a writer without the key of a ledger with no event yet: one with the key
            # may still make it shredding before this one's first write (which checks)
            sink._mode_open = empty
            return
        if not writer:
            log.info("ledger stores payloads in clear; the payload key is not used")
            return
        if not empty:
            raise PayloadKeyError(
                "this ledger was created without crypto-shredding: its stored args and "
                "result are in clear, so it cannot be switched to encrypted payloads; open "
                "it without a payload key (unset $LEDGER_PAYLOAD_KEY), or copy its events "
                "into a new ledger created with one"
            )
        mode = _create_mode(sink, t, wrapper)
    scheme, key_id = mode
    if scheme != SCHEME:
        raise StorageError(f"the ledger's payload scheme {scheme!r} is unknown to this version")
    if wrapper is not None and wrapper.key_id != key_id:
        raise PayloadKeyError(
            f"the payload key {wrapper.key_id} is not this ledger's (it was created with key "
            f"{key_id}); give the key file it was created with"
        )
    payloads = Payloads(sink, wrapper, origin=sink.origin, key_id=key_id)
    sink._payloads = payloads
    sink._decode = payloads.decode_row


class _KeylessDecode:
    """The reader's hook (``sink._decode``) of a sink opened without the operator's key:
    envelopes are left as stored, but a run whose key was destroyed has them erased.
    The destroyed keys (few: one per shredded run) are read in one query at the first
    envelope and again once :data:`_CACHE_SECONDS` have passed, never once per run.

    At the first row it decodes, the hook reads the ledger's payload mode: a ledger in
    clear that holds events (this row is one) stays in clear for good (only an empty one
    can be made a shredding ledger), so the sink's hook becomes plain ``parse_row`` and
    its later reads pay nothing for the payload mode."""

    __slots__ = ("_at", "_gone", "_settled", "_sink", "_t")

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self._t = shred_tables(getattr(sink, "schema", None))
        self._gone: dict[str, _Destroyed] = {}
        self._at: float | None = None
        self._settled = False

    def __call__(self, row: Any) -> Event:
        if not self._settled:
            self._settle()
        event = parse_row(row)
        sealed = sealed_fields(event)
        return event if not sealed else self.shown(event, sealed, row[-1])

    def shown(self, event: Event, sealed: tuple[str, ...], stored: Any) -> Event:
        """``event`` (whose ``sealed`` fields hold envelopes) as a reader without the key
        shows it: erased when its run's key was destroyed, else as stored."""
        gone = self._destroyed().get(event.run_id)
        return event if gone is None else _shredded(event, sealed, gone, stored)

    def _settle(self) -> None:
        """Read the payload mode once; in clear, make ``parse_row`` the sink's hook."""
        self._settled = True
        reading: AbstractContextManager[sa.Connection] = self._sink._reading()
        try:
            with reading as conn:
                mode = conn.execute(sa.select(self._t.mode.c.scheme).limit(1)).first()
                if mode is None:  # a clear ledger, unless data keys lost their mode row
                    mode = conn.execute(sa.select(self._t.keys.c.run_id).limit(1)).first()
        except (sa.exc.SQLAlchemyError, StorageError) as exc:  # the hook stays
            # (a role allowed to read only the events, say): each row is still checked
            log.debug("payload mode not read (%s); each row is checked for envelopes", exc)
            return
        if mode is None:
            self._sink._decode = parse_row

    def _destroyed(self) -> dict[str, _Destroyed]:
        now = time.monotonic()
        if self._at is None or now - self._at >= _CACHE_SECONDS:
            k = self._t.keys
            reading: AbstractContextManager[sa.Connection] = self._sink._reading()
            try:
                with reading as conn:
                    rows = conn.execute(
                        sa.select(k.c.run_id, k.c.record_id, k.c.reason).where(
                            sa.or_(k.c.destroyed_us.is_not(None), k.c.wrapped.is_(None))
                        )
                    ).all()
            except (sa.exc.SQLAlchemyError, StorageError) as exc:
                # a role that may not read the run keys: envelopes as stored, never a crash
                log.warning("the run keys could not be read (%s): encrypted payloads are "
                            "shown as stored, erased ones too", exc)  # fmt: skip
                rows = []
            self._gone = {
                str(r.run_id): _Destroyed(str(r.record_id or ""), str(r.reason or "erased"))
                for r in rows
            }
            self._at = now
        return self._gone


def shows_sealed(sink: Any) -> bool:
    """True when the SQL ledger ``sink`` leaves encrypted payloads as stored when it
    reads them: a crypto-shredding ledger opened without the operator's key (a reader,
    or a writer that holds no key). What a check of a result's hash (drift) cannot do
    without the key; a ledger in clear, or one opened with the key, shows every payload
    as it was recorded."""
    payloads = sink._payloads
    if payloads is not None:
        return payloads._wrapper is None
    return shredding(sink)


def shredding(sink: Any) -> bool:
    """True when the SQL ledger ``sink`` was created in shredding mode (False for any
    other store, and for a SQL ledger created in clear). A ledger whose ``payload_mode``
    row was deleted but whose data keys remain is still one."""
    if not hasattr(sink, "_reading") or not hasattr(sink, "_table"):
        return False
    t = shred_tables(getattr(sink, "schema", None))
    reading: AbstractContextManager[sa.Connection] = sink._reading()
    with reading as conn:  # a data key without the mode row: the row was deleted
        return any(
            conn.execute(sa.select(column).limit(1)).first() is not None
            for column in (t.mode.c.scheme, t.keys.c.run_id)
        )


def _lost_mode(
    sink: Any, conn: sa.Connection, t: ShredTables, *, writer: bool
) -> tuple[str, str] | None:
    """The payload mode of a ledger whose ``payload_mode`` row is missing: None (a
    ledger in clear) when ``run_keys`` holds no data key either. A data key without the
    mode row means the row was deleted outside the ledger: a writer is refused
    (``IntegrityError``: it would store the payloads of new runs in clear), a reader
    reads on in shredding mode under the key the data keys name, and ``ledger verify``
    reports the deletion (:meth:`ledger.retention.Retention.tables_changed`)."""
    found = conn.execute(sa.select(t.keys.c.key_id).limit(1)).first()
    if found is None:
        return None
    where = getattr(sink, "path", None) or "this ledger"
    if writer:
        raise IntegrityError(
            f"{where}: its run_keys table holds data keys but its payload_mode row is "
            "gone: the ledger was created with crypto-shredding and the row recording "
            "that was deleted outside the ledger, so nothing was written (new payloads "
            "would be stored in clear). Run `ledger verify`, and put the row back from a "
            "backup"
        )
    log.warning(
        "%s: the payload_mode row is missing but run keys exist (deleted outside the "
        "ledger); reading it as a crypto-shredding ledger. Run `ledger verify`",
        where,
    )
    return SCHEME, str(found[0])


def check_still_clear(
    fetch: Callable[[str, Sequence[Any]], Sequence[Any]], schema: str | None
) -> None:
    """Inside the first write transaction of a writer without the key that opened a
    ledger with no payload mode recorded and no event (``sink._mode_open``): refuse
    (``PayloadKeyError``, nothing written) when a writer with a key made it a
    crypto-shredding ledger since, else this one would store payloads in clear in it.
    The mode is recorded under the writers' lock, so either that writer saw this one's
    events (and refused), or this one sees its mode row."""
    table = f'"{schema}".payload_mode' if schema else "payload_mode"
    if fetch(f"SELECT key_id FROM {table}", ()):
        raise PayloadKeyError(
            "this ledger was made a crypto-shredding ledger (by a writer with the payload "
            "key) after this sink opened it without the key, so nothing was written: its "
            "args and results would be stored in clear; open it again with the payload "
            "key ($LEDGER_PAYLOAD_KEY)"
        )


def writer_events(rows: Sequence[Any]) -> bool:
    """True when stored ``rows`` (the run id second) hold an event a writer stored, not
    only retention records (``ledger db copy`` carries those as events): once one is
    committed the ledger is in clear for good (:func:`_holds_events`)."""
    return any(not str(r[1]).startswith(ADMIN_RUN_PREFIX) for r in rows)


def _holds_events(conn: sa.Connection, events: sa.Table) -> bool:
    """True when the ledger holds an event a writer stored: its payload mode is then
    decided (in clear, unless recorded). Retention records (a policy or a hold set
    before the first event), always stored in clear, leave it open."""
    prefix = sa.func.substr(events.c.run_id, 1, len(ADMIN_RUN_PREFIX))
    found = conn.execute(sa.select(events.c.seq).where(prefix != ADMIN_RUN_PREFIX).limit(1))
    return found.first() is not None


def _create_mode(sink: Any, t: ShredTables, wrapper: KeyWrapper) -> tuple[str, str]:
    """Record shredding mode in a new ledger (refused when an event arrived meanwhile)."""
    writing: AbstractContextManager[sa.Connection] = sink._tree_writing()
    with writing as conn:
        return _record_mode(conn, sink, t, wrapper.key_id, created=True)


def _record_mode(
    conn: sa.Connection, sink: Any, t: ShredTables, key_id: str, *, created: bool
) -> tuple[str, str]:
    """The ledger's payload mode, recorded in ``conn``'s transaction when no row holds it
    and the ledger holds no event (:func:`_holds_events`; an event stored in clear first
    makes it a ledger in clear for good: ``PayloadKeyError``)."""
    mode = conn.execute(sa.select(t.mode.c.scheme, t.mode.c.key_id)).first()
    if mode is not None:
        return str(mode[0]), str(mode[1])
    if _holds_events(conn, sink._table):
        raise PayloadKeyError(
            "the ledger received events while it was being created; open it again"
            if created
            else "this ledger holds events stored in clear and no record of crypto-shredding "
            "(the transaction that recorded it was rolled back), so nothing was written; "
            "open it without a payload key"
        )
    conn.execute(
        t.mode.insert().values(
            id=1, scheme=SCHEME, key_id=key_id, created_us=time.time_ns() // 1000
        )
    )
    if created:
        log.info("ledger created in shredding mode (payload key %s)", key_id)
    else:
        log.warning("the ledger's shredding mode was recorded again (payload key %s)", key_id)
    return SCHEME, key_id
