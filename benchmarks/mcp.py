"""Benchmark: a tools/call through the MCP gateway against the same server called directly.

    python benchmarks/mcp.py [--calls 100] [--rounds 9] [--dir PATH]

Two real downstream servers over stdio, each called with the SDK's own ``Client``:
``mcp-server-time`` (``get_current_time``, the lightest real call there is, so the
gateway's fixed cost shows most) and ``mcp-server-git`` on a scratch repository
(``git_status``, and ``git_add`` of an unchanged file: a no-op, so every call does the
same work). For each server, in the same run:

- **direct**: ``Client(server).call_tool(...)`` of the safe and of the non-safe tool,
  no gateway;
- **gateway, safe**: the SDK ``Client`` talking to :class:`McpGateway` in process (the
  SDK's direct 2026-07-28 path; the calls name one session in ``_meta``, so they are one
  run), forwarding to another instance of the server; the tool is marked safe
  (forwarded, then recorded);
- **gateway, non-safe**: the non-safe tool allowed: its ``action`` is durably committed
  (``SQLiteSink``, WAL, ``synchronous=FULL``) before it is forwarded;
- **direct + commit**: the direct call of the non-safe tool, then one ``commit_action``
  of an action shaped as the gateway's (the same refs: the run's request and the tool's
  definition) on the same ledger (the non-safe gateway's own SQLite file), made
  synchronously, timed as one: the "direct latency plus one durable commit" of the bar,
  without the hand-off to a worker thread an event loop needs (that hand-off is counted
  as the gateway's cost). The rows ``commit_action`` and ``commit_action via a worker
  thread`` time the commit alone, for information.

Every side that calls a server has a server process of its own (three direct clients,
and each gateway's downstream), so each process serves one call per turn: a process
that served three calls for every one of another's answered faster (the time server's
direct call took 1,357 us instead of 1,583 us when its process also served the other two
direct sides), which made the baseline's server quicker than the one the gateway
forwards to.

Each round makes ``--calls`` calls of every side (the commit is a side too), one call of
each side in turn, in a fresh shuffled order each time (seeded: the same every run), so
load that drifts during the run hits every side alike and no side always follows the
same one (a call right after an fsync is slower: with a fixed cyclic order, one side
always came after a commit and the same call measured up to a third slower as one side
than as another); none is timed while a gateway still writes the record of an earlier
call (as between an agent's calls). Per side and round the p50 and p99 latencies are taken;
the figure reported is the median over rounds. ``cpu us`` is the p50 of the CPU time this
process's event-loop thread spent on a call (the client; for the gateway sides the
gateway too, whose process does a client's and a server's work on top of the direct
client's; the downstream server runs in its own process): on a loaded machine a call
that needs more CPU loses proportionally more wall time, so the ratios grow with the
load. The bars (exit status 1 when one fails):

- non-safe: p50 <= (direct + commit) p50 + 0.3 x direct p50, and the same at p99 (that
  is, 1.3 x the direct latency plus one commit, per call);
- safe: p50 <= 1.2 x direct p50 and p99 <= 1.2 x direct p99.

The commit is timed with the direct call, not apart from it and added: percentiles do
not add (the 99th percentile of the sum of two long-tailed latencies is well below the
sum of their 99th percentiles, which made the p99 bar lax, and their medians add only
when both are tight). The separate figures are printed too.

The gateway's upstream hop is the SDK's in-process one, so the figures are the
gateway's own cost plus the cheapest hop the SDK offers; ``ledger mcp proxy`` as a
subprocess has a stdio hop there instead (as any MCP proxy process does), about the cost
of the direct call's own transport. A call's records (decision, result) are written
after its answer is sent; only the ``action`` commit is on the answer's path.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # this file is named mcp.py: keep its folder off the path, or it shadows the SDK
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client, StdioServerParameters

from ledger.adapters.mcp import McpGateway
from ledger.adapters.mcp.gateway import SESSION_META_KEY
from ledger.gate import AllowList, Gate
from ledger.gate.recorder import executor
from ledger.model import Event, Kind, Ref, RefSource, Verdict
from ledger.sinks import SQLiteSink


@dataclass(frozen=True)
class Scenario:
    """One downstream server and the calls made of it."""

    label: str
    args: list[str]  # the server command after the Python interpreter
    safe_tool: str
    safe_args: dict[str, Any]
    unsafe_tool: str
    unsafe_args: dict[str, Any]


def scenarios(workdir: Path) -> list[Scenario]:
    repo = workdir / "repo"
    repo.mkdir()
    for cmd in (["init", "-q"], ["config", "user.email", "b@example.com"],
                ["config", "user.name", "b"]):  # fmt: skip
        subprocess.run(["git", "-C", str(repo), *cmd], check=True)
    (repo / "README.md").write_text("bench\n")
    subprocess.run(["git", "-C", str(repo), "add", "README.md"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "bench"], check=True)
    tz = {"timezone": "Etc/UTC"}
    return [
        # the lightest real call there is: the gateway's fixed cost is most visible here
        Scenario("mcp-server-time", ["-m", "mcp_server_time"], "get_current_time", tz,
                 "get_current_time", tz),
        # a real repository: git_status (safe) and git_add of an unchanged file (non-safe,
        # a no-op each time, so every call does the same work)
        Scenario("mcp-server-git", ["-m", "mcp_server_git"], "git_status",
                 {"repo_path": str(repo)}, "git_add",
                 {"repo_path": str(repo), "files": ["README.md"]}),
    ]  # fmt: skip


def server(scenario: Scenario) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=scenario.args, env=dict(os.environ))


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


def commit_once(
    sink: SQLiteSink, run_id: str, refs: tuple[Ref, ...], i: int, tool: str, args: dict[str, Any]
) -> None:
    """One ``commit_action`` of an action shaped as the gateway's."""
    sink.commit_action(
        Event(
            kind=Kind.ACTION,
            run_id=run_id,
            call_id=f"bench-{i}",
            tool=tool,
            args=dict(args),
            verdict=Verdict.ALLOWED,
            reason="benchmark commit",
            refs=refs,
        )
    )


