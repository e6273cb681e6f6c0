"""Session 19's hostile pass on retention: a writer's tombstone look-alike, retention
commands on a ledger at an older schema revision, events dated ahead of the clock, and
reasons that say nothing."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.errors import RetentionError, ValidationError
from ledger.ids import new_event_id
from ledger.integrity import Signer, generate_key, verify_ledger
from ledger.model.erasure import Erasure
from ledger.model.event import Event
from ledger.retention import Retention, Selection
from ledger.retention.rules import require_reason
from ledger.sinks import JSONLSink, SQLiteSink
from ledger.sinks.schema import MIGRATIONS_DIR
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, run_events

pytestmark = needs_retention_schema


def _tombstone(run_id: str) -> Event:
    return Event(
        kind="tool_result",
        run_id=run_id,
        call_id="c1",
        time=OLD,
        erased=Erasure(fields=("result",), leaf_hash="ab" * 32,
                       records=(str(new_event_id()),), reason="GDPR Art. 17"),
    )  # fmt: skip


def test_no_writer_stores_a_tombstone_look_alike(ledger_db: Ledger, tmp_path: Path) -> None:
    """An event carrying ``erased`` is refused by record, record_many (the whole batch)
    and JSONL alike; the ledger still verifies and erases as before."""
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    fake = _tombstone("old-1")
    with pytest.raises(ValidationError, match="tombstone"):
        sink.record(fake)
    with pytest.raises(ValidationError, match="tombstone"):
        sink.record_many([Event(kind="request", run_id="r2", time=OLD, args='"x"'), fake])
    assert [e.run_id for e in sink.events()] == ["old-1"] * 7  # nothing of the batch
    with JSONLSink(tmp_path / "log.jsonl") as jsonl, pytest.raises(ValidationError):
        jsonl.record(fake)
    assert (tmp_path / "log.jsonl").read_bytes() == b""
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    assert r.erase(Selection.older_than(OLD + timedelta(days=1)), reason="expiry").erased == 7
    assert verify_ledger(sink, None).ok


def _downgrade(path: Path, revision: str) -> None:
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.attributes["connection"] = conn
        config.attributes["schema"] = None
        command.downgrade(config, revision)
    engine.dispose()


@pytest.mark.parametrize(
    "args",
    [
        ["erase", "--run", "old-1", "--reason", "gdpr", "--dry-run"],
        ["erase", "--run", "old-1", "--reason", "gdpr"],
        ["erase", "--run", "no-such-run", "--reason", "gdpr"],
        ["hold", "add", "--run", "old-1", "--reason", "litigation"],
        ["retention", "set", "--keep", "500d", "--floor", "200d", "--reason", "v2"],
        ["db", "vacuum"],
    ],
    ids=["dry-run", "erase", "refused", "hold", "policy", "vacuum"],
)
def test_retention_commands_leave_an_older_ledger_as_it_was(
    tmp_path: Path, args: list[str]
) -> None:
    path = tmp_path / "old.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old-1", OLD))
        Retention(sink).set_policy(keep="400d", floor="180d", reason="v1", by="dpo")
    _downgrade(path, "0005_payload_keys")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    url = f"sqlite:///{path}"
    where = ["--db", url] if args[0] != "db" else [url]
    result = CliRunner().invoke(cli, [*args[:2], *where, *args[2:]] if args[0] in (
        "hold", "retention", "db") else [args[0], *where, *args[1:]])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "ledger db upgrade" in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_an_event_dated_ahead_of_the_clock_goes_only_under_a_floor_of_zero(
    ledger_db: Ledger,
) -> None:
    sink = ledger_db.open()
    ahead = datetime(2099, 1, 1, tzinfo=UTC)
    sink.record(Event(kind="request", run_id="skewed", time=ahead, args='"alice, 1984-03-17"'))
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    skey, vkey = generate_key("dpo.example/policy")
    r.set_policy(keep="2d", floor="1d", keys=[vkey], reason="v1", by="dpo")
    with pytest.raises(RetentionError, match="dated after this erasure's own time"):
        r.erase(Selection.of_run("skewed"), reason="GDPR Art. 17")
    with pytest.raises(RetentionError, match="inside the retention floor"):  # all or nothing
        ids = [e.event_id for e in sink.events() if e.run_id in ("skewed", "old-1")]
        r.erase(Selection.of_events(ids), reason="GDPR")
    assert sink.chain("skewed").events[0].erased is None
    assert not any(e.erased for e in sink.chain("old-1").events)
    r.set_policy(keep="0", floor="0", reason="a GDPR request for a skewed event", by="dpo",
                 signer=Signer.from_key(skey))  # fmt: skip
    done = r.erase(Selection.of_run("skewed"), reason="GDPR Art. 17")
    assert done.erased == 1
    assert sink.chain("skewed").events[0].erased is not None
    report = verify_ledger(sink, None)
    assert report.ok, report.findings


@pytest.mark.parametrize("said", ["\u0301", "\u20e3\u0e31", "\ue000", " \u0301 "])
def test_a_reason_of_marks_with_nothing_to_mark_says_nothing(said: str) -> None:
    with pytest.raises(ValidationError, match="a reason is required"):
        require_reason(said)
    assert require_reason("e\u0301") == "e\u0301"


def test_a_reason_of_bytes_that_are_not_utf8_is_named_as_such() -> None:
    with pytest.raises(ValidationError, match="not UTF-8"):
        require_reason("\udced\udca0\udc80")


def test_a_hold_on_a_retention_record_is_refused(ledger_db: Ledger) -> None:
    sink = ledger_db.open()
    sink.record_many(run_events("old-1", OLD))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="v1", by="dpo")
    (admin,) = [s.run_id for s in sink.runs() if s.run_id.startswith("ledger-retention-")]
    with pytest.raises(RetentionError, match="would hold nothing"):
        r.add_hold(run_id=admin, reason="keep it", by="legal")
    assert r.holds() == []


def test_a_window_of_a_forbidden_erasure_is_not_compliant(
    ledger_db: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure the floor or a hold forbade (made here by a library whose checks are
    switched off, as a buggy or hostile writer would) makes the report of the period it
    was made in not compliant, whether or not the window holds the erased rows."""
    import ledger.retention.store as store
    from ledger.report import build_report

    sink = ledger_db.open()
    now = datetime.now(UTC)
    sink.record_many(run_events("held", now - timedelta(days=200)))
    sink.record_many(run_events("young", now - timedelta(days=2)))
    r = Retention(sink)
    r.set_policy(keep="100d", floor="30d", reason="v1", by="dpo")
    r.add_hold(run_id="held", reason="litigation", by="legal")
    assert build_report(sink, since=now - timedelta(days=1)).compliant
    plain = store._Guard.__init__
    monkeypatch.setattr(store._Guard, "__init__", lambda g, cutoff, holds: plain(g, None, []))
    monkeypatch.setattr(store.Retention, "_check_allowed", lambda *a, **k: None)
    Retention(sink).erase(Selection.of_run("held"), reason="forbidden", by="x")
    monkeypatch.undo()
    for since, until in [(now - timedelta(days=1), None), (now - timedelta(days=210), None)]:
        report = build_report(sink, since=since, until=until)
        assert not report.compliant, (since, until)
    assert build_report(sink, until=now - timedelta(days=1)).compliant is False


def test_a_window_lists_the_erasures_that_erased_its_events_not_all_that_selected_them(
    ledger_db: Ledger,
) -> None:
    from ledger.report import build_report

    sink = ledger_db.open()
    jan, feb = datetime(2025, 1, 10, tzinfo=UTC), datetime(2025, 2, 10, tzinfo=UTC)
    sink.record_many(run_events("jan", jan))
    sink.record_many(run_events("feb", feb))
    r = Retention(sink)
    r.set_policy(keep="60d", floor="30d", reason="v1", by="dpo")
    first = r.erase(Selection.of_run("jan"), reason="E1", by="dpo")
    second = r.erase(Selection.older_than("2025-03-01"), reason="E2", by="dpo")
    assert (first.erased, second.erased, second.already) == (7, 7, 7)
    january = build_report(sink, since=jan - timedelta(days=9), until=feb - timedelta(days=9))
    assert [e.reason for e in january.retention.erasures] == ["E1"]  # type: ignore[union-attr]
    february = build_report(sink, since=feb - timedelta(days=9), until=feb + timedelta(days=9))
    assert [e.reason for e in february.retention.erasures] == ["E2"]  # type: ignore[union-attr]
