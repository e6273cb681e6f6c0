"""OpenTelemetry: a gated run exported as GenAI spans, live and after the fact.

    pip install 'agentledger[otel]'
    python examples/otel_export.py

Spans go to the console here; to send them to a collector over OTLP/HTTP use
``ledger export otel --db sqlite:///ledger.db --since 24h --endpoint URL``, or give
``TracingSink`` a provider with an ``OTLPSpanExporter``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ledger import AllowList, Gate, ToolDenied
from ledger.adapters.otel import TracingSink, export_runs
from ledger.sinks import SQLiteSink


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    return p, exporter


def main(db: Path) -> None:
    live, live_spans = provider()
    with TracingSink(SQLiteSink(db), live) as sink:  # live: spans as the gate records
        gate = Gate(sink, policy=AllowList(["write_file"]), safe_tools={"read_file"})
        with gate.run("tidy the notes", agent_path="planner") as run:
            run.call("read_file", {"path": "notes.txt"}, lambda path: "hello")
            run.call("write_file", {"path": "out.txt", "text": "hi"}, lambda path, text: 2)
            try:
                run.call("delete_file", {"path": "/"}, lambda path: None)
            except ToolDenied as denied:
                print("denied:", denied.reason)
    print("live spans:")
    for span in live_spans.get_finished_spans():
        print(f"  {span.name:<28} {dict(span.attributes or {}).get('agentledger.verdict', '')}")
    after, spans = provider()  # after the fact, from the ledger
    with SQLiteSink(db) as reader:
        print("exported runs:", export_runs(reader, after))
    for span in spans.get_finished_spans():
        attrs = dict(span.attributes or {})
        print(f"  {span.name:<28} call id {attrs.get('gen_ai.tool.call.id', '-')}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp) / "ledger.db")
