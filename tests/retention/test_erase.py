"""Retention on SQLite and PostgreSQL through the library: policy, holds, erasure, and
the log verifying after every allowed erasure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ledger.errors import RetentionError, ValidationError
from ledger.integrity import generate_key
from ledger.integrity.note import Signer, Verifier
from ledger.integrity.verify import FindingKind, verify_ledger
from ledger.model.erasure import ERASE_TOOL, erased_whole
from ledger.retention import Retention, Selection, store
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema

SKEY, VKEY = generate_key("test.example/log")


def _setup(db: Ledger) -> tuple[object, Retention]:
    sink = db.open()
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1), secret="bob"))
    sink.record_many(run_events("young", datetime.now(UTC) - timedelta(days=1), secret="carol"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="records policy v1", by="dpo")
    return sink, r


def _rows(db: Ledger) -> dict[str, bytes]:
    return {
        str(i): (j.encode() if isinstance(j, str) else bytes(j))
        for i, j in db.sql("SELECT event_id, event_json FROM {p}events")
    }


def _verified(sink: object) -> object:
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])  # type: ignore[arg-type]
    assert result.ok, [f.message for f in result.errors]
    return result


def test_erasing_a_run_keeps_the_log_verifiable_and_other_rows_byte_identical(
    ledger_db: Ledger,
) -> None:
    sink, r = _setup(ledger_db)
    sink.checkpoint(Signer.from_key(SKEY))  # type: ignore[attr-defined]
    before = _rows(ledger_db)
    head = sink.tree_head()  # type: ignore[attr-defined]
    done = r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", by="dpo")
    assert done.erased == len(run_events("old-1", OLD)) and done.record_id
    after = _rows(ledger_db)
    erased = {e.event_id for e in sink.events(run_id="old-1")}  # type: ignore[attr-defined]
    for event_id, data in before.items():
        if any(str(e) == event_id for e in erased):
            assert b"alice" not in after[event_id]
        else:
            assert after[event_id] == data  # every surviving byte unchanged
    result = _verified(sink)
    assert any(f.kind is FindingKind.ERASED for f in result.findings)  # type: ignore[attr-defined]
    # the tree only grew: the old checkpoint is consistent with the new head
    assert sink.tree_head().size > head.size  # type: ignore[attr-defined]
    chain = sink.chain("old-1")  # type: ignore[attr-defined]
    text = chain.render()
    assert "[erased: GDPR Art. 17 request 42]" in text and "alice" not in text
    assert [a.tool for a in chain.actions] == ["send_mail", "send_mail", "rm"]
    assert chain.actions[2].denied  # the denial is still a denial
    record = sink.get(done.record_id)  # type: ignore[attr-defined]
    assert record.tool == ERASE_TOOL and "GDPR" in record.reason
    assert not [a for a in sink.chain(record.run_id).anomalies]  # type: ignore[attr-defined]
    assert [e.record_id for e in r.erasures()] == [done.record_id]
    # an erased event is still proven in the tree, by the leaf hash its tombstone keeps
    root = sink.tree_head().root  # type: ignore[attr-defined]
    for event_id in erased:
        sink.inclusion_proof(event_id).verify(root)  # type: ignore[attr-defined]


def test_field_level_erasure_keeps_the_rest_readable(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    r.erase(Selection.of_run("old-2"), reason="minimise", fields=["args", "result"])
    chain = sink.chain("old-2")  # type: ignore[attr-defined]
    first = chain.actions[0]
    assert first.intent.args is None and first.intent.reason == "ok"
    assert first.intent.refs and first.result is not None and first.result.result is None
    assert first.outcome == "succeeded"
    assert chain.request is not None and chain.request.args is None
    assert "[erased: minimise]" in chain.why("c0").render()
    _verified(sink)
    # a whole erasure later: the earlier record still accounts for its rows
    later = r.erase(Selection.of_run("old-2"), reason="expired")
    assert later.erased == len(run_events("old-2", OLD))
    _verified(sink)
    again = r.erase(Selection.of_run("old-2"), reason="expired again")
    assert again.erased == 0 and again.record_id is None


def test_dry_run_lists_exactly_what_would_go_and_changes_nothing(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    before = _rows(ledger_db)
    size = sink.tree_head().size  # type: ignore[attr-defined]
    seen: list[str] = []
    plan = r.erase(Selection.older_than(OLD + timedelta(hours=1)), reason="x", dry_run=True,
                   each=lambda s: seen.append(s.event_id))  # fmt: skip
    assert plan.erased == len(seen) == len(run_events("old-1", OLD))
    assert _rows(ledger_db) == before and sink.tree_head().size == size  # type: ignore[attr-defined]
    done = r.erase(Selection.older_than(OLD + timedelta(hours=1)), reason="x")
    assert done.erased == plan.erased and done.digest == plan.digest


@pytest.mark.parametrize(
    "selection",
    [Selection.of_run("young"), Selection.older_than(datetime.now(UTC))],
    ids=["run", "before-now"],
)
def test_erasing_inside_the_floor_is_refused_and_nothing_changes(
    ledger_db: Ledger, selection: Selection
) -> None:
    sink, r = _setup(ledger_db)
    before, size = _rows(ledger_db), sink.tree_head().size  # type: ignore[attr-defined]
    with pytest.raises(RetentionError, match="inside the retention floor"):
        r.erase(selection, reason="please")
    assert _rows(ledger_db) == before and sink.tree_head().size == size  # type: ignore[attr-defined]


def test_holds_block_erasure_until_released(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    by_run = r.add_hold(run_id="old-1", reason="litigation 2026-044", by="legal")
    by_time = r.add_hold(since=OLD + timedelta(hours=12), until=OLD + timedelta(days=2),
                         reason="audit")  # fmt: skip
    before = _rows(ledger_db)
    with pytest.raises(RetentionError, match=by_run.hold_id):
        r.erase(Selection.of_run("old-1"), reason="x")
    with pytest.raises(RetentionError, match=by_time.hold_id):
        r.erase(Selection.of_run("old-2"), reason="x")
    assert _rows(ledger_db) == before
    assert {h.hold_id for h in r.holds()} == {by_run.hold_id, by_time.hold_id}
    r.release_hold(by_run.hold_id, reason="case closed")
    assert r.erase(Selection.of_run("old-1"), reason="x").erased
    with pytest.raises(RetentionError, match="already released"):
        r.release_hold(by_run.hold_id, reason="again")
    with pytest.raises(RetentionError, match="no legal hold"):
        r.release_hold("01JDX0S1ZQ9T4W8M3V6K2N7B5C", reason="x")
    assert len(r.holds(released=True)) == 2
    _verified(sink)


def test_bad_requests_are_refused_and_change_nothing(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    before = _rows(ledger_db)
    with pytest.raises(RetentionError, match="no events of run"):
        r.erase(Selection.of_run("nope"), reason="x")
    with pytest.raises(ValidationError, match="reason is required"):
        r.erase(Selection.of_run("old-1"), reason="  ")
    with pytest.raises(RetentionError, match="no event with id"):
        r.erase(Selection.of_events(["01JDX0S1ZQ9T4W8M3V6K2N7B5C"]), reason="x")
    with pytest.raises(ValidationError, match="cannot be erased"):
        r.erase(Selection.of_run("old-1"), reason="x", fields=["run_id"])
    record_run = r.policy().record_id  # type: ignore[union-attr]
    policy_run = sink.get(record_run).run_id  # type: ignore[attr-defined]
    with pytest.raises(RetentionError, match="retention"):
        r.erase(Selection.of_run(policy_run), reason="x")
    assert _rows(ledger_db) == before


def test_no_policy_means_no_erasure(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    with pytest.raises(RetentionError, match="no retention policy"):
        Retention(sink).erase(Selection.of_run("old-1"), reason="x")


def test_the_floor_is_raised_freely_and_lowered_only_by_a_signed_change(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    skey, vkey = generate_key("dpo.example/policy")
    other, _ = generate_key("intruder.example/policy")
    with pytest.raises(RetentionError, match="no policy key"):
        r.set_policy(keep="400d", floor="30d", reason="lower")
    r.set_policy(keep="400d", keys=[vkey], reason="register the DPO key")
    raised = r.set_policy(keep="500d", floor="365d", reason="regulator asks a year")
    assert raised.policy.floor == timedelta(days=365)
    with pytest.raises(RetentionError, match="needs a signature"):
        r.set_policy(keep="500d", floor="180d", reason="lower")
    with pytest.raises(RetentionError, match="not one of the policy keys"):
        r.set_policy(keep="500d", floor="180d", reason="lower", signer=Signer.from_key(other))
    assert r.policy().policy.floor == timedelta(days=365)  # type: ignore[union-attr]
    lowered = r.set_policy(keep="500d", floor="180d", reason="back to the law's minimum",
                           signer=Signer.from_key(skey))  # fmt: skip
    assert lowered.policy.floor == timedelta(days=180) and lowered.signed_by
    record = sink.get(lowered.record_id)  # type: ignore[attr-defined]
    assert '"change":"lower"' in (record.args or "") and '"signature":{' in (record.args or "")
    assert [s.version for s in r.policies()] == [1, 2, 3, 4]
    _verified(sink)


def test_a_tombstone_changed_or_forged_outside_the_ledger_is_tampering(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    done = r.erase(Selection.of_run("old-1"), reason="gdpr")
    assert done.record_id
    victim = next(iter(sink.events(run_id="old-2")))  # type: ignore[attr-defined]
    stone = next(iter(sink.events(run_id="old-1")))  # type: ignore[attr-defined]
    # forge: copy a tombstone's shape onto an unerased row of another run, keeping its leaf
    nodes = ledger_db.sql("SELECT nodes FROM {p}events WHERE event_id = :i", i=str(victim.event_id))
    leaf = bytes(nodes[0][0])[:32]
    forged = victim.replace(
        args=None,
        erased=stone.erased.__class__(
            fields=("args",), leaf_hash=bytes(leaf).hex(), records=(done.record_id,), reason="gdpr"
        ),
    )
    ledger_db.sql("UPDATE {p}events SET event_json = :j WHERE event_id = :i",
                  j=forged.to_json(), i=str(victim.event_id))  # fmt: skip
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])  # type: ignore[arg-type]
    assert not result.ok
    assert any(done.record_id in f.message for f in result.errors)


def test_a_tombstone_edited_after_erasure_is_tampering(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    r.erase(Selection.of_run("old-1"), reason="gdpr")
    stone = next(iter(sink.events(run_id="old-1", kind="action")))  # type: ignore[attr-defined]
    edited = stone.replace(verdict="denied")
    ledger_db.sql("UPDATE {p}events SET event_json = :j WHERE event_id = :i",
                  j=edited.to_json(), i=str(stone.event_id))  # fmt: skip
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])  # type: ignore[arg-type]
    assert not result.ok and any("changed after the erasure" in f.message for f in result.errors)


def test_erasing_a_row_tampered_with_is_refused(ledger_db: Ledger) -> None:
    sink, r = _setup(ledger_db)
    ev = next(iter(sink.events(run_id="old-1")))  # type: ignore[attr-defined]
    ledger_db.sql("UPDATE {p}events SET event_json = :j WHERE event_id = :i",
                  j=ev.replace(preview="edited").to_json(), i=str(ev.event_id))  # fmt: skip
    with pytest.raises(RetentionError, match="would hide that"):
        r.erase(Selection.of_run("old-1"), reason="x")


def test_an_erasure_in_pages_erases_what_row_by_row_erases(
    ledger_db: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pages of 3 rows: a page all ordinary (the page path), pages holding rows erased
    # before (row by row), the same counts and digest as the dry run (row by row)
    monkeypatch.setattr(store, "PAGE", 3)
    sink, r = _setup(ledger_db)
    ids = [str(e.event_id) for e in sink.events(run_id="old-1")]  # type: ignore[attr-defined]
    r.erase(Selection.of_events(ids[4:6]), reason="one", fields=["args"])
    plan = r.erase(Selection.of_run("old-1"), reason="all", dry_run=True)
    done = r.erase(Selection.of_run("old-1"), reason="all")
    assert done.erased == plan.erased == len(ids) and done.digest == plan.digest
    assert all(erased_whole(e) for e in sink.events(run_id="old-1"))  # type: ignore[attr-defined]
    _verified(sink)


def test_a_row_tampered_with_in_a_later_page_refuses_the_whole_erasure(
    ledger_db: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "PAGE", 3)
    sink, r = _setup(ledger_db)
    ev = list(sink.events(run_id="old-1"))[-1]  # type: ignore[attr-defined]
    ledger_db.sql("UPDATE {p}events SET event_json = :j WHERE event_id = :i",
                  j=ev.replace(label="edited").to_json(), i=str(ev.event_id))  # fmt: skip
    before, size = _rows(ledger_db), sink.tree_head().size  # type: ignore[attr-defined]
    with pytest.raises(RetentionError, match="would hide that"):
        r.erase(Selection.of_run("old-1"), reason="x")
    assert _rows(ledger_db) == before and sink.tree_head().size == size  # type: ignore[attr-defined]


def test_the_compliance_report_shows_policy_holds_and_erasures_and_stays_compliant(
    ledger_db: Ledger,
) -> None:
    from ledger.report.build import build_report

    sink, r = _setup(ledger_db)
    hold = r.add_hold(run_id="old-2", reason="litigation 2026-044", by="legal")
    done = r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", by="dpo")
    report = build_report(sink)  # type: ignore[arg-type]
    section = report.to_dict()["retention"]
    assert section["policy"]["floor"] == "180d"
    assert [h["id"] for h in section["holds"]] == [hold.hold_id]
    assert [e["record"] for e in section["erasures"]] == [done.record_id]
    assert section["erased_events"] == done.erased
    assert report.compliant, report.to_dict()["log_check"]
    page = report.to_html()
    assert "Retention, legal holds and erasures" in page and "GDPR Art. 17 request 42" in page
    assert "alice" not in page
    # the text and CSV forms carry the section too
    from ledger.report.render import render_csv

    lines = report.retention.lines() if report.retention else []
    assert any("keep 400d, floor 180d" in x for x in lines)
    assert any(hold.hold_id in x and "litigation 2026-044" in x for x in lines)
    assert done.record_id is not None
    assert any(done.record_id in x and "GDPR Art. 17 request 42" in x for x in lines)
    csv_text = render_csv(report)
    assert "retention," in csv_text and "GDPR Art. 17 request 42" in csv_text
    # a window of the erased run, long before the erasure: the erasure is listed (it
    # took events of the window), the policy as it stood then is none, and the one it
    # was made under is shown as set after the window
    early = build_report(sink, until=datetime(2025, 6, 1, tzinfo=UTC))  # type: ignore[arg-type]
    section = early.to_dict()["retention"]
    assert [e["record"] for e in section["erasures"]] == [done.record_id]
    assert section["policy"] is None
    assert section["policy_set_after_window"]["floor"] == "180d"
    assert early.retention is not None
    assert "none in force in the window" in early.retention.lines()[0]
    # a window with none of the erased events, before the erasure: none listed
    other = build_report(  # type: ignore[arg-type]
        sink, since=datetime(2025, 1, 2, tzinfo=UTC), until=datetime(2025, 6, 1, tzinfo=UTC)
    )
    assert other.to_dict()["retention"]["erasures"] == []


def test_vacuum_reclaims_space_and_keeps_every_row_and_the_tree(ledger_db: Ledger) -> None:
    from ledger.retention.vacuum import vacuum

    sink, r = _setup(ledger_db)
    r.erase(Selection.of_run("old-1"), reason="gdpr")
    before, head = _rows(ledger_db), sink.tree_head()  # type: ignore[attr-defined]
    outcome = vacuum(sink)
    assert outcome.rows == len(before) and outcome.size_after > 0
    assert _rows(ledger_db) == before and sink.tree_head() == head  # type: ignore[attr-defined]
    _verified(sink)


def test_why_and_the_report_show_erased_parts_as_erased(ledger_db: Ledger) -> None:
    """After a whole-run erasure: ``why`` shows each erased part as erased (text and
    JSON, never empty or "(none)"), and the report's denials say the reason was erased."""
    from ledger.report.build import build_report

    sink, r = _setup(ledger_db)
    r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", by="dpo")
    chain = sink.chain("old-1")  # type: ignore[attr-defined]
    done = chain.why(chain.actions[0].call_id)
    text = done.render()
    for label in ("reason:", "args:", "outcome:", "evidence:", "request:"):
        line = next(x for x in text.splitlines() if x.strip().startswith(label))
        assert "[erased: GDPR Art. 17 request 42]" in line, line
    found = done.to_dict()
    assert set(found["erased"]) == {"intent", "result", "request"}
    assert found["erased"]["intent"]["reason"] == "GDPR Art. 17 request 42"
    denied = build_report(sink).denials  # type: ignore[arg-type]
    assert [d.reason for d in denied if d.run_id == "old-1"] == [
        "[erased: GDPR Art. 17 request 42]"
    ]


def test_older_than_takes_a_date_as_the_command_does() -> None:
    """``Selection.older_than("2025-01-01")`` reads the date as ``--before`` does; a
    malformed one is refused, naming what to give."""
    from datetime import UTC, datetime

    from ledger.errors import ValidationError

    assert Selection.older_than("2025-01-01").before == datetime(2025, 1, 1, tzinfo=UTC)
    assert Selection.older_than("2025-01-01T08:00:00+02:00").before == datetime(
        2025, 1, 1, 6, tzinfo=UTC
    )
    with pytest.raises(ValidationError, match="not a calendar date"):
        Selection.older_than("2025-13-01")
    with pytest.raises(ValidationError, match="RFC 3339"):
        Selection.older_than("last tuesday")
