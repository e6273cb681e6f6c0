"""Defects a hostile reader of erased ledgers found (session 11), each a test that failed
before its fix, on SQLite and PostgreSQL, in the database build of the report and in the
streaming one:

- erasing a run took its gate decisions' safe markers (``label``, ``reason``), so its safe
  reads became "non-safe actions without a committed intent" and a compliant ledger
  failed ``report --strict``;
- erasing a failed call's ``err`` made the report and ``runs()`` count it a success;
- a row whose content hash was recomputed over an edit the readers refuse (a
  ``duration_ms`` of ``"5"``) passed the report's check and was counted.

A tombstone now keeps ``had_err`` and ``marked_safe`` (``ledger.model.erasure``): the
chain, the report and the run summaries read an erased run as they read it before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.canonical import sha256_of
from ledger.chain.parts import DecisionMark, decision_mark
from ledger.errors import CorruptRecord
from ledger.model.erasure import ALL_FIELDS, Erasure, erase_fields, erase_stored
from ledger.model.event import Event
from ledger.report import build_report
from ledger.retention import Retention, Selection
from ledger.retention.tombstones import TombstoneMaker
from ledger.sinks import MemoryReader
from tests.retention.conftest import OLD, Ledger, needs_retention_schema

pytestmark = needs_retention_schema
RECORD = "01JDX0S1ZQ9T4W8M3V6K2N7B5C"


def _gated_run(run: str) -> list[Event]:
    """A run as the gate records it: a safe read (a decision labelled safe, no action),
    a write with an allowed action, a call that failed, a denial, the end."""
    t = OLD
    at = [t + timedelta(seconds=i) for i in range(12)]
    return [
        Event(kind="request", run_id=run, time=at[0], args='"tidy the notes"'),
        Event(kind="gate_decision", run_id=run, call_id="r1", tool="read_file", time=at[1],
              verdict="allowed", label="safe:readers", reason="read-only tool"),
        Event(kind="tool_result", run_id=run, call_id="r1", tool="read_file", time=at[2],
              result='"notes"', duration_ms=2),
        Event(kind="gate_decision", run_id=run, call_id="r2", tool="stat", time=at[3],
              verdict="allowed", reason="safe tool: stat"),
        Event(kind="tool_result", run_id=run, call_id="r2", tool="stat", time=at[4],
              result="1", duration_ms=1),
        Event(kind="action", run_id=run, call_id="w1", tool="write_file", time=at[5],
              verdict="allowed", reason="the user asked", args={"path": "a.txt"}),
        Event(kind="tool_result", run_id=run, call_id="w1", tool="write_file", time=at[6],
              result="12", duration_ms=3),
        Event(kind="action", run_id=run, call_id="d1", tool="deploy", time=at[7],
              verdict="allowed", reason="release", args={"to": "prod"}),
        Event(kind="tool_result", run_id=run, call_id="d1", tool="deploy", time=at[8],
              err="PermissionError: alice@example.com may not deploy", duration_ms=4),
        Event(kind="action", run_id=run, call_id="x1", tool="rm", time=at[9],
              verdict="denied", reason="destructive"),
        Event(kind="run_end", run_id=run, time=at[10]),
    ]  # fmt: skip


class _Streamed:
    """The same ledger read as any reader is (not a SQL sink): the streaming build."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("get", "chain", "events", "runs"):
            return getattr(self._inner, name)
        raise AttributeError(name)


def _what_counts(reader: Any, run: str) -> dict[str, Any]:
    report = build_report(reader).to_dict()
    chain = reader.chain(run)
    (summary,) = [s for s in reader.runs() if s.run_id == run]
    return {
        "compliant": report["compliant"],
        "unsafe": report["totals"]["unsafe_without_intent"],
        "tools": sorted(
            (t["tool"], t["succeeded"], t["failed"], t["safe_reads"])
            for t in report["tools"]
            if not t["tool"].startswith("ledger.")  # the retention records' own calls
        ),
        "outcomes": sorted((a.call_id, a.outcome) for a in chain.actions),
        "anomalies": sorted(str(a.code) for a in chain.anomalies),
        "errors": summary.errors,
    }


