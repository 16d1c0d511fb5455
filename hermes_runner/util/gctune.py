"""Garbage collection for a long run: no collection while the command starts, then what start-up built is frozen.

Start-up (Hydra, the openai SDK's ~650 model classes, the composed config) makes about 125,000 objects that live
as long as the process, and little cyclic garbage (about 17,000 objects, 3 MB, kept). Left to the defaults, the
collector walks all of them during start-up and again at every full collection of the run (0.1 s each on 2
cores). Only a command's own process is tuned: `starting()` is called by its entry point, and `started()` does
nothing where it was not (a run started from Python, a test).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 7_000  # allocations between young collections (CPython's default: 700)
_state = {"starting": False}


def starting() -> None:
    """No collection until `started()`."""
    _state["starting"] = True
    gc.disable()


def started() -> None:
    """Move every object alive now to the permanent generation, then collect again, less often in the young one."""
    if not _state["starting"]:
        return
    _state["starting"] = False
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), middle, old)
    gc.enable()


def ended() -> None:
    """Collections back on when the command ends (its run may never have started: a listing, an error)."""
    _state["starting"] = False
    gc.enable()
