"""A change to the stored tree itself (``events.nodes``) that leaves every row's bytes
and the head alone is still found by ``verify_ledger``: the nodes the roots, proofs and
the next commit are computed from must lead to the roots the rows lead to."""

from __future__ import annotations

import os

import pytest

from ledger.errors import IntegrityError
from ledger.integrity import Signer, Verifier, generate_key
from ledger.integrity.verify import FindingKind, verify_ledger
from tests.sinks.factories import action

from .conftest import Store

SKEY, VKEY = generate_key("test.example/log")


def _ledger(store: Store, n: int) -> None:
    sink = store.open()
    for i in range(n):
        sink.commit_action(action("r1", call_id=f"c{i}"))
    sink.checkpoint(Signer.from_key(SKEY))
    sink.close()


def _replace_node(store: Store, owner: int, level: int) -> None:
    """Overwrite the level-``level`` hash kept in the row of leaf ``owner``."""
    (blob,) = store.sql("SELECT nodes FROM {p}events WHERE leaf_index = :i", i=owner)[0]
    blob = bytes(blob)
    assert len(blob) >= 32 * (level + 1)
    changed = blob[: 32 * level] + os.urandom(32) + blob[32 * (level + 1) :]
    store.sql("UPDATE {p}events SET nodes = :n WHERE leaf_index = :i", n=changed, i=owner)


@pytest.mark.parametrize(
    ("owner", "level"),
    [(15, 4), (19, 2)],  # the subtrees [0, 16) and [16, 20) of a 20-leaf tree
)
def test_a_changed_covering_node_fails_verification(
    log_store: Store, owner: int, level: int
) -> None:
    _ledger(log_store, 20)
    _replace_node(log_store, owner, level)
    sink = log_store.open()
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])
    assert not result.ok
    heads = [f for f in result.findings if f.kind is FindingKind.HEAD]
    assert heads and "events.nodes" in heads[0].message
    assert verify_ledger(sink, None).ok is False  # what `ledger report` / `db check` run
    with pytest.raises(IntegrityError):  # and the writers refuse to extend it
        log_store.open().commit_action(action("r1", call_id="after"))


def test_an_untouched_ledger_still_verifies(log_store: Store) -> None:
    _ledger(log_store, 20)
    assert verify_ledger(log_store.open(), [Verifier.from_key(VKEY)]).ok


def test_ledger_proof_refuses_to_print_a_proof_that_does_not_verify(sqlite_log: Store) -> None:
    """A changed node inside the tree (not one of the head's covering nodes): the proofs
    that use it no longer verify, and ``ledger proof`` says so instead of printing one."""
    from click.testing import CliRunner

    from ledger.cli.main import cli

    _ledger(sqlite_log, 20)
    _replace_node(sqlite_log, 4, 0)  # leaf 4's hash, a sibling in leaf 5's proof
    (event_id,) = sqlite_log.sql("SELECT event_id FROM events WHERE leaf_index = 5")[0]
    runner = CliRunner()
    result = runner.invoke(cli, ["proof", str(event_id), "--db", sqlite_log.url])
    assert result.exit_code == 1, result.output
    assert "does not verify" in result.output
    (other,) = sqlite_log.sql("SELECT event_id FROM events WHERE leaf_index = 17")[0]
    assert runner.invoke(cli, ["proof", str(other), "--db", sqlite_log.url]).exit_code == 0


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE events SET nodes = 'abc' WHERE leaf_index = 15",  # text where bytes belong
        "UPDATE events SET nodes = substr(nodes, 1, 128) || randomblob(32) WHERE leaf_index = 15",
        "UPDATE tree_head SET root = 'abc'",
        "UPDATE tree_head SET size = 'abc'",
    ],
)
def test_values_of_the_wrong_type_are_findings_not_crashes(
    sqlite_log: Store, statement: str
) -> None:
    """SQLite keeps any type in any column: what an attacker writes by hand is a finding
    (and valid ``--json``), never an internal error."""
    import json

    from click.testing import CliRunner

    from ledger.cli.main import cli

    _ledger(sqlite_log, 20)
    sqlite_log.sql(statement)
    result = verify_ledger(sqlite_log.open(), [Verifier.from_key(VKEY)])
    assert not result.ok
    assert FindingKind.HEAD in {f.kind for f in result.errors}
    if "tree_head" in statement:  # a head of the wrong types is unreadable, not deleted
        said = " ".join(f.message for f in result.errors if f.kind is FindingKind.HEAD)
        assert "cannot be read" in said and ("'abc'" in said or "type str" in said), said
        assert "deleted" not in said, said
    run = CliRunner().invoke(cli, ["verify", "--db", sqlite_log.url, "--vkey", VKEY, "--json"])
    assert run.exit_code == 1, run.output
    assert json.loads(run.stdout)["ok"] is False
