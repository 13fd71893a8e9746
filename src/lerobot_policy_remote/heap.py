"""Long-lived processes move what they built at start-up out of the garbage collector's way.

A full (generation 2) collection walks every tracked object. A server holds its model's modules and parameters,
a simulated robot host 250 engines: each full pass walked all of it, for nothing, and held the GIL while it did
(the robots' callbacks and the inference worker wait). Freezing once start-up is done leaves the young
generations collected as before. Process-wide: only entry points call it, never a library object.
"""

from __future__ import annotations

import gc


def settle_after_startup() -> int:
    """Collect what start-up left over, then freeze the survivors; returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
