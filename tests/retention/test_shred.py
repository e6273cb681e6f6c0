"""Crypto-shredding on SQLite and PostgreSQL, with real AES-GCM: payloads stored
encrypted under a per-run data key, erasing a run destroys the key, the log verifies
before and after, and readers without the key or with another one behave clearly."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import CorruptRecord, PayloadKeyError, RetentionError
from ledger.integrity import generate_key
from ledger.integrity.note import Signer, Verifier
from ledger.integrity.verify import FindingKind, verify_ledger
from ledger.retention import Retention, Selection
from ledger.sinks import PostgresSink, SQLiteSink
from ledger.sinks.shred import ENV_KEY, FileKeyWrapper, shredding
from tests.retention.conftest import OLD, Ledger, needs_retention_schema, open_keyed, run_events

pytestmark = needs_retention_schema

SKEY, VKEY = generate_key("test.example/log")


def _stored(db: Ledger, run: str) -> dict[str, bytes]:
    return {
        str(i): (j.encode() if isinstance(j, str) else bytes(j))
        for i, j in db.sql("SELECT event_id, event_json FROM {p}events WHERE run_id = :r", r=run)
    }


def _ok(sink: Any) -> Any:
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])
    assert result.ok, [f.message for f in result.errors]
    return result


def _shredding(db: Ledger, key: FileKeyWrapper) -> tuple[Any, Retention]:
    sink = open_keyed(db, key)
    sink.record_many(run_events("old-1", OLD))
    sink.record_many(run_events("old-2", OLD + timedelta(days=1), secret="bob"))
    r = Retention(sink)
    r.set_policy(keep="400d", floor="180d", reason="policy v1", by="dpo")
    return sink, r


def test_payloads_are_stored_encrypted_and_read_back_with_the_key(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    sink, _ = _shredding(ledger_db, key)
    stored = _stored(ledger_db, "old-1")
    assert stored and not any(b"alice@example.com" in d for d in stored.values())
    assert all(b'"encrypted":"aes-256-gcm"' in d for d in stored.values() if b'"args"' in d)
    chain = sink.chain("old-1")
    assert chain.actions[0].intent.args == '{"to":"alice@example.com"}'
    assert chain.actions[0].result is not None
    assert chain.actions[0].result.result == '{"sent":"alice"}'
    assert "alice@example.com" in chain.render()
    _ok(sink)
    # without the key a reader shows the envelopes, clearly encrypted, and never crashes
    blind = open_keyed(ledger_db, reader=True)
    intent = blind.chain("old-1").actions[0].intent
    assert intent.args.startswith('{"encrypted":"aes-256-gcm"') and "alice" not in intent.args
    blind.chain("old-1").render()
    # the mode is stored: reopening with the same key reads, another key is refused
    assert open_keyed(ledger_db, FileKeyWrapper(key.path), reader=True).get(intent.event_id).args
    other = FileKeyWrapper.create(key.path.with_name("other.key"))
    for reader in (True, False):
        with pytest.raises(PayloadKeyError, match="is not this ledger's"):
            open_keyed(ledger_db, other, reader=reader)


def test_a_writer_without_the_key_is_refused_and_nothing_is_stored(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    sink, _ = _shredding(ledger_db, key)
    size = sink.tree_head().size
    writer = open_keyed(ledger_db)  # no key: maintenance still opens it
    with pytest.raises(PayloadKeyError, match="no payload key was given"):
        writer.record_many(run_events("new", OLD))
    assert writer.tree_head().size == size
    assert ledger_db.sql("SELECT count(*) FROM {p}events WHERE run_id = 'new'")[0][0] == 0


def test_a_ledger_created_in_clear_refuses_to_be_switched(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    plain = open_keyed(ledger_db)
    plain.record_many(run_events("old-1", OLD))
    with pytest.raises(PayloadKeyError, match="created without crypto-shredding"):
        open_keyed(ledger_db, key)
    plain.record_many(run_events("clear-again", OLD))  # the keyless writer goes on writing
    assert not shredding(plain)
    assert open_keyed(ledger_db, key, reader=True).chain("old-1").request is not None
    assert b"alice" in b"".join(_stored(ledger_db, "old-1").values())


def test_erasing_a_run_destroys_its_key_and_the_log_verifies_before_and_after(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    sink, r = _shredding(ledger_db, key)
    before = _stored(ledger_db, "old-1")
    checkpoint = sink.checkpoint(Signer.from_key(SKEY))
    plan = r.erase(Selection.of_run("old-1"), reason="x", fields=["args", "result"], dry_run=True)
    holding = sum(b'"args":' in b or b'"result":' in b for b in before.values())
    assert holding == len(before) - 1  # all but the run end
    assert plan.shredded and plan.erased == holding
    done = r.erase(
        Selection.of_run("old-1"), reason="GDPR Art. 17 request 42", fields=["args", "result"]
    )
    assert done.shredded and done.erased == holding and done.record_id
    assert _stored(ledger_db, "old-1") == before  # the rows stay as they are
    wrapped = ledger_db.sql("SELECT wrapped FROM {p}run_keys WHERE run_id = 'old-1'")
    assert wrapped == [(None,)]
    result = verify_ledger(sink, [Verifier.from_key(VKEY)], [checkpoint.text])
    assert result.ok, [f.message for f in result.errors]
    fresh = open_keyed(ledger_db, key, reader=True)
    chain = fresh.chain("old-1")
    text = chain.render()
    assert "[erased: GDPR Art. 17 request 42]" in text and "encrypted" not in text
    intent = chain.actions[0].intent
    assert intent.args is None and intent.erased is not None
    assert intent.erased.records == (done.record_id,)
    assert fresh.chain("old-2").actions[0].intent.args == '{"to":"bob@example.com"}'
    record = json.loads(fresh.get(done.record_id).args)
    assert record["shredded"]["run_id"] == "old-1" and record["events"] == 0
    again = r.erase(Selection.of_run("old-1"), reason="again", fields=["args", "result"])
    assert again.erased == 0 and not again.shredded and again.already == holding
    with pytest.raises(PayloadKeyError, match="was erased"):
        open_keyed(ledger_db, key).record_many(run_events("old-1", OLD + timedelta(hours=1)))
    # a whole erasure: tombstones as in any ledger, and the key goes too
    whole = r.erase(Selection.of_run("old-2"), reason="expired")
    assert whole.shredded and whole.erased == len(_stored(ledger_db, "old-2"))
    assert all(b'"erased":{' in d for d in _stored(ledger_db, "old-2").values())
    _ok(open_keyed(ledger_db, key, reader=True))
    assert r.tables_changed() == ""  # the erasures table agrees with the log's records


def test_a_changed_ciphertext_is_tampering(ledger_db: Ledger, key: FileKeyWrapper) -> None:
    sink, _ = _shredding(ledger_db, key)
    event_id, data = next((i, d) for i, d in _stored(ledger_db, "old-1").items() if b'"args"' in d)
    text = data.decode()
    at = text.index('"ciphertext":"') + len('"ciphertext":"') + 4
    flipped = text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1 :]
    ledger_db.sql("UPDATE {p}events SET event_json = :j WHERE event_id = :i", j=flipped, i=event_id)
    result = verify_ledger(sink, [Verifier.from_key(VKEY)])
    assert not result.ok and any(f.kind is FindingKind.CHANGED for f in result.errors)
    with pytest.raises(CorruptRecord, match="does not decrypt"):
        open_keyed(ledger_db, key, reader=True).get(event_id)


def test_vacuum_gives_back_the_destroyed_key_bytes(tmp_path: Path, key: FileKeyWrapper) -> None:
    from ledger.retention.vacuum import vacuum

    path = tmp_path / "l.db"
    with SQLiteSink(path, payload_key=key) as sink:
        sink.record_many(run_events("old-1", OLD))
        r = Retention(sink)
        r.set_policy(keep="400d", floor="180d", reason="v1")
        with sqlite3.connect(path) as conn:
            (wrapped,) = conn.execute("SELECT wrapped FROM run_keys").fetchone()
        r.erase(Selection.of_run("old-1"), reason="gdpr", fields=["args", "result"])
        vacuum(sink)
    assert bytes(wrapped) not in path.read_bytes()
    assert (
        not Path(f"{path}-wal").exists() or bytes(wrapped) not in Path(f"{path}-wal").read_bytes()
    )


def test_the_key_file_is_private_and_never_overwritten(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ledger.cli.main import cli

    out = tmp_path / "p.key"
    result = CliRunner().invoke(cli, ["payload-key", "--out", str(out)])
    assert result.exit_code == 0 and FileKeyWrapper(out).key_id in result.stdout
    assert out.stat().st_mode & 0o777 == 0o600
    again = CliRunner().invoke(cli, ["payload-key", "--out", str(out)])
    assert again.exit_code == 1 and "never overwritten" in again.stderr
    out.write_text("not a key\n")
    with pytest.raises(PayloadKeyError, match="not a payload key file"):
        FileKeyWrapper(out)


def test_the_environment_names_the_key_for_open_sink(
    tmp_path: Path, key: FileKeyWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.sinks import open_sink

    monkeypatch.setenv(ENV_KEY, str(key.path))
    sink: Any
    with open_sink(f"sqlite:///{tmp_path / 'l.db'}") as sink:
        sink.record_many(run_events("r1", OLD))
        assert sink.chain("r1").request is not None
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("l.db*"))
    assert b"alice@example.com" not in raw


# --- properties --------------------------------------------------------------------


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=20),
    _nested,
    max_leaves=8,
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Retention]]:
    folder = tmp_path_factory.mktemp("shred")
    wrapper = FileKeyWrapper.create(folder / "k.key")
    saved = os.environ.pop(ENV_KEY, None)
    with SQLiteSink(folder / "l.db", payload_key=wrapper) as sink:
        r = Retention(sink)
        r.set_policy(keep="400d", floor="0", reason="property")
        yield sink, r
    if saved is not None:
        os.environ[ENV_KEY] = saved


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    args=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    result=json_values,
    erase=st.booleans(),
)
def test_any_payload_round_trips_and_erasing_makes_it_unreadable(
    shared: tuple[Any, Retention], args: dict[str, Any], result: Any, erase: bool
) -> None:
    from ledger.ids import new_event_id
    from ledger.model.event import Event

    sink, r = shared
    run = f"p-{new_event_id()}"
    action = Event(kind="action", run_id=run, call_id="c", tool="t", args=args,
                   verdict="allowed", time=OLD)  # fmt: skip
    outcome = Event(kind="tool_result", run_id=run, call_id="c", tool="t",
                    result=json.dumps(result), time=OLD)  # fmt: skip
    sink.record_many([action, outcome])
    assert json.loads(sink.get(action.event_id).args) == args
    assert sink.get(outcome.event_id).result == outcome.result  # byte for byte
    if erase:
        r.erase(Selection.of_run(run), reason="property", fields=["args", "result"])
        gone = sink.chain(run)
        assert gone.actions[0].intent.args is None and gone.actions[0].result is not None
        assert gone.actions[0].result.result is None
        assert verify_ledger(sink, []).ok


@pytest.mark.postgres
def test_in_the_callers_transaction_a_rolled_back_key_is_not_used_again(
    pg_ledger: Ledger, key: FileKeyWrapper
) -> None:
    engine = sa.create_engine(pg_ledger.sql_url)
    try:
        PostgresSink(engine, schema=pg_ledger.schema, payload_key=key).close()  # created
        with engine.connect() as conn:
            sink = PostgresSink(conn, schema=pg_ledger.schema, payload_key=key)
            sink.record_many(run_events("r1", OLD))
            conn.rollback()  # the run's key row goes with the events
            sink.record_many(run_events("r1", OLD))
            conn.commit()
        reader = PostgresSink(engine, schema=pg_ledger.schema, payload_key=key, migrate=False)
        assert reader.chain("r1").actions[0].intent.args == '{"to":"alice@example.com"}'
    finally:
        engine.dispose()


def test_copying_a_shredding_ledger_is_refused_saying_why(
    ledger_db: Ledger, key: FileKeyWrapper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy would store the payloads in clear (with the key) or keep envelopes bound
    to the source ledger (without), and shredded runs would lose their records: the
    copy is refused before anything is written, key or no key."""
    from ledger.errors import ValidationError
    from ledger.sinks import copy_ledger

    _shredding(ledger_db, key)
    for with_key in (False, True):
        if with_key:
            monkeypatch.setenv(ENV_KEY, str(tmp_path / "payload.key"))
        target = tmp_path / f"copy-{with_key}.db"
        with pytest.raises(ValidationError, match="crypto-shredding"):
            copy_ledger(ledger_db.url, f"sqlite:///{target}")
        assert not target.exists()


