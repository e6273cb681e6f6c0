"""OpenTelemetry GenAI export (``agentledger[otel]``): the ledger's record as traces.

>>> from opentelemetry.sdk.trace import TracerProvider          # doctest: +SKIP
>>> export_runs(SQLiteSink("ledger.db"), provider, since=yesterday)   # doctest: +SKIP
3

Each run becomes a trace following the OpenTelemetry GenAI semantic conventions:

- an ``invoke_agent {agent}`` span (``gen_ai.operation.name`` ``invoke_agent``,
  ``gen_ai.agent.name`` = the run's ``agent_path``, ``gen_ai.conversation.id`` = the run
  id), from the request to ``run_end`` / ``abort`` (an aborted run has ``error.type``
  ``agentledger.abort`` and an error status);
- as its children, one ``execute_tool {tool}`` span per call, safe or not, allowed or
  denied (``gen_ai.operation.name`` ``execute_tool``, ``gen_ai.tool.name``,
  ``gen_ai.tool.type`` ``function``, ``gen_ai.tool.call.id`` = the ledger's call id),
  from the decision to the result. A failed call has ``error.type`` (the exception's
  type when the error names one, else ``tool_error``); a denied call has ``error.type``
  ``agentledger.denied``; both have an error status.
- ``agentledger.*`` attributes: ``run_id``, ``verdict``, ``reason``, ``policy`` (the
  deciding policy id), ``safe`` (a safe read, as the chain and the report judge it),
  ``erased`` (the fields an erasure took from the call's events; their text shows as
  ``[erased: reason]``, and a failed call whose error was erased still fails),
  ``intent_event_id``, ``decision_event_id``,
  ``result_event_id``, ``content_hash`` (``sha256:`` of the RFC 8785 form of the
  intent event, the hash the SQL sinks store), ``result_hash`` and ``evidence`` (the
  refs, as ``source:id``).
- Arguments and results (``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``)
  and the request text (``agentledger.request``) only with ``include_content=True``,
  after redaction (``redact``, default :func:`ledger.gate.redact_text`, on top of the
  gate's own redaction at record time).

Two ways:

- after the fact, :func:`export_runs` (``ledger export otel --db URL --since ...``), with
  span times taken from the recorded event times;
- live, :class:`TracingSink`: a sink wrapper handed to the ``Gate`` that passes every
  write through unchanged and *then* queues the stored event for a background thread
  that builds the spans. It is never on the durable path: a commit returns as soon as
  the wrapped sink has committed; a full queue drops spans (counted in ``dropped``),
  never blocks; a failure building spans is logged, never raised. An event the wrapped
  sink refused produces no span.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ledger.adapters import needs_extra
from ledger.canonical import sha256_of
from ledger.drift import content_hash
from ledger.errors import LedgerError
from ledger.gate import redact_text
from ledger.model import Event, Kind, Verdict
from ledger.model.erasure import erased_text, request_shown
from ledger.model.marks import failed, marked_safe
from ledger.sinks import Reader, Sink

with needs_extra(__name__, "otel", ("opentelemetry",)):
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

if TYPE_CHECKING:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

__all__ = [
    "ExportError",
    "Sent",
    "TracingSink",
    "export_runs",
    "otlp_tracer_provider",
    "run_spans",
    "send_otlp",
    "traces_endpoint",
]

log = logging.getLogger(__name__)

TRACER_NAME = "agentledger"
_ERR_TYPE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Denied|Interrupt|Exit)):")
_MAX_ATTR = 8192


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000) * 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class _Options:
    include_content: bool = False
    redact: Callable[[str], str] = redact_text

    def text(self, value: str | None) -> str | None:
        if value is None or not self.include_content:
            return None
        try:
            out = self.redact(value)
        except Exception:
            return "[withheld: redaction failed]"
        return out if len(out) <= _MAX_ATTR else out[: _MAX_ATTR - 1] + "…"


def _intent_hash(event: Event) -> str:
    try:
        return sha256_of(json.loads(event.to_json()), profile="rfc8785")
    except Exception:  # a value outside RFC 8785's range: fall back to the stored text
        return content_hash(event.to_json())


def _error_type(err: str) -> str:
    if err == "cancelled":
        return "cancelled"
    m = _ERR_TYPE.match(err)
    return m.group(1) if m else "tool_error"


@dataclass(slots=True)
class _Call:
    call_id: str
    tool: str
    decision: Event | None = None
    action: Event | None = None
    result: Event | None = None

    @property
    def first(self) -> Event:
        for e in (self.decision, self.action, self.result):
            if e is not None:
                return e
        raise ValueError("empty call")  # pragma: no cover

    def add(self, event: Event) -> None:
        if event.kind is Kind.GATE_DECISION and self.decision is None:
            self.decision = event
        elif event.kind is Kind.ACTION and (self.action is None or event.verdict is Verdict.DENIED):
            self.action = event
        elif event.kind is Kind.TOOL_RESULT and self.result is None:
            self.result = event


def _call_attributes(call: _Call, run_id: str, opts: _Options) -> dict[str, Any]:
    intent = call.action or call.decision or call.first
    verdict = intent.verdict or (call.decision.verdict if call.decision else None)
    label = call.decision.label if call.decision is not None else intent.label
    # a safe read as the chain and the report judge it: an erased label or reason reads
    # as what its tombstone kept (marked_safe)
    decision = call.decision
    safe = decision is not None and decision.verdict is Verdict.ALLOWED and marked_safe(decision)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call.call_id,
        "agentledger.run_id": run_id,
        "agentledger.safe": safe,
        "agentledger.policy": label.removeprefix("safe:"),
        "agentledger.intent_event_id": str(intent.event_id),
        "agentledger.content_hash": _intent_hash(intent),
    }
    if verdict is not None:
        attrs["agentledger.verdict"] = str(verdict)
    reason = erased_text(intent, "reason") or intent.reason
    if reason:
        attrs["agentledger.reason"] = reason[:_MAX_ATTR]
    gone = sorted({f for e in (call.decision, call.action, call.result) for f in _erased(e)})
    if gone:  # erased (hash kept): what went, never shown as absent
        attrs["agentledger.erased"] = gone
    if call.decision is not None:
        attrs["agentledger.decision_event_id"] = str(call.decision.event_id)
    evidence = [f"{r.source}:{r.id}" for r in intent.refs]
    if evidence:
        attrs["agentledger.evidence"] = evidence
    args = opts.text(erased_text(intent, "args") or intent.args)
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = args
    if call.result is not None:
        attrs["agentledger.result_event_id"] = str(call.result.event_id)
        if call.result.result is not None:
            attrs["agentledger.result_hash"] = content_hash(call.result.result)
        shown = opts.text(erased_text(call.result, "result") or call.result.result)
        if shown is not None:
            attrs["gen_ai.tool.call.result"] = shown
        attrs["agentledger.duration_ms"] = call.result.duration_ms
    return attrs


def _call_status(call: _Call, span: Span) -> None:
    intent = call.action or call.decision
    verdict = intent.verdict if intent is not None else None
    if verdict is not None and verdict is not Verdict.ALLOWED:
        span.set_attribute("error.type", "agentledger.denied")
        said = "" if intent is None else erased_text(intent, "reason") or intent.reason
        span.set_status(Status(StatusCode.ERROR, said[:500]))
    elif call.result is not None and failed(call.result):  # its err may be erased
        err = call.result.err
        span.set_attribute("error.type", _error_type(err) if err else "tool_error")
        shown = err or erased_text(call.result, "err") or "tool_error"
        span.set_status(Status(StatusCode.ERROR, shown[:500]))
    elif call.result is None:
        span.set_attribute("agentledger.outcome", "no_result")


def _run_attributes(request: Event | None, run_id: str, opts: _Options) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": run_id,
        "agentledger.run_id": run_id,
    }
    if request is not None:
        agent = request.agent_path or erased_text(request, "agent_path")
        if agent:
            attrs["gen_ai.agent.name"] = agent
        attrs["agentledger.request_event_id"] = str(request.event_id)
        shown = opts.text(request_shown(request))
        if shown is not None:
            attrs["agentledger.request"] = shown
    return attrs


def _erased(event: Event | None) -> tuple[str, ...]:
    """The fields an erasure took from ``event`` (none for an ordinary event)."""
    return () if event is None or event.erased is None else event.erased.fields


def _span_name(op: str, what: str) -> str:
    return f"{op} {what}" if what else op


def run_spans(
    tracer: Tracer,
    events: Sequence[Event],
    *,
    include_content: bool = False,
    redact: Callable[[str], str] = redact_text,
) -> int:
    """Emit the spans of one run's ``events`` (in stored order) on ``tracer``; returns
    the number of spans."""
    if not events:
        return 0
    opts = _Options(include_content=include_content, redact=redact)
    run_id = events[0].run_id
    request = next((e for e in events if e.kind is Kind.REQUEST), None)
    end = next((e for e in events if e.kind in (Kind.RUN_END, Kind.ABORT)), None)
    start_ns = _ns(min(e.time for e in events))
    end_ns = _ns(end.time if end is not None else max(e.time for e in events))
    agent = request.agent_path if request is not None else ""
    root = tracer.start_span(
        _span_name("invoke_agent", agent),
        kind=SpanKind.INTERNAL,
        start_time=start_ns,
        attributes=_run_attributes(request, run_id, opts),
    )
    root.set_attribute("agentledger.ended", end is not None)
    if end is not None and end.kind is Kind.ABORT:
        root.set_attribute("error.type", "agentledger.abort")
        root.set_status(Status(StatusCode.ERROR, end.reason[:500]))
    calls: dict[str, _Call] = {}
    for e in events:
        if e.call_id and e.kind in (Kind.GATE_DECISION, Kind.ACTION, Kind.TOOL_RESULT):
            calls.setdefault(e.call_id, _Call(call_id=e.call_id, tool=e.tool)).add(e)
    parent = trace.set_span_in_context(root)
    for call in calls.values():
        first = call.first
        last = call.result or call.action or first
        begin = _ns(first.time)
        span = tracer.start_span(
            _span_name("execute_tool", call.tool),
            context=parent,
            kind=SpanKind.INTERNAL,
            start_time=begin,
            attributes=_call_attributes(call, run_id, opts),
        )
        _call_status(call, span)
        span.end(end_time=max(begin, _ns(last.time)))
    root.end(end_time=max(start_ns, end_ns))
    return 1 + len(calls)


def export_runs(
    reader: Reader,
    tracer_provider: TracerProvider,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    include_content: bool = False,
    redact: Callable[[str], str] = redact_text,
) -> int:
    """Turn the runs of ``reader`` (those with events between ``since`` and ``until``)
    into spans on ``tracer_provider``; returns the number of runs exported. Flushing the
    provider's processors is the caller's (``provider.force_flush()``)."""
    tracer = tracer_provider.get_tracer(TRACER_NAME)
    count = 0
    for summary in reader.runs(since=since, until=until):
        events = list(reader.events(run_id=summary.run_id))
        if run_spans(tracer, events, include_content=include_content, redact=redact):
            count += 1
    return count


class ExportError(LedgerError):
    """The spans could not be delivered to the OTLP receiver."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """What :func:`send_otlp` delivered."""

    runs: int
    spans: int


def send_otlp(
    reader: Reader,
    endpoint: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    include_content: bool = False,
    timeout: float = 10.0,
) -> Sent:
    """Export the runs of ``reader`` to the OTLP/HTTP traces ``endpoint``
    (``http://127.0.0.1:4318/v1/traces``); raises :class:`ExportError` when the receiver
    does not accept them (``ledger export otel``). A base URL (no path) gets
    ``/v1/traces``, as :func:`traces_endpoint` says."""
    with needs_extra(__name__, "otel", ("opentelemetry",)):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import SpanExportResult

    class Collect(SpanProcessor):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def on_end(self, span: ReadableSpan) -> None:
            self.spans.append(span)

    collected = Collect()
    provider = SdkTracerProvider(resource=Resource.create({"service.name": "agentledger"}))
    provider.add_span_processor(collected)
    runs = export_runs(reader, provider, since=since, until=until, include_content=include_content)
    exporter = _otlp_exporter(endpoint, timeout)
    endpoint = traces_endpoint(endpoint)
    try:
        spans = collected.spans
        for i in range(0, len(spans), 512):
            if exporter.export(spans[i : i + 512]) is not SpanExportResult.SUCCESS:
                raise ExportError(
                    f"the OTLP/HTTP receiver at {endpoint} did not accept the spans "
                    f"({i} of {len(spans)} delivered); check that it runs and the URL"
                )
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        provider.shutdown()
    return Sent(runs=runs, spans=len(collected.spans))


def otlp_tracer_provider(endpoint: str, *, timeout: float = 10.0) -> TracerProvider:
    """An SDK tracer provider that batches spans to the OTLP/HTTP traces ``endpoint``
    (for :class:`TracingSink`; call its ``shutdown()`` to flush at the end). A base URL
    (no path) gets ``/v1/traces``, as :func:`traces_endpoint` says."""
    with needs_extra(__name__, "otel", ("opentelemetry",)):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = SdkTracerProvider(resource=Resource.create({"service.name": "agentledger"}))
    provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(endpoint, timeout)))
    return provider


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL for ``url``, after the OpenTelemetry convention for a base
    endpoint: a URL with no path (or just ``/``) gets ``/v1/traces``
    (``http://127.0.0.1:4318`` → ``http://127.0.0.1:4318/v1/traces``); a URL with a path
    is used as given.

    >>> traces_endpoint("http://127.0.0.1:4318/")
    'http://127.0.0.1:4318/v1/traces'
    >>> traces_endpoint("https://collector.example/otlp/traces")
    'https://collector.example/otlp/traces'
    """
    parts = urlsplit(url.strip())
    if not parts.netloc or parts.path not in ("", "/"):
        return url
    return urlunsplit(parts._replace(path="/v1/traces"))


def _otlp_exporter(endpoint: str, timeout: float) -> OTLPSpanExporter:
    """The one place an OTLP/HTTP exporter is built from a user's URL."""
    with needs_extra(__name__, "otel", ("opentelemetry",)):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=traces_endpoint(endpoint), timeout=timeout)


