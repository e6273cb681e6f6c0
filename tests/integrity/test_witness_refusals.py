"""The witness client says plainly why nothing was cosigned: a rollback (the witness
cosigned a larger size than the checkpoint's), and on the command line an unreachable
witness or a URL that is not http(s) (never an internal error)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import IntegrityError, ValidationError
from ledger.integrity import (
    Checkpoint,
    CosignatureSigner,
    MemoryTree,
    Signer,
    TreeHead,
    Verifier,
    generate_key,
    generate_witness_key,
    leaf_hash,
)
from ledger.integrity.witness import WitnessServer, request_cosignatures

ORIGIN = "example.com/log"
_SKEY, _VKEY = generate_key(ORIGIN)
_WSKEY, WVKEY = generate_witness_key("witness.example/w1")
TREE = MemoryTree.of(leaf_hash(i.to_bytes(2, "big")) for i in range(40))


def _checkpoint(size: int) -> Checkpoint:
    root = TREE.root(size)
    return Checkpoint.sign(ORIGIN, TreeHead(size=size, root=root), Signer.from_key(_SKEY))


def _proof_to(size: int) -> Callable[[int], Sequence[bytes]]:
    def proof_from(old: int) -> Sequence[bytes]:
        if old > size:
            raise ValidationError(f"old_size {old} is not between 0 and the new size {size}")
        return TREE.consistency_proof(old, size) if old else []

    return proof_from


def test_a_rollback_is_refused_saying_so(tmp_path: Path) -> None:
    server = WitnessServer(
        tmp_path / "state",
        witness=CosignatureSigner.from_key(_WSKEY),
        logs={ORIGIN: [Verifier.from_key(_VKEY)]},
    )
    with server:
        request_cosignatures(server.url, _checkpoint(30).text, proof_from=_proof_to(30))
        with pytest.raises(IntegrityError, match=r"cosigned size 30 .* has size 20 .*rollback"):
            request_cosignatures(server.url, _checkpoint(20).text, proof_from=_proof_to(20))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _ledger(tmp_path: Path) -> tuple[str, Path]:
    from ledger.sinks import SQLiteSink
    from tests.sinks.factories import action

    db = tmp_path / "ledger.db"
    with SQLiteSink(db) as sink:
        sink.commit_action(action("r1"))
    key = tmp_path / "log.key"
    key.write_text(_SKEY + "\n")
    return f"sqlite:///{db}", key


def test_an_unreachable_witness_is_a_one_line_error(tmp_path: Path) -> None:
    url, key = _ledger(tmp_path)
    out = tmp_path / "cps"
    witness = f"http://127.0.0.1:{_closed_port()}={WVKEY}"
    result = CliRunner().invoke(
        cli, ["checkpoint", "--db", url, "--key", str(key), "-o", f"{out}/", "--witness", witness]
    )
    assert result.exit_code == 1, result.output
    assert "could not be reached" in result.output
    assert "internal error" not in result.output
    assert not list(out.glob("checkpoint-*.txt"))


def test_a_witness_url_that_is_not_http_is_a_usage_error(tmp_path: Path) -> None:
    url, key = _ledger(tmp_path)
    result = CliRunner().invoke(
        cli, ["checkpoint", "--db", url, "--key", str(key), "--witness", f"ftp://h={WVKEY}"]
    )
    assert result.exit_code == 2, result.output
    assert "http:// or https://" in result.output
