"""A scripted agent under the gate: a safe read, a denied shell command, an approved write.

Run it from a checkout (no install needed) or with the package installed::

    python examples/agent.py

It uses a temporary SQLite ledger, then prints the run's chain and explains the write
with ``chain.why(call_id)``. The agent itself lives in :mod:`ledger.demo` (``ledger demo``
runs it too): from code, call ``ledger.demo.run_scripted_agent(sink, workdir)``, which
works wherever the package is installed (``run_demo`` below wraps it for this script).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.demo import render_chain, run_scripted_agent
from ledger.sinks import SQLiteSink
from ledger.sinks.base import Sink

NOTE = """\
Reading the chain (events in the order they happened): every call starts with the
gate's decision; an allowed non-safe call then has its `action`, committed durably
before the tool ran, and its `tool_result`; a safe call has just its result; a denied
one a denied `action`. The `denied_attempt` anomaly is expected: it flags the refused
shell command.
"""


def run_demo(sink: Sink, workdir: Path) -> str:
    """Run the scripted agent against ``sink`` in ``workdir``; return the run id."""
    return run_scripted_agent(sink, Path(workdir)).run_id


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        with SQLiteSink(Path(tmp) / "ledger.db") as sink:
            result = run_scripted_agent(sink, Path(tmp) / "work")
            chain = sink.chain(result.run_id)
        print("The agent read notes.txt (safe), was refused `sudo rm -rf /`, and was")
        print(f"approved to write {result.written.name if result.written else 'nothing'}.")
        print()
        print(render_chain(chain))
        print()
        print(NOTE)
        print(f"$ chain.why({result.write_call_id!r})   # why was the file written?")
        print(chain.why(result.write_call_id))
        print()
        print(f"$ chain.why({result.shell_call_id!r})   # why was the shell command refused?")
        print(chain.why(result.shell_call_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
