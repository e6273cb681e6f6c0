"""A scripted agent under the gate: a safe read, a denied shell command, an approved write.

Run it::

    python examples/agent.py

It uses a temporary SQLite ledger, then prints the run's chain and explains the write
with ``chain.why(call_id)``. From code, ``run_demo(sink, workdir)`` runs the same flow
against any sink and returns the run id. The agent itself lives in :mod:`ledger.demo`
(``ledger demo`` runs it too).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from ledger.demo import render_chain, run_scripted_agent
from ledger.sinks import SQLiteSink
from ledger.sinks.base import Sink


def run_demo(sink: Sink, workdir: Path) -> str:
    """Run the scripted agent against ``sink`` in ``workdir``; return the run id."""
    return run_scripted_agent(sink, Path(workdir)).run_id


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="ledger-demo-") as tmp:
        with SQLiteSink(Path(tmp) / "ledger.db") as sink:
            result = run_scripted_agent(sink, Path(tmp) / "work")
            chain = sink.chain(result.run_id)
        print(render_chain(chain))
        print()
        print(f"why was {result.write_call_id} allowed?")
        print(chain.why(result.write_call_id))
        print()
        print(f"why was {result.shell_call_id} refused?")
        print(chain.why(result.shell_call_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