@pytest.mark.parametrize(
    "fields",
    [None, ("label", "reason"), ("err",), ("reason",), ("label",), ("args", "result")],
    ids=["whole", "label+reason", "err", "reason", "label", "args+result"],
)
def test_an_erased_run_reads_as_it_read_before(ledger_db: Ledger, fields: Any) -> None:
    sink = ledger_db.open()
    sink.record_many(_gated_run("g1"))
    before = _what_counts(sink, "g1")
    assert before["compliant"] and before["unsafe"] == 0, before
    assert ("deploy", 0, 1, 0) in before["tools"] and before["errors"] == 1, before
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    done = retention.erase(
        Selection.of_run("g1"), reason="GDPR Art. 17", by="dpo", fields=fields or ALL_FIELDS
    )
    assert done.erased > 0
    assert _what_counts(sink, "g1") == before
    assert _what_counts(_Streamed(sink), "g1") == before  # the streaming build agrees
    assert build_report(sink).hash_check.mismatch_count == 0
    # the error text is gone, the fact that the call failed is not
    if fields is None or "err" in fields:
        (deploy,) = [a for a in sink.chain("g1").actions if a.call_id == "d1"]
        assert deploy.result is not None and deploy.result.err == ""
        assert "alice" not in deploy.result.to_json()


def test_a_tombstone_without_the_kept_facts_stays_fail_safe() -> None:
    """A tombstone written before ``had_err`` and ``marked_safe`` were kept: its decision
    is not taken for a safe read and its failure is not taken for a success."""
    gone = Erasure(fields=ALL_FIELDS, leaf_hash="ab" * 32, records=(RECORD,), reason="r")
    decision = Event(kind="gate_decision", call_id="c1", verdict="allowed", erased=gone)
    assert decision_mark(decision) is DecisionMark.NOT_SAFE
    sink = MemoryReader(
        [
            Event(kind="action", run_id="o", call_id="c1", tool="t", verdict="allowed"),
            Event(kind="tool_result", run_id="o", call_id="c1", tool="t", erased=gone),
        ]
    )
    (action,) = sink.chain("o").actions
    assert action.outcome == "erased"


def test_the_kept_facts_are_checked_when_read() -> None:
    with pytest.raises(ValueError, match="had_err"):
        Erasure(fields=("args",), leaf_hash="ab" * 32, records=(RECORD,), reason="r",
                had_err=True)  # fmt: skip
    with pytest.raises(ValueError, match="marked_safe"):
        Erasure.from_dict({"fields": ["label"], "leaf_hash": "ab" * 32, "records": [RECORD],
                           "reason": "r", "marked_safe": "yes"})  # fmt: skip
    with pytest.raises(ValueError, match="erased"):
        Erasure.from_dict({"fields": ["label"], "leaf_hash": "ab" * 32, "records": [RECORD],
                           "reason": "r", "kept": True})  # fmt: skip


_texts = st.sampled_from(["", "safe", "SAFE:ro", "safe tool: ls", "ok", "boom", "Safety"])


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(["gate_decision", "tool_result", "action"]),
    label=_texts,
    reason=_texts,
    err=_texts,
    first=st.sets(st.sampled_from(ALL_FIELDS), min_size=1),
    second=st.sets(st.sampled_from(ALL_FIELDS), min_size=1),
)
def test_erasing_in_steps_keeps_the_facts_of_erasing_at_once(
    kind: str, label: str, reason: str, err: str, first: set[str], second: set[str]
) -> None:
    """Any two erasures one after the other keep the same safe mark and failure as the
    event had, and the stored-bytes path (``erase_stored``, and the fast tombstones of a
    whole erasure) writes exactly the text the event path does."""
    event = Event(kind=kind, run_id="r", call_id="c", tool="t", verdict="allowed",
                  label=label, reason=reason, err=err)  # fmt: skip
    leaf = "cd" * 32
    once = erase_fields(event, fields=first, leaf_hash=leaf, record=RECORD, reason="one")
    text, _, has_err = erase_stored(
        event.to_json().encode(), fields=first, leaf_hash=leaf, record=RECORD, reason="one"
    )
    assert text == once.to_json() and has_err is bool(err)
    twice = erase_fields(once, fields=second, leaf_hash=leaf, record=RECORD, reason="two")
    again, _, has_err = erase_stored(
        text.encode(), fields=second, leaf_hash=leaf, record=RECORD, reason="two"
    )
    assert again == twice.to_json() and has_err is bool(err)
    if kind == "gate_decision":
        assert decision_mark(twice) is decision_mark(event)
    sink = MemoryReader([Event(kind="action", run_id="r", call_id="c", tool="t",
                               verdict="allowed"), twice.replace(kind="tool_result")])  # fmt: skip
    outcome = sink.chain("r").actions[0].outcome
    assert outcome == ("failed" if err else "succeeded")
    made = TombstoneMaker(fields=ALL_FIELDS, record=RECORD, reason="one")
    stored = event.to_json().encode()
    general = erase_stored(stored, fields=ALL_FIELDS, leaf_hash=leaf, record=RECORD, reason="one")
    assert made.make(stored, leaf) == general
    assert made.make_page([stored], [bytes.fromhex(leaf)]) == [general]