def test_open_sink_and_postgres_open_take_the_payload_key(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    """The key reaches a ledger opened by URL too (not only through the environment)."""
    from ledger.errors import ValidationError
    from ledger.sinks import open_sink

    sink: Any = open_sink(ledger_db.url, payload_key=key)
    ledger_db.opened.insert(0, sink)
    sink.record_many(run_events("by-url", OLD))
    stored = _stored(ledger_db, "by-url")
    assert not any(b"alice@example.com" in d for d in stored.values())
    assert sink.chain("by-url").actions[0].intent.args == '{"to":"alice@example.com"}'
    with pytest.raises(ValidationError, match="only SQL ledgers"):
        open_sink("jsonl:///unused.jsonl", payload_key=key)


@pytest.mark.parametrize("fields", [["args"], ["result"], ["args", "reason"]])
def test_erasing_args_or_result_alone_is_refused_where_one_key_covers_both(
    ledger_db: Ledger, key: FileKeyWrapper, fields: list[str]
) -> None:
    """The run's data key encrypts both fields: destroying it for ``args`` alone would
    take ``result`` too while the record says ``args``. Refused, nothing changed."""
    sink, r = _shredding(ledger_db, key)
    before = _stored(ledger_db, "old-1")
    for dry_run in (True, False):
        with pytest.raises(RetentionError, match="one data key"):
            r.erase(Selection.of_run("old-1"), reason="x", fields=fields, dry_run=dry_run)
    assert _stored(ledger_db, "old-1") == before
    assert ledger_db.sql("SELECT wrapped IS NULL FROM {p}run_keys WHERE run_id = 'old-1'") == [
        (False,)
    ]
    chain = open_keyed(ledger_db, key, reader=True).chain("old-1")
    assert "alice" in str(chain.actions[0].result.result if chain.actions[0].result else "")
    _ok(sink)


def test_previews_are_sealed_with_the_payloads(ledger_db: Ledger, key: FileKeyWrapper) -> None:
    """A preview is the gate's clip of the args or result it previews: in a shredding
    ledger it is stored encrypted too, read back with the key, and erased with the run."""
    from ledger.model import Event, Kind

    sink = open_keyed(ledger_db, key)
    clip = "deploy key for staging: hunter2-preview"
    sink.record(
        Event(kind=Kind.TOOL_RESULT, run_id="p-1", call_id="c1", tool="read", time=OLD).replace(
            result='"the whole file"', preview=clip
        )
    )
    stored = _stored(ledger_db, "p-1")
    assert not any(b"hunter2-preview" in d for d in stored.values())
    (back,) = list(sink.events(run_id="p-1"))
    assert back.preview == clip
    blind = open_keyed(ledger_db, reader=True)
    (sealed,) = list(blind.events(run_id="p-1"))
    assert "hunter2" not in sealed.preview and sealed.preview.startswith('{"encrypted"')


def test_the_demo_on_a_shredding_ledger_without_the_key_is_one_error_line(
    tmp_path: Path, key: FileKeyWrapper
) -> None:
    from click.testing import CliRunner

    from ledger.cli import cli

    path = tmp_path / "shredded.db"
    SQLiteSink(path, payload_key=key).close()  # created in shredding mode
    result = CliRunner().invoke(cli, ["demo", "--db", f"sqlite:///{path}"])
    assert result.exit_code == 1
    assert result.output.count("ledger: error:") == 1 and "payload key" in result.output
    reader = SQLiteSink(path, migrate=False)
    assert list(reader.events()) == []  # nothing half-recorded
    reader.close()


def test_a_reader_opened_before_the_ledger_was_made_shredding_shows_what_was_erased(
    ledger_db: Ledger, key: FileKeyWrapper
) -> None:
    open_keyed(ledger_db)  # the schema, no events: the ledger has no payload mode yet
    early = open_keyed(ledger_db, reader=True)
    _, r = _shredding(ledger_db, key)
    done = r.erase(Selection.of_run("old-1"), reason="GDPR Art. 17", fields=["args", "result"])
    for _ in range(2):  # the first read settles the payload mode; the second reads as settled
        intent = early.chain("old-1").actions[0].intent
        assert intent.args is None and intent.erased is not None
        assert intent.erased.records == (done.record_id,)
        kept = early.chain("old-2").actions[0].intent.args
        assert kept is not None and kept.startswith('{"encrypted":"aes-256-gcm"')


def test_a_reader_of_a_ledger_in_clear_shows_payloads_that_look_encrypted_as_stored(
    ledger_db: Ledger,
) -> None:
    look = {"encrypted": "aes-256-gcm", "nonce": "AAAA", "data": "BBBB"}
    events = run_events("clear-1", OLD)
    events[1] = events[1].replace(args=look, preview=json.dumps(look))
    open_keyed(ledger_db).record_many(events)
    reader = open_keyed(ledger_db, reader=True)
    for _ in range(2):  # before the payload mode is settled and after
        intent = reader.chain("clear-1").actions[0].intent
        assert intent.args is not None and json.loads(intent.args) == look
        assert intent.erased is None and reader.get(intent.event_id) == events[1]
