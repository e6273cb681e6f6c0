"""What a new user met: `ledger events --run` takes a run-id prefix as `ledger chain` does
(and refuses an unknown or ambiguous one as it does), an empty table keeps its title on
one line, and `ledger export otel --endpoint` takes a base URL as OpenTelemetry does."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

from ledger.model import Event
from ledger.sinks import open_sink
from tests.cli.conftest import REPO, Ledger, fill, invoke, run_cli, sqlite_url

WIDE = {"COLUMNS": "120"}


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[str, str, str]:
    """A ledger of two scripted runs: its URL and the two run ids."""
    url = sqlite_url(tmp_path / "ledger.db")
    first = fill(url, tmp_path / "w1")
    second = fill(url, tmp_path / "w2")
    return url, first.run_id, second.run_id


def _shared(a: str, b: str) -> str:
    """The longest prefix ``a`` and ``b`` share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _unique_prefix(run_id: str, other: str) -> str:
    shared = len(_shared(run_id, other))
    assert shared < len(run_id) - 1
    return run_id[: shared + 1]


def test_events_run_takes_a_unique_prefix(two_runs: tuple[str, str, str]) -> None:
    url, run1, run2 = two_runs
    prefix = _unique_prefix(run1, run2)
    by_prefix = invoke("events", "--db", url, "--run", prefix, "--nl")
    by_id = invoke("events", "--db", url, "--run", run1, "--nl")
    assert by_prefix.exit_code == 0, by_prefix.stderr
    lines = by_prefix.stdout.splitlines()
    assert lines == by_id.stdout.splitlines() and len(lines) == 10
    assert {json.loads(line)["run_id"] for line in lines} == {run1}
    table = invoke("events", "--db", url, "--run", prefix, env=WIDE)
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0].startswith(f"10 event(s) of run {run1}, times in UTC")


def test_events_refuses_an_unknown_run_as_chain_does(two_runs: tuple[str, str, str]) -> None:
    url, _, _ = two_runs
    for form in ((), ("--nl",), ("--json",)):
        events = invoke("events", "--db", url, "--run", "nonexistent", *form)
        chain = invoke("chain", "nonexistent", "--db", url)
        assert events.exit_code == chain.exit_code == 1, events.stdout
        assert events.stderr == chain.stderr
        assert events.stderr.startswith("ledger: error: no run id is or starts with")
        assert len(events.stderr.splitlines()) == 1
        assert "0 event(s)" not in events.stdout


def test_events_refuses_an_ambiguous_prefix_as_chain_does(
    two_runs: tuple[str, str, str],
) -> None:
    url, run1, run2 = two_runs
    shared = _shared(run1, run2)
    assert shared  # ULIDs made moments apart share their leading time digits
    events = invoke("events", "--db", url, "--run", shared)
    chain = invoke("chain", shared, "--db", url)
    assert events.exit_code == chain.exit_code == 2
    said = events.stderr.strip().splitlines()[-1]
    assert said == chain.stderr.strip().splitlines()[-1]
    assert "is ambiguous" in said and run1 in said and run2 in said
    assert "0 event(s)" not in events.stdout


def test_an_empty_events_table_keeps_its_title_on_one_line(sqlite_ledger: Ledger) -> None:
    run = sqlite_ledger.run_id
    done = invoke("events", "--db", sqlite_ledger.url, "--run", run, "--kind", "abort", env=WIDE)
    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    assert lines[0].rstrip() == f"0 event(s) of run {run}, times in UTC"
    assert lines[1].split() == ["time", "kind", "call", "tool", "verdict", "detail"]


def _line(stream: IO[str], timeout: float = 20) -> str:
    """The next line of a child's output, or "" when none comes within ``timeout``."""
    if not select.select([stream], [], [], timeout)[0]:
        return ""
    return stream.readline()


def test_events_follow_waits_for_a_run_not_yet_recorded(tmp_path: Path) -> None:
    """A run may be given its id before it starts: --follow waits for it, saying so."""
    url = sqlite_url(tmp_path / "l.db")
    with open_sink(url) as sink:
        sink.record(Event(kind="request", run_id="other", args='"first"'))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "events", "--db", url, "--run", "nightly-7",
         "--follow", "--interval", "0.1"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        assert proc.stderr is not None and proc.stdout is not None
        note = _line(proc.stderr)
        assert note.startswith("ledger: note: no run id is or starts with 'nightly-7'")
        assert "waiting for events of run 'nightly-7'" in note
        with open_sink(url) as sink:
            sink.record(Event(kind="request", run_id="other", args='"not this"'))
            sink.record(Event(kind="request", run_id="nightly-7", args='"this"'))
        assert json.loads(_line(proc.stdout))["run_id"] == "nightly-7"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- `ledger export otel --endpoint`: a base URL gets /v1/traces --------------------------


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that accepts any POST and keeps the path it came to."""

    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

    class Handler(_Receiver):
        paths: ClassVar[list[str]] = []

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("tail", "path"),
    [("", "/v1/traces"), ("/", "/v1/traces"), ("/v1/traces", "/v1/traces"),
     ("/custom/traces", "/custom/traces")],
)  # fmt: skip
def test_export_otel_takes_a_base_endpoint(
    sqlite_ledger: Ledger, receiver: tuple[str, type[_Receiver]], tail: str, path: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    base, handler = receiver
    done = run_cli("export", "otel", "--db", sqlite_ledger.url, "--endpoint", base + tail,
                   "--json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runs": 1, "spans": 4, "endpoint": base + path}
    assert handler.paths and set(handler.paths) == {path}


def test_the_live_tracer_provider_takes_a_base_endpoint(
    receiver: tuple[str, type[_Receiver]],
) -> None:
    """`otlp_tracer_provider` is what `ledger mcp proxy --otel-endpoint` builds."""
    from ledger.adapters.otel import otlp_tracer_provider

    base, handler = receiver
    provider = otlp_tracer_provider(base, timeout=5)
    provider.get_tracer("t").start_span("s").end()
    provider.shutdown()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while not handler.paths and time.monotonic() < deadline:
        time.sleep(0.05)
    assert handler.paths == ["/v1/traces"]
