"""All-or-nothing transactions on a folder store: a write-ahead intent and its recovery.

A transaction (one persisted artifact, one append, one compaction) changes one or more
ledgers at once. On a folder store it goes through ``<root>/.pending/<txid>/``:

1. **stage**: every new shard file and state file is written under the transaction's
   folder and fsynced (nothing under ``ledgers/`` is touched yet);
2. **commit**: the intent ``COMMITTED`` (the list of every file to add and remove, per
   ledger) is written to a temporary name, fsynced and renamed into place; that rename
   is the commit point;
3. **apply**: each staged file is renamed into its ledger's folder (created only now,
   so a ledger that gets no records gets no folder), files to remove are removed, every
   touched folder is fsynced;
4. **finish**: the intent is removed, then the transaction folder.

Whoever next takes the store's lock (a read, an append, a persist, a compaction) first
finishes any transaction left by a crashed process: one with an intent is completed
(step 3 again; each step is idempotent), one without is rolled back (its folder is
removed). So a process killed at any point leaves the store either as before or with
the whole transaction.

The lock is an advisory ``flock`` on the store's root folder: exclusive for writers and
recovery, shared for readers (so a reader never sees half of a transaction).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from ledger.fsync import fsync_path
from ledger.typed import crashpoint
from ledger.typed.config import check_ledger_name
from ledger.typed.layout import SHARD_NAME_RE, SHARDS_DIR, STATE_PATH, LedgerChange, StoreError

__all__ = ["PENDING_DIR", "apply_transaction", "checked_dir", "recover", "store_lock"]

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

log = logging.getLogger(__name__)

PENDING_DIR: Final = ".pending"
INTENT: Final = "COMMITTED"
_INTENT_VERSION: Final = "agentledger/store-transaction/v1"
_held = threading.local()


def checked_dir(root: Path, *parts: str) -> Path:
    """``root/parts...``, refusing a symbolic link (or a non-folder) at any level below
    ``root``: a store never follows a link out of itself. A missing level is fine."""
    path = root
    for part in parts:
        path = path / part
        try:
            info = path.lstat()
        except FileNotFoundError:
            return root.joinpath(*parts)
        if stat.S_ISLNK(info.st_mode):
            raise StoreError(
                f"{path} is a symbolic link; a typed-ledger store never follows links "
                "(replace it with a real folder inside the store)"
            )
        if not stat.S_ISDIR(info.st_mode):
            raise StoreError(f"{path} is not a folder; the typed-ledger store expects one")
    return path


@contextmanager
def store_lock(root: Path, *, shared: bool = False, create: bool = False) -> Iterator[None]:
    """Hold the store's advisory lock (re-entrant within a thread; a no-op without
    ``fcntl`` or, unless ``create``, when the root folder does not exist)."""
    held: dict[str, bool] = getattr(_held, "roots", None) or {}
    _held.roots = held
    key = os.path.realpath(root)
    if key in held or fcntl is None:
        yield
        return
    if create:
        root.mkdir(parents=True, exist_ok=True)
    elif not root.is_dir():
        yield
        return
    fd = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        held[key] = shared
        yield
    finally:
        held.pop(key, None)
        os.close(fd)  # closing the descriptor releases the lock


def pending(root: Path) -> bool:
    """True when an unfinished transaction waits under ``root`` (cheap; no lock)."""
    try:
        return any(True for _ in (root / PENDING_DIR).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return False


def recover(root: Path) -> None:
    """Complete or roll back every unfinished transaction (call under the exclusive lock)."""
    base = checked_dir(root, PENDING_DIR)
    if not base.is_dir():
        return
    for folder in sorted(base.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            raise StoreError(f"{folder} is not a transaction folder; remove it by hand")
        intent = folder / INTENT
        if intent.is_file() and not intent.is_symlink():
            log.warning("completing the interrupted store transaction %s", folder.name)
            _apply(root, folder, _read_intent(intent))
        else:
            log.warning("rolling back the interrupted store transaction %s", folder.name)
        _finish(base, folder)
    _remove_if_empty(base)


def apply_transaction(root: Path, changes: Mapping[str, LedgerChange]) -> None:
    """Stage, commit and apply ``changes`` all or nothing (call under the exclusive lock)."""
    work = {name: change for name, change in changes.items() if not change.empty}
    if not work:
        return
    for name, change in work.items():  # refuse a link or a file in the way before anything
        check_ledger_name(name)
        checked_dir(root, "ledgers", name, *SHARDS_DIR.split("/"))
        if change.state is not None:
            checked_dir(root, "ledgers", name, *STATE_PATH.split("/")[:-1])
    base = checked_dir(root, PENDING_DIR)
    created = not base.exists()
    base.mkdir(parents=True, exist_ok=True)
    if created:
        fsync_path(root)
    folder = base / uuid.uuid4().hex
    folder.mkdir()
    try:
        intent = _stage(folder, work)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        _remove_if_empty(base)
        raise
    try:
        _apply(root, folder, intent)
    except OSError as exc:
        raise StoreError(
            f"the write was committed but could not be completed ({exc}); the next access "
            f"to the store {root} completes it (transaction {folder.name})"
        ) from exc
    _finish(base, folder)
    _remove_if_empty(base)


def _remove_if_empty(base: Path) -> None:
    try:
        base.rmdir()
    except OSError:
        return  # not empty (another transaction waits) or already gone
    fsync_path(base.parent, best_effort=True)


def _stage(folder: Path, changes: Mapping[str, LedgerChange]) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    for name, change in sorted(changes.items()):
        check_ledger_name(name)
        for file in [*change.add, *change.remove]:
            if SHARD_NAME_RE.fullmatch(file) is None:
                raise StoreError(f"shard file name {file!r} is not <uuid4>.jsonl")
        staged = folder / name
        staged.mkdir()
        for file, data in change.add.items():
            _write_synced(staged / file, data)
            crashpoint.step(f"stage {name}/{file}")
        if change.state is not None:
            _write_synced(staged / "state.json", change.state)
            crashpoint.step(f"stage {name}/state.json")
        fsync_path(staged)
        entries[name] = {
            "add": sorted(change.add),
            "remove": sorted(change.remove),
            "state": change.state is not None,
        }
    fsync_path(folder)
    intent = {"version": _INTENT_VERSION, "ledgers": entries}
    temp = folder / f".{INTENT}.tmp"
    _write_synced(temp, json.dumps(intent, sort_keys=True).encode())
    crashpoint.step("intent written")
    os.replace(temp, folder / INTENT)
    fsync_path(folder)
    crashpoint.step("intent committed")
    return intent


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _read_intent(path: Path) -> dict[str, Any]:
    try:
        intent = json.loads(path.read_bytes())
        ledgers = intent["ledgers"]
        if intent["version"] != _INTENT_VERSION or not isinstance(ledgers, dict):
            raise ValueError("unknown version")
        return dict(intent)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"{path}: an interrupted store transaction cannot be read ({exc}); "
            "inspect it and remove its folder by hand"
        ) from None


def _apply(root: Path, folder: Path, intent: Mapping[str, Any]) -> None:
    for name, entry in sorted(intent["ledgers"].items()):
        check_ledger_name(name)
        staged = folder / name
        shards = _make_dirs(root, "ledgers", name, *SHARDS_DIR.split("/"))
        for file in entry["add"]:
            source, target = staged / file, shards / file
            if source.exists():
                os.replace(source, target)
                crashpoint.step(f"apply {name}/{file}")
            elif not target.is_file():
                raise StoreError(
                    f"{folder}: the interrupted transaction lost its staged file {name}/{file}"
                )
        if entry["state"]:
            source = staged / "state.json"
            state_dir = _make_dirs(root, "ledgers", name, *STATE_PATH.split("/")[:-1])
            if source.exists():
                os.replace(source, state_dir / "state.json")
                crashpoint.step(f"apply {name}/state.json")
            fsync_path(state_dir)
        for file in entry["remove"]:
            (shards / file).unlink(missing_ok=True)
            crashpoint.step(f"remove {name}/{file}")
        fsync_path(shards)
        crashpoint.step(f"fsync {name}")


def _make_dirs(root: Path, *parts: str) -> Path:
    """Create ``root/parts`` (refusing links), fsyncing the parent of each new folder."""
    path = root
    for depth, part in enumerate(parts, start=1):
        parent, path = path, path / part
        checked_dir(root, *parts[:depth])
        try:
            path.mkdir()
        except FileExistsError:
            continue
        fsync_path(parent)
    return path


def _finish(base: Path, folder: Path) -> None:
    (folder / INTENT).unlink(missing_ok=True)
    crashpoint.step("intent removed")
    shutil.rmtree(folder, ignore_errors=True)
    fsync_path(base, best_effort=True)
