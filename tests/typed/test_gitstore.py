"""GitShardStore: typed ledgers on real git repositories' ledgers/<name> branches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError, PersistError
from ledger.typed import (
    ShardStore,
    build_projection,
    normalize_appends,
    parse_config,
    persist,
    query_sql,
)
from ledger.typed.compaction.apply import apply_compaction, plan_compaction
from ledger.typed.gitstore import INVALID_FILE, GitShardStore
from ledger.typed.layout import StoreError
from tests.typed.oracle import case_id, check_projection_case, config_of, load

CONFIG_DATA: dict[str, Any] = {
    "findings": {"type": "table", "key": "id"},
    "knowledge": {"type": "notes"},
    "events": {"type": "log", "compaction": {"min-segments": 2}},
}
CONFIG = parse_config(CONFIG_DATA)
NOTE = {
    "ledger": "knowledge",
    "operation": "note",
    "subject": "s",
    "note": "n",
    "reason": "r",
    "citations": [{"type": "repository", "path": "README.md"}],
}


def git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, input=data, capture_output=True, env=env, check=True
    )
    return done.stdout.decode().strip()


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    repo = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    return repo


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTLEDGER_GIT_CACHE", str(tmp_path / "cache"))


def artifact(tx: str, finding: str) -> dict[str, Any]:
    requests = [
        {"ledger": "findings", "operation": "insert", "value": {"id": finding}},
        {**NOTE, "subject": finding},
    ]
    return normalize_appends(CONFIG, requests, tx)


def payloads(store: Any, name: str) -> list[Any]:
    return sorted(json.dumps(r.payload, sort_keys=True) for r in store.read(name).records)


def test_persist_and_read_back_over_file_url(bare: Path, tmp_path: Path) -> None:
    url = bare.as_uri()
    store = GitShardStore(url, CONFIG)
    assert store.names() == []
    result = persist(CONFIG, store, artifact("run:1", "a"))
    assert {k: v["persisted"] for k, v in result["ledgers"].items()} == {
        "events": 0,
        "findings": 1,
        "knowledge": 1,
    }
    again = persist(CONFIG, store, artifact("run:1", "a"))  # the same artifact: reconciled
    assert again["ledgers"]["findings"]["already_present"] == 1
    fresh = GitShardStore(url, CONFIG, cache_dir=tmp_path / "other-cache")
    assert fresh.names() == ["findings", "knowledge"]
    assert [r.payload["value"]["id"] for r in fresh.read("findings").records] == ["a"]
    # the branch is the reference's: an empty-tree root commit, one commit per persistence
    log = git(bare, "log", "--format=%s", "ledgers/findings").splitlines()
    assert log == [
        "Append 1 ledger record(s) from workflow run unknown",
        "Initialize ledgers/findings",
    ]
    root = git(bare, "rev-list", "--max-parents=0", "ledgers/findings")
    assert git(bare, "rev-parse", f"{root}^{{tree}}") == git(bare, "mktree", data=b"")
    files = git(bare, "ls-tree", "-r", "--name-only", "ledgers/findings").splitlines()
    assert len(files) == 1 and files[0].startswith("ledger/shards/") and files[0].endswith(".jsonl")
    assert "ledgers/events" not in git(bare, "branch", "--list")  # no branch without records


def test_commit_message_names_the_workflow_run(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_RUN_ID", "98765")
    persist(CONFIG, GitShardStore(bare, CONFIG), artifact("98765:1", "a"))
    assert git(bare, "log", "-1", "--format=%s", "ledgers/knowledge") == (
        "Append 1 ledger record(s) from workflow run 98765"
    )


def test_nothing_in_the_users_worktree_is_touched(tmp_path: Path, bare: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)
    git(clone, "checkout", "-q", "-b", "main")
    (clone / "README.md").write_text("committed\n")
    git(clone, "add", "README.md")
    git(clone, "commit", "-q", "-m", "user work")
    (clone / "README.md").write_text("work in progress\n")  # an uncommitted change
    before = (git(clone, "status", "--porcelain"), git(clone, "symbolic-ref", "HEAD"))
    store = GitShardStore(clone, CONFIG)  # a clone with origin: reads and pushes origin
    persist(CONFIG, store, artifact("run:1", "a"))
    assert (git(clone, "status", "--porcelain"), git(clone, "symbolic-ref", "HEAD")) == before
    assert git(clone, "branch", "--list") == "* main"  # no local branch was made
    assert "ledgers/findings" in git(bare, "branch", "--list")  # ... it went to origin
    build_projection(CONFIG, store, tmp_path / "out")
    assert (git(clone, "status", "--porcelain"), git(clone, "symbolic-ref", "HEAD")) == before


def test_a_clone_reads_what_another_writer_pushed(tmp_path: Path, bare: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True)
    reader = GitShardStore(clone, CONFIG)
    assert reader.names() == []
    persist(CONFIG, GitShardStore(bare.as_uri(), CONFIG), artifact("run:1", "a"))
    assert reader.names() == []  # a snapshot: taken at first use
    reader.refresh()
    assert reader.names() == ["findings", "knowledge"]


def test_a_repository_without_the_remote_holds_the_branches_itself(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    store = GitShardStore(repo, CONFIG)
    persist(CONFIG, store, artifact("run:1", "a"))
    assert "ledgers/findings" in git(repo, "branch", "--list")
    assert git(repo, "status", "--porcelain") == ""


def _commit_tree(repo: Path, branch: str, entries: list[tuple[str, str, str, str]]) -> None:
    """Commit a hand-made tree: (mode, type, oid, path under ledger/shards)."""
    shards = git(
        repo,
        "mktree",
        data="".join(f"{m} {t} {o}\t{p}\n" for m, t, o, p in entries).encode(),
    )
    ledger = git(repo, "mktree", data=f"040000 tree {shards}\tshards\n".encode())
    root = git(repo, "mktree", data=f"040000 tree {ledger}\tledger\n".encode())
    commit = git(repo, "commit-tree", root, "-m", "by hand")
    git(repo, "update-ref", f"refs/heads/{branch}", commit)


SHARD = "0b7c2a4e-3f1d-4c2b-9a8e-1d2c3b4a5f60.jsonl"


@pytest.mark.parametrize(
    "kind", ["symlink", "submodule", "folder", "executable", "other-file", "wrong-name"]
)
def test_trees_the_reference_rejects_are_refused_with_its_message(bare: Path, kind: str) -> None:
    good = ShardStore(bare.parent / "tmpstore")
    (record,) = good.append("findings", [{"operation": "insert", "value": {"id": "a"}}])
    blob = git(bare, "hash-object", "-w", "--stdin", data=(record.to_line() + "\n").encode())
    entries = [("100644", "blob", blob, SHARD)]
    if kind == "symlink":
        target = git(bare, "hash-object", "-w", "--stdin", data=b"../../../etc/passwd")
        entries = [("120000", "blob", target, SHARD)]
    elif kind == "submodule":
        entries = [("160000", "commit", "1" * 40, SHARD)]
    elif kind == "folder":
        inner = git(bare, "mktree", data=f"100644 blob {blob}\tx\n".encode())
        entries.append(("040000", "tree", inner, "0b7c2a4e-3f1d-4c2b-9a8e-1d2c3b4a5f61.jsonl"))
    elif kind == "executable":  # 100755 is a mode the reference accepts
        entries = [("100755", "blob", blob, SHARD)]
    elif kind == "other-file":  # not a shard file: not read, as the reference does not
        entries.append(("100644", "blob", blob, "README.md"))
    else:  # a *.jsonl that is not <uuid4>.jsonl: a diagnostic, as in a checkout
        entries.append(("100644", "blob", blob, "notes.jsonl"))
    _commit_tree(bare, "ledgers/findings", entries)
    store = GitShardStore(bare, CONFIG)
    if kind in ("symlink", "submodule", "folder"):
        with pytest.raises(StoreError, match=INVALID_FILE):
            store.read("findings")
        with pytest.raises(LedgerError, match=INVALID_FILE):
            build_projection(CONFIG, store, bare.parent / "out")
    elif kind == "wrong-name":
        rec = store.read("findings")
        assert [(d.code, d.file) for d in rec.diagnostics] == [("invalid-envelope", "notes.jsonl")]
        with pytest.raises(LedgerError, match="invalid-envelope"):
            build_projection(CONFIG, store, bare.parent / "out")
        folder = ShardStore(bare.parent / "tmpstore")  # the same tree in a folder: the same
        (folder.shard_dir("findings") / "notes.jsonl").write_bytes(b"{}\n")
        assert [d.code for d in folder.read("findings").diagnostics] == ["invalid-envelope"]
    else:
        assert [r.sha for r in store.read("findings").records] == [record.sha]


def test_compaction_on_a_branch(bare: Path, tmp_path: Path) -> None:
    store = GitShardStore(bare.as_uri(), CONFIG)
    for i in range(3):
        store.append("events", [{"operation": "append", "value": i}])
    before = query_sql(
        build_projection(CONFIG, store, tmp_path / "a")["events"], "SELECT * FROM state"
    )
    plan = plan_compaction(CONFIG, store, "events")
    assert plan is not None
    outcome = apply_compaction(CONFIG, store, plan)
    assert outcome.status == "ready"
    store.refresh()
    assert len(store.entries("events")) < 3  # sources merged into one built segment
    assert git(bare, "log", "-1", "--format=%s", "ledgers/events").startswith(
        "Compact ledger events"
    )
    assert git(bare, "ls-tree", "--name-only", "ledgers/events:ledger/compaction") == "state.json"
    after = query_sql(
        build_projection(CONFIG, store, tmp_path / "b")["events"], "SELECT * FROM state"
    )
    assert after == before


CHILD = """
import json, sys
from ledger.typed import normalize_appends, parse_config, persist
from ledger.typed.gitstore import GitShardStore
config = parse_config(json.loads(sys.argv[1]))
store = GitShardStore(sys.argv[2], config, max_attempts=200)
for tx in sys.argv[3:]:
    requests = [{"ledger": "findings", "operation": "insert", "value": {"id": tx}},
                {"ledger": "events", "operation": "append", "value": tx}]
    result = persist(config, store, normalize_appends(config, requests, tx))
    print(json.dumps({k: v["persisted"] for k, v in result["ledgers"].items()}))
