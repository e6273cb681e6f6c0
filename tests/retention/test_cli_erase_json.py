"""``ledger erase --json`` lists every selected event in one JSON document, as the
library's ``each`` sees them, and keeps the listing in a file as it grows (it was a
list in memory: 170 MB for 50,000 events where the plain erasure took 67 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.model.event import Event
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema

REPO = Path(__file__).resolve().parents[2]

pytestmark = needs_retention_schema


def _ledger(tmp_path: Path, n: int) -> str:
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(
            [Event(kind="request", run_id=f"r{i // 500}", time=OLD + timedelta(seconds=i),
                   args=json.dumps(f"user {i} " + "x" * 200)) for i in range(n)]
        )  # fmt: skip
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    policy = ["retention", "set", "--db", url, "--keep", "400d", "--floor", "30d"]
    assert CliRunner().invoke(cli, [*policy, "--reason", "p"]).exit_code == 0
    return url


def _erase(url: str, *extra: str) -> tuple[dict[str, object], int]:
    tracemalloc.start()
    try:
        result = CliRunner().invoke(
            cli, ["erase", "--db", url, "--before", "2030-01-01", "--reason", "GDPR", *extra]
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    return json.loads(result.output), peak


def test_erase_json_lists_every_event_in_one_document(tmp_path: Path) -> None:
    url = _ledger(tmp_path, 1200)
    dry, _ = _erase(url, "--dry-run", "--json")
    assert dry["dry_run"] is True and dry["erased"] == 1200
    events = dry["events"]
    assert isinstance(events, list) and len(events) == 1200
    assert len({e["event_id"] for e in events}) == 1200
    assert {"event_id", "run_id", "kind", "time"} <= set(events[0])
    done, _ = _erase(url, "--json")
    assert done["erased"] == 1200 and done["events"] == [{**e} for e in events]
    again, _ = _erase(url, "--json")  # nothing left to erase: an empty listing
    assert again["erased"] == 0 and len(again["events"]) == 1200  # listed as already erased


_PEAK = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            sys.stderr.write('peak ' + line.split()[1] + '\\n')\n"
    "atexit.register(peak)\n"
    "sys.argv = ['ledger', *sys.argv[1:]]\n"
    "runpy.run_module('ledger', run_name='__main__')\n"
)


def _peak_rss_mib(url: str, out: Path) -> float:
    """Peak resident memory (MiB) of ``ledger erase --dry-run --json`` in a process of
    its own (its VmHWM: a forked child's ``ru_maxrss`` starts at its parent's), its
    output going to ``out``."""
    with out.open("wb") as handle:
        done = subprocess.run(
            [sys.executable, "-c", _PEAK, "erase", "--db", url, "--before", "2030-01-01",
             "--reason", "GDPR", "--dry-run", "--json"],
            stdout=handle, stderr=subprocess.PIPE, text=True, check=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    (kib,) = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("peak ")]
    return int(kib) / 1024


def test_erase_json_memory_does_not_grow_with_the_listing(tmp_path: Path) -> None:
    peaks = []
    for n in (2_000, 40_000):
        (tmp_path / str(n)).mkdir()
        url = _ledger(tmp_path / str(n), n)
        out = tmp_path / f"{n}.json"
        peaks.append(_peak_rss_mib(url, out))
        assert len(json.loads(out.read_text())["events"]) == n
    assert peaks[1] < peaks[0] + 12, peaks  # a list of 40,000 events took ~40 MiB more


def test_erase_json_keeps_text_with_unicode_line_separators_exact(tmp_path: Path) -> None:
    run = "rün-😀\u2028x\u2029y\x85z"
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many([Event(kind="request", run_id=run, time=OLD, args='"hi"')])
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    policy = ["retention", "set", "--db", url, "--keep", "400d", "--floor", "30d"]
    assert CliRunner().invoke(cli, [*policy, "--reason", "p"]).exit_code == 0
    result = CliRunner().invoke(
        cli, ["erase", "--db", url, "--run", run, "--reason", "GDPR", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["selection"]["run_id"] == run and [e["run_id"] for e in out["events"]] == [run]
