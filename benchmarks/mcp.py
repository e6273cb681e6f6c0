"""Benchmark: a tools/call through the MCP gateway against the same server called directly.

    python benchmarks/mcp.py [--calls 40] [--rounds 9] [--dir PATH]

The downstream is the real ``mcp-server-time`` over stdio; its ``get_current_time`` is
called with the SDK's own ``Client``:

- **direct**: ``Client(server).call_tool(...)``, no gateway;
- **gateway, safe**: the SDK ``Client`` talking to :class:`McpGateway` in process (the
  SDK's direct 2026-07-28 path; the calls name one session in ``_meta``, so they are one
  run) that forwards to a second instance of the server, the tool marked safe
  (forwarded, then recorded);
- **gateway, non-safe**: the same with the tool allowed but not safe: its ``action`` is
  durably committed (``SQLiteSink``, WAL, ``synchronous=FULL``) before it is forwarded;
- **commit**: one ``commit_action`` of an action of the same shape on the same kind of
  sink, what one durable write costs on this storage.

Each round makes ``--calls`` calls of every side (the commit is a side too), one call of
each side in turn, the order rotating, so load that drifts during the run hits every
side alike (and none is timed while a gateway still writes the record of an earlier
call, as between an agent's calls); per side and round the p50 and p99 latencies are taken, and the
figure reported is the median over rounds. The bars (exit status 1 when one fails):

- non-safe: p50 <= 1.3 x direct p50 + commit p50, and p99 <= 1.3 x direct p99 + commit p99;
- safe: p50 <= 1.2 x direct p50 and p99 <= 1.2 x direct p99.

The gateway's upstream hop here is the SDK's in-process one, so the figures are the
gateway's own cost plus the cheapest hop the SDK has; ``ledger mcp proxy`` as a
subprocess adds a stdio hop instead (as any MCP proxy process does), about the cost of
the direct call's own transport. The gate's records of a call (decision, result) are
written after the answer is sent; only the ``action`` commit is on the answer's path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

try:  # this file is named mcp.py: keep its folder off the path, or it shadows the SDK
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client, StdioServerParameters

from ledger.adapters.mcp import McpGateway
from ledger.adapters.mcp.gateway import SESSION_META_KEY
from ledger.gate import AllowList, Gate
from ledger.model import Event, Kind, Ref, RefSource, Verdict
from ledger.sinks import SQLiteSink

TOOL = "get_current_time"
ARGS = {"timezone": "Etc/UTC"}


def server() -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_server_time"], env=dict(os.environ)
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(n: int, call: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1e6)
    return out


def commit_once(sink: SQLiteSink, run_id: str, request_id: str, i: int) -> None:
    """One ``commit_action`` of an action shaped as the gateway's."""
    sink.commit_action(
        Event(
            kind=Kind.ACTION,
            run_id=run_id,
            call_id=f"bench-{i}",
            tool=TOOL,
            args=dict(ARGS),
            verdict=Verdict.ALLOWED,
            reason="benchmark commit",
            refs=(Ref(source=RefSource.TOOL, id=request_id),),
        )
    )


async def main(calls: int, rounds: int, directory: Path) -> int:
    results: dict[str, list[tuple[float, float]]] = {
        "direct": [], "safe": [], "non-safe": [], "commit": []
    }  # fmt: skip
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        safe_sink = SQLiteSink(Path(tmp) / "safe.db")
        unsafe_sink = SQLiteSink(Path(tmp) / "unsafe.db")
        commit_sink = SQLiteSink(Path(tmp) / "commit.db")
        safe_gate = Gate(safe_sink, policy=AllowList([]), safe_tools={TOOL})
        unsafe_gate = Gate(unsafe_sink, policy=AllowList([TOOL]))
        async with (
            Client(server()) as direct,
            McpGateway(safe_gate, server()) as safe_gw,
            McpGateway(unsafe_gate, server()) as unsafe_gw,
            Client(safe_gw.server) as safe,
            Client(unsafe_gw.server) as unsafe,
        ):
            one_run = {SESSION_META_KEY: "bench"}  # the calls of each side form one run
            sides: dict[str, Callable[[], Awaitable[object]]] = {
                "direct": lambda: direct.call_tool(TOOL, ARGS),
                "safe": lambda: safe.call_tool(TOOL, ARGS, meta=one_run),
                "non-safe": lambda: unsafe.call_tool(TOOL, ARGS, meta=one_run),
            }
            for side in sides.values():  # warm up every path (imports, first writes)
                await timed(5, side)
            with safe_gate.run("commit baseline") as baseline:
                request_id = baseline.request_id
            counter = iter(range(10**9))

            async def one_commit() -> None:
                commit_once(commit_sink, baseline.run_id, request_id, next(counter))

            sides["commit"] = one_commit
            names = list(sides)
            for r in range(rounds):
                times: dict[str, list[float]] = {name: [] for name in names}
                for i in range(calls):  # one call of each side in turn, the order rotating
                    k = (r + i) % len(names)
                    for name in names[k:] + names[:k]:
                        start = time.perf_counter()
                        await sides[name]()
                        times[name].append((time.perf_counter() - start) * 1e6)
                        # an agent thinks between calls: no call is timed while the
                        # gateway still writes the record of the one before
                        await safe_gw.settle()
                        await unsafe_gw.settle()
                for name, t in times.items():
                    results[name].append((pct(t, 0.5), pct(t, 0.99)))
        for sink in (safe_sink, unsafe_sink, commit_sink):
            sink.close()

    def med(name: str, i: int) -> float:
        return statistics.median(x[i] for x in results[name])

    d50, d99 = med("direct", 0), med("direct", 1)
    c50, c99 = med("commit", 0), med("commit", 1)
    rows = [
        ("direct (baseline)", d50, d99, "", ""),
        ("commit (baseline)", c50, c99, "", ""),
        ("gateway, safe", med("safe", 0), med("safe", 1), f"{1.2 * d50:.0f}", f"{1.2 * d99:.0f}"),
        (
            "gateway, non-safe",
            med("non-safe", 0),
            med("non-safe", 1),
            f"{1.3 * d50 + c50:.0f}",
            f"{1.3 * d99 + c99:.0f}",
        ),
    ]
    print(f"MCP gateway, {rounds} rounds x {calls} calls of {TOOL} (mcp-server-time, stdio)")
    print(f"{'side':<20} {'p50 us':>9} {'p99 us':>9} {'bar p50':>9} {'bar p99':>9}")
    for name, p50, p99, b50, b99 in rows:
        print(f"{name:<20} {p50:>9.0f} {p99:>9.0f} {b50:>9} {b99:>9}")
    print(
        f"ratios to direct: safe p50 {med('safe', 0) / d50:.2f}x p99 {med('safe', 1) / d99:.2f}x;"
        f" non-safe p50 {(med('non-safe', 0) - c50) / d50:.2f}x p99 "
        f"{(med('non-safe', 1) - c99) / d99:.2f}x (after subtracting one commit)"
    )
    failed = []
    if med("safe", 0) > 1.2 * d50 or med("safe", 1) > 1.2 * d99:
        failed.append("safe calls exceed 1.2x direct")
    if med("non-safe", 0) > 1.3 * d50 + c50 or med("non-safe", 1) > 1.3 * d99 + c99:
        failed.append("non-safe calls exceed 1.3x direct plus one commit")
    for f in failed:
        print(f"FAIL: {f}")
    if not failed:
        print("ok: every bar met")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", type=Path, default=Path.cwd())
    ns = parser.parse_args()
    sys.exit(asyncio.run(main(ns.calls, ns.rounds, ns.dir)))
