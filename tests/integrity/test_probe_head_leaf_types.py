"""A leaf index of another type written into a SQLite row by hand (text, a real, a
blob) is a finding of ``verify_ledger``, never an exception, and a writer refuses."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from ledger.errors import IntegrityError
from ledger.integrity.verify import FindingKind, verify_ledger
from ledger.sinks import SQLiteSink
from tests.sinks.factories import action


@pytest.mark.parametrize("value", ["'zz'", "19.5", "x'00'"])
@pytest.mark.parametrize("leaf", [5, 19])
def test_a_leaf_index_of_another_type_is_a_finding(tmp_path: Path, value: str, leaf: int) -> None:
    path = tmp_path / "l.db"
    with SQLiteSink(path) as sink:
        for i in range(20):
            sink.commit_action(action("r", f"c{i}"))
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"UPDATE events SET leaf_index = {value} WHERE leaf_index = {leaf}")
        conn.commit()
    with SQLiteSink(path) as sink:
        result = verify_ledger(sink, None)
        assert not result.ok
        assert any(
            f.kind is FindingKind.CHANGED and "not a leaf index" in f.message
            for f in result.findings
        )
        with pytest.raises(IntegrityError):
            sink.commit_action(action("r", "after"))
