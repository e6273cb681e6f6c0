"""``ledger verify`` checks each erasure against the retention policy the log held when
it was made: an erasure made outside the ledger's API (tombstones written by hand, with
a record appended that accounts for them) is reported when it erased what that policy
forbade, while every erasure the API made still verifies."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest

from ledger.integrity.verify import FindingKind, verify_ledger
from ledger.model.erasure import ALL_FIELDS, ERASE_TOOL, erase_stored, erasure_digest
from ledger.retention import Retention, Selection
from ledger.retention.records import RetentionRun
from ledger.timefmt import format_time
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def erase_by_hand(
    db: Ledger,
    sink: Any,
    run_id: str,
    *,
    policy: dict[str, Any],
    at: datetime,
    time: str | None = None,
    run: str | None = None,
) -> str:
    """What an eraser outside the ledger would do: tombstone the run's rows with SQL
    (each keeps its committed leaf hash, so the tree still verifies) and append an
    erasure record that accounts for them exactly. Returns the record's id. ``time`` and
    ``run`` rewrite the tombstones' kept time and run id (a forger's lie: the kept leaf
    hash covers the original bytes, which do not show them)."""
    retention = RetentionRun()
    record_id = str(retention.record_id)
    rows = db.sql(
        "SELECT seq, leaf_index, event_json FROM {p}events WHERE run_id = :r ORDER BY leaf_index",
        r=run_id,
    )
    leaves, stones = [], hashlib.sha256()
    for seq, index, text in rows:
        data = str(text).encode()
        leaf = hashlib.sha256(b"\x00" + data).digest()
        if time is not None or run is not None:
            event = orjson.loads(data)
            event["time"] = time or event["time"]
            event["run_id"] = run or event["run_id"]
            data = orjson.dumps(event)
        tomb, chash, has_err = erase_stored(
            data, fields=ALL_FIELDS, leaf_hash=leaf.hex(), record=record_id, reason="by hand"
        )
        db.sql(
            "UPDATE {p}events SET event_json = :j, content_hash = :h, has_err = :e "
            "WHERE seq = :s",
            j=tomb, h=chash, e=has_err, s=seq,
        )  # fmt: skip
        leaves.append((index, leaf))
        stones.update(index.to_bytes(8, "big") + hashlib.sha256(tomb.encode()).digest())
    record = {
        "selection": {"run_id": run_id},
        "fields": list(ALL_FIELDS),
        "events": len(rows),
        "digest": erasure_digest(leaves),
        "tombstones": stones.hexdigest(),
        "already_erased": 0,
        "policy": policy,
        "at": format_time(at),
        "by": "someone",
        "reason": "by hand",
    }
    sink._record_copied(  # a forger's write: what `ledger db copy` carries as it is
        retention.events(
            tool=ERASE_TOOL,
            asked="erase",
            record=record,
            outcome={"erased": len(rows)},
            reason="by hand",
            by="someone",
            at=at,
        )
    )
    return record_id


def forbidden(result: Any) -> list[str]:
    return [f.message for f in result.findings if f.kind is FindingKind.CHANGED]


def test_every_erasure_the_api_makes_verifies_across_policy_changes(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD) + run_events("old-2", OLD) + run_events("new", NOW))
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", reason="policy")
    r.erase(Selection.of_run("old-1"), reason="GDPR 1", by="dpo")
    r.set_policy(keep="400d", floor="300d", reason="raised")  # version 2
    r.erase(Selection.of_run("old-2"), reason="GDPR 2", by="dpo")
    result = verify_ledger(sink, None)
    assert result.ok, result.findings
    assert sum(f.kind is FindingKind.ERASED for f in result.findings) == 2


def test_an_erasure_inside_the_floor_made_by_hand_is_reported(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("young", NOW - timedelta(days=10)))
    Retention(sink, clock=lambda: NOW).set_policy(keep="400d", floor="180d", reason="policy")
    assert verify_ledger(sink, None).ok
    record = erase_by_hand(
        ledger_db, sink, "young", policy={"version": 1, "keep": "400d", "floor": "180d"}, at=NOW
    )
    result = verify_ledger(sink, None)
    assert not result.ok
    (message,) = forbidden(result)
    assert record in message and "inside the retention floor of 180d" in message


def test_an_erasure_naming_a_laxer_policy_than_the_logs_is_reported(ledger_db: Ledger) -> None:
    """The record claims a floor of 0 (a policy the log never held): the floor that
    counts is the log's."""
    sink = ledger_db.open()
    sink.record_many(run_events("young", NOW - timedelta(days=10)))
    Retention(sink, clock=lambda: NOW).set_policy(keep="400d", floor="180d", reason="policy")
    erase_by_hand(ledger_db, sink, "young", policy={"version": 1, "keep": "400d", "floor": "0d"},
                  at=NOW)  # fmt: skip
    (message,) = forbidden(verify_ledger(sink, None))
    assert "floor 0d" in message and "version 1 (floor 180d)" in message


