"""Make a file's contents, or a rename inside a folder, durable.

>>> fsync_path(Path("."))                # a folder, after os.replace into it; a file
...                                       # (below) before renaming it into place
>>> fsync_path(temp_file)                # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["fsync_path"]

log = logging.getLogger(__name__)


def fsync_path(path: Path, *, best_effort: bool = False) -> None:
    """fsync the file or folder at ``path``. With ``best_effort`` an OS that cannot
    (folders without file descriptors, some file systems) is logged, not raised."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if not best_effort:
            raise
        log.debug("cannot open %s to fsync it", path)
        return
    try:
        os.fsync(fd)
    except OSError:
        if not best_effort:
            raise
        log.debug("cannot fsync %s", path)
    finally:
        os.close(fd)