# --- live ---------------------------------------------------------------------------------


_STOP = object()


@dataclass(slots=True)
class _LiveRun:
    span: Span
    calls: dict[str, tuple[Span, _Call]] = field(default_factory=dict)


class TracingSink:
    """``TracingSink(sink, tracer_provider, *, include_content=False, max_queue=10000)``:
    ``sink`` with spans built live, off the durable path (see the module docstring).

    >>> gate = Gate(TracingSink(SQLiteSink("ledger.db"), provider))   # doctest: +SKIP

    ``commit_action`` and ``record_many`` exist exactly when ``sink`` has them, so the
    gate treats the wrapper as it treats ``sink``; every other attribute (``chain``,
    ``events``, ...) is the wrapped sink's. ``close()`` drains the queue (up to
    ``drain_timeout`` seconds), ends the spans still open and closes ``sink``.
    """

    commit_action: Callable[[Event], None]
    record_many: Callable[[Iterable[Event]], None]
    joins_caller_transaction: bool

    def __init__(
        self,
        sink: Sink,
        tracer_provider: TracerProvider,
        *,
        include_content: bool = False,
        redact: Callable[[str], str] = redact_text,
        max_queue: int = 10000,
        drain_timeout: float = 5.0,
    ) -> None:
        self.sink = sink
        self.dropped = 0
        self.drain_timeout = drain_timeout
        self._opts = _Options(include_content=include_content, redact=redact)
        self._tracer = tracer_provider.get_tracer(TRACER_NAME)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._runs: dict[str, _LiveRun] = {}
        self._closed = False
        commit = getattr(sink, "commit_action", None)
        if callable(commit):
            self.commit_action = self._commit_action
        many = getattr(sink, "record_many", None)
        if callable(many):
            self.record_many = self._record_many
        if getattr(sink, "joins_caller_transaction", False) is True:
            self.joins_caller_transaction = True
        self._worker = threading.Thread(target=self._work, name="agentledger-otel", daemon=True)
        self._worker.start()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("commit_action", "record_many"):
            raise AttributeError(name)
        return getattr(self.sink, name)

    def __repr__(self) -> str:
        return f"TracingSink({self.sink!r})"

    def __enter__(self) -> TracingSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the write path: the wrapped sink first, then a non-blocking hand-off ----------

    def record(self, event: Event) -> None:
        self.sink.record(event)
        self._observe((event,))

    def _record_many(self, events: Iterable[Event]) -> None:
        batch = list(events)
        self.sink.record_many(batch)  # type: ignore[attr-defined]
        self._observe(batch)

    def _commit_action(self, event: Event) -> None:
        self.sink.commit_action(event)  # type: ignore[attr-defined]
        self._observe((event,))

    def _observe(self, events: Iterable[Event]) -> None:
        if self._closed:
            return
        for event in events:
            try:
                self._queue.put_nowait(event)
            except queue.Full:
                if self.dropped == 0:
                    log.warning(
                        "agentledger otel: the span queue is full (%d events: the exporter "
                        "is slower than the gate); spans are being dropped, every record is "
                        "kept in the ledger (ledger export otel can send them again)",
                        self._queue.maxsize,
                    )
                self.dropped += 1

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(queue.Full):
                self._queue.put(_STOP, timeout=self.drain_timeout)
            self._worker.join(self.drain_timeout)
            if self.dropped:
                log.warning(
                    "agentledger otel: %d event(s) had no span (the queue was full); the "
                    "ledger has them all: send them with ledger export otel",
                    self.dropped,
                )
        self.sink.close()

    # --- the worker --------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            try:
                assert isinstance(item, Event)
                self._span_for(item)
            except Exception:
                log.exception("agentledger otel: a span could not be built (the record is kept)")
        for run_id in list(self._runs):
            self._end_run(run_id, None)

    def _span_for(self, e: Event) -> None:
        if e.kind is Kind.REQUEST:
            if e.run_id not in self._runs:
                span = self._tracer.start_span(
                    _span_name("invoke_agent", e.agent_path),
                    start_time=_ns(e.time),
                    attributes=_run_attributes(e, e.run_id, self._opts),
                )
                self._runs[e.run_id] = _LiveRun(span=span)
            return
        if e.kind in (Kind.RUN_END, Kind.ABORT):
            self._end_run(e.run_id, e)
            return
        if not e.call_id or e.kind not in (Kind.GATE_DECISION, Kind.ACTION, Kind.TOOL_RESULT):
            return
        run = self._runs.get(e.run_id)
        if run is None:  # a call outside a recorded run (an orphan denial): its own trace
            attrs = _run_attributes(None, e.run_id, self._opts)
            span = self._tracer.start_span("invoke_agent", start_time=_ns(e.time), attributes=attrs)
            run = self._runs[e.run_id] = _LiveRun(span=span)
        entry = run.calls.get(e.call_id)
        if entry is None:
            span = self._tracer.start_span(
                _span_name("execute_tool", e.tool),
                context=trace.set_span_in_context(run.span),
                start_time=_ns(e.time),
            )
            entry = run.calls[e.call_id] = (span, _Call(call_id=e.call_id, tool=e.tool))
        span, call = entry
        call.add(e)
        span.set_attributes(_call_attributes(call, e.run_id, self._opts))
        denied = e.kind is Kind.ACTION and e.verdict is Verdict.DENIED
        if e.kind is Kind.TOOL_RESULT or denied:
            _call_status(call, span)
            span.end(end_time=max(_ns(e.time), _ns(call.first.time)))
            del run.calls[e.call_id]

    def _end_run(self, run_id: str, end: Event | None) -> None:
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        for span, call in run.calls.values():
            _call_status(call, span)
            span.end()
        run.span.set_attribute("agentledger.ended", end is not None)
        if end is not None and end.kind is Kind.ABORT:
            run.span.set_attribute("error.type", "agentledger.abort")
            run.span.set_status(Status(StatusCode.ERROR, end.reason[:500]))
        run.span.end(end_time=_ns(end.time) if end is not None else None)
