"""Faults for real: a SIGKILL during an erasure of many rows leaves all of it or none of
it; and a property: for any history and any allowed erasure, the log verifies and every
surviving byte is unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.integrity.verify import verify_ledger
from ledger.model.erasure import ALL_FIELDS, ERASE_TOOL
from ledger.model.event import Event
from ledger.retention import Retention, Selection
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema

pytestmark = needs_retention_schema

ROWS = 20000

CHILD = textwrap.dedent(
    """
    import sys
    from ledger.retention import Retention, Selection
    from ledger.sinks import SQLiteSink
    with SQLiteSink(sys.argv[1]) as sink:
        print("start", flush=True)
        Retention(sink).erase(Selection.of_run("big"), reason="kill test", by="test")
        print("done", flush=True)
    """
)


def _prepare(path: Path) -> None:
    with SQLiteSink(path) as sink:
        batch = [
            Event(kind="tool_result", run_id="big", call_id=f"c{i}", tool="t",
                  time=OLD + timedelta(milliseconds=i), result={"secret": f"s{i}"})
            for i in range(ROWS)
        ]  # fmt: skip
        sink.record_many(batch)
        Retention(sink).set_policy(keep="400d", floor="180d", reason="kill test")


def _state(path: Path) -> tuple[int, int, int]:
    """(tombstones, erasure records in the log, erasures in the index)."""
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        stones = conn.execute(
            sa.text("SELECT count(*) FROM events WHERE event_json LIKE '%\"erased\":{%'")
        ).scalar_one()
        records = conn.execute(
            sa.text("SELECT count(*) FROM events WHERE tool = :t AND kind = 'action'"),
            {"t": ERASE_TOOL},
        ).scalar_one()
        index = conn.execute(sa.text("SELECT count(*) FROM erasures")).scalar_one()
    engine.dispose()
    return int(stones), int(records), int(index)


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.4, 0.8, 1.5])
def test_sigkill_during_an_erasure_leaves_all_or_nothing(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "ledger.db"
    _prepare(path)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "start"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    stones, records, index = _state(path)
    assert (stones, records, index) in ((0, 0, 0), (ROWS, 1, 1)), (stones, records, index)
    with SQLiteSink(path) as sink:
        result = verify_ledger(sink, None)
        assert result.ok, [f.message for f in result.errors]
        # and the erasure can be (re)done after the crash
        again = Retention(sink).erase(Selection.of_run("big"), reason="after the crash")
        assert again.erased == (ROWS if stones == 0 else 0)
        assert verify_ledger(sink, None).ok


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_event = st.tuples(
    st.sampled_from(["request", "action", "tool_result", "retrieved", "run_end"]),
    st.sampled_from(["", "c1", "c2"]),
    st.sampled_from(["", "mail", "rm"]),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(["to", "path"]), _texts, max_size=2)),
    _texts,
    st.one_of(st.none(), st.lists(_texts, max_size=2)),
    st.integers(0, 86400 * 30),
)  # fmt: skip
_history = st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3"]), _event), min_size=1, max_size=12)
_erasure = st.tuples(
    st.sampled_from(["run", "before", "events"]),
    st.sampled_from(["r1", "r2", "r3"]),
    st.integers(0, 86400 * 30),
    st.lists(st.integers(0, 11), min_size=1, max_size=3),
    st.sets(st.sampled_from(ALL_FIELDS), min_size=1),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_history, st.lists(_erasure, min_size=1, max_size=3))
def test_any_allowed_erasure_verifies_and_keeps_every_surviving_byte(
    history: list[tuple[str, tuple[object, ...]]],
    erasures: list[tuple[str, str, int, list[int], set[str]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        with SQLiteSink(path) as sink:
            events = []
            for run_id, (kind, call, tool, args, reason, result, secs) in history:
                events.append(
                    Event(kind=str(kind), run_id=run_id, call_id=str(call), tool=str(tool),
                          args=args, reason=str(reason), result=result,
                          time=OLD + timedelta(seconds=int(secs)))  # type: ignore[call-overload]
                )  # fmt: skip
            sink.record_many(events)
            r = Retention(sink)
            r.set_policy(keep="400d", floor="180d", reason="property")
            for how, run_id, secs, picks, fields in erasures:
                before = _bytes(path)
                if how == "run":
                    if not any(e.run_id == run_id for e in events):
                        continue
                    sel = Selection.of_run(run_id)
                    chosen = {str(e.event_id) for e in events if e.run_id == run_id}
                elif how == "before":
                    cut = OLD + timedelta(seconds=secs)
                    sel = Selection.older_than(cut)
                    chosen = {str(e.event_id) for e in events if e.time < cut}
                else:
                    ids = list(dict.fromkeys(str(events[i % len(events)].event_id) for i in picks))
                    sel = Selection.of_events(ids)
                    chosen = set(ids)
                r.erase(sel, reason="property", fields=sorted(fields))
                after = _bytes(path)
                for event_id, data in before.items():
                    if event_id not in chosen:
                        assert after[event_id] == data
                result = verify_ledger(sink, None)
                assert result.ok, [f.message for f in result.errors]


def _bytes(path: Path) -> dict[str, bytes]:
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT event_id, CAST(event_json AS BLOB) FROM events"))
        out = {str(i): bytes(j) for i, j in rows}
    engine.dispose()
    return out
