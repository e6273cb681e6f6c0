"""PydanticAI: an agent with GateCapability (the framework's FunctionModel, no API key).

pip install 'agentledger[pydantic-ai]'
python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ledger import AllowList, Gate
from ledger.adapters.pydantic_ai import GateCapability
from ledger.sinks import SQLiteSink


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("read_file", {"path": "notes.txt"}, tool_call_id="call-1"),
                ToolCallPart("delete_file", {"path": "/"}, tool_call_id="call-2"),
            ]
        )
    return ModelResponse(parts=[TextPart("done")])


def main(db: Path) -> None:
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        agent: Agent[None, str] = Agent(
            FunctionModel(scripted), capabilities=[GateCapability(gate)], name="tidier"
        )

        @agent.tool_plain
        def read_file(path: str) -> str:
            return f"contents of {path}"

        @agent.tool_plain
        def delete_file(path: str) -> str:
            raise AssertionError("never reached: the gate denies it")

        result = agent.run_sync("tidy the notes")
        print("output:", result.output)
        (run,) = list(sink.runs())
        for action in sink.chain(run.run_id).actions:
            print(f"ledger: {action.tool} {action.verdict} ({action.intent.reason})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp) / "ledger.db")
