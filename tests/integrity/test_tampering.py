"""Any history of appends and checkpoints verifies; one tampering step never does.

The matrix of the issue -- edit (content hash rewritten too), delete, reorder, truncate,
insert, fork -- on SQLite, PostgreSQL and JSONL. The attacker has write access to the
database (not to the checkpoints kept outside it, nor to the log's key, except in the
fork case, where the key is compromised and a second history is signed).
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import assume as _assume
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from ledger.errors import IntegrityError
from ledger.integrity import Checkpoint, MemoryTree, Signer, TreeHead, Verifier, generate_key
from ledger.integrity.merkle import Frontier, leaf_hash
from ledger.integrity.verify import FindingKind, JSONLLeaves, verify_ledger
from ledger.sinks import JSONLSink
from ledger.sinks.rows import content_hash
from tests.sinks.factories import action

from .conftest import Store, drop_schema, make_pg_store, make_sqlite_store

SKEY, VKEY = generate_key("test.example/log")
SIGNER, VERIFIER = Signer.from_key(SKEY), Verifier.from_key(VKEY)
TAMPERS = ["none", "edit", "delete", "reorder", "truncate", "insert", "fork"]

steps = st.lists(
    st.one_of(st.tuples(st.just("append"), st.integers(1, 4)), st.just(("checkpoint", 0))),
    min_size=1,
    max_size=8,
)


def assume(condition: bool) -> None:
    """Hypothesis's ``assume`` inside a property; a plain check in a fixed example."""
    if currently_in_test_context():
        _assume(condition)
    else:
        assert condition


def _edit(data: str, rng: random.Random) -> str:
    """Change one character of the event's args, keeping it a valid event JSON."""
    return data.replace('"/tmp/x"', f'"/tmp/{rng.choice("abcdefg")}"', 1)


# --- SQL ----------------------------------------------------------------------------


def _rows(store: Store) -> list[tuple[int, str, int | None]]:
    return [
        (int(s), str(j), i)
        for s, j, i in store.sql("SELECT seq, event_json, leaf_index FROM {p}events ORDER BY seq")
    ]


def _rebuild_tree(store: Store) -> None:
    """What a careful attacker does after changing rows: renumber the leaves and rebuild
    the tree tables so that they agree with the rows again."""
    rows = _rows(store)
    frontier = Frontier()
    for seq, _, _ in rows:
        store.sql("UPDATE {p}events SET leaf_index = NULL, nodes = NULL WHERE seq = :s", s=seq)
    for seq, data, _ in rows:
        index = frontier.size
        nodes = frontier.append_owned(leaf_hash(data.encode()))
        store.sql(
            "UPDATE {p}events SET leaf_index = :i, nodes = :n WHERE seq = :s",
            i=index,
            n=nodes,
            s=seq,
        )
    store.sql(
        "UPDATE {p}tree_head SET size = :n, root = :r WHERE id = 1",
        n=frontier.size,
        r=frontier.root(),
    )


def _tamper_sql(store: Store, how: str, covered: int, rng: random.Random) -> None:
    rows = _rows(store)
    if how == "edit":
        seq, data, _ = rng.choice(rows)
        changed = _edit(data, rng)
        assume(changed != data)
        store.sql(
            "UPDATE {p}events SET event_json = :j, content_hash = :h WHERE seq = :s",
            j=changed,
            h=content_hash(changed),
            s=seq,
        )
    elif how == "delete":
        seq = rng.choice(rows)[0]
        store.sql("DELETE FROM {p}events WHERE seq = :s", s=seq)
    elif how == "reorder":
        assume(len(rows) >= 2)
        (s1, _j1, i1), (s2, _j2, i2) = rng.sample(rows, 2)
        store.sql("UPDATE {p}events SET leaf_index = NULL WHERE seq IN (:a, :b)", a=s1, b=s2)
        store.sql("UPDATE {p}events SET seq = -1 WHERE seq = :a", a=s1)
        store.sql("UPDATE {p}events SET seq = :a, leaf_index = :i WHERE seq = :b", a=s1, b=s2, i=i2)
        store.sql("UPDATE {p}events SET seq = :b, leaf_index = :i WHERE seq = -1", b=s2, i=i1)
    elif how == "truncate":
        assume(covered > 0)
        cut = rng.randrange(0, covered)  # keep fewer rows than the last checkpoint
        store.sql("DELETE FROM {p}events WHERE leaf_index >= :c", c=cut)
        _rebuild_tree(store)
    elif how == "insert":
        extra = action("intruder", f"x{rng.randrange(1000)}")
        from ledger.sinks.rows import event_row
        from ledger.sinks.sql import COLUMNS

        names = ", ".join(COLUMNS)
        marks = ", ".join(f":{c}" for c in COLUMNS)
        store.sql(
            f"INSERT INTO {{p}}events ({names}) VALUES ({marks})",
            **dict(zip(COLUMNS, event_row(extra), strict=True)),
        )
    elif how == "fork":
        assume(covered > 0)
        target = rng.choice([r for r in rows if r[2] is not None and r[2] < covered])
        changed = _edit(target[1], rng)
        assume(changed != target[1])
        store.sql(
            "UPDATE {p}events SET event_json = :j, content_hash = :h WHERE seq = :s",
            j=changed,
            h=content_hash(changed),
            s=target[0],
        )
        _rebuild_tree(store)
        store.sql("DELETE FROM {p}tree_checkpoints")
        store.open().checkpoint(SIGNER)  # the stolen key signs the second history


