"""``ledger export otel``: recorded runs as OpenTelemetry GenAI traces, over OTLP/HTTP.

::

    ledger export otel --db sqlite:///ledger.db --since 24h
    ledger export otel --db URL --since 2026-11-01 --until 2026-12-01 \\
        --endpoint http://127.0.0.1:4318 --include-content

A thin layer over :func:`ledger.adapters.otel.export_runs` (needs ``agentledger[otel]``).
The endpoint defaults to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else ``http://127.0.0.1:4318/v1/traces``.
A URL with no path (``http://127.0.0.1:4318``, or ending in just ``/``) is a base endpoint
and gets ``/v1/traces``, as OpenTelemetry's exporters do; a URL with a path is used as given.
A receiver that refuses or cannot be reached is an error (exit status 1) naming it.
"""

from __future__ import annotations

import os
from datetime import datetime

import click

from ledger.cli.common import db_option, emit_json, json_option, open_db, window_options

__all__ = ["export", "register"]

DEFAULT_ENDPOINT = "http://127.0.0.1:4318/v1/traces"


def _endpoint(given: str | None) -> str:
    if given:
        return given
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if base:
        return base.rstrip("/") + "/v1/traces"
    return DEFAULT_ENDPOINT


@click.group(short_help="Export recorded runs: otel.")
def export() -> None:
    """Export recorded runs to other tools."""


@export.command(short_help="Send runs as OpenTelemetry GenAI traces over OTLP/HTTP.")
@db_option
@window_options
@click.option(
    "--endpoint",
    metavar="URL",
    help=f"OTLP/HTTP traces URL; one with no path gets /v1/traces [{DEFAULT_ENDPOINT}].",
)
@click.option(
    "--include-content",
    is_flag=True,
    help="Also send arguments, results and request text (after redaction).",
)
@click.option(
    "--timeout",
    metavar="SECONDS",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the receiver.",
)
@json_option
def otel(
    db: str,
    since: datetime | None,
    until: datetime | None,
    endpoint: str | None,
    include_content: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Each run an invoke_agent span, each tool call an execute_tool child span."""
    # without the extra: MissingExtra, one `ledger: error:` line with the pip command
    from ledger.adapters.otel import send_otlp, traces_endpoint

    url = traces_endpoint(_endpoint(endpoint))
    with open_db(db) as reader:
        sent = send_otlp(
            reader, url, since=since, until=until, include_content=include_content, timeout=timeout
        )
    if as_json:
        emit_json({"runs": sent.runs, "spans": sent.spans, "endpoint": url})
    else:
        click.echo(f"exported {sent.runs} run(s), {sent.spans} span(s) to {url}")


def register(group: click.Group) -> None:
    """Add the ``export`` group to ``group``."""
    group.add_command(export)
