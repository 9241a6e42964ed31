"""The built-in scheduling plugins, one a file, each with its own frozen arguments dataclass.

`BUILTIN` maps a plugin's name (as profiles and settings call it) to its class.
"""

from __future__ import annotations

from sam_server.scheduling.framework.points import Plugin
from sam_server.scheduling.plugins.arch import Arch
from sam_server.scheduling.plugins.drain import Drain
from sam_server.scheduling.plugins.fifo_sort import FifoSort
from sam_server.scheduling.plugins.first_after_stop import FirstAfterStop
from sam_server.scheduling.plugins.fit import Fit
from sam_server.scheduling.plugins.migrate import Migrate
from sam_server.scheduling.plugins.oldest_first import OldestFirst
from sam_server.scheduling.plugins.preempt import Preempt
from sam_server.scheduling.plugins.priority_sort import PrioritySort
from sam_server.scheduling.plugins.quota import Quota
from sam_server.scheduling.plugins.reserve import Backfill

BUILTIN: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (
        PrioritySort,
        FifoSort,
        OldestFirst,
        FirstAfterStop,
        Quota,
        Arch,
        Fit,
        Preempt,
        Migrate,
        Drain,
        Backfill,
    )
}

__all__ = [
    "BUILTIN",
    "Arch",
    "Backfill",
    "Drain",
    "FifoSort",
    "FirstAfterStop",
    "Fit",
    "Migrate",
    "OldestFirst",
    "Preempt",
    "PrioritySort",
    "Quota",
]
