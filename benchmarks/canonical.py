"""Throughput of ``ledger.canonical.canonicalize`` against the pure-Python ``rfc8785`` package.

Run from anywhere::

    python benchmarks/canonical.py

Both sides encode the same ~500-byte event-like dict in the same process; the claim is the
ratio (at least 5x for the rfc8785 profile), not the absolute figures. Takes ~10 s.
"""

from __future__ import annotations

import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run without installing

import rfc8785

from ledger.canonical import canonical_bytes, canonicalize

BAR = 5.0
REPEATS = 7
TARGET_SECONDS_PER_REPEAT = 0.2

EVENT: dict[str, Any] = {
    "event_id": "01JD8Z6Q4W8K3V2M5N7P9R1T3X",
    "run_id": "run-2026-11-30-001",
    "call_id": "call_0042",
    "kind": "tool_call",
    "tool": "github.create_issue",
    "verdict": "allow",
    "time": "2026-11-30T14:02:07.123456Z",
    "seq": 42,
    "duration_ms": 12.75,
    "args": {
        "repo": "octo/agentledger",
        "title": "Flaky test in sinks",
        "labels": ["bug", "ci", "p2"],
        "draft": False,
    },
    "result": {"status": 201, "url": "https://github.com/octo/agentledger/issues/77", "ok": True},
    "policy": {"name": "default", "version": 3, "rules": ["allow-github-write", "rate-limit"]},
    "parent": None,
    "tags": ["agent:planner", "env:ci"],
}


def measure(function: Callable[[], object]) -> tuple[float, float]:
    """Return (best, median) ops/s over REPEATS timed batches of ``function``."""
    timer = timeit.Timer(function)
    number, _ = timer.autorange()  # loops that take at least 0.2 s
    number = max(1, int(number * TARGET_SECONDS_PER_REPEAT / 0.2))
    per_call = [t / number for t in timer.repeat(repeat=REPEATS, number=number)]
    return 1.0 / min(per_call), 1.0 / statistics.median(per_call)


def main() -> int:
    reference = rfc8785.dumps(EVENT)
    if canonical_bytes(EVENT) != reference:
        print("FAIL: canonicalize disagrees with rfc8785.dumps on the benchmark event")
        return 1
    print(f"event: {len(reference)} bytes canonical; {REPEATS} repeats, best-of and median")
    rows = [
        ("rfc8785.dumps (baseline)", lambda: rfc8785.dumps(EVENT).decode()),
        ("canonicalize rfc8785", lambda: canonicalize(EVENT)),
        ("canonicalize gh-aw", lambda: canonicalize(EVENT, "gh-aw")),
    ]
    results = {}
    for name, function in rows:
        best, median = measure(function)
        results[name] = (best, median)
        print(f"  {name:<26} best {best:>12,.0f} ops/s   median {median:>12,.0f} ops/s")
    base_best, base_median = results["rfc8785.dumps (baseline)"]
    ours_best, ours_median = results["canonicalize rfc8785"]
    ghaw_best, ghaw_median = results["canonicalize gh-aw"]
    ratio_best, ratio_median = ours_best / base_best, ours_median / base_median
    print(
        f"ratio rfc8785 profile / rfc8785.dumps: best {ratio_best:.1f}x, median {ratio_median:.1f}x"
    )
    print(f"ratio gh-aw profile / rfc8785.dumps:   best {ghaw_best / base_best:.1f}x, "
          f"median {ghaw_median / base_median:.1f}x")  # fmt: skip
    verdict = "PASS" if ratio_median >= BAR else "FAIL"
    print(f"{verdict}: median ratio {ratio_median:.1f}x against the {BAR:.0f}x bar")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