def _run_sql(store: Store, plan: list[tuple[str, int]], how: str, seed: int) -> None:
    rng = random.Random(seed)
    sink = store.open()
    outside: list[str] = []  # the checkpoints kept outside the database
    covered = 0
    n = 0
    for op, k in plan:
        if op == "append":
            events = [action(f"r{n}", f"c{n + i}") for i in range(k)]
            if k == 1:
                sink.commit_action(events[0])
            else:
                sink.record_many(events)
            n += k
        else:
            cp = sink.checkpoint(SIGNER)
            outside.append(cp.text)
            covered = cp.size
    assume(n > 0)
    # the writer closes first: an open SQLite writer writes its head row with every 8th
    # commit, so until then only a checkpoint covers its newest rows (see
    # test_an_open_writers_newest_rows_are_covered_by_checkpoints_alone)
    sink.close()
    if how != "none":
        _tamper_sql(store, how, covered, rng)
    result = verify_ledger(store.open(), [VERIFIER], outside)
    if how == "none":
        assert result.ok, result.findings
        assert result.size == n
    else:
        assert not result.ok, f"{how} not detected"
        assert result.errors


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, how=st.sampled_from(TAMPERS), seed=st.integers(0, 2**32))
def test_sqlite_any_history_verifies_and_any_tampering_is_found(
    plan: list[tuple[str, int]], how: str, seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = make_sqlite_store(Path(tmp) / "ledger.db")
        try:
            _run_sql(store, plan, how, seed)
        finally:
            store.close_all()


@pytest.mark.postgres
def test_postgres_any_history_verifies_and_any_tampering_is_found(pg_dsn: str) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(plan=steps, how=st.sampled_from(TAMPERS), seed=st.integers(0, 2**32))
    def check(plan: list[tuple[str, int]], how: str, seed: int) -> None:
        store = make_pg_store(pg_dsn)
        try:
            _run_sql(store, plan, how, seed)
        finally:
            store.close_all()
            drop_schema(store)

    check()


@pytest.mark.parametrize("how", TAMPERS[1:])
def test_each_tampering_is_named_on_sqlite(tmp_path: Path, how: str) -> None:
    store = make_sqlite_store(tmp_path / "l.db")
    try:
        sink = store.open()
        sink.record_many([action("r", f"c{i}") for i in range(6)])
        outside = [sink.checkpoint(SIGNER).text]
        sink.record_many([action("r", f"d{i}") for i in range(2)])
        _tamper_sql(store, how, 6, random.Random(7))
        result = verify_ledger(store.open(), [VERIFIER], outside)
    finally:
        store.close_all()
    kinds = {f.kind for f in result.errors}
    expected = {
        "edit": FindingKind.CHANGED,
        "delete": FindingKind.DELETED,
        "reorder": FindingKind.REORDERED,
        "truncate": FindingKind.TRUNCATED,
        "insert": FindingKind.INSERTED,
        "fork": FindingKind.FORK,
    }[how]
    assert expected in kinds, result.findings


# --- JSONL --------------------------------------------------------------------------


def _jsonl_checkpoint(path: Path, origin: str) -> Checkpoint:
    tree = MemoryTree.of(leaf_hash(d) for d in JSONLLeaves(path).leaves())
    return Checkpoint.sign(origin, TreeHead(size=tree.size, root=tree.root()), SIGNER)


def _tamper_jsonl(path: Path, how: str, covered: int, rng: random.Random, origin: str) -> list[str]:
    lines = path.read_bytes().split(b"\n")[:-1]
    i = rng.randrange(covered)
    if how == "edit":
        changed = _edit(lines[i].decode(), rng).encode()
        assume(changed != lines[i])
        lines[i] = changed
    elif how == "delete":
        del lines[i]
    elif how == "reorder":
        assume(covered >= 2)
        j = rng.choice([k for k in range(covered) if k != i])
        lines[i], lines[j] = lines[j], lines[i]
    elif how == "truncate":
        lines = lines[:i]
    elif how == "insert":
        extra = action("intruder", "x").to_json().encode()
        lines.insert(i, extra)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    if how == "fork":
        lines[i] = _edit(lines[i].decode(), rng).encode()
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        return [_jsonl_checkpoint(path, origin).text]
    return []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, how=st.sampled_from(TAMPERS), seed=st.integers(0, 2**32))