def test_a_row_the_readers_refuse_is_not_counted_though_its_hash_was_recomputed(
    ledger_db: Ledger,
) -> None:
    sink = ledger_db.open()
    sink.record_many(_gated_run("g2"))
    rows = ledger_db.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")
    seq, text = next((s, t) for s, t in rows if '"duration_ms":3' in str(t))
    edited = orjson.loads(text)
    edited["duration_ms"] = "3"  # what a reader refuses
    ledger_db.sql(
        "UPDATE {p}events SET event_json = :j, content_hash = :h WHERE seq = :s",
        j=orjson.dumps(edited).decode(),
        h=sha256_of(edited, profile="rfc8785"),
        s=seq,
    )
    with pytest.raises(CorruptRecord, match=f"seq={seq}"):
        sink.chain("g2")
    for reader in (sink, _Streamed(sink)):
        report = build_report(reader)
        assert not report.compliant
        assert report.events == len(rows) - 1, report.events
    found = build_report(sink).hash_check
    assert found.mismatch_count == 1
    assert "does not read back as an event" in found.mismatches[0].detail
    assert "duration_ms" in found.mismatches[0].detail


# --- the second probe: crypto-shredding claims, text that is not UTF-8 -----------------


def test_an_erasure_that_erases_nothing_does_not_claim_a_destroyed_key(
    ledger_db: Ledger, tmp_path: Any
) -> None:
    """A shredded run whose events hold no sealed field (no args, result or preview):
    erasing its args and result erases nothing, so the transaction that destroyed the key
    is undone and neither the outcome nor the command says the key was destroyed. (A
    preview alone is sealed by the run's key: erasing args and result destroys it too,
    and says so: ``test_a_shredded_preview_is_named_by_its_erasure``.)"""
    from click.testing import CliRunner

    from ledger.cli.main import cli
    from ledger.sinks.shred import FileKeyWrapper
    from tests.retention.conftest import open_keyed as _open

    key = FileKeyWrapper.create(tmp_path / "payload.key")
    sink = _open(ledger_db, key)
    sink.record_many([Event(kind="tool_result", run_id="p1", call_id="c1", tool="t", time=OLD,
                            err="timeout", duration_ms=1)])  # fmt: skip
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    keys = "SELECT wrapped IS NOT NULL, destroyed_us FROM {p}run_keys WHERE run_id = 'p1'"
    before = [tuple(r) for r in ledger_db.sql(keys)]
    for dry_run in (True, False):
        done = retention.erase(Selection.of_run("p1"), reason="GDPR", by="dpo",
                               fields=("args", "result"), dry_run=dry_run)  # fmt: skip
        assert done.erased == 0 and not done.shredded, done
    assert [tuple(r) for r in ledger_db.sql(keys)] == before
    env = {"LEDGER_PAYLOAD_KEY": str(tmp_path / "payload.key")}
    result = CliRunner().invoke(cli, ["erase", "--db", ledger_db.url, "--run", "p1", "--field",
                                      "args", "--field", "result", "--reason", "GDPR"],
                                env=env)  # fmt: skip
    assert result.exit_code == 0 and "destroy" not in result.stdout, result.stdout
    assert [tuple(r) for r in ledger_db.sql(keys)] == before


