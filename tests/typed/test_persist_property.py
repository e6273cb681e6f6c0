"""Property: persistence either succeeds or leaves every byte of the store unchanged."""

from __future__ import annotations

import contextlib
import copy
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ledger.errors import LedgerError, PersistError
from ledger.typed.config import parse_config
from ledger.typed.jsontext import final_id
from ledger.typed.persist import persist
from ledger.typed.store import ShardStore
from ledger.typed.transactions import normalize_appends

CONFIG = parse_config(
    {
        "log": {"type": "log"},
        "tbl": {"type": "table", "key": "id"},
        "cnt": {"type": "counter"},
        "kn": {"type": "notes"},
        "raw": {"schema": {"type": "object", "required": ["a"]}},
    }
)
CITATION = {"type": "repository", "path": "docs/a.md"}
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=4))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
keys = st.sampled_from(["a", "b"])

requests = st.one_of(
    st.builds(lambda v: {"ledger": "log", "operation": "append", "value": v}, json_values),
    st.builds(
        lambda op, k, v: {"ledger": "tbl", "operation": op, "value": {"id": k, "v": v}},
        st.sampled_from(["insert", "upsert"]),
        keys,
        json_values,
    ),
    st.builds(
        lambda k, v: {"ledger": "tbl", "operation": "update", "key": k, "patch": {"v": v}},
        keys,
        json_values,
    ),
    st.builds(
        lambda op, n, a: {"ledger": "cnt", "operation": op, "name": n, "amount": a},
        st.sampled_from(["increment", "decrement"]),
        keys,
        st.sampled_from([0, 1, 2**53 - 1]),
    ),
    st.builds(
        lambda t: {
            "ledger": "kn",
            "operation": "note",
            "subject": "s",
            "note": "n",
            "reason": "r",
            "citations": [CITATION],
            "temp_id": t,
        },
        st.sampled_from(["n1", "n2"]),
    ),
    st.builds(
        lambda t, v: {"ledger": "kn", "operation": "vote", "note_id": t, "vote": v},
        st.sampled_from(["#n1", "#n2", "ldg-missing"]),
        st.sampled_from(["up", "down"]),
    ),
    st.builds(lambda v: {"ledger": "raw", "record": {"a": v}}, json_values),
)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def tamper(artifact: dict[str, Any], choice: int) -> dict[str, Any]:
    bad = copy.deepcopy(artifact)
    entries = [a for ledger in bad["ledgers"].values() for a in ledger["appends"]]
    if choice == 1 and entries:
        entries[0]["record"]["sha"] = "sha256:" + "0" * 64
    elif choice == 2 and entries:
        entries[-1]["index"] += 1
        entries[-1]["record"]["id"] = final_id(bad["transaction_id"], entries[-1]["index"])
    elif choice == 3:
        bad["version"] = 2
    return bad


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.lists(requests, max_size=6),
    batch=st.lists(requests, min_size=1, max_size=8),
    choice=st.integers(0, 3),
    same_tx=st.booleans(),
)
def test_persist_succeeds_or_changes_nothing(
    seed: list[dict[str, Any]], batch: list[dict[str, Any]], choice: int, same_tx: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = ShardStore(root)
        with contextlib.suppress(LedgerError):
            persist(CONFIG, store, normalize_appends(CONFIG, seed, "seed:1"))
        try:
            artifact = normalize_appends(CONFIG, batch, "seed:1" if same_tx else "run:1")
        except LedgerError:
            event("refused at normalization")
            return
        artifact = tamper(artifact, choice)
        before = snapshot(root)
        try:
            result = persist(CONFIG, store, artifact)
        except PersistError:
            event("refused at persistence")
            assert snapshot(root) == before
            return
        event("persisted")
        persisted = sum(entry["persisted"] for entry in result["ledgers"].values())
        after = snapshot(root)
        assert (after != before) == (persisted > 0)
        assert all(store.read(name).ok for name in CONFIG.names)
