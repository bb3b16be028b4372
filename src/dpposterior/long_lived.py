"""Keep numba's process-lifetime objects out of the cyclic garbage collector's way (issue 29).

Source: CPython's ``gc.freeze`` (Python 3.7+; the ``gc`` module documentation, and its recipe for
processes that fork: ``gc.disable()`` early in the parent, ``gc.freeze()`` before forking).

The first compiled kernel a process runs (compiled or loaded from numba's cache) builds numba's typing and
lowering registries: about 50,000 Python objects (of the ~120,000 such a process holds) that live as long
as the process.  CPython's full collections walk every tracked object, and the interpreter runs full
collections when it exits, so a one-posterior process spent about a quarter of its time walking them
(docs/benchmarks.md, "Start-up").  :func:`freeze_long_lived` moves the objects alive at that moment into the permanent
generation, once per process, after a young-generation collection:

* the frozen objects are still freed by reference counting when their last reference goes; only
  reference cycles among them are no longer collected -- for numba's registries (never garbage) nothing
  changes, for a caller's own objects alive at that moment a cycle dropped later stays until the process
  ends (``gc.unfreeze()`` hands them all back to the collector);
* draws do not depend on it (the collector never touches numbers).

:func:`collector_paused` is the pre-fork half of the recipe, for the ``processes`` forkserver
(``dpposterior/worker_preload.py``): no collections while it imports (they find almost no garbage there),
then a freeze, so every worker forked from it starts with the preloaded objects out of its collections.
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager

#: set once this process has frozen (inherited by processes forked from it)
_FROZEN = False
#: imported only by numba's registry set-up (``CPUContext.load_additional_registries``), at the first kernel
_NUMBA_REGISTRIES = "numba.np.arraymath"


def freeze_long_lived(*, force: bool = False) -> bool:
    """Freeze the tracked objects once per process, after numba's registries are loaded (or ``force``).

    Returns True when this call froze them.
    """
    global _FROZEN
    if _FROZEN or not (force or _NUMBA_REGISTRIES in sys.modules):
        return False
    gc.collect(1)  # the young garbage is not frozen; a full collection would cost what freezing saves
    gc.freeze()
    _FROZEN = True
    return True


@contextmanager
def collector_paused():
    """No cyclic collections inside the block; on leaving it, the objects alive are frozen
    (:func:`freeze_long_lived`) and the collector is restored to its previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        freeze_long_lived(force=True)
        if enabled:
            gc.enable()
