"""OpenAI Agents SDK: run_gated with the SDK's ScriptedModel (no API key, no network).

pip install 'agentledger[openai-agents]'
python examples/openai_agents_agent.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from ledger import AllowList, Gate
from ledger.adapters.openai_agents import run_gated_sync
from ledger.sinks import SQLiteSink


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@function_tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("never reached: the gate denies it")


def main(db: Path) -> None:
    set_tracing_disabled(True)  # the SDK's own tracing would need an API key
    model = ScriptedModel(
        [
            [
                function_call("read_file", {"path": "notes.txt"}, call_id="call_1"),
                function_call("delete_file", {"path": "/"}, call_id="call_2"),
            ],
            [assistant_message("done")],
        ]
    )
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent = Agent(name="tidier", model=model, tools=[read_file, delete_file])
        result = run_gated_sync(gate, agent, "tidy the notes")
        print("output:", result.final_output)
        (run,) = list(sink.runs())
        for action in sink.chain(run.run_id).actions:
            print(f"ledger: {action.tool} {action.verdict} ({action.intent.reason})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp) / "ledger.db")