"""


def test_concurrent_writers_over_file_url_never_lose_a_record(bare: Path, tmp_path: Path) -> None:
    writers = 6
    procs = []
    for w in range(writers):
        txs = [f"w{w}-{i}:1" for i in range(4)] + ["shared:1"]  # one artifact retried by all
        env = {**os.environ, "AGENTLEDGER_GIT_CACHE": str(tmp_path / f"host{w}")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, json.dumps(CONFIG_DATA), bare.as_uri(), *txs],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    store = GitShardStore(bare, CONFIG)
    ids = sorted(r.payload["value"]["id"] for r in store.read("findings").records)
    expected = sorted([f"w{w}-{i}:1" for w in range(writers) for i in range(4)] + ["shared:1"])
    assert ids == expected  # every record, exactly once (the shared one too)
    assert store.read("events").ok and len(store.read("events").records) == len(expected)
    persisted = sum(json.loads(line)["findings"] for out, _ in outputs for line in out.splitlines())
    assert persisted == len(expected)
    for branch in ("ledgers/findings", "ledgers/events"):  # linear: never a lost update
        assert git(bare, "rev-list", "--merges", branch) == ""
        commits = git(bare, "log", "--format=%s", branch).splitlines()
        assert commits[-1] == f"Initialize {branch}" and len(commits) == len(expected) + 1


ORACLE = load("replay_projection_python_written")


def _fast_import(repo: Path, branches: dict[str, dict[str, str]]) -> None:
    """Commit each branch's shard files by hand, with git fast-import (no ledger code)."""
    stream = bytearray()
    for name, shards in branches.items():
        stream += f"commit refs/heads/ledgers/{name}\n".encode()
        stream += b"committer t <t@example.com> 1700000000 +0000\ndata 14\nshards by hand\n"
        for file, text in shards.items():
            data = text.encode("utf-8", "surrogatepass")
            stream += f"M 100644 inline ledger/shards/{file}\ndata {len(data)}\n".encode()
            stream += data + b"\n"
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=bytes(stream), check=True)


