"""LangGraph: a graph whose ToolNode is gated (a scripted model node, no API key).

pip install 'agentledger[langgraph]'
python examples/langgraph_agent.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import ledger  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without installing: use the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph

from ledger import AllowList, Gate
from ledger.adapters.langgraph import gate_tool_node
from ledger.sinks import SQLiteSink


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("never reached: the gate denies it")


def model(state: MessagesState) -> dict[str, Any]:
    """A scripted model: one turn of tool calls, then an answer."""
    if len(state["messages"]) == 1:
        calls = [
            {"name": "read_file", "args": {"path": "notes.txt"}, "id": "call-1"},
            {"name": "delete_file", "args": {"path": "/"}, "id": "call-2"},
        ]
        return {"messages": [AIMessage("", tool_calls=calls)]}
    return {"messages": [AIMessage("done")]}


def main(db: Path) -> None:
    with SQLiteSink(db) as sink:
        gate = Gate(sink, policy=AllowList([]), safe_tools={"read_file"})
        g = StateGraph(MessagesState)
        g.add_node("model", model)
        g.add_node("tools", gate_tool_node(gate, [read_file, delete_file]))
        g.add_edge(START, "model")
        g.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
        g.add_edge("tools", "model")
        with gate.run("tidy the notes", agent_path="langgraph") as run:
            out = g.compile().invoke({"messages": [HumanMessage("tidy the notes")]})
        for m in out["messages"]:
            if isinstance(m, ToolMessage):
                print(f"{m.name}: [{m.status}] {m.content}")
        for action in sink.chain(run.run_id).actions:
            print(f"ledger: {action.tool} {action.verdict} ({action.intent.reason})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp) / "ledger.db")
