"""The witness HTTP server and client, over a real socket on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ledger.errors import IntegrityError, StorageError
from ledger.integrity import (
    Checkpoint,
    CosignatureSigner,
    CosignatureVerifier,
    MemoryTree,
    Signer,
    TreeHead,
    Verifier,
    add_signature_lines,
    generate_key,
    generate_witness_key,
    leaf_hash,
    verify_cosignature,
)
from ledger.integrity.witness import (
    MAX_REQUEST_BYTES,
    WitnessServer,
    WitnessState,
    request_cosignatures,
    submit_checkpoint,
)

ORIGIN = "example.com/log"
_SKEY, _VKEY = generate_key(ORIGIN)
LOG, LOG_V = Signer.from_key(_SKEY), Verifier.from_key(_VKEY)
_WSKEY, _WVKEY = generate_witness_key("witness.example/w1")
WITNESS_V = CosignatureVerifier.from_key(_WVKEY)
TREE = MemoryTree.of(leaf_hash(i.to_bytes(2, "big")) for i in range(64))


def _checkpoint(size: int) -> Checkpoint:
    return Checkpoint.sign(ORIGIN, TreeHead(size=size, root=TREE.root(size)), LOG)


class ProofTo:
    """``proof_from(old)`` for a checkpoint of ``size`` leaves of TREE."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.asked: list[int] = []

    def __call__(self, old: int) -> Sequence[bytes]:
        self.asked.append(old)
        return TREE.consistency_proof(old, self.size) if old else []


def _server(folder: Path) -> WitnessServer:
    return WitnessServer(
        folder,
        witness=CosignatureSigner.from_key(_WSKEY),
        logs={ORIGIN: [LOG_V]},
        clock=lambda: 1_700_000_000,
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WitnessServer]:
    with _server(tmp_path / "state") as s:
        yield s


def test_binds_loopback_by_default(server: WitnessServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")


def test_cosigns_a_first_checkpoint_and_then_an_update(server: WitnessServer) -> None:
    cp = _checkpoint(10)
    lines = request_cosignatures(server.url, cp.text, proof_from=ProofTo(10))
    cosig = verify_cosignature(add_signature_lines(cp.text, lines), WITNESS_V)
    assert cosig.timestamp == 1_700_000_000
    assert server.state.heads()[ORIGIN] == cp.head

    newer = _checkpoint(37)
    proof_from = ProofTo(37)
    lines = request_cosignatures(server.url, newer.text, proof_from=proof_from, old_size=10)
    assert proof_from.asked == [10]
    assert Checkpoint.parse(add_signature_lines(newer.text, lines), [WITNESS_V]).size == 37


def test_a_wrong_old_size_is_corrected_through_409(server: WitnessServer) -> None:
    request_cosignatures(server.url, _checkpoint(10).text, proof_from=ProofTo(10))
    proof_from = ProofTo(20)
    request_cosignatures(server.url, _checkpoint(20).text, proof_from=proof_from, old_size=0)
    assert proof_from.asked == [0, 10]
    reply = submit_checkpoint(server.url, 3, TREE.consistency_proof(3, 30), _checkpoint(30).text)
    assert (reply.status, reply.latest_size) == (409, 20)


def test_refusals_raise_integrity_error_with_the_status(server: WitnessServer) -> None:
    request_cosignatures(server.url, _checkpoint(10).text, proof_from=ProofTo(10))
    with pytest.raises(IntegrityError, match=r"\(422\)"):
        request_cosignatures(
            server.url, _checkpoint(30).text, proof_from=lambda old: [bytes(32)] * 3, old_size=10
        )
    other = Checkpoint.sign("other.example/log", TreeHead(size=1, root=TREE.root(1)), LOG)
    with pytest.raises(IntegrityError, match=r"\(404\)"):
        request_cosignatures(server.url, other.text, proof_from=ProofTo(1))
    assert server.state.heads()[ORIGIN].size == 10  # nothing refused was recorded


def test_state_survives_a_restart(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    with _server(folder) as first:
        request_cosignatures(first.url, _checkpoint(12).text, proof_from=ProofTo(12))
    with _server(folder) as second:
        assert second.state.heads()[ORIGIN] == _checkpoint(12).head
        assert second.state.checkpoint(ORIGIN) is not None
        # a rollback to a smaller tree is refused by the restarted witness
        reply = submit_checkpoint(second.url, 0, [], _checkpoint(5).text)
        assert (reply.status, reply.latest_size) == (409, 12)
    data = json.loads((folder / "witness-state.json").read_text())
    assert data["logs"][ORIGIN]["size"] == 12
    assert [p.name for p in folder.iterdir()] == ["witness-state.json"]  # no temp files


def test_an_unreadable_state_file_is_refused_not_reset(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "witness-state.json").write_text("{not json")
    with pytest.raises(StorageError, match="restore it"):
        WitnessState(folder)


def test_http_edges(server: WitnessServer) -> None:
    def post(path: str, data: bytes | None, method: str = "POST") -> int:
        req = urllib.request.Request(server.url + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post("/other", b"x") == 404
    assert post("/add-checkpoint", None, method="GET") == 405
    assert post("/add-checkpoint", b"garbage") == 400
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("POST", "/add-checkpoint")
    conn.putheader("Content-Length", str(MAX_REQUEST_BYTES + 1))
    conn.endheaders()  # the body is never sent: the header alone is refused
    assert conn.getresponse().status == 413
    conn.close()
