"""Evidence bundles of runs with erased events: ``ledger bundle`` then ``ledger
verify-bundle`` verify the tombstones as *erased (hash kept)* against the leaf the log
committed, and any changed byte still fails; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.errors import IntegrityError
from ledger.integrity.bundle import verify_bundle
from ledger.integrity.note import Verifier
from ledger.retention import Retention, Selection
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _run(*args: str) -> tuple[int, str, str]:
    from ledger.cli.main import cli

    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _setup(db: Ledger, tmp_path: Path) -> tuple[Retention, Path, Path]:
    sink = db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1), secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    code, out, _ = _run("keygen", "example.com/agent-log", "--out", str(tmp_path / "log.key"))
    assert code == 0
    (tmp_path / "log.vkey").write_text(out)
    return r, tmp_path / "log.key", tmp_path / "log.vkey"


def _bundle(db: Ledger, run: str, key: Path, out: Path) -> tuple[int, str]:
    code, _, err = _run("bundle", run, "--db", db.url, "-o", str(out), "--key", str(key))
    return code, err


def _verifies(data: bytes, vkey: Path) -> bool:
    try:
        verify_bundle(data, [Verifier.from_key(vkey.read_text().strip())])
    except IntegrityError:
        return False
    return True


def _bundled(db: Ledger, run: str, key: Path, vkey: Path, tmp_path: Path) -> bytes:
    """The bytes of ``run``'s bundle, which must verify."""
    out = tmp_path / f"{run}.json"
    code, err = _bundle(db, run, key, out)
    assert code == 0, err
    data = out.read_bytes()
    assert _verifies(data, vkey)
    return data


