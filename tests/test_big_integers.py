"""An integer beyond 2^53 in args or a result has no RFC 8785 form, so the event is
stored without a content hash, at any size. ``orjson`` reads an integer beyond 64 bits
as a float, rounded: such an event was stored with the hash of the rounded value, so a
change of its digits matched it. Now it is unhashed like the others; the Merkle log,
which covers the stored bytes, is what catches such a change."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.canonical import CanonicalizationError, loads_exact, sha256_of
from ledger.model import Event
from ledger.report import build_report
from ledger.sinks import SQLiteSink
from ledger.sinks.rows import content_hash, event_row

T = datetime(2025, 1, 1, tzinfo=UTC)
SAFE = 2**53 - 1


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**80), max_value=2**80), st.sampled_from(["args", "result"]))
def test_an_event_is_hashed_exactly_when_its_integers_are_safe(n: int, where: str) -> None:
    text = f'{{"amount":{n},"note":"x"}}'
    event = Event(kind="tool_result" if where == "result" else "action", run_id="r",
                  call_id="c", tool="pay", time=T, **{where: text})  # fmt: skip
    stored = event_row(event)[9]
    assert (stored is not None) == (abs(n) <= SAFE), (n, stored)
    assert stored == content_hash(event.to_json())
    if stored is not None:
        assert stored == sha256_of(loads_exact(event.to_json()), "rfc8785")
    assert loads_exact(text)["amount"] == n  # exact, where orjson rounds past 64 bits
    if abs(n) > SAFE:
        with pytest.raises(CanonicalizationError):
            sha256_of(loads_exact(event.to_json()), "rfc8785")


def _ledger(tmp_path: Path, n: int) -> tuple[Path, Event]:
    path = tmp_path / "ledger.db"
    event = Event(kind="request", run_id="r", time=T, args=f'{{"amount":{n}}}')
    with SQLiteSink(path) as sink:
        sink.record_many([event])
    return path, event


def test_a_changed_integer_beyond_64_bits_fails_the_report(tmp_path: Path) -> None:
    path, event = _ledger(tmp_path, 2**64)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT content_hash FROM events").fetchone() == (None,)
        conn.execute("UPDATE events SET event_json = replace(event_json, ?, ?)",
                     (str(2**64), str(2**64 + 1)))  # fmt: skip
    with SQLiteSink(path) as sink:
        assert sink.get(str(event.event_id)).args == f'{{"amount":{2**64 + 1}}}'
        report = build_report(sink)
    assert report.hash_check.unhashed == 1 and report.hash_check.mismatch_count == 0
    assert report.log_check is not None and not report.log_check.ok  # the log sees it
    assert not report.compliant


def test_a_row_hashed_as_rounded_before_still_checks(tmp_path: Path) -> None:
    """A row such a sink stored with the hash of the rounded value (before this rule) is
    not reported as changed: its hash is the one it was written with."""
    path, _ = _ledger(tmp_path, 2**64)
    with sqlite3.connect(path) as conn:
        (text,) = conn.execute("SELECT event_json FROM events").fetchone()
        legacy = sha256_of(orjson.loads(text), "rfc8785")  # the rounded float's hash
        conn.execute("UPDATE events SET content_hash = ?", (legacy,))
    with SQLiteSink(path) as sink:
        report = build_report(sink)
    assert report.hash_check.mismatch_count == 0 and report.compliant


def test_a_float_edited_into_an_integer_beyond_64_bits_is_a_mismatch(tmp_path: Path) -> None:
    """``1e20`` and ``100000000000000000001`` read alike as ``orjson`` floats: the row's
    stored hash (of ``1e20``) must not match the edit."""
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many([Event(kind="request", run_id="r", time=T, args='{"amount":1e20}')])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET event_json = replace(event_json, '1e20', ?)",
                     ("100000000000000000001",))  # fmt: skip
    with SQLiteSink(path) as sink:
        report = build_report(sink)
    assert report.hash_check.mismatch_count == 1, report.hash_check


def test_a_row_nested_too_deeply_for_python_is_reported_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many([Event(kind="request", run_id="r", time=T, args='{"a":1}')])
    deep = "[" * 1000 + "1234567890123456789" + "]" * 1000  # orjson: 1,024 at most
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET event_json = replace(event_json, '{\"a\":1}', ?)", (deep,))
    with SQLiteSink(path) as sink:
        report = build_report(sink)
    assert report.hash_check.mismatch_count == 1 and not report.compliant
    assert loads_exact("[" * 10 + "1" + "]" * 10) == [[[[[[[[[[1]]]]]]]]]]
    with pytest.raises(CanonicalizationError):
        loads_exact(deep)
