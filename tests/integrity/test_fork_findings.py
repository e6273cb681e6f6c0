"""A fork is named only when the log really signed two histories: a changed row under
two honest checkpoints is a mismatch, not a fork; a second history signed with the
log's key over the changed rows is a fork. A JSONL file is checked against its own
identity (agentledger/<first event id>), so a checkpoint of another log is named as one."""

from __future__ import annotations

from pathlib import Path

from ledger.integrity import Checkpoint, MemoryTree, Signer, TreeHead, Verifier, generate_key
from ledger.integrity.merkle import leaf_hash
from ledger.integrity.verify import FindingKind, JSONLLeaves, verify_ledger
from ledger.sinks import JSONLSink
from tests.sinks.factories import action

SKEY, VKEY = generate_key("test.example/log")
SIGNER, VERIFIER = Signer.from_key(SKEY), Verifier.from_key(VKEY)


def _sign(path: Path, origin: str, size: int | None = None) -> str:
    leaves = [leaf_hash(d) for d in JSONLLeaves(path).leaves()]
    tree = MemoryTree.of(leaves[:size] if size is not None else leaves)
    return Checkpoint.sign(origin, TreeHead(size=tree.size, root=tree.root()), SIGNER).text


def _ledger(tmp_path: Path, n: int = 20) -> tuple[Path, str]:
    path = tmp_path / "ledger.jsonl"
    sink = JSONLSink(path)
    for i in range(n):
        sink.record(action("r1", f"c{i}"))
    sink.close()
    origin = JSONLLeaves(path).origin_guess()
    assert origin is not None
    return path, origin


def _edit_line(path: Path, i: int) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[i] = lines[i].replace(b'"c', b'"C', 1)
    path.write_bytes(b"\n".join(lines))


def test_a_changed_row_under_two_honest_checkpoints_is_a_mismatch_not_a_fork(
    tmp_path: Path,
) -> None:
    path, origin = _ledger(tmp_path)
    honest = [_sign(path, origin, 12), _sign(path, origin)]
    _edit_line(path, 3)
    result = verify_ledger(JSONLLeaves(path), [VERIFIER], honest)
    kinds = {f.kind for f in result.errors}
    assert kinds == {FindingKind.MISMATCH}, result.findings


def test_a_second_history_signed_with_the_key_is_a_fork(tmp_path: Path) -> None:
    path, origin = _ledger(tmp_path)
    honest = _sign(path, origin, 12)
    _edit_line(path, 3)
    forged = _sign(path, origin)  # the stolen key signs the changed history
    result = verify_ledger(JSONLLeaves(path), [VERIFIER], [honest, forged])
    assert FindingKind.FORK in {f.kind for f in result.errors}, result.findings


def test_a_jsonl_checkpoint_of_another_log_is_named_as_such(tmp_path: Path) -> None:
    path, origin = _ledger(tmp_path)
    other = Checkpoint.sign(
        "agentledger/01AAAAAAAAAAAAAAAAAAAAAAAA", TreeHead(size=30, root=b"\x00" * 32), SIGNER
    ).text
    result = verify_ledger(JSONLLeaves(path), [VERIFIER], [other, _sign(path, origin)])
    assert [f.kind for f in result.errors] == [FindingKind.BAD_CHECKPOINT], result.findings
    assert result.checkpoints_verified == (20,)
