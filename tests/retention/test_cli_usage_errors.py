"""Usage errors of the retention commands: values that are malformed, or that contradict
each other, exit 2 with a message that offers only forms the command takes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.sinks import SQLiteSink
from tests.retention.conftest import OLD, needs_retention_schema, run_events

pytestmark = needs_retention_schema


@pytest.mark.parametrize("value", ["1D", "soon", "30m"])
def test_a_hold_window_says_the_forms_a_hold_takes(tmp_path: Path, value: str) -> None:
    """A hold's --since takes an age in hours, days or weeks, never minutes ('m' could
    be months): its usage error offers only forms a hold takes."""
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old", OLD))
    result = CliRunner().invoke(
        cli, ["hold", "add", "--db", f"sqlite:///{path}", "--since", value, "--reason", "x"]
    )
    assert result.exit_code == 2, result.output
    assert "30m" not in result.output.replace(repr(value), "")  # not offered as a form


def test_a_floor_longer_than_keep_given_together_is_a_usage_error(tmp_path: Path) -> None:
    """Two values that contradict each other, as a reversed hold window (a floor longer
    than the keep stored before stays a refusal: exit 1)."""
    path = tmp_path / "ledger.db"
    with SQLiteSink(path) as sink:
        sink.record_many(run_events("old", OLD))
    url = f"sqlite:///{path}"
    result = CliRunner().invoke(
        cli, ["retention", "set", "--db", url, "--keep", "100d", "--floor", "200d", "--reason", "x"]
    )
    assert result.exit_code == 2 and "cannot exceed keep" in result.output, result.output
    shown = CliRunner().invoke(cli, ["retention", "show", "--db", url])
    assert "no retention policy" in shown.output.lower(), shown.output  # nothing was set
