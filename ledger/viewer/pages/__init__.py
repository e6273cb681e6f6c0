"""The viewer's pages, one module each: :mod:`.runs`, :mod:`.run`, :mod:`.why`,
:mod:`.report`, :mod:`.integrity`, :mod:`.event`; :mod:`.parts` holds what they share."""
