"""``python -m ledger``: the ``ledger`` command."""

from ledger.cli.main import main

if __name__ == "__main__":
    main()