@pytest.mark.parametrize("where", ["reason", "by", "run", "hold"])
def test_text_that_is_not_utf8_is_refused_by_name(sqlite_ledger: Ledger, where: str) -> None:
    """What a command-line argument of bytes that are not UTF-8 becomes (a lone
    surrogate) is a ``ValidationError`` naming the argument, not a bare ``TypeError``
    from the database driver, and nothing is changed."""
    from ledger.errors import ValidationError

    sink = sqlite_ledger.open()
    sink.record_many(_gated_run("u1"))
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    rows = sqlite_ledger.sql("SELECT seq, event_json FROM {p}events ORDER BY seq")
    bad = "GDPR \udcff"
    with pytest.raises(ValidationError, match="not UTF-8 text"):
        if where == "reason":
            retention.erase(Selection.of_run("u1"), reason=bad, by="dpo")
        elif where == "by":
            retention.erase(Selection.of_run("u1"), reason="r", by=bad)
        elif where == "run":
            retention.erase(Selection.of_run(bad), reason="r", by="dpo")
        else:
            retention.add_hold(run_id="u1", reason=bad, by="dpo")
    assert sqlite_ledger.sql("SELECT seq, event_json FROM {p}events ORDER BY seq") == rows


def test_a_writer_that_sealed_before_another_erased_the_run_is_refused(
    ledger_db: Ledger, tmp_path: Any
) -> None:
    """A long-lived writer holds a run's data key (read a moment ago); another sink
    erases the run, destroying the key. The writer's next event of that run is refused
    inside its write transaction (nothing of it stored), and its events of other runs
    are written as before."""
    from ledger.errors import PayloadKeyError
    from ledger.sinks.shred import FileKeyWrapper
    from tests.retention.conftest import open_keyed as _open

    key = FileKeyWrapper.create(tmp_path / "payload.key")
    writer = _open(ledger_db, key)
    writer.record_many(_gated_run("s1"))  # the writer now holds run s1's key
    other = _open(ledger_db, key)
    retention = Retention(other)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    done = retention.erase(
        Selection.of_run("s1"), reason="GDPR", by="dpo", fields=("args", "result")
    )
    assert done.shredded
    # the writer writes another run first: it then knows the tree's head after the
    # erasure (PostgreSQL's one-statement path: its guard must refuse the erased run)
    writer.record(Event(kind="request", run_id="s2", args='"another run"'))
    count = "SELECT count(*) FROM {p}events"
    (before,) = ledger_db.sql(count)
    late = Event(kind="action", run_id="s1", call_id="late", tool="t", verdict="allowed",
                 args={"to": "bob"}, reason="after the erasure",
                 refs=[{"source": "memory", "id": "m"}])  # fmt: skip
    with pytest.raises(PayloadKeyError, match="while this event was being written"):
        writer.commit_action(late)
    with pytest.raises(PayloadKeyError, match="erased"):
        writer.record_many([late.replace(call_id="late2"), Event(kind="run_end", run_id="s1")])
    with pytest.raises(PayloadKeyError, match="erased"):  # a preview alone is sealed too
        writer.record(Event(kind="tool_result", run_id="s1", call_id="p", preview="alice's"))
    assert ledger_db.sql(count) == [before]
    writer.record(Event(kind="tool_result", run_id="s2", call_id="c", result='"ok"'))
    assert ledger_db.sql(count)[0][0] == before[0] + 1
    assert writer.chain("s2").request is not None