@pytest.mark.parametrize("chunk", range(2))
def test_oracle_shards_committed_by_hand_project_the_same(tmp_path: Path, chunk: int) -> None:
    cases = ORACLE[chunk::2]
    by_branch: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_branch.setdefault(case["config"]["name"], []).append(case)
    failures: dict[str, list[str]] = {}
    for round_no in range(max(len(v) for v in by_branch.values())):
        batch = [v[round_no] for v in by_branch.values() if len(v) > round_no]
        repo = tmp_path / f"handmade{round_no}.git"  # one branch per ledger name
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
        _fast_import(repo, {c["config"]["name"]: c["shards"] for c in batch})
        for case in batch:
            store = GitShardStore(repo, config_of(case))
            out = tmp_path / f"p{round_no}-{case_id(case)}"
            problems = check_projection_case(case, out, store)
            if problems:
                failures[case_id(case)] = problems
    assert failures == {}


def _branches(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/")
    return dict(line.split(" ") for line in out.splitlines())


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    batch=st.lists(
        st.one_of(
            st.builds(
                lambda k: {"ledger": "findings", "operation": "insert", "value": {"id": k}},
                st.sampled_from(["a", "b"]),
            ),
            st.just({**NOTE, "temp_id": "n"}),
            st.builds(
                lambda t: {"ledger": "knowledge", "operation": "vote", "note_id": t, "vote": "up"},
                st.sampled_from(["#n", "ldg-00000000-0000-4000-8000-000000000000"]),
            ),
        ),
        min_size=1,
        max_size=5,
    ),
    seeded=st.booleans(),
)
def test_a_git_persist_succeeds_whole_or_changes_nothing(
    bare: Path, batch: list[dict[str, Any]], seeded: bool
) -> None:
    store = GitShardStore(bare, CONFIG)
    if seeded and not _branches(bare):
        persist(CONFIG, store, artifact("seed:1", "a"))
    try:
        request = normalize_appends(CONFIG, batch, f"run:{uuid.uuid4().hex[:8]}")
    except LedgerError:
        return
    before = _branches(bare)
    try:
        result = persist(CONFIG, store, request)
    except PersistError:
        assert _branches(bare) == before  # no branch moved, none created
        return
    after = _branches(bare)
    for name, entry in result["ledgers"].items():
        ref = f"refs/heads/ledgers/{name}"
        moved = after.get(ref) != before.get(ref)
        assert moved == (entry["persisted"] > 0)
