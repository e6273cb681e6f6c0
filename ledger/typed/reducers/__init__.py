"""The reducers of the six built-in ledger types: :mod:`.base` (what every reducer
shares), :mod:`.simple` (log, set, map, table, counter) and :mod:`.notes`."""
