"""The reference engine's own outputs (tests/vectors/ghaw-oracle/) reproduced here.

Every case of the four oracle files must agree: replay order, shas, heads, diagnostics,
the reducers' rows and every table, column, typed cell, ``sqlite_master`` entry and file
mode of the projection; record hashes; final ids; canonical JSON (its ``value_json`` read
as JavaScript's ``JSON.parse`` reads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.errors import LedgerError
from ledger.typed import canonical_json, final_id, record_sha
from ledger.typed.jsontext import loads_as_js
from tests.typed.oracle import case_id, check_projection_case, load

PROJECTION = load("replay_projection_python_written")
RECORD_SHA = load("record_sha_vectors")
FINAL_ID = load("final_id_vectors")
CANONICAL = load("canonical_json_vectors")


def test_the_oracle_files_are_complete() -> None:
    assert (len(PROJECTION), len(RECORD_SHA), len(FINAL_ID), len(CANONICAL)) == (
        586,
        400,
        400,
        341,
    )


@pytest.mark.parametrize(
    "case", PROJECTION, ids=[f"{i}-{case_id(c)}" for i, c in enumerate(PROJECTION)]
)
def test_replay_and_projection_agree(case: dict[str, Any], tmp_path: Path) -> None:
    assert check_projection_case(case, tmp_path) == []


def test_record_shas_agree() -> None:
    wrong = []
    for vector in RECORD_SHA:
        record, expected = vector["record_without_sha"], vector["expected"]
        if record_sha(record) != expected["sha"] or canonical_json(record) != expected["canonical"]:
            wrong.append(record)
    assert wrong == []


def test_final_ids_agree() -> None:
    wrong = [v for v in FINAL_ID if final_id(v["transaction_id"], v["index"]) != v["expected"]]
    assert wrong == []


def test_canonical_json_agrees() -> None:
    wrong = []
    for vector in CANONICAL:
        expected = vector["expected"]
        try:
            got: dict[str, Any] = {"text": canonical_json(loads_as_js(vector["value_json"]))}
        except LedgerError as exc:
            got = {"error": str(exc)}
        # where the reference refuses, so must we (the messages are our own)
        ok = got.get("text") == expected["text"] if "text" in expected else "error" in got
        if not ok:
            wrong.append((vector, got))
    assert wrong == []
