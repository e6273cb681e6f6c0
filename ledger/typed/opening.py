"""One parser for a typed-ledger store location: a folder, or ``git+<repository>``.

::

    open_store("ledgers-store", config)                    # ShardStore (a folder)
    open_store("git+.", config)                            # GitShardStore (this repository)
    open_store("git+https://github.com/o/r.git", config)   # a remote: fetched, never checked out
    open_store("git+file:///srv/ledgers.git", config)

After ``git+`` comes anything ``git`` accepts as a repository: a path to a working tree or
a bare repository, or a URL (``file://``, ``https://``, ``ssh://``, ``user@host:path``).
"""

from __future__ import annotations

import os
from pathlib import Path

from ledger.typed.config import LedgerConfig
from ledger.typed.layout import StoreError
from ledger.typed.storage import LedgerStore

__all__ = ["GIT_PREFIX", "open_store"]

GIT_PREFIX = "git+"


def open_store(
    location: str | os.PathLike[str],
    config: LedgerConfig | None = None,
    *,
    must_exist: bool = False,
    remote: str = "origin",
) -> LedgerStore:
    """The store at ``location``; with ``must_exist`` a missing folder is an error (a
    typo must not look like an empty ledger)."""
    text = os.fspath(location)
    if text.startswith(GIT_PREFIX):
        from ledger.typed.gitstore import GitShardStore

        target = text[len(GIT_PREFIX) :]
        if not target:
            raise StoreError("git+ needs a repository after it: git+PATH or git+URL")
        return GitShardStore(target, config, remote=remote)
    from ledger.typed.store import ShardStore

    path = Path(text)
    if must_exist and not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        raise StoreError(f"the typed-ledger store {path} {what} (give --store an existing folder)")
    return ShardStore(path, config)