def test_an_erasure_with_no_policy_in_the_log_is_reported(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    erase_by_hand(ledger_db, sink, "old", policy={"version": 1, "keep": "1d", "floor": "0d"},
                  at=NOW)  # fmt: skip
    (message,) = forbidden(verify_ledger(sink, None))
    assert "held no retention policy" in message


@pytest.mark.parametrize("floor", ["0d", "180d"])
def test_a_hand_made_erasure_the_policy_allowed_is_accounted_for(
    ledger_db: Ledger, floor: str
) -> None:
    """Old events, the policy in force named truly: the log accounts for the rows (the
    rule is the policy, not who wrote the tombstones)."""
    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    Retention(sink, clock=lambda: NOW).set_policy(keep="400d", floor=floor, reason="policy")
    erase_by_hand(ledger_db, sink, "old", policy={"version": 1, "keep": "400d", "floor": floor},
                  at=NOW)  # fmt: skip
    result = verify_ledger(sink, None)
    assert result.ok, result.findings


POLICY = {"version": 1, "keep": "400d", "floor": "180d"}


@pytest.mark.parametrize("scope", ["run", "range", "open range"])
def test_an_erasure_by_hand_under_a_standing_hold_is_reported(
    ledger_db: Ledger, scope: str
) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("held", OLD) + run_events("other", OLD + timedelta(days=30)))
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", reason="policy")
    if scope == "run":
        hold = r.add_hold(run_id="held", reason="litigation")
    elif scope == "range":
        hold = r.add_hold(since=OLD, until=OLD + timedelta(days=1), reason="litigation")
    else:
        hold = r.add_hold(until=OLD + timedelta(days=1), reason="litigation")
    r.erase(Selection.of_run("other"), reason="GDPR", by="dpo")  # outside the hold: fine
    assert verify_ledger(sink, None).ok
    record = erase_by_hand(ledger_db, sink, "held", policy=POLICY, at=NOW)
    (message,) = forbidden(verify_ledger(sink, None))
    assert record in message and f"under legal hold {hold.hold_id}" in message


def test_an_erasure_after_the_hold_was_released_verifies(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("held", OLD))
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", reason="policy")
    hold = r.add_hold(run_id="held", reason="litigation")
    r.release_hold(hold.hold_id, reason="case closed")
    erase_by_hand(ledger_db, sink, "held", policy=POLICY, at=NOW)
    result = verify_ledger(sink, None)
    assert result.ok, result.findings


def forge_policy(
    sink: Any,
    *,
    version: int,
    floor: str,
    keys: list[str],
    at: datetime,
    signer: Any = None,
    bound: bool = False,
) -> str:
    """Append a policy change record to the log as the ledger writes one, bypassing the
    API's check (a forger with write access); signed by ``signer`` when given. With
    ``bound`` it names the policy record it replaces (``after``), as changes written
    since that member exists do; else it reads as one written before."""
    from ledger.canonical import canonical_bytes
    from ledger.integrity._keytext import b64encode
    from ledger.model.erasure import POLICY_TOOL

    run = RetentionRun()
    body: dict[str, Any] = {
        "origin": sink.origin,
        "version": version,
        "keep": "400d",
        "floor": floor,
        "keys": keys,
        "previous": None,
        "change": "lower",
        "at": format_time(at),
        "by": "someone",
        "reason": "forged",
    }
    if bound:
        state = Retention(sink).policy()
        body["after"] = None if state is None else state.record_id
    signature = None
    if signer is not None:
        signed = signer.sign(canonical_bytes(body, "rfc8785"))
        signature = {
            "name": signer.name,
            "key_id": f"{signer.key_id:08x}",
            "signature": b64encode(signed),
        }
    events = run.events(
        tool=POLICY_TOOL,
        asked="set retention",
        record={**body, "signature": signature},
        outcome={"version": version},
        reason="forged",
        by="someone",
        at=at,
    )
    sink._record_copied(events)  # a forger's write: what `ledger db copy` carries as it is
    return str(run.record_id)


def test_an_unsigned_lowering_of_the_floor_in_the_log_is_reported(ledger_db: Ledger) -> None:
    """A forger appends a policy record lowering the floor to 0 (no signature) and then
    an erasure of young events under it: verify names the unsigned change and judges
    the erasure under the floor that stood before it."""
    sink = ledger_db.open()
    sink.record_many(run_events("young", NOW - timedelta(days=10)))
    Retention(sink, clock=lambda: NOW).set_policy(keep="400d", floor="180d", reason="policy")
    forged = forge_policy(sink, version=2, floor="0d", keys=[], at=NOW)
    record = erase_by_hand(
        ledger_db, sink, "young", policy={"version": 2, "keep": "400d", "floor": "0d"}, at=NOW
    )
    messages = forbidden(verify_ledger(sink, None))
    assert any(forged in m and "without a valid signature" in m for m in messages), messages
    assert any(record in m and "version 1 (floor 180d)" in m for m in messages), messages


