"""OpenTelemetry GenAI export: the SDK's in-memory exporter, and a real OTLP/HTTP
receiver on 127.0.0.1 for `ledger export otel`."""

from __future__ import annotations

import gzip
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ledger import AllowList, Gate, ToolDenied
from ledger.adapters.otel import TracingSink, export_runs, send_otlp
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, env


def record_runs(sink: Any) -> tuple[str, str]:
    gate = Gate(sink, policy=AllowList(["write_file"]), safe_tools={"read_file"})
    with gate.run("tidy the notes; api_key=abcd1234efgh5678", agent_path="planner") as r1:
        r1.call("read_file", {"path": "notes.txt"}, lambda path: "hello", call_id="c-read")
        r1.call(
            "write_file", {"path": "out.txt", "text": "hi"}, lambda path, text: 2, call_id="c-write"
        )
        with pytest.raises(ToolDenied):
            r1.call("delete_file", {"path": "/"}, lambda path: None, call_id="c-del")
        with pytest.raises(ZeroDivisionError):
            r1.call(
                "write_file", {"path": "x", "text": ""}, lambda path, text: 1 / 0, call_id="c-fail"
            )
    with pytest.raises(RuntimeError), gate.run("second", agent_path="planner") as r2:
        raise RuntimeError("the agent crashed")
    return r1.run_id, r2.run_id


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def check_spans(spans: Any, run1: str, run2: str, *, content: bool) -> None:
    by_name: dict[str, list[Any]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    agents = by_name["invoke_agent planner"]
    assert len(agents) == 2
    root = next(s for s in agents if s.attributes["agentledger.run_id"] == run1)
    aborted = next(s for s in agents if s.attributes["agentledger.run_id"] == run2)
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "planner"
    assert aborted.attributes["error.type"] == "agentledger.abort"
    assert aborted.status.status_code is StatusCode.ERROR
    tools = {
        s.attributes["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool")
    }
    assert set(tools) == {"c-read", "c-write", "c-del", "c-fail"}
    for s in tools.values():
        assert s.parent is not None and s.parent.span_id == root.context.span_id
        assert s.context.trace_id == root.context.trace_id
        assert s.attributes["gen_ai.operation.name"] == "execute_tool"
        assert s.name == f"execute_tool {s.attributes['gen_ai.tool.name']}"
        assert s.attributes["agentledger.content_hash"].startswith("sha256:")
        assert ("gen_ai.tool.call.arguments" in s.attributes) is content
    assert tools["c-read"].attributes["agentledger.safe"] is True
    assert tools["c-write"].attributes["agentledger.verdict"] == "allowed"
    assert "error.type" not in tools["c-write"].attributes
    assert tools["c-del"].attributes["error.type"] == "agentledger.denied"
    assert tools["c-del"].attributes["agentledger.verdict"] == "denied"
    assert tools["c-fail"].attributes["error.type"] == "ZeroDivisionError"
    assert tools["c-fail"].status.status_code is StatusCode.ERROR
    if content:
        assert json.loads(tools["c-write"].attributes["gen_ai.tool.call.arguments"]) == {
            "path": "out.txt",
            "text": "hi",
        }
        assert tools["c-write"].attributes["gen_ai.tool.call.result"] == "2"
        assert "abcd1234efgh5678" not in root.attributes["agentledger.request"]


@pytest.mark.parametrize("content", [False, True])
def test_export_runs_after_the_fact(tmp_path: Path, content: bool) -> None:
    with SQLiteSink(tmp_path / "l.db") as sink:
        run1, run2 = record_runs(sink)
        provider, exporter = memory_provider()
        assert export_runs(sink, provider, include_content=content) == 2
        check_spans(exporter.get_finished_spans(), run1, run2, content=content)


def test_the_window_selects_runs(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    with SQLiteSink(tmp_path / "l.db") as sink:
        record_runs(sink)
        provider, exporter = memory_provider()
        later = datetime.now(UTC) + timedelta(hours=1)
        assert export_runs(sink, provider, since=later) == 0
        assert exporter.get_finished_spans() == ()


def test_live_spans_match_and_never_touch_the_durable_path(tmp_path: Path) -> None:
    provider, exporter = memory_provider()
    inner = SQLiteSink(tmp_path / "l.db")
    sink = TracingSink(inner, provider)
    run1, run2 = record_runs(sink)
    sink.close()
    check_spans(exporter.get_finished_spans(), run1, run2, content=False)


class _Broken(TracerProvider):
    """A tracer provider whose spans blow up: the gate must not notice."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        class T:
            def start_span(self, *a: Any, **k: Any) -> Any:
                raise RuntimeError("exporter on fire")

        return T()


def test_a_failing_live_hook_never_denies_or_breaks_a_call(tmp_path: Path) -> None:
    sink = TracingSink(SQLiteSink(tmp_path / "l.db"), _Broken(), max_queue=2)
    ran: list[int] = []
    gate = Gate(sink, policy=AllowList(["write_file"]))
    with gate.run("go") as run:
        for i in range(20):  # more events than the queue holds: dropped, never blocking
            run.call("write_file", {"i": i}, lambda i: ran.append(i))
    assert ran == list(range(20))
    chain = sink.chain(run.run_id)
    assert len(chain.actions) == 20 and all(a.outcome == "succeeded" for a in chain.actions)
    sink.close()


def test_the_wrapper_is_durable_exactly_when_the_sink_is(tmp_path: Path) -> None:
    from ledger.sinks import JSONLSink

    provider, _ = memory_provider()
    plain = TracingSink(JSONLSink(tmp_path / "l.jsonl"), provider)
    assert not hasattr(plain, "commit_action")
    assert not Gate(plain).durable
    plain.close()
    durable = TracingSink(SQLiteSink(tmp_path / "l.db"), provider)
    assert Gate(durable).durable
    durable.close()


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[ExportTraceServiceRequest]] = []
    paths: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        msg = ExportTraceServiceRequest()
        msg.ParseFromString(body)
        type(self).received.append(msg)
        type(self).paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    class Handler(_Receiver):
        received: ClassVar[list[ExportTraceServiceRequest]] = []
        paths: ClassVar[list[str]] = []

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", Handler
    finally:
        server.shutdown()
        server.server_close()


def _otlp_spans(handler: type[_Receiver]) -> list[Any]:
    return [
        span
        for msg in handler.received
        for rs in msg.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]


def _attr(span: Any, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            v = kv.value
            return v.string_value or v.bool_value or v.int_value
    return None


def test_send_otlp_delivers_to_a_receiver(tmp_path: Path, receiver: Any) -> None:
    url, handler = receiver
    with SQLiteSink(tmp_path / "l.db") as sink:
        record_runs(sink)
        sent = send_otlp(sink, url)
    assert (sent.runs, sent.spans) == (2, 6)
    spans = _otlp_spans(handler)
    assert len(spans) == 6 and handler.paths == ["/v1/traces"]
    names = sorted(s.name for s in spans)
    assert names.count("invoke_agent planner") == 2
    call_ids = {_attr(s, "gen_ai.tool.call.id") for s in spans} - {None}
    assert call_ids == {"c-read", "c-write", "c-del", "c-fail"}


def test_ledger_export_otel_command(tmp_path: Path, receiver: Any) -> None:
    url, handler = receiver
    db = tmp_path / "l.db"
    with SQLiteSink(db) as sink:
        record_runs(sink)
    done = subprocess.run(
        [
            PY,
            "-m",
            "ledger",
            "export",
            "otel",
            "--db",
            f"sqlite:///{db}",
            "--since",
            "1h",
            "--endpoint",
            url,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env(),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"runs": 2, "spans": 6, "endpoint": url}
    assert len(_otlp_spans(handler)) == 6


def test_ledger_export_otel_names_a_receiver_that_is_down(tmp_path: Path) -> None:
    from tests.adapters.conftest import free_port

    db = tmp_path / "l.db"
    with SQLiteSink(db) as sink:
        record_runs(sink)
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    start = time.monotonic()
    done = subprocess.run(
        [
            PY,
            "-m",
            "ledger",
            "export",
            "otel",
            "--db",
            f"sqlite:///{db}",
            "--endpoint",
            url,
            "--timeout",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    assert done.returncode == 1
    assert url in done.stderr and "did not accept" in done.stderr
    assert time.monotonic() - start < 100


def test_the_mcp_proxy_sends_spans_live(tmp_path: Path, receiver: Any, repo: Path) -> None:
    pytest.importorskip("mcp_server_git")
    import asyncio

    from mcp import Client, StdioServerParameters

    url, handler = receiver
    db = f"sqlite:///{tmp_path / 'l.db'}"
    args = ["-m", "ledger", "mcp", "proxy", "--db", db, "--safe", "git_status",
            "--otel-endpoint", url, "--", PY, "-m", "mcp_server_git"]  # fmt: skip

    async def main() -> None:
        async with Client(StdioServerParameters(command=PY, args=args, env=env())) as c:
            await c.call_tool("git_status", {"repo_path": str(repo)})
            await c.call_tool("git_commit", {"repo_path": str(repo), "message": "x"})

    asyncio.run(main())
    spans = _otlp_spans(handler)  # the proxy flushed its spans before it exited
    names = sorted(s.name for s in spans)
    assert "execute_tool git_status" in names and "execute_tool git_commit" in names
    commit = next(s for s in spans if s.name == "execute_tool git_commit")
    assert _attr(commit, "error.type") == "agentledger.denied"
    assert any(n.startswith("invoke_agent") for n in names)


def test_an_erased_run_exports_as_it_did_before_with_its_erased_parts_marked(
    tmp_path: Path,
) -> None:
    """An erasure takes the text (args, results, errors, reasons, labels) but keeps what
    the calls were: a failed call still fails, a safe read is still a safe read, and
    the erased parts say so (``[erased: reason]``, ``agentledger.erased``), never shown
    as absent."""
    from datetime import UTC, datetime

    from ledger.retention import Retention, Selection

    with SQLiteSink(tmp_path / "ledger.db") as sink:
        run1, _ = record_runs(sink)

        def spans() -> dict[str, Any]:
            provider, exporter = memory_provider()
            export_runs(sink, provider, include_content=True)
            out: dict[str, Any] = {}
            for s in exporter.get_finished_spans():
                attributes = dict(s.attributes or {})
                if attributes["agentledger.run_id"] == run1:
                    out[str(attributes.get("gen_ai.tool.call.id", "root"))] = s
            return out

        before = spans()
        future = datetime(2100, 1, 1, tzinfo=UTC)  # the run is older than any floor then
        r = Retention(sink, clock=lambda: future)
        r.set_policy(keep="1d", floor="0", reason="test")
        r.erase(Selection.of_run(run1), reason="GDPR request 7", by="dpo")
        after = spans()
    assert set(after) == set(before)
    for call in ("c-read", "c-write", "c-del", "c-fail"):
        was, now = before[call].attributes, after[call].attributes
        assert now["agentledger.safe"] == was["agentledger.safe"], call
        assert after[call].status.status_code == before[call].status.status_code, call
        # the error's text went (its exception type with it): still an error
        assert ("error.type" in now) == ("error.type" in was), call
        assert now.get("agentledger.verdict") == was.get("agentledger.verdict"), call
        assert "args" in now["agentledger.erased"], call
        assert now["gen_ai.tool.call.arguments"] == "[erased: GDPR request 7]", call
    assert after["c-fail"].status.status_code is StatusCode.ERROR
    assert after["c-del"].status.description == "[erased: GDPR request 7]"  # its reason went
    assert after["c-read"].attributes["agentledger.safe"] is True
    assert after["c-write"].attributes["gen_ai.tool.call.result"] == "[erased: GDPR request 7]"
    root = after["root"].attributes
    assert root["agentledger.request"] == "[erased: GDPR request 7]"
    assert root["gen_ai.agent.name"] == "[erased: GDPR request 7]"  # its agent_path went
