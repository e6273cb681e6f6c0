"""``JSONLSink`` and ``read_jsonl``: one line per event, crash evidence, no interleaving."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ledger.errors import SinkClosed
from ledger.model import Event, Kind
from ledger.sinks import DurableSink, JSONLSink, Sink, open_sink, read_jsonl

from .factories import action, request_event

ROOT = Path(__file__).resolve().parents[2]


def test_two_events_make_two_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    first = Event(kind=Kind.TOOL_REQUEST, tool="search", args='{"q":"x"}')
    with JSONLSink(path) as sink:
        sink.record(first)
        sink.record(request_event("r1"))
    data = path.read_bytes()
    assert data.count(b"\n") == 2 and data.endswith(b"\n")
    back = Event.from_json(data.split(b"\n")[0])
    assert (back.kind, back.tool) == (Kind.TOOL_REQUEST, "search")
    contents = read_jsonl(path)
    assert contents.events[0] == first and contents.events[1].run_id == "r1"
    assert not contents.truncated_tail and contents.corrupt_lines == []


def test_file_is_created_private_and_appended(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with JSONLSink(path) as sink:
        sink.record(request_event("r1"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with JSONLSink(path, fsync=True) as sink:
        sink.record(request_event("r2"))
    assert [e.run_id for e in read_jsonl(path).events] == ["r1", "r2"]


def test_not_durable_and_refuses_writes_after_close(tmp_path: Path) -> None:
    sink = JSONLSink(tmp_path / "l.jsonl")
    assert isinstance(sink, Sink) and not isinstance(sink, DurableSink)
    assert not hasattr(sink, "commit_action")
    sink.close()
    sink.close()
    with pytest.raises(SinkClosed):
        sink.record(request_event("r1"))
    with pytest.raises(SinkClosed):  # closed comes before the event is looked at
        sink.record("not an event")  # type: ignore[arg-type]


def test_open_sink_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    with open_sink(f"jsonl:///{path}?fsync=1") as sink:
        assert isinstance(sink, JSONLSink) and sink.fsync
        sink.record(request_event("r1"))
    assert len(read_jsonl(path).events) == 1


def test_a_cut_at_every_byte_of_the_last_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "full.jsonl"
    events = [request_event("r1"), action("r1"), action("r1", "c2", args='{"p":"é€😀"}')]
    with JSONLSink(path) as sink:
        for ev in events:
            sink.record(ev)
    data = path.read_bytes()
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    cut_path = tmp_path / "cut.jsonl"
    for cut in range(last_start, len(data) + 1):
        cut_path.write_bytes(data[:cut])
        contents = read_jsonl(cut_path)
        if cut == len(data):
            assert contents.events == events and not contents.truncated_tail
        else:
            assert contents.events == events[:2], cut
            assert contents.truncated_tail == (cut != last_start), cut
        assert contents.corrupt_lines == []


def test_corrupt_lines_are_named_and_the_rest_is_read(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    good = [request_event("r1"), action("r1")]
    lines = [good[0].to_json(), '{"event_id": "nope"}', "", good[1].to_json(), "{trunc"]
    path.write_text("\n".join(lines))
    contents = read_jsonl(path)
    assert contents.events == good
    assert contents.corrupt_lines == [2, 3]
    assert contents.truncated_tail


def test_threads_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    big = '{"blob":"' + "x" * 20_000 + '"}'
    with JSONLSink(path) as sink:

        def write(k: int) -> None:
            for i in range(50):
                sink.record(
                    Event(kind=Kind.TOOL_RESULT, run_id=f"t{k}", call_id=str(i), result=big)
                )

        threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    contents = read_jsonl(path)
    assert len(contents.events) == 400 and contents.corrupt_lines == []
    assert all(e.result == big for e in contents.events)


_WRITER = """
import sys
from ledger.model import Event, Kind
from ledger.sinks import JSONLSink
path, k = sys.argv[1], sys.argv[2]
big = '{"blob":"' + k * 30000 + '"}'
with JSONLSink(path) as sink:
    for i in range(100):
        sink.record(Event(kind=Kind.TOOL_RESULT, run_id="p" + k, call_id=str(i), result=big))
"""


def test_processes_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(k)], env=env)
        for k in range(4)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    contents = read_jsonl(path)
    assert contents.corrupt_lines == [] and not contents.truncated_tail
    assert len(contents.events) == 400
    for ev in contents.events:
        k = ev.run_id[1:]
        assert ev.result == '{"blob":"' + k * 30000 + '"}'
    for k in "0123":
        calls = [e.call_id for e in contents.events if e.run_id == "p" + k]
        assert calls == [str(i) for i in range(100)]