def test_erasing_the_same_fields_again_counts_every_event_already_erased(
    ledger_db: Ledger,
) -> None:
    """After ``args`` went, an erasure of ``args`` and ``result`` takes the results; a
    third finds nothing left and counts all of them (the actions' args went first)."""
    from tests.retention.conftest import run_events

    sink = ledger_db.open()
    sink.record_many(run_events("a1", OLD))
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    run = Selection.of_run("a1")
    first = retention.erase(run, reason="one", by="dpo", fields=("args",))
    both = ("args", "result")
    second = retention.erase(run, reason="two", by="dpo", fields=both)
    third = retention.erase(run, reason="three", by="dpo", fields=both)
    listed: list[Any] = []
    dry = retention.erase(run, reason="four", by="dpo", fields=both, dry_run=True,
                          each=listed.append)  # fmt: skip
    assert (first.erased, second.erased, second.already) == (4, 2, 4)
    assert (third.erased, third.already) == (0, 6)
    assert (dry.erased, dry.already, len(listed)) == (0, 6, 6)
    assert all(s.already for s in listed)


def test_a_hold_until_a_time_finer_than_a_microsecond_covers_what_is_before_it(
    ledger_db: Ledger,
) -> None:
    from ledger.errors import LedgerError
    from ledger.retention import parse_date

    sink = ledger_db.open()
    sink.record_many([Event(kind="request", run_id="h1", time=OLD, args='"x"')])
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    until = parse_date("2025-01-01T00:00:00.0000001Z")  # just after the event
    assert until == OLD + timedelta(microseconds=1)
    retention.add_hold(since=OLD - timedelta(days=1), until=until, reason="litigation", by="dpo")
    with pytest.raises(LedgerError, match="legal hold"):
        retention.erase(Selection.of_run("h1"), reason="GDPR", by="dpo")
    assert parse_date("2025-01-01T00:00:00.0000000Z") == OLD  # zeros are no finer


def test_readers_show_an_erased_approval_actor_and_cited_result_as_erased(
    ledger_db: Ledger,
) -> None:
    from ledger.model.values import Approval

    sink = ledger_db.open()
    t = OLD
    read = Event(kind="tool_result", run_id="p1", call_id="r", tool="fetch", time=t,
                 result='"the notes"')  # fmt: skip
    sink.record_many([
        Event(kind="request", run_id="p1", time=t, args='"tidy"'),
        Event(kind="gate_decision", run_id="p1", call_id="r", tool="fetch", time=t,
              verdict="allowed", label="safe:readers"),
        read,
        Event(kind="action", run_id="p1", call_id="w", tool="write", time=t + timedelta(seconds=1),
              verdict="allowed", reason="asked", args={"p": 1},
              actor={"principal": "alice@example.com", "agent_id": "a1"},
              approval=Approval(approver="bob@example.com", reason="fine"),
              refs=[{"source": "tool", "id": str(read.event_id), "hash": "sha256:" + "ab" * 32}]),
        Event(kind="tool_result", run_id="p1", call_id="w", tool="write",
              time=t + timedelta(seconds=2), result="1"),
    ])  # fmt: skip
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    retention.erase(Selection.of_run("p1"), reason="GDPR who", by="dpo",
                    fields=("approval", "actor"))  # fmt: skip
    retention.erase(Selection.of_events([str(read.event_id)]), reason="GDPR read", by="dpo",
                    fields=("result",))  # fmt: skip
    text = sink.chain("p1").why("w").render()
    assert "approved: [erased: GDPR who]" in text and "for:      [erased: GDPR who]" in text
    assert "[erased: GDPR read]" in text, text  # the cited result
    data = sink.chain("p1").why("w").to_dict()
    assert data["evidence"][0]["erased"] == "[erased: GDPR read]"
    for reader in (sink, _Streamed(sink)):
        report = build_report(reader).to_dict()
        (approved,) = [a for a in report["approved_actions"] if a["call_id"] == "w"]
        assert approved["approver"] == "[erased: GDPR who]", approved
        assert approved["principal"] == "[erased: GDPR who]", approved


