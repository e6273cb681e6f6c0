"""``ledger ui``: a local, read-only web viewer over any ledger URL.

>>> from ledger.viewer import serve
>>> with serve("sqlite:///ledger.db") as viewer:         # doctest: +SKIP
...     print(viewer.url)                                 # open it in a browser
http://127.0.0.1:40613/

Server-rendered HTML with one inline style sheet: no script, no CDN, no font or image is
fetched. Pages: the runs list (filters, paging), a run's chain as a timeline, why for
any action, the compliance report for any window, the integrity status. The modules:
:mod:`.server` (HTTP, headers, the loopback rule), :mod:`.routing` (requests, responses,
error pages), :mod:`.pages` (one module per page), :mod:`.listing` (the runs list's
filters and paging), :mod:`.html` (escaping and the layout), :mod:`.source` (the reader).
"""

from __future__ import annotations

from ledger.viewer.server import Viewer, is_loopback, serve

__all__ = ["Viewer", "is_loopback", "serve"]
