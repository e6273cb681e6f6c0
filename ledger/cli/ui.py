"""``ledger ui``: the local read-only web viewer (:func:`ledger.viewer.serve`).

::

    ledger ui                                   # ./ledger.db on http://127.0.0.1:8765/
    ledger ui --db postgresql://ledger@db/prod --port 9000
    ledger ui --db jsonl:///runs/today.jsonl --port 0      # any free port

It listens on 127.0.0.1 only; ``--host`` names another loopback address, and a host that
is not loopback is refused unless ``--allow-remote`` is given too (the viewer has no
accounts: anyone who reaches the port reads the whole ledger). Ctrl-C or SIGTERM stops
it.
"""

from __future__ import annotations

import signal

import click

from ledger.cli.common import db_option

__all__ = ["register", "ui"]

DEFAULT_PORT = 8765


@click.command(short_help="Browse a ledger in a local, read-only web viewer.")
@db_option
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port; 0 picks a free one.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; only loopback addresses without --allow-remote.",
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host: every machine that reaches it can read the ledger.",
)
def ui(db: str, port: int, host: str, allow_remote: bool) -> None:
    """Serve the ledger at --db as web pages on 127.0.0.1: runs, each run's chain, why for
    any action, the compliance report, the integrity status. Read-only: nothing is
    written, and only GET and HEAD are answered."""
    from ledger.viewer import serve

    try:
        viewer = serve(db, host=host, port=port, allow_remote=allow_remote)
    except OSError as exc:
        if exc.errno == 98 or "in use" in str(exc).lower():
            raise click.UsageError(
                f"port {port} is in use on {host}: pick another with --port (0 picks a free one)"
            ) from None
        raise
    # `kill` stops it as Ctrl-C does, and Ctrl-C does even when the parent started it
    # with SIGINT ignored or blocked (both are inherited across exec)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # from the first line on, a signal always reaches close(): no thread is left
        click.echo(f"ledger ui: {viewer.url}  (read-only; Ctrl-C stops it)")
        viewer.wait()
    except KeyboardInterrupt:
        click.echo("ledger ui: stopped", err=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        viewer.close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register(group: click.Group) -> None:
    """Add ``ui`` to ``group``."""
    group.add_command(ui)
