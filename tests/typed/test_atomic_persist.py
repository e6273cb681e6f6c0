"""A transaction artifact is persisted across all its ledgers or not at all, even when the
persisting process is SIGKILLed at any write step; no ledger folder without records."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError, PersistError
from ledger.typed import (
    ShardStore,
    canonical_json,
    normalize_appends,
    parse_config,
    persist,
    write_artifact,
)
from ledger.typed.crashpoint import CRASH_ENV
from ledger.typed.filetxn import PENDING_DIR
from ledger.typed.layout import StoreError

CONFIG_DATA: dict[str, Any] = {
    "a": {"type": "log", "max-record-kb": 1, "max-segment-kb": 1},  # several shards
    "b": {"type": "table", "key": "id"},
    "c": {"type": "notes"},
}
CONFIG = parse_config(CONFIG_DATA)
NOW = "2026-01-02T03:04:05.678Z"
NOTE = {
    "ledger": "c",
    "operation": "note",
    "subject": "s",
    "note": "n",
    "reason": "r",
    "citations": [{"type": "repository", "path": "docs/a.md"}],
    "temp_id": "n1",
}
REQUESTS = [
    *({"ledger": "a", "operation": "append", "value": "x" * 300 + str(i)} for i in range(6)),
    {"ledger": "b", "operation": "insert", "value": {"id": "k", "v": 1}},
    NOTE,
    {"ledger": "c", "operation": "vote", "note_id": "#n1", "vote": "up"},
]

CHILD = """
import sys, json
from ledger.typed import ShardStore, parse_config, persist, read_artifact
config = parse_config(json.loads(sys.argv[1]))
persist(config, ShardStore(sys.argv[2], config), read_artifact(sys.argv[3]), now=sys.argv[4])
"""


def state(root: Path) -> dict[str, list[str]]:
    store = ShardStore(root, CONFIG)
    found = {}
    for name in CONFIG.names:
        rec = store.read(name)
        assert rec.ok, rec.diagnostics
        found[name] = sorted(canonical_json(r.payload) for r in rec.records)
    return found


def ledger_folders(root: Path) -> list[str]:
    base = root / "ledgers"
    return sorted(p.name for p in base.iterdir()) if base.is_dir() else []


def test_sigkill_at_every_write_step_leaves_all_or_nothing(tmp_path: Path) -> None:
    template = tmp_path / "template"
    seed = normalize_appends(
        CONFIG, [{"ledger": "a", "operation": "append", "value": "seed"}], "seed:1"
    )
    persist(CONFIG, ShardStore(template, CONFIG), seed, now=NOW)
    artifact = write_artifact(tmp_path / "t.json", normalize_appends(CONFIG, REQUESTS, "run:1"))
    before = state(template)

    reference = tmp_path / "reference"  # the same artifact persisted without a crash
    shutil.copytree(template, reference)
    persist(CONFIG, ShardStore(reference, CONFIG), json.loads(artifact.read_text()), now=NOW)
    complete = state(reference)
    assert all(len(complete[n]) > len(before[n]) for n in CONFIG.names)

    outcomes: list[str] = []
    for step in range(1, 80):
        root = tmp_path / f"run{step}"
        shutil.copytree(template, root)
        env = {**os.environ, CRASH_ENV: str(step)}
        args = [json.dumps(CONFIG_DATA), str(root), str(artifact), NOW]
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True
        )
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        found = state(root)  # the next reader finishes or rolls back the interrupted write
        assert found in (before, complete), f"step {step}: a partial transaction is visible"
        outcomes.append("before" if found == before else "complete")
        assert not (root / PENDING_DIR).exists()
        assert ShardStore(root, CONFIG).names() == ledger_folders(root)
        assert ledger_folders(root) == (["a"] if found == before else ["a", "b", "c"])
        # persisting the artifact again completes it exactly once
        again = persist(CONFIG, ShardStore(root, CONFIG), json.loads(artifact.read_text()))
        assert state(root) == complete
        assert sum(e["persisted"] for e in again["ledgers"].values()) == (
            0 if found == complete else 9
        )
        if proc.returncode == 0:
            break
    else:
        raise AssertionError("the child was still killed after 79 steps")
    # the kill landed on both sides of the commit point
    assert "before" in outcomes and "complete" in outcomes[:-1], outcomes


def test_sigkill_during_a_multi_shard_append(tmp_path: Path) -> None:
    child = (
        "import sys\nfrom ledger.typed import ShardStore\n"
        "ShardStore(sys.argv[1]).append('a', ['x' * 500] * 8, max_segment_kb=1)\n"
    )
    for step in range(1, 40):
        root = tmp_path / f"s{step}"
        env = {**os.environ, CRASH_ENV: str(step)}
        proc = subprocess.run(
            [sys.executable, "-c", child, str(root)], env=env, capture_output=True, text=True
        )
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        rec = ShardStore(root).read("a")
        assert rec.ok and len(rec.records) in (0, 8)
        assert ShardStore(root).names() == ([] if not rec.records else ["a"])
        if proc.returncode == 0:
            break


# --- property: persist succeeds whole or changes nothing ---------------------------------

requests = st.one_of(
    st.builds(lambda v: {"ledger": "a", "operation": "append", "value": v}, st.integers(0, 3)),
    st.builds(
        lambda op, k: {"ledger": "b", "operation": op, "value": {"id": k}},
        st.sampled_from(["insert", "upsert"]),
        st.sampled_from(["k1", "k2"]),
    ),
    st.just(NOTE),
    st.builds(
        lambda t: {"ledger": "c", "operation": "vote", "note_id": t, "vote": "up"},
        st.sampled_from(["#n1", "ldg-00000000-0000-4000-8000-000000000000"]),
    ),
)


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in root.rglob("*")
    }


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.lists(requests, max_size=4),
    batch=st.lists(requests, min_size=1, max_size=6),
    blocked=st.sampled_from([None, "a", "b", "c"]),
    how=st.sampled_from(["file", "symlink"]),
)
def test_persist_succeeds_whole_or_changes_nothing(
    seed: list[dict[str, Any]], batch: list[dict[str, Any]], blocked: str | None, how: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        store = ShardStore(root, CONFIG)
        with contextlib.suppress(LedgerError):
            persist(CONFIG, store, normalize_appends(CONFIG, seed, "seed:1"), now=NOW)
        if blocked is not None and (root / "ledgers" / blocked).exists():
            blocked = None  # the ledger already has records: nothing to block
        if blocked is not None:
            target = root / "ledgers" / blocked
            target.parent.mkdir(parents=True, exist_ok=True)
            if how == "file":
                target.write_text("in the way")  # a real fault: the folder cannot be made
            else:
                (Path(tmp) / "outside").mkdir()
                target.symlink_to(Path(tmp) / "outside")  # refused, never followed
        try:
            artifact = normalize_appends(CONFIG, batch, "run:1")
        except LedgerError:
            return
        before_files = snapshot(root)
        before = {n: len(store.read(n).records) if n != blocked else 0 for n in CONFIG.names}
        try:
            result = persist(CONFIG, store, artifact, now=NOW)
        except PersistError:
            event("refused")
            assert snapshot(root) == before_files
            return
        event("persisted")
        assert list(result["ledgers"]) == list(CONFIG.names)  # every configured ledger
        touched = {n for n, e in result["ledgers"].items() if e["requested"]}
        assert blocked not in touched  # a blocked ledger given appends refuses the whole
        for name in touched:
            entry = result["ledgers"][name]
            assert len(store.read(name).records) == before[name] + entry["persisted"]
        readable = [n for n in CONFIG.names if n != blocked]
        expected = sorted(n for n in readable if store.read(n).records)
        if how == "symlink" and blocked is not None:
            with pytest.raises(StoreError, match="is a symbolic link"):
                store.names()
        else:
            assert store.names() == expected


COMPACT_CHILD = """
import sys
from ledger.typed import ShardStore, parse_config
from ledger.typed.compaction.apply import apply_compaction, plan_compaction
config = parse_config({"log": {"type": "log", "compaction": {"min-segments": 2}}})
store = ShardStore(sys.argv[1], config)
plan = plan_compaction(config, store, "log")
assert apply_compaction(config, store, plan).status == "ready"
"""


def test_sigkill_at_every_step_of_a_compaction(tmp_path: Path) -> None:
    config = parse_config({"log": {"type": "log", "compaction": {"min-segments": 2}}})
    template = tmp_path / "template"
    seed = ShardStore(template, config)
    for i in range(4):
        seed.append("log", [{"operation": "append", "value": i}])
    before_files = sorted(e.file for e in seed.entries("log"))
    shas = sorted(r.sha for r in seed.read("log").records)
    layouts = set()
    for step in range(1, 40):
        root = tmp_path / f"c{step}"
        shutil.copytree(template, root)
        env = {**os.environ, CRASH_ENV: str(step)}
        proc = subprocess.run(
            [sys.executable, "-c", COMPACT_CHILD, str(root)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode in (0, -signal.SIGKILL), proc.stderr
        store = ShardStore(root, config)
        rec = store.read("log")
        assert rec.ok and sorted(r.sha for r in rec.records) == shas  # lossless, always
        files = sorted(e.file for e in store.entries("log"))
        state = store.read_state("log")
        if files == before_files:
            assert state is None  # not applied: no state file either
        else:
            assert len(files) == 1 and state is not None  # applied whole: segment and state
        layouts.add(tuple(files))
        if proc.returncode == 0:
            break
    assert len(layouts) == 2  # the kill landed before and after the commit point