async def measure(sc: Scenario, calls: int, rounds: int, directory: Path) -> list[str]:
    """Run one scenario; print its table; return the bars it fails."""
    results: dict[str, list[tuple[float, float, float]]] = {
        "direct": [], "direct, non-safe tool": [], "direct + commit": [], "safe": [],
        "non-safe": [], "commit": [], "commit, worker thread": [],
    }  # fmt: skip
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        safe_sink = SQLiteSink(Path(tmp) / "safe.db")
        unsafe_sink = SQLiteSink(Path(tmp) / "unsafe.db")  # the commits are measured on it too
        safe_gate = Gate(safe_sink, policy=AllowList([]), safe_tools={sc.safe_tool})
        unsafe_gate = Gate(unsafe_sink, policy=AllowList([sc.unsafe_tool]))
        async with (
            Client(server(sc)) as direct,
            Client(server(sc)) as direct_unsafe,
            Client(server(sc)) as direct_commit,
            McpGateway(safe_gate, server(sc)) as safe_gw,
            McpGateway(unsafe_gate, server(sc)) as unsafe_gw,
            Client(safe_gw.server) as safe,
            Client(unsafe_gw.server) as unsafe,
        ):
            one_run: Any = {SESSION_META_KEY: "bench"}  # the calls of each side form one run
            sides: dict[str, Callable[[], Awaitable[object]]] = {
                "direct": lambda: direct.call_tool(sc.safe_tool, sc.safe_args),
                "direct, non-safe tool": lambda: direct_unsafe.call_tool(
                    sc.unsafe_tool, sc.unsafe_args
                ),
                "safe": lambda: safe.call_tool(sc.safe_tool, sc.safe_args, meta=one_run),
                "non-safe": lambda: unsafe.call_tool(sc.unsafe_tool, sc.unsafe_args, meta=one_run),
            }
            for side in sides.values():  # warm up every path (imports, first writes)
                await timed(5, side)
            # the baseline commits go to the non-safe gateway's ledger, in a run of their own
            with unsafe_gate.run("commit baseline") as baseline:
                definition = unsafe_gw.tools[sc.unsafe_tool].ref
                assert definition is not None
                refs = (Ref(source=RefSource.TOOL, id=baseline.request_id), definition)
            counter = iter(range(10**9))

            def commit() -> None:
                commit_once(
                    unsafe_sink,
                    baseline.run_id,
                    refs,
                    next(counter),
                    sc.unsafe_tool,
                    sc.unsafe_args,
                )

            async def one_commit() -> None:
                commit()

            async def direct_and_commit() -> None:  # the baseline of the non-safe bar
                await direct_commit.call_tool(sc.unsafe_tool, sc.unsafe_args)
                commit()

            async def one_commit_in_thread() -> None:  # information: the hand-off's cost
                await asyncio.wrap_future(executor().submit(commit))

            sides["direct + commit"] = direct_and_commit
            sides["commit"] = one_commit
            sides["commit, worker thread"] = one_commit_in_thread
            names = list(sides)
            order = random.Random(14)
            for _ in range(rounds):
                times: dict[str, list[float]] = {name: [] for name in names}
                cpu: dict[str, list[float]] = {name: [] for name in names}
                for _ in range(calls):  # one call of each side in turn, in a shuffled order
                    for name in order.sample(names, len(names)):
                        start, start_cpu = time.perf_counter(), time.thread_time()
                        await sides[name]()
                        times[name].append((time.perf_counter() - start) * 1e6)
                        cpu[name].append((time.thread_time() - start_cpu) * 1e6)
                        # an agent thinks between calls: no call is timed while the
                        # gateway still writes the record of the one before
                        await safe_gw.settle()
                        await unsafe_gw.settle()
                for name, t in times.items():
                    results[name].append((pct(t, 0.5), pct(t, 0.99), pct(cpu[name], 0.5)))
        for sink in (safe_sink, unsafe_sink):
            sink.close()

    def med(name: str, i: int) -> float:
        return statistics.median(x[i] for x in results[name])

    d50, d99 = med("direct", 0), med("direct", 1)
    u50, u99 = med("direct, non-safe tool", 0), med("direct, non-safe tool", 1)
    x50, x99 = med("direct + commit", 0), med("direct + commit", 1)
    c50, c99 = med("commit", 0), med("commit", 1)
    t50, t99 = med("commit, worker thread", 0), med("commit, worker thread", 1)
    s50, s99 = med("safe", 0), med("safe", 1)
    n50, n99 = med("non-safe", 0), med("non-safe", 1)
    rows = [
        (f"direct {sc.safe_tool}", d50, d99, "", ""),
        (f"direct {sc.unsafe_tool}", u50, u99, "", ""),
        (f"direct {sc.unsafe_tool} + commit_action", x50, x99, "", ""),
        ("commit_action (info)", c50, c99, "", ""),
        ("commit_action via a worker thread (info)", t50, t99, "", ""),
        (f"gateway {sc.safe_tool} (safe)", s50, s99, f"{1.2 * d50:.0f}", f"{1.2 * d99:.0f}"),
        (
            f"gateway {sc.unsafe_tool} (non-safe)",
            n50,
            n99,
            f"{x50 + 0.3 * u50:.0f}",
            f"{x99 + 0.3 * u99:.0f}",
        ),
    ]
    print(f"\n{sc.label}: {rounds} rounds x {calls} calls per side, stdio downstream")
    side_of = {
        f"direct {sc.safe_tool}": "direct",
        f"direct {sc.unsafe_tool}": "direct, non-safe tool",
        f"direct {sc.unsafe_tool} + commit_action": "direct + commit",
        "commit_action (info)": "commit",
        "commit_action via a worker thread (info)": "commit, worker thread",
        f"gateway {sc.safe_tool} (safe)": "safe",
        f"gateway {sc.unsafe_tool} (non-safe)": "non-safe",
    }
    print(f"{'side':<44} {'p50 us':>8} {'p99 us':>8} {'bar p50':>8} {'bar p99':>8} {'cpu us':>7}")
    for name, p50, p99, b50, b99 in rows:
        used = med(side_of[name], 2)
        print(f"{name:<44} {p50:>8.0f} {p99:>8.0f} {b50:>8} {b99:>8} {used:>7.0f}")
    print(
        f"safe: {s50 / d50:.2f}x direct at p50, {s99 / d99:.2f}x at p99 (bar 1.2x); non-safe "
        f"minus one commit: {(n50 - x50 + u50) / u50:.2f}x direct at p50, "
        f"{(n99 - x99 + u99) / u99:.2f}x at p99 (bar 1.3x; with the commit timed apart and "
        f"added: {(n50 - c50) / u50:.2f}x, {(n99 - c99) / u99:.2f}x)"
    )
    failed = []
    if s50 > 1.2 * d50 or s99 > 1.2 * d99:
        failed.append(f"{sc.label}: safe calls exceed 1.2x direct")
    if n50 > x50 + 0.3 * u50 or n99 > x99 + 0.3 * u99:
        failed.append(f"{sc.label}: non-safe calls exceed 1.3x direct plus one commit")
    return failed


async def main(calls: int, rounds: int, directory: Path) -> int:
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        failed = []
        for sc in scenarios(Path(tmp)):
            failed += await measure(sc, calls, rounds, directory)
    print()
    for f in failed:
        print(f"FAIL: {f}")
    if not failed:
        print("ok: every bar met")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", type=Path, default=Path.cwd())
    ns = parser.parse_args()
    sys.exit(asyncio.run(main(ns.calls, ns.rounds, ns.dir)))