def test_a_lowering_signed_by_a_key_not_of_the_policy_is_reported(ledger_db: Ledger) -> None:
    from ledger.integrity import generate_key
    from ledger.integrity.note import Signer

    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    dpo, dpo_public = generate_key("dpo.example/policy")
    evil, evil_public = generate_key("intruder.example/policy")
    Retention(sink, clock=lambda: NOW).set_policy(
        keep="400d", floor="180d", keys=[dpo_public], reason="policy"
    )
    # the intruder signs with its own key, and names it as the new policy key
    forged = forge_policy(sink, version=2, floor="1d", keys=[evil_public], at=NOW,
                          signer=Signer.from_key(evil))  # fmt: skip
    messages = forbidden(verify_ledger(sink, None))
    assert any(forged in m and "without a valid signature" in m for m in messages), messages
    # the same change signed by the policy's own key stands
    signed = forge_policy(sink, version=2, floor="1d", keys=[dpo_public], at=NOW,
                          signer=Signer.from_key(dpo))  # fmt: skip
    assert not any(signed in m for m in forbidden(verify_ledger(sink, None)))


def test_a_lowering_signed_by_the_policy_key_verifies(ledger_db: Ledger) -> None:
    from ledger.integrity import generate_key
    from ledger.integrity.note import Signer

    sink = ledger_db.open()
    sink.record_many(run_events("young", NOW - timedelta(days=10)))
    dpo, dpo_public = generate_key("dpo.example/policy")
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="policy")
    r.set_policy(keep="400d", floor="1d", reason="signed", signer=Signer.from_key(dpo))
    r.erase(Selection.of_run("young"), reason="GDPR", by="dpo")
    result = verify_ledger(sink, None)
    assert result.ok, result.findings


def test_a_retention_record_erased_by_hand_is_reported(ledger_db: Ledger) -> None:
    """The API never erases a retention run (the proof of what went); tombstones of one,
    written by hand with a record accounting for them, are tampering to verify."""
    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="0d", reason="policy")
    hold = r.add_hold(run_id="old", reason="litigation")
    (admin,) = ledger_db.sql(
        "SELECT DISTINCT run_id FROM {p}events WHERE event_id = :e", e=hold.hold_id
    )
    erase_by_hand(ledger_db, sink, str(admin[0]),
                  policy={"version": 1, "keep": "400d", "floor": "0d"}, at=NOW)  # fmt: skip
    messages = forbidden(verify_ledger(sink, None))
    assert any("tombstone of a retention record" in m for m in messages), messages


@pytest.mark.parametrize("bound", [True, False])
def test_a_raise_showing_a_signature_no_policy_key_made_is_reported(
    ledger_db: Ledger, bound: bool
) -> None:
    """A raise needs no signature, but one that carries a signature is shown as "signed
    by" its signer: a record whose signature no policy key made (appended outside the
    API) is a verify finding, and the erasure API refuses the ledger, naming it. Builds
    before a change named the record it replaces (``after``; ``bound`` False) did not
    check who signed a change that needed no signature: such a record is not held to
    the rule, so a ledger they wrote is neither refused for good nor reported."""
    from ledger.errors import RetentionError
    from ledger.integrity import generate_key
    from ledger.integrity.note import Signer

    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    _dpo, dpo_public = generate_key("dpo.example/policy")
    evil, _ = generate_key("intruder.example/policy")
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="policy")
    assert verify_ledger(sink, None).ok
    forged = forge_policy(sink, version=2, floor="200d", keys=[dpo_public], at=NOW,
                          signer=Signer.from_key(evil), bound=bound)  # fmt: skip
    messages = forbidden(verify_ledger(sink, None))
    if not bound:  # (the forger wrote no table row, which is refused; not the signature)
        assert not [m for m in messages if "signature" in m], messages
        assert "signature that no key" not in r.tables_changed()
        return
    assert any(
        forged in m and "intruder.example/policy+" in m and "no key of the policy" in m
        for m in messages
    ), messages
    with pytest.raises(RetentionError, match=f"{forged}.*signature that no key"):
        r.erase(Selection.of_run("old"), reason="GDPR", by="dpo")
    assert "signature that no key" in r.tables_changed()


def test_a_raise_signed_by_a_policy_key_verifies(ledger_db: Ledger) -> None:
    """The rule's other side: a raise signed by the key it registers, or by a key of the
    policy before it, verifies and erasures go on."""
    from ledger.integrity import generate_key
    from ledger.integrity.note import Signer

    sink = ledger_db.open()
    sink.record_many(run_events("old", OLD))
    dpo, dpo_public = generate_key("dpo.example/policy")
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(
        keep="400d", floor="180d", keys=[dpo_public], reason="p", signer=Signer.from_key(dpo)
    )  # fmt: skip  (signed by the key it registers)
    r.set_policy(keep="400d", floor="200d", reason="raise", signer=Signer.from_key(dpo))
    r.erase(Selection.of_run("old"), reason="GDPR", by="dpo")
    result = verify_ledger(sink, None)
    assert result.ok, result.findings
    assert r.tables_changed() == ""
