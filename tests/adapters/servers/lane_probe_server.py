"""A hand-written, hostile JSON-RPC MCP server for the stdio lane's probe tests.

Run: ``python lane_probe_server.py STATE_DIR``. Speaks only the 2025-11-25 handshake.
It writes its process id to STATE_DIR/pid and appends every line it reads to
STATE_DIR/received.jsonl (so a test sees what reached it: calls,
``notifications/cancelled``, answers to its own requests). Each tool is one
misbehaviour, named by the tool (see ``call``); ``delay`` answers after ``ms``
milliseconds from a thread, so concurrent calls come back out of order.
With the environment variable LANE_PROBE_DB set to a SQLite ledger file, ``audited``
answers with the ``action`` rows of itself that the ledger holds when the call arrives.
With LANE_PROBE_FAREWELL set it writes 2 MB of log messages when its stdin closes; it
writes STATE_DIR/clean-exit when it gets to the end of its own shutdown.
With LANE_PROBE_MUTE set it reads and answers nothing for two minutes (a server stuck
starting up).
With LANE_PROBE_STRICT set it refuses, as the SDK's own handshake-era server loop does,
every request that carries the 2026-07-28 ``_meta`` envelope.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

STATE = sys.argv[1] if len(sys.argv) > 1 else "."
OUT = sys.stdout.buffer
LOCK = threading.Lock()
NAMES = [
    "echo",
    "delay",
    "dup",
    "numeric_id",
    "stranger_first",
    "non_utf8",
    "huge",
    "partial",
    "nan",
    "bigint",
    "list_result",
    "no_result",
    "null_result",
    "bad_error",
    "chatty",
    "ask",
    "close_stdout",
    "exit",
    "hang",
    "stderr",
    "audited",
    "surrogate",
    "deaf",
    "orphan_exit",
]
TOOLS = [{"name": n, "description": f"probe {n}", "inputSchema": {"type": "object"}} for n in NAMES]
WAITING: dict[str, Any] = {}  # our request id -> the id of the call it belongs to


def write(data: bytes) -> None:
    with LOCK:
        OUT.write(data)
        OUT.flush()


def send(obj: dict[str, Any]) -> None:
    write(json.dumps(obj).encode() + b"\n")


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def reply(msg_id: Any, result: Any) -> None:
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def log(line: bytes) -> None:
    with open(os.path.join(STATE, "received.jsonl"), "ab") as f:
        f.write(line if line.endswith(b"\n") else line + b"\n")


def main() -> None:
    with open(os.path.join(STATE, "pid"), "w") as f:
        f.write(str(os.getpid()))
    if os.environ.get("LANE_PROBE_MUTE"):  # stuck starting up: reads and answers nothing
        time.sleep(120)
        return
    for line in sys.stdin.buffer:
        log(line)
        serve(json.loads(line))
    if os.environ.get("LANE_PROBE_FAREWELL"):  # much to say once stdin closes, then done
        note = {"jsonrpc": "2.0", "method": "notifications/message"}
        for _ in range(200):
            send({**note, "params": {"level": "info", "data": "bye " * 2500}})
    with open(os.path.join(STATE, "clean-exit"), "w") as f:
        f.write("1")


def serve(msg: dict[str, Any]) -> None:
    method = msg.get("method")
    if method is None:  # an answer to one of our requests
        call_id = WAITING.pop(str(msg.get("id")), None)
        if call_id is not None:
            reply(call_id, text("client said: " + json.dumps(msg.get("result", msg.get("error")))))
        return
    if "id" not in msg:
        return
    meta = (msg.get("params") or {}).get("_meta") or {}
    modern = "io.modelcontextprotocol/protocolVersion" in meta
    if os.environ.get("LANE_PROBE_STRICT") and modern and method != "server/discover":
        error = {"code": -32600, "message": "this connection serves the handshake era"}
        send({"jsonrpc": "2.0", "id": msg["id"], "error": error})
        return
    if method == "initialize":
        reply(
            msg["id"],
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}, "logging": {}},
                "serverInfo": {"name": "lane-probe", "version": "0"},
            },
        )
    elif method == "tools/list":
        reply(msg["id"], {"tools": TOOLS})
    elif method == "tools/call":
        params = msg.get("params") or {}
        call(msg["id"], str(params.get("name")), params.get("arguments") or {})
    elif method == "ping":
        reply(msg["id"], {})
    else:
        send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": method}})


def call(mid: Any, name: str, args: dict[str, Any]) -> None:
    if name == "echo":
        reply(mid, text(str(args.get("text", ""))))
    elif name == "delay":
        ms = float(args.get("ms", 0))
        later = threading.Timer(ms / 1000, reply, (mid, text(f"after {args.get('ms')}")))
        later.start()
    elif name == "dup":  # the real answer, then a second one for the same id
        reply(mid, text("first"))
        reply(mid, text("second"))
    elif name == "numeric_id":  # first an answer whose id is the lane's number, as a number
        number = int(str(mid).rsplit("-", 1)[-1]) if isinstance(mid, str) else mid
        reply(number, text("numeric impostor"))
        reply(mid, text("numeric real"))
    elif name == "stranger_first":  # an answer to an id nobody sent, then the real one
        reply("ledger-999999", text("stranger"))
        reply(mid, text("real"))
    elif name == "non_utf8":
        body = json.dumps({"jsonrpc": "2.0", "id": mid, "result": text("@@")}).encode()
        write(body.replace(b"@@", b"bad \xff\xfe byte") + b"\n")
    elif name == "huge":
        reply(mid, text("y" * int(args.get("size", 8_000_000))))
    elif name == "partial":  # one answer in three pieces, with pauses
        line = json.dumps({"jsonrpc": "2.0", "id": mid, "result": text("pieced")}).encode()
        third = len(line) // 3
        for piece in (line[:third], line[third : 2 * third], line[2 * third :] + b"\n"):
            write(piece)
            time.sleep(float(args.get("pause", 1.0)))
    elif name == "nan":
        write(
            b'{"jsonrpc": "2.0", "id": '
            + json.dumps(mid).encode()
            + b', "result": {"content": [{"type": "text", "text": "nan"}], '
            + b'"structuredContent": {"x": NaN, "y": Infinity}}}\n'
        )
    elif name == "bigint":
        result = text("big")
        result["structuredContent"] = {"n": 2**80}
        reply(mid, result)
    elif name == "list_result":
        reply(mid, [])
    elif name == "no_result":
        send({"jsonrpc": "2.0", "id": mid})
    elif name == "null_result":
        reply(mid, None)
    elif name == "bad_error":
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": "nope"}})
    elif name == "chatty":  # notifications of every kind before the answer
        token = "t"
        for i in range(int(args.get("n", 50))):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i},
                }
            )
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": f"log {i}"},
                }
            )
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        reply(mid, text("chatty done"))
    elif name == "ask":  # a request of ours in the middle of the call; answered after it
        kind = str(args.get("kind", "ping"))
        our_id = f"srv-{mid}"
        WAITING[our_id] = mid
        params: dict[str, Any] = {}
        if kind == "elicitation/create":
            params = {"message": "Sure?", "requestedSchema": {"type": "object"}}
        elif kind == "sampling/createMessage":
            params = {"messages": [], "maxTokens": 1}
        send({"jsonrpc": "2.0", "id": our_id, "method": kind, "params": params})
    elif name == "close_stdout":
        OUT.flush()
        os.close(1)
        time.sleep(60)
    elif name == "exit":
        os._exit(4)
    elif name == "orphan_exit":  # exit, leaving a child that holds our stdout open
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        with open(os.path.join(STATE, "child.pid"), "w") as f:
            f.write(str(child.pid))
        os._exit(4)
    elif name == "hang":
        pass
    elif name == "stderr":
        sys.stderr.write("lane-probe stderr marker\n")
        sys.stderr.flush()
        reply(mid, text("wrote stderr"))
    elif name == "surrogate":  # a lone surrogate escaped in a string (valid JSON text)
        reply(mid, text("half \ud800 pair"))
    elif name == "deaf":  # stop reading stdin for a while, then answer
        time.sleep(float(args.get("seconds", 2)))
        reply(mid, text("heard"))
    elif name == "audited":
        db = os.environ.get("LANE_PROBE_DB", "")
        with sqlite3.connect(db) as conn:
            rows = conn.execute(
                "SELECT kind, verdict FROM events WHERE tool = 'audited' ORDER BY seq"
            ).fetchall()
        reply(mid, text(json.dumps(rows)))
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": f"no {name}"}})


if __name__ == "__main__":
    main()
