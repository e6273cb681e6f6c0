"""The ``ledger`` command: a thin layer over library calls.

``ledger`` (the console script) and ``python -m ledger`` both run :func:`main`.
"""

from __future__ import annotations

from ledger.cli.main import cli, main

__all__ = ["cli", "main"]
