"""Recorded text comes out the same, and inert, wherever the output goes.

A denial reason holding an escape sequence (``ESC[2J`` clears a terminal), a C1 control,
a bidirectional override and a line separator: ``click.echo`` deleted the escape
sequence from a report or listing written to a pipe, and let it through to a terminal,
while ``-o FILE`` kept it raw. An auditor's piped CSV then did not say what the ledger
recorded, and a terminal acted on it. Now every format writes the same bytes to a pipe,
a terminal and a file: CSV and HTML show such characters escaped (``\\x1b``), as the
text outputs do, and JSON writes them as ``\\uXXXX`` escapes, so the value parses back
exactly as recorded.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.model import Event, Ref
from ledger.model.shown import inert_json, one_line
from ledger.sinks import SQLiteSink

from .conftest import REPO, run_cli

REASON = "rm -rf \x1b[2J/ refused\x9b31m \u202eevil\u2028next\nline"
RAW = ("\x1b", "\x9b", "\u202e", "\u2028")


@pytest.fixture
def ledger_dir(tmp_path: Path) -> Path:
    with SQLiteSink(tmp_path / "ledger.db") as sink:
        sink.record_many(
            [
                Event(kind="request", run_id="r1", args='"clean up"', time="2025-01-01T00:00:00Z"),
                Event(kind="action", run_id="r1", call_id="c1", tool="rm", verdict="denied",
                      args={"path": "/", "note": REASON}, reason=REASON,
                      refs=[Ref(source="tool", id="x")], time="2025-01-01T00:00:01Z"),
                Event(kind="run_end", run_id="r1", time="2025-01-01T00:00:02Z"),
            ]
        )  # fmt: skip
    return tmp_path


def _on_a_terminal(cwd: Path, *args: str) -> str:
    """What ``ledger ARGS`` prints to a pseudo-terminal (util-linux ``script``), its
    standard error (a progress bar) left out."""
    script = shutil.which("script")
    if script is None:
        pytest.skip("util-linux `script` (a pseudo-terminal) is not installed")
    command = shlex.join([sys.executable, "-m", "ledger", *args]) + " 2>/dev/null"
    env = dict(os.environ, PYTHONPATH=str(REPO), TERM="xterm")
    env.pop("LEDGER_DB", None)
    done = subprocess.run(
        [script, "-qec", command, "/dev/null"],
        cwd=cwd, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    return done.stdout.decode("utf-8").replace("\r\n", "\n")  # the terminal's line ends


def _made(text: str) -> str:
    """``text`` with its times left out (the report's own time of making differs from
    one run of the command to the next)."""
    return re.sub(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z?", "<time>", text)


@pytest.mark.parametrize(
    "args",
    [
        ("report", "--format", "csv"),
        ("report", "--format", "html"),
        ("report", "--format", "json"),
        ("report", "--nl"),
        ("events", "--csv"),
        ("events", "--json"),
        ("events", "--run", "r1", "--csv"),
    ],
)
def test_every_format_writes_the_same_inert_bytes_to_a_pipe_a_file_and_a_terminal(
    ledger_dir: Path, args: tuple[str, ...]
) -> None:
    piped = run_cli(*args, cwd=ledger_dir)
    assert piped.returncode == 0, piped.stderr
    for c in RAW:
        assert c not in piped.stdout, (c, piped.stdout)
    assert "\\x1b[2J" in piped.stdout or "\\u001b[2J" in piped.stdout, piped.stdout
    if args[0] == "report":
        out = ledger_dir / "out.txt"
        assert run_cli(*args, "-o", str(out), cwd=ledger_dir).returncode == 0
        assert _made(out.read_text(encoding="utf-8")) == _made(piped.stdout)
    assert _made(_on_a_terminal(ledger_dir, *args)) == _made(piped.stdout)


def test_json_reads_back_exactly_what_was_recorded(ledger_dir: Path) -> None:
    report = json.loads(run_cli("report", "--format", "json", cwd=ledger_dir).stdout)
    assert [d["reason"] for d in report["denials"]] == [REASON]
    rows = [
        json.loads(line) for line in run_cli("report", "--nl", cwd=ledger_dir).stdout.splitlines()
    ]
    assert [r["detail"] for r in rows if r["section"] == "denial"] == [REASON]  # not one_line'd
    (action,) = [
        e for e in json.loads(run_cli("events", "--json", cwd=ledger_dir).stdout)
        if e["kind"] == "action"
    ]  # fmt: skip
    assert action["reason"] == REASON and action["args"]["note"] == REASON


def test_csv_cells_show_recorded_text_on_one_line(ledger_dir: Path) -> None:
    listed = run_cli("events", "--csv", cwd=ledger_dir).stdout
    rows = list(csv.DictReader(io.StringIO(listed)))
    assert len(listed.splitlines()) == len(rows) + 1  # no cell spans lines
    (action,) = [r for r in rows if r["kind"] == "action"]
    assert action["reason"] == one_line(REASON)
    assert json.loads(action["args"])["note"] == REASON  # a JSON cell is the same value
    report = run_cli("report", "--format", "csv", cwd=ledger_dir).stdout
    (denial,) = [r for r in csv.reader(io.StringIO(report)) if r[0] == "denial"]
    assert denial[-1] == one_line(REASON)


def test_inert_json_is_the_same_json_value() -> None:
    values = [REASON, {"k\u202e": [REASON, 1, None]}, "\x7f\x85\u2029\u200f\ud800"]
    for value in values:
        text = json.dumps(value, ensure_ascii=False, indent=2)
        shown = inert_json(text)
        assert json.loads(shown) == value
        assert shown.isprintable() or set(shown) - set(shown.replace("\n", "")) == {"\n"}


def test_inert_json_escapes_exactly_what_one_line_escapes() -> None:
    """The fast scan's class of characters is :func:`one_line`'s rule, but the line
    break a JSON text's layout holds: every code point checked."""
    for code in [*range(0x10000), 0x1F600, 0xE0001, 0x10FFFF]:
        c = chr(code)
        expected = c if c == "\n" or one_line(c) == c else f"\\u{code:04x}"
        assert inert_json(c) == expected, hex(code)
