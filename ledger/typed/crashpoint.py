"""Numbered write steps, so a test can SIGKILL a real process at each one.

Every durable step of a store write (a file written and fsynced, a rename, a directory
fsync, the commit mark) calls :func:`step`. When the environment variable
``AGENTLEDGER_CRASH_AT_STEP`` is a positive integer ``k``, the process sends itself
``SIGKILL`` right after its ``k``-th step: nothing is mocked, the files are exactly what a
power cut or an OOM kill at that point would leave. Unset (the normal case), a step costs
one dictionary lookup.

::

    AGENTLEDGER_CRASH_AT_STEP=3 python -c "..."    # killed after the third write step
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["CRASH_ENV", "step"]

log = logging.getLogger(__name__)

CRASH_ENV = "AGENTLEDGER_CRASH_AT_STEP"
_count = 0


def step(label: str) -> None:
    """Count one durable write step; die by SIGKILL here when the test hook asks for it."""
    global _count
    target = os.environ.get(CRASH_ENV)
    if not target:
        return
    _count += 1
    if target.isdigit() and _count == int(target):
        log.warning("crash hook: SIGKILL after write step %d (%s)", _count, label)
        os.kill(os.getpid(), signal.SIGKILL)
