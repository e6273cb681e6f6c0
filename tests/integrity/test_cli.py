"""`ledger keygen / checkpoint / verify / proof / bundle / verify-bundle / witness serve`
as a user runs them."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.sinks import JSONLSink, SQLiteSink
from tests.sinks.factories import action

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def ledger_db(tmp_path: Path) -> tuple[str, Path, Path]:
    """A ledger with two runs, a key pair, and the folder for checkpoints."""
    db = tmp_path / "ledger.db"
    with SQLiteSink(db) as sink:
        sink.record_many([action("run-a", f"c{i}") for i in range(5)])
        sink.record_many([action("run-b", f"c{i}") for i in range(3)])
    code, out, _ = run("keygen", "example.com/agent-log", "--out", str(tmp_path / "log.key"))
    assert code == 0
    (tmp_path / "log.vkey").write_text(out)
    return f"sqlite:///{db}", tmp_path / "log.key", tmp_path / "log.vkey"


def test_keygen_writes_a_private_key_file_and_prints_the_verifier(tmp_path: Path) -> None:
    key = tmp_path / "k"
    code, out, _ = run("keygen", "example.com/log", "--out", str(key))
    assert code == 0 and out.startswith("example.com/log+")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("PRIVATE+KEY+example.com/log+")
    code, _, err = run("keygen", "example.com/log", "--out", str(key))
    assert code == 2 and "never overwritten" in err
    code, _, err = run("keygen", "bad name+x", "--out", str(tmp_path / "k2"))
    assert code == 2


def test_the_five_line_path_verifies_and_finds_tampering(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, key, vkey = ledger_db
    folder = tmp_path / "cps"
    code, _, err = run("checkpoint", "--db", db, "--key", str(key), "-o", f"{folder}/")
    assert code == 0, err
    assert len(list(folder.glob("checkpoint-*.txt"))) == 1
    code, out, _ = run("verify", "--db", db, "--vkey", str(vkey), "--checkpoint", str(folder))
    assert code == 0 and out.startswith("verified: 8 leaves")
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    conn.execute("UPDATE events SET event_json = replace(event_json, 'c2', 'c7') WHERE seq = 3")
    conn.commit()
    conn.close()
    code, out, _ = run(
        "verify", "--db", db, "--vkey", str(vkey), "--checkpoint", str(folder), "--json"
    )
    assert code == 1
    report = json.loads(out)
    assert not report["ok"]
    changed = [f for f in report["findings"] if f["kind"] == "changed"]
    assert changed and changed[0]["seq"] == 3


def test_verify_without_a_key_checks_the_tree_and_says_the_signatures_went_unchecked(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, key, _ = ledger_db
    code, out, err = run("verify", "--db", db)  # no checkpoint yet: the tree alone
    assert code == 0 and "verified: 8 leaves" in out and "no-checkpoint" in out
    assert "warning" not in err  # there was no signature to check
    assert run("checkpoint", "--db", db, "--key", str(key))[0] == 0
    code, out, err = run("verify", "--db", db)
    assert code == 0 and "signatures not checked" in out and "--vkey" in err
    code, out, _ = run("verify", "--db", db, "--json")
    report = json.loads(out)
    assert report["ok"] and report["signatures_checked"] is False
    assert report["checkpoints_verified"] == [8]
    conn = sqlite3.connect(db.removeprefix("sqlite:///"))
    conn.execute("UPDATE events SET event_json = replace(event_json, 'c2', 'c7') WHERE seq = 3")
    conn.commit()
    conn.close()
    code, out, _ = run("verify", "--db", db, "--json")  # tampering is found without a key
    assert code == 1
    assert [f["seq"] for f in json.loads(out)["findings"] if f["kind"] == "changed"] == [3]


def test_verify_usage_errors_exit_2(ledger_db: tuple[str, Path, Path]) -> None:
    db, _, _ = ledger_db
    code, _, err = run("verify", "--db", db, "--vkey", "not-a-key+zz+zz")
    assert code == 2 and "Error" in err
    assert run("verify", "--db", db, "--vkey", "x", "--checkpoint", "/nonexistent")[0] == 2


def test_a_checkpoint_by_another_key_is_a_finding(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, _, vkey = ledger_db
    run("keygen", "mallory.example/log", "--out", str(tmp_path / "m.key"))
    code, out, _ = run("checkpoint", "--db", db, "--key", str(tmp_path / "m.key"))
    assert code == 0
    (tmp_path / "m.txt").write_text(out)
    code, out, _ = run(
        "verify", "--db", db, "--vkey", str(vkey), "--checkpoint", str(tmp_path / "m.txt")
    )
    assert code == 1 and "unknown-key" in out


def test_bundle_verifies_offline_and_any_changed_byte_fails(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, key, vkey = ledger_db
    out = tmp_path / "run-a.json"
    code, _, err = run("bundle", "run-a", "--db", db, "-o", str(out))
    # nothing to prove the run against: a refusal in one line (exit 1), not a usage error
    assert code == 1 and "no stored checkpoint" in err and "Usage:" not in err
    code, _, err = run("bundle", "no-such-run", "--db", db, "-o", str(out))
    assert code == 1 and "no events of run 'no-such-run'" in err and "Usage:" not in err
    assert len(err.strip().splitlines()) == 1
    code, _, err = run("bundle", "run-a", "--db", db, "-o", str(out), "--key", str(key))
    assert code == 0, err
    Path(db.removeprefix("sqlite:///")).unlink()  # offline: no database at all
    assert run("verify-bundle", str(out), "--vkey", str(vkey))[0] == 0
    data = out.read_bytes()
    for position in range(0, len(data), max(1, len(data) // 97)):
        changed = bytearray(data)
        changed[position] ^= 0x01
        out.write_bytes(bytes(changed))
        code, text, _ = run("verify-bundle", str(out), "--vkey", str(vkey))
        assert code == 1, f"byte {position} changed and still verified"
        assert "NOT verified" in text
    out.write_bytes(data + b" ")
    assert run("verify-bundle", str(out), "--vkey", str(vkey))[0] == 1
    out.write_bytes(b"{not json")
    assert run("verify-bundle", str(out), "--vkey", str(vkey))[0] == 1


def test_proof_prints_an_inclusion_and_a_consistency_proof(
    ledger_db: tuple[str, Path, Path],
) -> None:
    db, _, _ = ledger_db
    with SQLiteSink(db.removeprefix("sqlite:///"), migrate=False) as sink:
        event = next(iter(sink.events(run_id="run-b")))
    code, out, _ = run("proof", str(event.event_id), "--db", db, "--json")
    assert code == 0
    value = json.loads(out)
    assert value["leaf_index"] == 5 and value["tree_size"] == 8 and len(value["proof"]) == 3
    code, out, _ = run("proof", "--old-size", "3", "--db", db, "--json")
    assert code == 0 and json.loads(out)["old_size"] == 3
    assert run("proof", "--db", db)[0] == 2
    code, _, err = run("proof", "01J0000000000000000000000Z", "--db", db)
    assert code == 1 and err.startswith("ledger: error:")


def test_jsonl_checkpoint_and_verify(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        for i in range(4):
            sink.record(action("r", f"c{i}"))
    run("keygen", "example.com/jsonl", "--out", str(tmp_path / "k"))
    code, _, _ = run("keygen", "example.com/jsonl2", "--out", str(tmp_path / "k2"))
    vkey_file = tmp_path / "v"
    code, out, _ = run("keygen", "example.com/j3", "--out", str(tmp_path / "k3"))
    vkey_file.write_text(out)
    code, note, err = run("checkpoint", "--db", f"jsonl:///{path}", "--key", str(tmp_path / "k3"))
    assert code == 0, err
    (tmp_path / "cp.txt").write_text(note)
    args = ["verify", "--db", f"jsonl:///{path}", "--vkey", str(vkey_file)]
    assert run(*args, "--checkpoint", str(tmp_path / "cp.txt"))[0] == 0
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:2] + lines[3:]))  # a line deleted
    code, out, _ = run(*args, "--checkpoint", str(tmp_path / "cp.txt"))
    assert code == 1 and "NOT verified" in out


@pytest.mark.slow
def test_witness_serve_cosigns_and_refuses_a_fork_over_http(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, key, vkey = ledger_db
    wkey = tmp_path / "w.key"
    code, wvkey, _ = run("keygen", "witness.example/w1", "--out", str(wkey), "--witness")
    assert code == 0
    with SQLiteSink(db.removeprefix("sqlite:///"), migrate=False) as sink:
        origin = sink.origin
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "witness", "serve", "--state", str(tmp_path / "ws"),
         "--key", str(wkey), "--log", f"{origin}={vkey.read_text().strip()}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
        witness = f"{url}={wvkey.strip()}"
        out = tmp_path / "cp.txt"
        code, _, err = run(
            "checkpoint", "--db", db, "--key", str(key), "--witness", witness, "-o", str(out)
        )
        assert code == 0, err
        assert "— witness.example/w1 " in out.read_text()
        with SQLiteSink(db.removeprefix("sqlite:///")) as sink:
            sink.commit_action(action("run-c", "c1"))
        code, _, err = run(
            "checkpoint", "--db", db, "--key", str(key), "--witness", witness, "-o", str(out)
        )
        assert code == 0, err
        # a fork: a different ledger claiming the same origin, signed with the same key
        fork = tmp_path / "fork.db"
        with SQLiteSink(fork) as other:
            other.record_many([action("x", f"c{i}") for i in range(12)])
        conn = sqlite3.connect(fork)
        conn.execute("UPDATE tree_head SET origin = ?", (origin,))
        conn.commit()
        conn.close()
        before = out.read_text()
        code, _, err = run(
            "checkpoint", "--db", f"sqlite:///{fork}", "--key", str(key), "--witness", witness,
            "-o", str(out),
        )  # fmt: skip
        assert code == 1 and "rewritten" in err  # the copy outside the database disagrees
        assert out.read_text() == before
        elsewhere = tmp_path / "fork-cp.txt"
        code, _, err = run(
            "checkpoint", "--db", f"sqlite:///{fork}", "--key", str(key), "--witness", witness,
            "-o", str(elsewhere),
        )  # fmt: skip
        assert code == 1 and "refused" in err  # the witness will not cosign a fork
        assert not elsewhere.exists()  # nothing written when a witness refuses
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    time.sleep(0.1)
    assert (tmp_path / "ws" / "witness-state.json").is_file()


@pytest.mark.slow
def test_checkpoint_every_signs_each_new_head(
    ledger_db: tuple[str, Path, Path], tmp_path: Path
) -> None:
    db, key, vkey = ledger_db
    folder = tmp_path / "cps"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "ledger", "checkpoint", "--db", db, "--key", str(key)]
    proc = subprocess.Popen(
        [*args, "-o", f"{folder}/", "--every", "0.2"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while len(list(folder.glob("checkpoint-*.txt"))) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        with SQLiteSink(db.removeprefix("sqlite:///")) as sink:
            sink.commit_action(action("run-c", "c1"))
        while len(list(folder.glob("checkpoint-*.txt"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    names = sorted(p.name for p in folder.glob("checkpoint-*.txt"))
    assert names == ["checkpoint-000000000008.txt", "checkpoint-000000000009.txt"]
    code, out, _ = run("verify", "--db", db, "--vkey", str(vkey), "--checkpoint", str(folder))
    assert code == 0 and "up to size 9" in out