def test_jsonl_any_history_verifies_and_any_tampering_is_found(
    plan: list[tuple[str, int]], how: str, seed: int
) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.jsonl"
        sink = JSONLSink(path)
        outside: list[str] = []
        covered = n = 0
        origin = ""
        for op, k in plan:
            if op == "append":
                for i in range(k):
                    sink.record(action(f"r{n}", f"c{n + i}"))
                n += k
                origin = origin or JSONLLeaves(path).origin_guess() or ""
            elif n:
                cp = _jsonl_checkpoint(path, origin)
                outside.append(cp.text)
                covered = cp.size
        sink.close()
        assume(n > 0)
        if how != "none":
            assume(covered > 0)
            outside += _tamper_jsonl(path, how, covered, rng, origin)
        result = verify_ledger(JSONLLeaves(path), [VERIFIER], outside, origin=origin)
        if how == "none":
            assert result.ok, result.findings
        else:
            assert not result.ok, f"{how} not detected"


def test_an_unknown_key_and_a_tampered_note_are_findings(tmp_path: Path) -> None:
    store = make_sqlite_store(tmp_path / "l.db")
    try:
        sink = store.open()
        sink.record_many([action("r", f"c{i}") for i in range(3)])
        other_key, _ = generate_key("mallory.example/log")
        foreign = Checkpoint.sign(sink.origin, sink.tree_head(), Signer.from_key(other_key))
        good = sink.checkpoint(SIGNER).text
        tampered = good.replace("\n3\n", "\n2\n")
        extra_line = good.replace("\n\n", "\nextra\n\n", 1)
        result = verify_ledger(sink, [VERIFIER], [foreign.text, tampered, extra_line, "junk"])
    finally:
        store.close_all()
    kinds = [f.kind for f in result.errors]
    assert kinds.count(FindingKind.UNKNOWN_KEY) == 1
    assert kinds.count(FindingKind.BAD_CHECKPOINT) == 3
    assert result.checkpoints_verified == (3,)


def test_an_open_writers_newest_rows_are_covered_by_checkpoints_alone(tmp_path: Path) -> None:
    """SQLite's head is where its rows end; its head row is a mark the log reached,
    written with the first commit, every 8th one and at close. Rows cut off below the
    mark are found without any checkpoint; the newest commits of a writer still open
    (fewer than 8 since the mark) are found only against a checkpoint that covers them,
    as in a JSONL file, and ``ledger verify`` names what no checkpoint covers."""
    from ledger.sinks import SQLiteSink
    from ledger.sinks.sqlite import MARK_EVERY

    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        for i in range(2 * MARK_EVERY + 3):
            sink.commit_action(action("r", f"c{i}"))
        size = sink.tree_head().size
        mark = sink.stored_head()
        assert mark is not None and mark[1].size == 2 * MARK_EVERY + 1  # 1st, 9th, 17th
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM events WHERE leaf_index >= ?", (size - 2,))  # above it
        conn.commit()
        shallow = verify_ledger(sink, [VERIFIER])
        assert shallow.size == size - 2
        assert {f.kind for f in shallow.findings} == {FindingKind.NO_CHECKPOINT}
        conn.execute("DELETE FROM events WHERE leaf_index >= ?", (size - 5,))  # below it
        conn.commit()
        conn.close()
        deep = verify_ledger(sink, [VERIFIER])
        assert not deep.ok and "cut off the end" in deep.errors[0].message
        with pytest.raises(IntegrityError, match="cut off the end"):
            sink.commit_action(action("r", "after the cut"))
    with SQLiteSink(tmp_path / "closed.db") as sink:
        for i in range(3):
            sink.commit_action(action("r", f"c{i}"))
    with SQLiteSink(tmp_path / "closed.db") as sink:  # closing wrote the mark: all 3
        assert sink.stored_head() is not None
        assert sink.stored_head()[1] == sink.tree_head()  # type: ignore[index]
