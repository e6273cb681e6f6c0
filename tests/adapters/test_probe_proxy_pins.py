"""``ledger mcp proxy --pins FILE`` where FILE cannot be written (acceptance probe).

The pins file is what keeps a rug pull refused across restarts. A proxy that cannot write
it would trust whatever the server lists at every restart: it must not start (one error
line naming the file), rather than warn and serve without the protection asked for."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("mcp_server_time")

from mcp import StdioServerParameters

from ledger import Gate
from ledger.adapters.mcp import McpGateway
from ledger.adapters.mcp.gateway import GatewayError
from ledger.sinks import SQLiteSink
from tests.adapters.conftest import PY, env, one_error_line


def test_an_unwritable_pins_file_stops_the_proxy_before_it_serves(tmp_path: Path) -> None:
    pins = tmp_path / "missing" / "pins.json"
    cmd = [PY, "-m", "ledger", "mcp", "proxy", "--db", f"sqlite:///{tmp_path / 'l.db'}"]
    line = one_error_line([*cmd, "--pins", str(pins), "--", PY, "-m", "mcp_server_time"])
    assert str(pins) in line


def test_the_gateway_refuses_to_start_without_its_pins(tmp_path: Path) -> None:
    server = StdioServerParameters(command=PY, args=["-m", "mcp_server_time"], env=env())

    async def main() -> None:
        with SQLiteSink(tmp_path / "l.db") as sink:
            async with McpGateway(Gate(sink), server, pins=tmp_path / "no" / "pins.json"):
                pass

    with pytest.raises(GatewayError, match="pins"):
        asyncio.run(main())
