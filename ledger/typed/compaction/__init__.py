"""Lossless compaction: :mod:`.plan` (the plan file and its checks), :mod:`.segments`
(compacted segments) and :mod:`.apply` (planning and applying)."""