def test_a_refusal_quoting_a_hold_reason_is_one_line_with_its_unicode_kept(
    sqlite_ledger: Ledger,
) -> None:
    from click.testing import CliRunner

    from ledger.cli.main import cli

    sink = sqlite_ledger.open()
    sink.record_many(_gated_run("q1"))
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    why = "case\x1b[2K\n\u202eevil caf\u00e9 10\u202f000 \u6771\u3000\u99c5"
    retention.add_hold(run_id="q1", reason=why, by="dpo")
    result = CliRunner().invoke(cli, ["erase", "--db", sqlite_ledger.url, "--run", "q1",
                                      "--reason", "GDPR"])  # fmt: skip
    assert result.exit_code == 1
    err = result.stderr
    assert err.startswith("ledger: error: ") and err.count("\n") == 1, err
    assert "\x1b" not in err and "\u202e" not in err
    assert "caf\u00e9 10\u202f000 \u6771\u3000\u99c5" in err


def test_a_shredding_erasure_counts_an_event_erased_before_as_already_erased(
    ledger_db: Ledger, tmp_path: Any
) -> None:
    """One event of a shredded run erased whole first; then the run's args and result:
    that event is counted already erased, as in a ledger in clear."""
    from ledger.sinks.shred import FileKeyWrapper
    from tests.retention.conftest import open_keyed as _open

    sink = _open(ledger_db, FileKeyWrapper.create(tmp_path / "payload.key"))
    events = [Event(kind="tool_result", run_id="x1", call_id=f"c{i}", tool="t", time=OLD,
                    result=f'"secret {i}"') for i in range(2)]  # fmt: skip
    sink.record_many(events)
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    retention.erase(Selection.of_events([str(events[0].event_id)]), reason="one", by="dpo")
    both = ("args", "result")
    dry = retention.erase(Selection.of_run("x1"), reason="r", by="dpo", fields=both, dry_run=True)
    done = retention.erase(Selection.of_run("x1"), reason="r", by="dpo", fields=both)
    assert (dry.erased, dry.already) == (done.erased, done.already) == (1, 1)
    assert done.shredded


@pytest.mark.parametrize("fields", [ALL_FIELDS, ("refs", "label", "approval")])
def test_the_report_shows_an_erased_policy_approval_and_evidence_as_erased(
    ledger_db: Ledger, fields: tuple[str, ...]
) -> None:
    """The report's approved actions (every format reads them) showed an erased policy
    as none and erased evidence as "cited nothing", where ``why`` shows them erased:
    an action that cited evidence reads as citing what was erased, in both builds."""
    from ledger.model.values import Approval

    sink = ledger_db.open()
    t = OLD
    sink.record_many([
        Event(kind="request", run_id="q1", time=t, args='"save it"'),
        Event(kind="gate_decision", run_id="q1", call_id="w", tool="write", time=t,
              verdict="allowed", label="policy-7",
              approval=Approval(approver="bob@example.com", reason="fine")),
        Event(kind="action", run_id="q1", call_id="w", tool="write", time=t,
              verdict="allowed", args={"p": 1},
              refs=[{"source": "memory", "id": "m-alice"}]),
        Event(kind="tool_result", run_id="q1", call_id="w", tool="write", time=t, result="1"),
        Event(kind="action", run_id="q1", call_id="x", tool="write", time=t,
              verdict="allowed", args={"p": 2}),  # cited nothing, decided by no policy
        Event(kind="tool_result", run_id="q1", call_id="x", tool="write", time=t, result="2"),
    ])  # fmt: skip
    before = [a for a in build_report(sink).to_dict()["approved_actions"] if a["call_id"] == "w"]
    assert before[0]["evidence"] == ["memory:m-alice"] and before[0]["policy"] == "policy-7"
    retention = Retention(sink)
    retention.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    retention.erase(Selection.of_run("q1"), reason="GDPR 9", by="dpo", fields=fields)
    for reader in (sink, _Streamed(sink)):
        report = build_report(reader)
        shown = {a["call_id"]: a for a in report.to_dict()["approved_actions"]}
        assert shown["w"]["evidence"] == ["[erased: GDPR 9]"], shown
        assert shown["w"]["policy"] == "[erased: GDPR 9]", shown
        assert shown["w"]["approver"] == "[erased: GDPR 9]", shown
        assert shown["x"]["evidence"] == [] and shown["x"]["policy"] == "", shown  # never held
        csv = report.to_csv()
        assert "cited [erased: GDPR 9]" in csv and "cited -" in csv, csv
        assert "[erased: GDPR 9]" in report.to_html()
