"""A signed lowering of the floor stands only in the ledger it was signed for.

Two ledgers whose policies the same data-protection key governs: the key holder lowers
the floor of one. Someone who can write the other's database but holds no key copies
that signed record into it (the record, and a policy table row saying the same): the
signature is valid, the versions line up, and before the change names the record it
replaces (``after``) both the erasure API and ``ledger verify`` took it. Now the
erasure API refuses the ledger, verify reports the record and judges later erasures
under the policy before it, while a copy made by ``ledger db copy`` (same event ids, a
new origin) keeps its history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from ledger.errors import RetentionError
from ledger.integrity import generate_key
from ledger.integrity.note import Signer
from ledger.integrity.verify import verify_ledger
from ledger.model.erasure import POLICY_TOOL
from ledger.retention import Retention, Selection
from ledger.retention.records import RetentionRun
from ledger.retention.store import _Txn
from ledger.sinks import SQLiteSink
from ledger.sinks.copy import copy_ledger
from ledger.sinks.rows import to_micros
from ledger.timefmt import parse_time
from tests.retention.conftest import Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _lowered_record(tmp_path: Path, dpo: str, dpo_public: str) -> dict[str, Any]:
    """The signed record of ledger A's floor lowered from 180d to 0 by the key holder."""
    with SQLiteSink(tmp_path / "a.db") as a:
        r = Retention(a, clock=lambda: NOW)
        r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="policy", by="dpo")
        r.set_policy(keep="400d", floor="0", reason="lower", by="dpo", signer=Signer.from_key(dpo))
        (found,) = [
            e.args
            for e in a.events(kind="action", tool=POLICY_TOOL)
            if '"version":2' in (e.args or "")
        ]
    record: dict[str, Any] = orjson.loads(found)
    return record


def _replay(sink: Any, record: dict[str, Any]) -> None:
    """What a writer without the key does: append ``record`` as a policy change of
    ``sink``'s ledger, with the policy table's row saying the same."""
    r = Retention(sink)
    run = RetentionRun()
    at = parse_time(record["at"])
    with r._writing() as conn:
        conn.execute(
            r._t.policy.insert().values(
                version=record["version"], keep_s=400 * 86400, floor_s=0,
                keys=json.dumps(record["keys"]), record_id=str(run.record_id),
                set_us=to_micros(at), set_by=record["by"], reason=record["reason"],
                signature=json.dumps(record["signature"]),
            )
        )  # fmt: skip
        r._append(
            _Txn(conn=conn, now=at),
            run.events(tool=POLICY_TOOL, asked="set retention", record=record,
                       outcome={"version": record["version"], "change": "lower"},
                       reason=record["reason"], by=record["by"], at=at),
        )  # fmt: skip


def test_a_lowering_signed_for_another_ledger_does_not_stand(
    ledger_db: Ledger, tmp_path: Path
) -> None:
    dpo, dpo_public = generate_key("dpo.example/policy")
    record = _lowered_record(tmp_path, dpo, dpo_public)
    sink = ledger_db.open()
    sink.record_many(run_events("young", NOW - timedelta(days=10)))
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="policy", by="dpo")
    _replay(sink, record)
    with pytest.raises(RetentionError, match="another ledger"):
        r.erase(Selection.of_run("young"), reason="GDPR", by="x")
    assert len(list(sink.chain("young").events)) == len(run_events("young", NOW))
    result = verify_ledger(sink, None)
    assert not result.ok
    assert any("another ledger" in f.message for f in result.findings), result.findings


def test_a_lowering_signed_here_stands_and_in_a_copy_too(tmp_path: Path) -> None:
    dpo, dpo_public = generate_key("dpo.example/policy")
    with SQLiteSink(tmp_path / "a.db") as a:
        a.record_many(run_events("young", NOW - timedelta(days=10)))
        r = Retention(a, clock=lambda: NOW)
        r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="policy", by="dpo")
        r.set_policy(keep="400d", floor="1d", reason="lower", by="dpo", signer=Signer.from_key(dpo))
    copied = copy_ledger(f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'c.db'}")
    assert copied.verified
    for name in ("a.db", "c.db"):
        with SQLiteSink(tmp_path / name) as sink:
            assert verify_ledger(sink, None).ok
            r = Retention(sink, clock=lambda: NOW)
            assert r.policy() is not None and r.policy().policy.floor == timedelta(days=1)  # type: ignore[union-attr]
            done = r.erase(Selection.of_run("young"), reason="GDPR", by="dpo")
            assert done.erased == len(run_events("young", NOW))
            assert verify_ledger(sink, None).ok
    with SQLiteSink(tmp_path / "c.db") as copy:  # the copy's own signed change stands
        Retention(copy, clock=lambda: NOW).set_policy(
            keep="400d", floor="0", reason="lower again", by="dpo", signer=Signer.from_key(dpo)
        )
        assert verify_ledger(copy, None).ok


