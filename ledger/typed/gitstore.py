"""Typed ledgers on git branches, where gh-aw keeps them: ``ledgers/<name>``.

::

    store = GitShardStore("https://github.com/owner/repo.git", config)   # or a path, or file://
    build_projection(config, store, "projections")
    persist(config, store, artifact)          # one commit per ledger, pushed compare-and-swap

Each ledger lives on the branch ``ledgers/<name>``: ``ledger/shards/<uuid4>.jsonl`` and
``ledger/compaction/state.json``, exactly the reference's tree. A missing branch is an
empty ledger; the first write creates it from a root commit with the empty tree,
"Initialize ledgers/<name>", and every write makes one commit per ledger, "Append <N>
ledger record(s) from workflow run <GITHUB_RUN_ID|unknown>" (a compaction: "Compact ledger
<name> with plan <id>"). Only git plumbing is used (``hash-object``, ``mktree``,
``commit-tree``, ``update-ref``, ``fetch``, ``push``): nothing is ever checked out, and no
branch, index or working tree of the user's repository is touched.

Where the ledgers live (``repo_path_or_url``):

- **a URL** (``https://``, ``ssh://``, ``file://``, ``user@host:path``): the branches are
  fetched into a private bare cache repository (``$AGENTLEDGER_GIT_CACHE``, else
  ``$XDG_CACHE_HOME/agentledger/git``, else ``~/.cache/agentledger/git``) and written by
  pushing to the URL;
- **a local repository that has the remote** ``remote`` (default ``origin``): the
  branches are fetched from that remote into ``refs/agentledger/<remote>/ledgers/*`` of
  that repository (a private namespace; its own branches stay as they are) and pushed to
  it, so ``GitShardStore(".")`` in a clone reads what gh-aw pushed to GitHub;
- **a local repository without that remote** (a bare repository, say): its own
  ``refs/heads/ledgers/*`` are the ledgers, updated with ``git update-ref`` transactions.

Reads use one snapshot of the branch heads, taken (fetched) at first use; :meth:`refresh`
takes a new one. Every write takes a fresh snapshot, runs the caller's plan on it, and
publishes all the ledgers it changes at once, **compare-and-swap** on every branch head
(``git push --atomic --force-with-lease=<branch>:<expected head>``, or one ``update-ref``
transaction with the expected old values). When another writer moved a branch first, the
push is refused, and the write fetches again, re-plans on the new history (persist's
reconciliation then counts what the other writer already stored as ``already_present``)
and retries, with a growing random pause, up to ``max_attempts`` times. So concurrent
writers on many hosts never lose a record. (A remote that does not support atomic pushes
gets one push per branch, each still compare-and-swap.)

The shard files are the ``*.jsonl`` entries directly in ``ledger/shards``, as a checkout
of the branch shows them to the reference's reader: one that is not a regular blob (a
symlink, a submodule, a folder, a mode other than 100644 or 100755) is refused with the
reference's message, "Ledger branch contains an invalid canonical file"; one whose name is
not ``<uuid4>.jsonl`` is an ``invalid-envelope`` diagnostic (so replay fails closed, as on
a folder store); other paths are not read.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TypeVar

from ledger.errors import LedgerError
from ledger.typed.config import LedgerConfig, check_ledger_name
from ledger.typed.layout import LedgerChange, ShardEntry, StoreError
from ledger.typed.reconstruct import Reconstruction, reconstruct
from ledger.typed.records import Record, parse_line
from ledger.typed.shard_writer import new_shards
from ledger.typed.storage import Plan
from ledger.typed.store import DEFAULT_SEGMENT_BYTES, build_records, payload_list, writable_heads

__all__ = ["GitShardStore"]


class _Batch:
    """The blobs of one ``entries()`` listing, read together on first use."""

    __slots__ = ("blobs", "fetched", "oids")

    def __init__(self, oids: list[str]) -> None:
        self.oids = oids
        self.fetched = False
        self.blobs: dict[str, bytes] = {}


fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

log = logging.getLogger(__name__)
T = TypeVar("T")

BRANCH_PREFIX: Final = "refs/heads/ledgers/"
INVALID_FILE: Final = "Ledger branch contains an invalid canonical file"
_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/:]+@[^/:]+:")
_CONFLICT: Final = re.compile(
    r"stale info|fetch first|non-fast-forward|already exists|atomic push failed|"
    r"cannot lock ref|but expected|reference already exists|failed to update ref",
    re.IGNORECASE,
)


def _default_cache() -> Path:
    configured = os.environ.get("AGENTLEDGER_GIT_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentledger" / "git"


class GitShardStore:
    """The typed ledgers of a git repository's ``ledgers/<name>`` branches.

    ``config`` (optional) supplies each ledger's ``max_segment_kb``, as for
    :class:`~ledger.typed.store.ShardStore`. ``cache_dir`` overrides where a URL's cache
    repository lives; ``max_attempts`` bounds the compare-and-swap retries.
    """

    def __init__(
        self,
        repo_path_or_url: str | os.PathLike[str],
        config: LedgerConfig | None = None,
        *,
        remote: str = "origin",
        cache_dir: str | os.PathLike[str] | None = None,
        max_attempts: int = 30,
        git: str = "git",
    ) -> None:
        self.location = os.fspath(repo_path_or_url)
        self.config = config
        self.max_attempts = max_attempts
        self._git_exe = git
        self._heads: dict[str, str] | None = None
        self._ssh_env: dict[str, str] = {}
        self._lock_depth = 0
        self._lock_guard = threading.RLock()
        if _URL.search(self.location):
            self._remote: str | None = self.location
            self._namespace = "refs/agentledger/url/ledgers/"
            self._git_dir = self._cache_repository(Path(cache_dir) if cache_dir else None)
        else:
            self._git_dir = self._local_repository(Path(self.location))
            has_remote = self._git("remote", "get-url", remote, check=False)[0] == 0
            self._remote = remote if remote and has_remote else None
            self._namespace = (
                f"refs/agentledger/{remote}/ledgers/" if self._remote else BRANCH_PREFIX
            )
        self._identity = self._commit_identity()
        self._ssh_env = self._batch_ssh()

    def _batch_ssh(self) -> dict[str, str]:
        """ssh without prompts (keys and agents still work), unless the user chose one."""
        if "GIT_SSH_COMMAND" in os.environ or "GIT_SSH" in os.environ:
            return {}
        if self._git("config", "--get", "core.sshCommand", check=False)[0] == 0:
            return {}
        return {"GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}

    def __repr__(self) -> str:
        return f"GitShardStore({self.location!r})"

    # --- the repository -----------------------------------------------------------------

    def _git(
        self,
        *args: str,
        data: bytes | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        git_dir: Path | None = None,
    ) -> tuple[int, bytes, str]:
        directory = git_dir or getattr(self, "_git_dir", None)
        command = [self._git_exe]
        if directory is not None:
            command.append(f"--git-dir={directory}")
        command.extend(args)
        full_env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",  # a missing credential fails, it never prompts
            "LC_ALL": "C",
            **self._ssh_env,
            **(env or {}),
        }
        try:
            done = subprocess.run(command, input=data, capture_output=True, env=full_env)
        except FileNotFoundError:
            raise StoreError(
                f"the git command ({self._git_exe!r}) was not found; install git to use a "
                "git+ store"
            ) from None
        stderr = done.stderr.decode("utf-8", "replace").strip()
        if check and done.returncode != 0:
            raise StoreError(
                f"git {args[0]} failed for {self.location}: {stderr or done.returncode}"
            )
        return done.returncode, done.stdout, stderr

    def _local_repository(self, path: Path) -> Path:
        if not path.exists():
            raise StoreError(f"{path} does not exist (give git+ a repository path or URL)")
        code, out, err = self._git(
            "-C", str(path), "rev-parse", "--absolute-git-dir", check=False, git_dir=None
        )
        if code != 0:
            raise StoreError(
                f"{path} is not a git repository ({err.splitlines()[-1] if err else 'no .git'}); "
                "give git+ a clone, a bare repository or a URL"
            )
        return Path(out.decode().strip())

    def _cache_repository(self, base: Path | None) -> Path:
        root = base or _default_cache()
        root.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(self.location.encode()).hexdigest()[:24]
        repo = root / f"{digest}.git"
        with self._file_lock(root / f"{digest}.lock"):
            if not (repo / "HEAD").exists():
                self._git("init", "--bare", "--quiet", str(repo), git_dir=None)
        return repo

    def _commit_identity(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for role in ("AUTHOR", "COMMITTER"):
            for field, key, default in (
                ("NAME", "user.name", "agentledger"),
                ("EMAIL", "user.email", "agentledger@localhost"),
            ):
                if f"GIT_{role}_{field}" in os.environ:
                    continue
                code, out, _ = self._git("config", "--get", key, check=False)
                if code != 0 or not out.strip():
                    env[f"GIT_{role}_{field}"] = default
        return env

    @contextmanager
    def _file_lock(self, path: Path) -> Iterator[None]:
        if fcntl is None:  # pragma: no cover - not POSIX
            yield
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this host's lock on the repository, re-entrantly (fetches and writes on
        one host take turns; writers on other hosts are kept apart by the compare-and-swap
        push)."""
        with self._lock_guard:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            with self._file_lock(self._git_dir / "agentledger.lock"):
                self._lock_depth = 1
                try:
                    yield
                finally:
                    self._lock_depth = 0

    # --- snapshots ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Take a new snapshot of the branch heads (fetching them from the remote)."""
        self._heads = self._snapshot()

    def _snapshot(self) -> dict[str, str]:
        with self.locked():  # two fetches into one repository would race for its refs
            return self._snapshot_locked()

    def _snapshot_locked(self) -> dict[str, str]:
        if self._remote is not None:
            refspec = f"+{BRANCH_PREFIX}*:{self._namespace}*"
            code, _, err = self._git(
                "fetch", "--prune", "--no-tags", "--quiet", self._remote, refspec, check=False
            )
            if code != 0:
                raise StoreError(f"cannot fetch the ledger branches from {self._remote}: {err}")
        _, out, _ = self._git("for-each-ref", "--format=%(objectname) %(refname)", self._namespace)
        heads: dict[str, str] = {}
        for line in out.decode().splitlines():
            oid, ref = line.split(" ", 1)
            name = ref[len(self._namespace) :]
            try:
                check_ledger_name(name)
            except LedgerError:
                continue  # not a ledger branch (e.g. ledgers/a/b)
            heads[name] = oid
        return heads

    def _current(self) -> dict[str, str]:
        if self._heads is None:
            self._heads = self._snapshot()
        return self._heads

    def head(self, name: str) -> str | None:
        """The commit the snapshot holds for ``ledgers/<name>`` (``None``: no branch)."""
        check_ledger_name(name)
        return self._current().get(name)

    # --- reading --------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The ledgers whose branch holds at least one shard file, sorted."""
        return sorted(n for n in self._current() if self.entries(n))

    def entries(self, name: str) -> list[ShardEntry]:
        """The ``*.jsonl`` files directly in ``ledger/shards`` of ``ledgers/<name>``, as a
        checkout of the branch shows them to the reference's reader (a name that is not
        ``<uuid4>.jsonl`` becomes an ``invalid-envelope`` diagnostic on read). One that is
        not a regular blob (a symlink, a submodule, a folder, a mode other than 100644 or
        100755) is refused with the reference's message."""
        commit = self.head(name)
        if commit is None:
            return []
        _, out, _ = self._git("ls-tree", "-z", "-l", commit, "--", "ledger/shards/")
        found: list[tuple[str, str, int]] = []
        for item in out.split(b"\0"):
            if not item:
                continue
            meta, _, raw_path = item.partition(b"\t")
            path = raw_path.decode("utf-8", "surrogateescape")
            file = path.rpartition("/")[2]
            if not path.startswith("ledger/shards/") or not file.endswith(".jsonl"):
                continue  # not a shard file: neither reference reader looks at it
            mode, kind, oid, size = meta.decode().split()
            if kind != "blob" or mode not in ("100644", "100755"):
                raise StoreError(
                    f"{INVALID_FILE}: ledgers/{name} holds {path} as a {kind} of mode {mode} "
                    "(a shard must be a regular file)"
                )
            found.append((file, oid, int(size)))
        batch = _Batch([oid for _, oid, _ in found])

        def loader(oid: str) -> Callable[[], bytes]:
            return lambda: self._blob(oid, batch)

        return [
            ShardEntry(file=file, kind="file", size=size, load=loader(oid))
            for file, oid, size in found
        ]

    def _blob(self, oid: str, batch: _Batch) -> bytes:
        """One blob's bytes; the first load of a listing reads all its blobs through one
        ``cat-file --batch``, and each is then handed out once (a reconstruction reads
        every shard once, so memory is not held twice)."""
        if not batch.fetched:
            batch.fetched = True
            batch.blobs = self._cat_files(list(dict.fromkeys(batch.oids)))
        data = batch.blobs.pop(oid, None)
        return data if data is not None else self._cat_files([oid])[oid]

    def _cat_files(self, oids: Sequence[str]) -> dict[str, bytes]:
        _, out, _ = self._git("cat-file", "--batch", data="".join(f"{o}\n" for o in oids).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for oid in oids:
            end = out.index(b"\n", pos)
            header = out[pos:end].decode().split()
            if len(header) != 3:
                raise StoreError(f"git cat-file could not read object {oid} of {self.location}")
            size = int(header[2])
            found[oid] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
        return found

    def read_state(self, name: str) -> bytes | None:
        """``ledger/compaction/state.json`` of the branch, ``None`` when absent."""
        commit = self.head(name)
        if commit is None:
            return None
        _, out, _ = self._git("ls-tree", "-z", commit, "--", "ledger/compaction/state.json")
        if not out.strip(b"\0"):
            return None
        meta = out.split(b"\t", 1)[0].decode().split()
        if meta[1] != "blob" or meta[0] not in ("100644", "100755"):
            raise StoreError(
                f"ledgers/{name} holds ledger/compaction/state.json as a {meta[1]} of mode "
                f"{meta[0]}; the state must be a regular file"
            )
        _, data, _ = self._git("cat-file", "blob", meta[2])
        return data

    def segment_bytes(self, name: str, override_kb: int | None = None) -> int:
        """The size at which appends to ``name`` roll to a new shard file."""
        if override_kb is not None:
            return override_kb * 1024
        if self.config is not None and name in self.config:
            return self.config[name].max_segment_bytes
        return DEFAULT_SEGMENT_BYTES

    def read(self, name: str, *, max_segment_kb: int | None = None) -> Reconstruction:
        """Reconstruct ledger ``name`` from its branch (empty when there is none)."""
        max_bytes: int | None = None
        if max_segment_kb is not None or (self.config is not None and name in self.config):
            max_bytes = self.segment_bytes(name, max_segment_kb)
        return reconstruct(name, self.entries(name), max_bytes)

    # --- writing --------------------------------------------------------------------------

    def run_transaction(self, plan: Plan[T]) -> T:
        """Fetch, run ``plan`` on the fresh history, commit and push compare-and-swap;
        on a refused push fetch again, re-plan and retry."""
        with self.locked():
            for attempt in range(1, self.max_attempts + 1):
                self._heads = self._snapshot()
                changes, result = plan()
                work = {n: c for n, c in sorted(changes.items()) if not c.empty}
                if not work:
                    return result
                updates = [(n, self._commit(n, c), self._heads.get(n)) for n, c in work.items()]
                if self._publish(updates):
                    for name, new, _ in updates:
                        self._heads[name] = new
                    log.info("pushed %d ledger branch(es) to %s", len(updates), self.location)
                    return result
                pause = min(2.0, 0.05 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.5)
                log.info(
                    "another writer moved a ledger branch of %s; re-planning (attempt %d) in %.2fs",
                    self.location,
                    attempt,
                    pause,
                )
                time.sleep(pause)
        raise StoreError(
            f"gave up after {self.max_attempts} attempts: other writers kept moving the "
            f"ledger branches of {self.location}; nothing was written, retry later"
        )

    def _commit(self, name: str, change: LedgerChange) -> str:
        check_ledger_name(name)
        parent = (self._heads or {}).get(name)
        if parent is None:
            parent = self._git_out(
                "commit-tree",
                self._empty_tree(),
                "-m",
                f"Initialize ledgers/{name}",
                env=self._identity,
            )
            base: str | None = None
        else:
            base = f"{parent}^{{tree}}"
        tree = self._tree_with(base, change)
        run_id = os.environ.get("GITHUB_RUN_ID") or "unknown"
        message = change.message or (
            f"Append {change.records} ledger record(s) from workflow run {run_id}"
        )
        return self._git_out("commit-tree", tree, "-p", parent, "-m", message, env=self._identity)

    def _git_out(
        self, *args: str, data: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        return self._git(*args, data=data, env=env)[1].decode().strip()

    def _empty_tree(self) -> str:
        return self._git_out("mktree", data=b"")

    def _ls(self, tree: str | None) -> dict[str, tuple[str, str, str]]:
        if tree is None:
            return {}
        _, out, _ = self._git("ls-tree", "-z", tree)
        entries: dict[str, tuple[str, str, str]] = {}
        for item in out.split(b"\0"):
            if item:
                meta, _, path = item.partition(b"\t")
                mode, kind, oid = meta.decode().split()
                entries[path.decode("utf-8", "surrogateescape")] = (mode, kind, oid)
        return entries

    def _mktree(self, entries: Mapping[str, tuple[str, str, str]]) -> str:
        data = b"".join(
            f"{mode} {kind} {oid}\t".encode() + name.encode("utf-8", "surrogateescape") + b"\0"
            for name, (mode, kind, oid) in sorted(entries.items())
        )
        return self._git_out("mktree", "-z", data=data)

    def _subtree(
        self, entries: Mapping[str, tuple[str, str, str]], name: str, where: str
    ) -> str | None:
        entry = entries.get(name)
        if entry is None:
            return None
        if entry[1] != "tree":
            raise StoreError(f"{INVALID_FILE}: {where} is a {entry[1]}, not a folder")
        return entry[2]

    def _tree_with(self, base: str | None, change: LedgerChange) -> str:
        root = self._ls(base)
        ledger = self._ls(self._subtree(root, "ledger", "ledger"))
        shards = self._ls(self._subtree(ledger, "shards", "ledger/shards"))
        for file, data in change.add.items():
            shards[file] = (
                "100644",
                "blob",
                self._git_out("hash-object", "-w", "--stdin", data=data),
            )
        for file in change.remove:
            shards.pop(file, None)
        if shards:
            ledger["shards"] = ("040000", "tree", self._mktree(shards))
        else:
            ledger.pop("shards", None)
        if change.state is not None:
            compaction = self._ls(self._subtree(ledger, "compaction", "ledger/compaction"))
            oid = self._git_out("hash-object", "-w", "--stdin", data=change.state)
            compaction["state.json"] = ("100644", "blob", oid)
            ledger["compaction"] = ("040000", "tree", self._mktree(compaction))
        if ledger:
            root["ledger"] = ("040000", "tree", self._mktree(ledger))
        else:
            root.pop("ledger", None)
        return self._mktree(root)

    def _publish(self, updates: Sequence[tuple[str, str, str | None]]) -> bool:
        """Move every branch from its expected head to its new commit, all or none;
        ``False`` when some branch was not at its expected head (another writer)."""
        if self._remote is None:
            zero = "0" * len(updates[0][1])
            script = (
                "start\n"
                + "".join(
                    f"update {BRANCH_PREFIX}{name} {new} {old or zero}\n"
                    for name, new, old in updates
                )
                + "prepare\ncommit\n"
            )
            code, _, err = self._git("update-ref", "--stdin", data=script.encode(), check=False)
            if code == 0:
                return True
            if _CONFLICT.search(err):
                return False
            raise StoreError(f"cannot update the ledger branches of {self.location}: {err}")
        code, err = self._push(updates, atomic=True)
        if code != 0 and "atomic" in err and "support" in err:
            log.warning(
                "%s does not support atomic pushes; pushing one branch at a time", self._remote
            )
            for update in updates:
                single, err = self._push([update], atomic=False)
                if single != 0:
                    code = single
                    break
            else:
                code = 0
        if code == 0:
            for name, new, _ in updates:
                self._git("update-ref", f"{self._namespace}{name}", new)
            return True
        if _CONFLICT.search(err):
            return False
        raise StoreError(f"git push to {self._remote} failed: {err}")

    def _push(
        self, updates: Iterable[tuple[str, str, str | None]], *, atomic: bool
    ) -> tuple[int, str]:
        assert self._remote is not None
        args = ["push", "--porcelain", "--no-verify", "--quiet"]
        if atomic:
            args.append("--atomic")
        refspecs: list[str] = []
        for name, new, old in updates:
            ref = f"{BRANCH_PREFIX}{name}"
            args.append(f"--force-with-lease={ref}:{old or ''}")
            refspecs.append(f"{new}:{ref}")
        code, out, err = self._git(*args, self._remote, *refspecs, check=False)
        return code, f"{out.decode('utf-8', 'replace')}\n{err}"

    def append(
        self,
        name: str,
        payloads: Iterable[Any],
        *,
        timestamp: datetime | str | None = None,
        ids: Sequence[str] | None = None,
        type: str = "ledger_append",
        max_segment_kb: int | None = None,
    ) -> list[Record]:
        """Append one record per payload on ``ledgers/<name>`` (as
        :meth:`ShardStore.append <ledger.typed.store.ShardStore.append>`)."""
        check_ledger_name(name)
        listed = payload_list(payloads, ids)
        if not listed:
            return []

        def plan() -> tuple[dict[str, LedgerChange], list[Record]]:
            heads = writable_heads(self.read(name))
            records = build_records(heads, listed, timestamp=timestamp, ids=ids, type=type)
            change, located = new_shards(records, self.segment_bytes(name, max_segment_kb))
            return {name: change}, located

        return self.run_transaction(plan)

    def append_records(
        self, name: str, records: Sequence[Record], *, max_segment_kb: int | None = None
    ) -> list[Record]:
        """Commit fully formed records as new shards of ``ledgers/<name>``."""
        check_ledger_name(name)
        checked = [parse_line(record.to_line()) for record in records]
        if not checked:
            return []
        change, located = new_shards(checked, self.segment_bytes(name, max_segment_kb))
        self.run_transaction(lambda: ({name: change}, None))
        return located
