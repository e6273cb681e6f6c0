"""The Merkle log under SQLiteSink and PostgresSink: written with the events, dense,
proofs that verify, checkpoints that never sign two histories, upgrades in place."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ledger.errors import DuplicateEvent, EventNotFound, IntegrityError, ValidationError
from ledger.integrity import (
    EMPTY_ROOT,
    Checkpoint,
    MemoryTree,
    Signer,
    Verifier,
    generate_key,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from ledger.integrity.verify import verify_ledger
from ledger.model.event import Event
from ledger.sinks import SQLiteSink
from tests.sinks.conftest import engine_url
from tests.sinks.factories import action

from .conftest import Store

ROOT = Path(__file__).resolve().parents[2]
SKEY, VKEY = generate_key("test.example/log")
SIGNER, VERIFIER = Signer.from_key(SKEY), Verifier.from_key(VKEY)


def _stored(store: Store) -> list[tuple[int, int | None, bytes]]:
    rows = store.sql("SELECT seq, leaf_index, event_json FROM {p}events ORDER BY seq")
    return [(int(s), i, str(j).encode()) for s, i, j in rows]


def test_every_event_becomes_the_next_leaf_in_the_same_commit(log_store: Store) -> None:
    sink = log_store.open()
    assert sink.tree_head().size == 0 and sink.tree_head().root == EMPTY_ROOT
    first = action("r1", "c1")
    sink.commit_action(first)
    assert sink.leaf_index(first.event_id) == 0
    assert sink.tree_head().size == 1  # in the tree when commit_action returned
    sink.record(action("r1", "c2"))
    sink.record_many([action("r1", f"b{i}") for i in range(5)])
    rows = _stored(log_store)
    assert [i for _, i, _ in rows] == list(range(7))
    tree = MemoryTree.of(leaf_hash(data) for _, _, data in rows)
    assert sink.tree_head().root == tree.root()


def test_origin_is_fixed_at_creation(log_store: Store) -> None:
    origin = log_store.open().origin
    assert origin.startswith("agentledger/") and len(origin) == len("agentledger/") + 26
    assert log_store.open().origin == origin


def test_threads_never_share_or_skip_an_index(log_store: Store) -> None:
    sink = log_store.open()
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(40):
                sink.commit_action(action(f"t{k}", f"c{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    rows = _stored(log_store)
    assert sorted(i or 0 for _, i, _ in rows) == list(range(320))
    assert all(i is not None for _, i, _ in rows)
    assert [i for _, i, _ in rows] == list(range(320))  # seq order is leaf order
    assert verify_ledger(sink, [VERIFIER]).ok


def test_a_refused_caller_in_a_batch_leaves_no_gap(log_store: Store) -> None:
    sink = log_store.open()
    dup = action("r", "dup")
    sink.commit_action(dup)
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def work(event: Event) -> None:
        barrier.wait()
        try:
            sink.commit_action(event)
            outcomes.append("ok")
        except DuplicateEvent:
            outcomes.append("dup")

    events = [dup, *(action("r", f"c{i}") for i in range(5))]
    threads = [threading.Thread(target=work, args=(e,)) for e in events]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["dup"] + ["ok"] * 5
    assert [i for _, i, _ in _stored(log_store)] == list(range(6))
    with pytest.raises(DuplicateEvent):
        sink.record_many([action("r", "fresh"), dup])
    assert sink.tree_head().size == 6
    assert verify_ledger(sink, [VERIFIER]).ok


def test_inclusion_and_consistency_proofs_verify(log_store: Store) -> None:
    sink = log_store.open()
    events = [action("r", f"c{i}") for i in range(13)]
    sink.record_many(events[:6])
    old = sink.tree_head()
    sink.record_many(events[6:])
    head = sink.tree_head()
    for i, ev in enumerate(events):
        proof = sink.inclusion_proof(ev.event_id)
        assert (proof.leaf_index, proof.tree_size) == (i, 13)
        verify_inclusion(proof.leaf_hash, i, 13, proof.hashes, head.root)
    early = sink.inclusion_proof(events[2].event_id, tree_size=6)
    early.verify(old.root)
    verify_consistency(6, 13, old.root, head.root, sink.consistency_proof(6))
    verify_consistency(0, 13, EMPTY_ROOT, head.root, sink.consistency_proof(0, 13))
    with pytest.raises(EventNotFound):
        sink.inclusion_proof(action("r", "never").event_id)
    with pytest.raises(ValidationError):
        sink.inclusion_proof(events[8].event_id, tree_size=5)  # not in that tree
    with pytest.raises(ValidationError):
        sink.consistency_proof(3, 99)
    with pytest.raises(ValidationError):
        sink.consistency_proof(9, 4)


def test_checkpoints_sign_the_head_and_never_two_histories(log_store: Store) -> None:
    sink = log_store.open()
    sink.record_many([action("r", f"c{i}") for i in range(4)])
    cp = sink.checkpoint(SIGNER)
    again = Checkpoint.parse(cp.text, [VERIFIER])
    assert (again.origin, again.size, again.root) == (sink.origin, 4, sink.tree_head().root)
    assert sink.checkpoint(SIGNER).text == cp.text  # same head: the stored note
    other_key, other_vkey = generate_key("second.example/key")
    both = sink.checkpoint(Signer.from_key(other_key))
    assert Checkpoint.parse(both.text, [Verifier.from_key(other_vkey)]).size == 4
    assert Checkpoint.parse(both.text, [VERIFIER]).size == 4
    sink.commit_action(action("r", "c9"))
    sink.checkpoint(SIGNER)
    assert [c.size for c in sink.checkpoints([VERIFIER])] == [4, 5]
    # cut the last row off and rewind the head: the ledger refuses to sign size 4 again
    log_store.sql("DELETE FROM {p}events WHERE leaf_index = 4")
    row = log_store.sql("SELECT nodes FROM {p}events WHERE leaf_index = 3")  # node (2, 0)
    root = bytes(row[0][0])[64:96]
    log_store.sql("UPDATE {p}tree_head SET size = 4, root = :r WHERE id = 1", r=root)
    fresh = log_store.open()
    with pytest.raises(IntegrityError, match="truncated"):
        fresh.checkpoint(SIGNER)


def test_checkpoint_refuses_a_rewritten_tree(log_store: Store) -> None:
    sink = log_store.open()
    sink.record_many([action("r", f"c{i}") for i in range(3)])
    sink.checkpoint(SIGNER)
    sink.commit_action(action("r", "c3"))
    # node (1, 0) is the second 32 bytes of leaf 1's nodes
    row = log_store.sql("SELECT nodes FROM {p}events WHERE leaf_index = 1")
    changed = bytes(row[0][0])[:32] + bytes(32) + bytes(row[0][0])[64:]
    log_store.sql("UPDATE {p}events SET nodes = :n WHERE leaf_index = 1", n=changed)
    fresh = log_store.open()
    with pytest.raises(IntegrityError):
        fresh.checkpoint(SIGNER)


def test_an_existing_ledger_is_upgraded_in_place(log_store: Store) -> None:
    """A database written before the log existed: its rows become the first leaves."""
    from alembic import command
    from alembic.config import Config

    from ledger.sinks.rows import event_row
    from ledger.sinks.schema import MIGRATIONS_DIR
    from ledger.sinks.sql import COLUMNS

    url = f"sqlite:///{log_store.path}" if log_store.path else engine_url(log_store.dsn)
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    events = [action("old", f"c{i}") for i in range(7)]
    with engine.begin() as conn:
        if log_store.schema:
            conn.execute(sa.text(f'CREATE SCHEMA "{log_store.schema}"'))
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["connection"] = conn
        config.attributes["schema"] = log_store.schema or None
        command.upgrade(config, "0001_events")
        names = ", ".join(COLUMNS)
        marks = ", ".join(f":{c}" for c in COLUMNS)
        for ev in reversed(events):  # seq order is not id order
            conn.execute(
                sa.text(f"INSERT INTO {log_store.prefix}events ({names}) VALUES ({marks})"),
                dict(zip(COLUMNS, event_row(ev), strict=True)),
            )
    engine.dispose()
    sink = log_store.open()  # migrates to the head revision
    assert [i for _, i, _ in _stored(log_store)] == list(range(7))
    assert sink.leaf_index(events[-1].event_id) == 0
    sink.commit_action(action("new", "c1"))
    assert sink.tree_head().size == 8
    cp = sink.checkpoint(SIGNER)
    assert verify_ledger(sink, [VERIFIER], [cp.text]).ok


@pytest.mark.slow
@pytest.mark.postgres
def test_processes_on_one_postgres_never_share_an_index(pg_log: Store) -> None:
    pg_log.open().close()  # create the schema once
    script = (
        "import sys\n"
        "from ledger.sinks import PostgresSink\n"
        "from tests.sinks.factories import action\n"
        "sink = PostgresSink.open(sys.argv[1], schema=sys.argv[2])\n"
        "for i in range(150):\n"
        "    sink.commit_action(action(sys.argv[3], f'c{i}'))\n"
        "sink.close()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, pg_log.dsn, pg_log.schema, f"p{k}"],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    rows = pg_log.sql("SELECT leaf_index FROM {p}events ORDER BY seq")
    assert [r[0] for r in rows] == list(range(450))
    assert verify_ledger(pg_log.open(), [VERIFIER]).ok


def test_sqlite_reader_sees_the_log(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        sink.record_many([action("r", f"c{i}") for i in range(3)])
        head = sink.tree_head()
    with SQLiteSink(path, migrate=False) as reader:
        assert reader.tree_head() == head


def test_a_ledger_with_a_tree_nodes_table_is_upgraded_keeping_every_stored_node(
    log_store: Store,
) -> None:
    """A database of revision 0003 (nodes in ``tree_nodes``): each node moves into its
    owner's row exactly as stored (not recomputed from the row's bytes, so a leaf hash
    that only the node table kept survives), proofs still verify, and the downgrade
    gives the same ``tree_nodes`` back."""
    from alembic import command
    from alembic.config import Config

    from ledger.integrity.merkle import Frontier, leaf_hash
    from ledger.sinks.rows import event_row
    from ledger.sinks.schema import MIGRATIONS_DIR
    from ledger.sinks.sql import COLUMNS

    url = f"sqlite:///{log_store.path}" if log_store.path else engine_url(log_store.dsn)
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    events = [action("old", f"c{i}") for i in range(11)]
    p = log_store.prefix
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["schema"] = log_store.schema or None
    frontier = Frontier()
    stored: list[tuple[int, int, bytes]] = []
    with engine.begin() as conn:
        if log_store.schema:
            conn.execute(sa.text(f'CREATE SCHEMA "{log_store.schema}"'))
        config.attributes["connection"] = conn
        command.upgrade(config, "0003_retention")
        names = ", ".join(COLUMNS)
        marks = ", ".join(f":{c}" for c in COLUMNS)
        for i, ev in enumerate(events):
            row = dict(zip(COLUMNS, event_row(ev), strict=True))
            conn.execute(
                sa.text(f"INSERT INTO {p}events ({names}, leaf_index) VALUES ({marks}, :li)"),
                {**row, "li": i},
            )
            stored += frontier.append(leaf_hash(row["event_json"].encode()))
        for level, idx, h in stored:
            conn.execute(
                sa.text(f"INSERT INTO {p}tree_nodes (level, idx, hash) VALUES (:l, :i, :h)"),
                {"l": level, "i": idx, "h": h},
            )
        conn.execute(
            sa.text(f"UPDATE {p}tree_head SET size = :n, root = :r WHERE id = 1"),
            {"n": frontier.size, "r": frontier.root()},
        )
        # the row of leaf 4 changed after its node was stored: only tree_nodes knows
        conn.execute(
            sa.text(f"UPDATE {p}events SET event_json = :j WHERE leaf_index = 4"),
            {"j": '{"changed": true}'},
        )
    engine.dispose()
    sink = log_store.open()  # migrates to the head revision
    rows = log_store.sql("SELECT leaf_index, nodes FROM {p}events ORDER BY leaf_index")
    by_owner: dict[int, bytes] = {}
    for level, idx, h in stored:
        owner = ((idx + 1) << level) - 1
        by_owner[owner] = by_owner.get(owner, b"") + h
    assert {int(i): bytes(n) for i, n in rows} == by_owner
    assert sink.tree_head().root == frontier.root()
    proof = sink.inclusion_proof(events[7].event_id)
    proof.verify(frontier.root())
    assert sink.consistency_proof(5) is not None
    result = verify_ledger(sink, None)
    assert [f.leaf_index for f in result.errors if f.leaf_index is not None] == [4]
    sink.commit_action(action("new", "c1"))
    assert sink.tree_head().size == 12
    sink.close()
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0003_retention")
        back = conn.execute(sa.text(f"SELECT level, idx, hash FROM {p}tree_nodes")).all()
    engine.dispose()
    assert {(int(lv), int(ix), bytes(h)) for lv, ix, h in back} >= set(stored)


def test_the_lean_pass_agrees_with_the_full_one_and_steps_aside_for_anything_unusual(
    log_store: Store,
) -> None:
    """``verify_ledger``'s lean pass (leaf index and bytes only) gives the roots and
    captured nodes the full pass gives on an ordinary ledger, and declines (so the full
    pass names what it finds) when a row is out of order or may be a tombstone."""
    from ledger.integrity import verify as v
    from ledger.integrity.merkle import consistency_nodes

    sink = log_store.open()
    for k in range(5):
        sink.record_many([action(f"r{k}", f"c{i}") for i in range(7 + k)])
    n = sink.tree_head().size
    want, wanted = {0, 9, 23, n}, set(consistency_nodes(9, 23))
    lean = v._fast_scan(sink, want, wanted, None)
    assert lean is not None

    class Full:  # the same source without the lean batches
        def __getattr__(self, name: str) -> Any:
            if name == "prefixed_leaf_batches":
                raise AttributeError(name)
            return getattr(sink, name)

    full = v._scan(Full(), want, wanted, [], None)  # type: ignore[arg-type]
    assert (lean.roots, lean.nodes, lean.rows) == (full.roots, full.nodes, full.rows)
    assert lean.frontier.root() == full.frontier.root() == sink.tree_head().root
    sink.record(action("r9", "c0").replace(result='{"erased":{"by":"a result key"}}'))
    assert v._fast_scan(sink, {n + 1}, set(), None) is None  # may be a tombstone: full pass
    assert verify_ledger(sink, None).ok
    log_store.sql("UPDATE {p}events SET leaf_index = leaf_index + 1000 WHERE leaf_index = 3")
    assert v._fast_scan(sink, {n + 1}, set(), None) is None
    assert not verify_ledger(sink, None).ok


def test_checkpoint_columns_changed_outside_the_ledger_are_not_signed_against(
    log_store: Store,
) -> None:
    """``sink.checkpoint`` trusts a stored checkpoint only as far as its signed note: a
    size or root column rewritten by hand is refused, saying so."""
    sink = log_store.open()
    sink.record_many([action("r", f"c{i}") for i in range(4)])
    sink.checkpoint(SIGNER)
    sink.commit_action(action("r", "c4"))
    log_store.sql("UPDATE {p}tree_checkpoints SET size = 99 WHERE size = 4")
    with pytest.raises(IntegrityError, match="disagrees with its own signed note"):
        log_store.open().checkpoint(SIGNER)
    log_store.sql("UPDATE {p}tree_checkpoints SET size = 4, root = :r WHERE size = 99", r=bytes(32))
    with pytest.raises(IntegrityError, match="disagrees with its own signed note"):
        log_store.open().checkpoint(SIGNER)


def test_a_tree_head_of_the_wrong_type_is_an_integrity_error_everywhere(
    sqlite_log: Store,
) -> None:
    """SQLite keeps any type an UPDATE gives: a text root or size in the head, text in
    ``nodes``, is an IntegrityError to readers, proofs and writers, never a TypeError or a
    decoding error."""
    sink = sqlite_log.open()
    sink.record_many([action("r", f"c{i}") for i in range(6)])
    first = next(iter(sink.events(limit=1)))
    sqlite_log.sql("UPDATE events SET nodes = 'not bytes ' || char(233) WHERE leaf_index = 1")
    fresh = sqlite_log.open()
    with pytest.raises(IntegrityError):
        fresh.inclusion_proof(first.event_id)
    for size, root in (("abc", None), (6, "abc")):
        if root is None:
            sqlite_log.sql("UPDATE tree_head SET size = :s", s=size)
        else:
            sqlite_log.sql("UPDATE tree_head SET size = :s, root = :r", s=size, r=root)
        fresh = sqlite_log.open()
        with pytest.raises(IntegrityError, match="changed outside the ledger"):
            fresh.tree_head()
        with pytest.raises(IntegrityError):
            fresh.commit_action(action("r", "later"))