def _no_changed_byte_verifies(data: bytes, vkey: Path, samples: int = 400) -> None:
    for position in range(0, len(data), max(1, len(data) // samples)):
        changed = bytearray(data)
        changed[position] ^= 0x01
        assert not _verifies(bytes(changed), vkey), f"byte {position} changed and still verified"


def test_a_bundle_of_an_erased_run_verifies_and_any_changed_byte_fails(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", by="dpo")
    out = tmp_path / "old-1.json"
    code, err = _bundle(ledger_db, "old-1", key, out)
    assert code == 0 and "7 erased, hash kept" in err, err
    ledger_db.close_all()  # offline from here on
    code, text, _ = _run("verify-bundle", str(out), "--vkey", str(vkey))
    assert code == 0 and "7 events (7 erased (hash kept))" in text, text
    code, text, _ = _run("verify-bundle", str(out), "--vkey", str(vkey), "--json")
    assert json.loads(text)["erased"] == 7
    data = out.read_bytes()
    assert b"alice" not in data and b'"erasures"' in data
    _no_changed_byte_verifies(data, vkey)


def test_a_changed_kept_field_of_a_tombstone_fails(ledger_db: Ledger, tmp_path: Path) -> None:
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.of_run("old-1"), reason="gdpr")
    out = tmp_path / "b.json"
    assert _bundle(ledger_db, "old-1", key, out)[0] == 0
    obj = json.loads(out.read_bytes())
    # a well-formed edit: the tool of an erased action, the file rewritten in its form
    stone = next(e for e in obj["events"] if '"tool":"rm"' in e["data"])
    stone["data"] = stone["data"].replace('"tool":"rm"', '"tool":"ls"')
    edited = (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    with pytest.raises(IntegrityError, match="not the ones it wrote"):
        verify_bundle(edited, [Verifier.from_key(vkey.read_text().strip())])
    # the evidence left out: the tombstones cannot be checked
    del obj["erasures"]
    bare = (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    with pytest.raises(IntegrityError, match="does not hold"):
        verify_bundle(bare, [Verifier.from_key(vkey.read_text().strip())])


def test_field_erasure_and_an_erasure_by_date_spanning_runs(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.of_run("old-1"), reason="minimise", fields=["args", "result"])
    r.erase(Selection.older_than(OLD + timedelta(days=2)), reason="expired")  # both runs
    for run in ("old-1", "old-2"):
        data = _bundled(ledger_db, run, key, vkey, tmp_path)
        erasures = json.loads(data)["erasures"]
        assert len(erasures) == 1 and len(erasures[0]["others"]) == 7  # the other run's rows
        obj = json.loads(data)
        obj["erasures"][0]["others"][0][1] = "00" * 32  # a row of the other run, edited
        edited = (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
        assert not _verifies(edited, vkey)


def test_a_field_erased_run_bundles_alone(ledger_db: Ledger, tmp_path: Path) -> None:
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.of_run("old-2"), reason="minimise", fields=["args", "result"])
    out = tmp_path / "b.json"
    code, err = _bundle(ledger_db, "old-2", key, out)
    assert code == 0 and "erased, hash kept" in err
    assert _verifies(out.read_bytes(), vkey)
    assert json.loads(out.read_bytes())["erasures"][0]["others"] == []
    # a run with no tombstone: the bundle is the one it always was (no erasures member)
    code, _ = _bundle(ledger_db, "old-1", key, tmp_path / "c.json")
    assert code == 0 and b'"erasures"' not in (tmp_path / "c.json").read_bytes()


@pytest.mark.parametrize("later", [1, 2])
def test_a_run_whose_erasure_record_later_erasures_partly_replaced_bundles_and_verifies(
    ledger_db: Ledger, tmp_path: Path, later: int
) -> None:
    """A field erasure by date writes tombstones in both runs; later erasures of old-2
    (one whole, or a field then the whole) replace its tombstones there. old-1's bundle
    was refused (the bytes the first erasure wrote in old-2 were gone); the replacing
    tombstones now keep their digests (``erased.earlier``), so it bundles, verifies
    offline, and any changed byte fails."""
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.older_than(OLD + timedelta(days=2)), reason="minimise", fields=["args"])
    if later == 2:
        r.erase(Selection.of_run("old-2"), reason="results", fields=["result"])
    r.erase(Selection.of_run("old-2"), reason="gdpr")  # replaces half of the first's rows
    for run in ("old-1", "old-2"):
        _no_changed_byte_verifies(_bundled(ledger_db, run, key, vkey, tmp_path), vkey, 200)
    obj = json.loads((tmp_path / "old-1.json").read_bytes())
    (entry,) = obj["erasures"]
    old_2 = {
        int(i) for (i,) in ledger_db.sql("SELECT leaf_index FROM {p}events WHERE run_id = 'old-2'")
    }  # fmt: skip
    # old-2's rows that held args, as the first erasure wrote them
    assert entry["others"] and {i for i, _ in entry["others"]} <= old_2
    from ledger.integrity.verify import verify_ledger

    result = verify_ledger(ledger_db.open(), None)
    assert result.ok, result.findings


def test_a_tombstone_replaced_before_it_kept_the_earlier_digest_is_refused_clearly(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    """A ledger whose tombstones were erased again before they kept ``earlier`` (what
    an older version wrote: the member taken out here by SQL) cannot vouch offline for
    the first record's other tombstones: refused, saying why, in one line."""
    r, key, _ = _setup(ledger_db, tmp_path)
    r.erase(Selection.older_than(OLD + timedelta(days=2)), reason="minimise", fields=["args"])
    r.erase(Selection.of_run("old-2"), reason="gdpr")
    for seq, text in ledger_db.sql(
        "SELECT seq, event_json FROM {p}events WHERE run_id = 'old-2'"
    ):  # fmt: skip
        obj = json.loads(text)
        obj["erased"].pop("earlier", None)
        ledger_db.sql(
            "UPDATE {p}events SET event_json = :j WHERE seq = :s",
            j=json.dumps(obj, separators=(",", ":")), s=seq,
        )  # fmt: skip
    code, err = _bundle(ledger_db, "old-1", key, tmp_path / "b.json")
    assert code == 1 and "cannot vouch for its tombstones offline" in err, err
    assert "before tombstones kept the digest" in err and "Traceback" not in err


def test_a_checkpoint_made_before_an_erasure_is_said_not_to_cover_its_record(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    """A bundle of an erased run carries the erasure record that vouches for its
    tombstones: a checkpoint signed before the erasure covers the run's events but not
    the record, and the refusal says so (it said only "it needs size N")."""
    r, key, _ = _setup(ledger_db, tmp_path)
    code, _, err = _run("checkpoint", "--db", ledger_db.url, "--key", str(key))
    assert code == 0, err
    r.erase(Selection.of_run("old-1"), reason="GDPR", by="dpo")
    code, _, err = _run("bundle", "old-1", "--db", ledger_db.url, "-o", str(tmp_path / "b.json"))
    assert code == 1 and "the erasure records of its tombstones" in err, err
    assert "pass --key" in err and err.count("\n") == 1


def test_a_changed_tombstone_of_a_partly_replaced_record_is_reported(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    """The first erasure's digest covers every tombstone it wrote; once a later erasure
    replaced some, verify (and a re-erasure) skipped its check, so a tombstone of it
    changed by SQL (its content hash recomputed to match) went unseen. The replaced
    rows now count by the digest their tombstones keep: the change is reported, and
    erasing the changed row again is refused."""
    from ledger.errors import RetentionError
    from ledger.integrity.verify import verify_ledger
    from ledger.sinks.rows import content_hash

    r, _, _ = _setup(ledger_db, tmp_path)
    r.erase(Selection.older_than(OLD + timedelta(days=2)), reason="minimise", fields=["args"])
    r.erase(Selection.of_run("old-2"), reason="gdpr")
    sink = ledger_db.open()
    assert verify_ledger(sink, None).ok
    ((seq, text),) = ledger_db.sql(
        "SELECT seq, event_json FROM {p}events WHERE run_id = 'old-1' AND kind = 'action' "
        "AND event_json LIKE '%\"erased\"%' ORDER BY seq LIMIT 1"
    )
    edited = str(text).replace('"minimise"', '"routine clean-up"')
    assert edited != text
    ledger_db.sql(
        "UPDATE {p}events SET event_json = :j, content_hash = :h WHERE seq = :s",
        j=edited, h=content_hash(edited), s=seq,
    )  # fmt: skip
    result = verify_ledger(sink, None)
    assert any("not the bytes it wrote" in f.message for f in result.findings), result.findings
    with pytest.raises(RetentionError, match="not the bytes it wrote"):
        r.erase(Selection.of_run("old-1"), reason="gdpr 2")


def test_a_run_whose_own_tombstones_a_later_erasure_partly_replaced_bundles(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    """A field erasure of a run, then one of its events erased whole: the first
    record's digest covers that event's first tombstone too, which the bundle now
    carries among ``others`` (the digest the replacing tombstone keeps). It was left
    out as a row of the run itself, and the bundle of an intact ledger failed to verify."""
    r, key, vkey = _setup(ledger_db, tmp_path)
    r.erase(Selection.of_run("old-1"), reason="minimise", fields=["args"])
    sink = ledger_db.open()
    first = next(str(e.event_id) for e in sink.events(run_id="old-1") if e.kind == "action")
    r.erase(Selection.of_events([first]), reason="gdpr")
    data = _bundled(ledger_db, "old-1", key, vkey, tmp_path)
    entries = {
        json.loads(e["record"]["data"])["args"]["reason"]: e for e in json.loads(data)["erasures"]
    }
    assert len(entries["minimise"]["others"]) == 1 and entries["gdpr"]["others"] == []
    _no_changed_byte_verifies(data, vkey, 200)