def test_a_copy_of_a_copy_keeps_its_signed_history(tmp_path: Path) -> None:
    """A copied ledger lowers its floor; a copy of that copy still verifies and erases
    under it (``after`` names records the copies keep by event id)."""
    dpo, dpo_public = generate_key("dpo.example/policy")
    with SQLiteSink(tmp_path / "a.db") as a:
        a.record_many(run_events("young", NOW - timedelta(days=10)))
        Retention(a, clock=lambda: NOW).set_policy(
            keep="400d", floor="180d", keys=[dpo_public], reason="policy", by="dpo"
        )
    assert copy_ledger(f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}").verified
    with SQLiteSink(tmp_path / "b.db") as b:
        Retention(b, clock=lambda: NOW).set_policy(
            keep="400d", floor="1d", reason="lower", by="dpo", signer=Signer.from_key(dpo)
        )
    assert copy_ledger(f"sqlite:///{tmp_path / 'b.db'}", f"sqlite:///{tmp_path / 'c.db'}").verified
    with SQLiteSink(tmp_path / "c.db") as c:
        assert verify_ledger(c, None).ok
        done = Retention(c, clock=lambda: NOW).erase(Selection.of_run("young"), reason="GDPR")
        assert done.erased == len(run_events("young", NOW)) and verify_ledger(c, None).ok


def test_a_change_without_after_stands_as_before() -> None:
    """A change written before ``after`` existed is not bound to a ledger (a copy of a
    copy holds such changes naming neither its origin nor its source's)."""
    from ledger.integrity.policy_change import signed_here

    assert signed_here({"origin": "log-x"}, "01A")
    assert signed_here({"after": "01A", "origin": "log-x"}, "01A")
    assert not signed_here({"after": "01A"}, "01B")
    assert not signed_here({"after": None}, "01A")
    assert not signed_here({"after": "01A"}, None)


def test_only_a_policy_key_may_sign_any_change(ledger_db: Ledger) -> None:
    """A change that needs no signature (a raise) signed by a key nobody registered was
    recorded and shown as "signed by" that key: now refused, nothing changed."""
    dpo, dpo_public = generate_key("dpo.example/policy")
    evil, _ = generate_key("evil.example/policy")
    sink = ledger_db.open()
    r = Retention(sink, clock=lambda: NOW)
    with pytest.raises(RetentionError, match="not one of the policy keys"):
        r.set_policy(keep="400d", floor="30d", reason="p", signer=Signer.from_key(evil))
    assert r.policy() is None
    r.set_policy(
        keep="400d", floor="30d", keys=[dpo_public], reason="p", signer=Signer.from_key(dpo)
    )  # fmt: skip  (a key it registers may sign)
    with pytest.raises(RetentionError, match="not one of the policy keys"):
        r.set_policy(keep="400d", floor="60d", reason="raise", signer=Signer.from_key(evil))
    r.set_policy(keep="400d", floor="60d", reason="raise", signer=Signer.from_key(dpo))
    state = r.policy()
    assert state is not None and state.version == 2 and state.signed_by.startswith("dpo")


class _Misconfigured:
    """A signer (as a KMS or HSM key implements ``NoteSigner``) that presents a policy
    key's name and key id but signs with another private key: what a misconfigured HSM
    slot, or a key ground to collide on the 32-bit key id, would present."""

    def __init__(self, claimed: str, actual: str) -> None:
        self._claimed, self._actual = Signer.from_key(claimed), Signer.from_key(actual)

    @property
    def name(self) -> str:
        return self._claimed.name

    @property
    def key_id(self) -> int:
        return self._claimed.key_id

    def sign(self, message: bytes) -> bytes:
        return self._actual.sign(message)


def test_a_signer_that_is_not_the_policy_key_it_names_is_refused(ledger_db: Ledger) -> None:
    """A signature is checked with the registered public key before it is recorded: a
    signer presenting a policy key's name and key id but another key was recorded, and
    shown as "signed by" the policy key. Refused for a raise and a lowering alike,
    nothing changed."""
    dpo, dpo_public = generate_key("dpo.example/policy")
    other, _ = generate_key("dpo.example/policy")  # the same name, another key
    sink = ledger_db.open()
    r = Retention(sink, clock=lambda: NOW)
    r.set_policy(keep="400d", floor="180d", keys=[dpo_public], reason="p")
    wrong = _Misconfigured(dpo, other)
    for floor in ("200d", "30d"):  # a raise, a lowering
        with pytest.raises(RetentionError, match="is not that key"):
            r.set_policy(keep="400d", floor=floor, reason="change", signer=wrong)
        state = r.policy()
        assert state is not None and state.version == 1 and state.policy.floor.days == 180
    r.set_policy(keep="400d", floor="30d", reason="lower", signer=Signer.from_key(dpo))
    state = r.policy()
    assert state is not None and state.version == 2 and state.signed_by.startswith("dpo")
