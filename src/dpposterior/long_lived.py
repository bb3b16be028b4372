"""Keep numba's process-lifetime objects out of the cyclic garbage collector's way, so that workers start fast.

Source: CPython's ``gc.freeze`` (Python 3.7+; the ``gc`` module documentation, and its recipe for
processes that fork: ``gc.disable()`` early in the parent, ``gc.freeze()`` before forking).

The first compiled kernel a process runs (compiled or loaded from numba's cache) builds numba's typing and
lowering registries: about 50,000 Python objects (of the ~120,000 such a process holds) that live as long
as the process. CPython's full collections walk every tracked object, and the interpreter runs full
collections when it exits, so a one-posterior process spent about a quarter of its time walking them
(docs/benchmarks.md, "Start-up"). :func:`freeze_long_lived` moves the objects alive at that moment into
the permanent generation, once per process, after a full collection (so no garbage is ever frozen: an
unreachable cycle holding, say, an open file must still be collected and closed):

* the frozen objects are still freed by reference counting when their last reference goes; only
  reference cycles among them are no longer collected -- for numba's registries (never garbage) nothing
  changes, for a caller's own objects alive at that moment a cycle dropped later stays until the process
  ends (``gc.unfreeze()`` hands them all back to the collector; ``DPPOSTERIOR_GC_FREEZE=0`` in the
  environment turns the freeze off for a long-lived program that would rather not);
* draws do not depend on it (the collector never touches numbers).

:func:`pause_during_first_kernel` also keeps the collector off while numba builds those objects (while it
holds its compiler lock, up to the hold that loads the registries and the first kernel), since the
collections it would run there walk tens of thousands of new objects and find almost no garbage; the
freeze's full collection, when the lock is released, collects whatever garbage there is. It listens to
numba's public event API (``numba.core.event``, kind ``numba:compiler_lock``).

:func:`collector_paused` is the pre-fork half of the recipe, for the ``processes`` forkserver
(``dpposterior/worker_preload.py``): no collections while it imports (they find almost no garbage there),
then a freeze, so every worker forked from it starts with the preloaded objects out of its collections.
The forkserver collects *before* its preload, not after (``imports_only``; CPython's recipe has no collection
at all: ``gc.disable()`` early, ``gc.freeze()`` before forking): a collection after it walks ~185,500 objects
for 0.06-0.08 s, a tenth of every pool's start-up, to find ~1,300 (~0.3 MB: functions, tuples and cells left
by the imports; ``benchmarks/startup_probes.py --parts garbage``), which instead stay frozen, shared by the workers; the one before it walks the few objects alive
then -- multiprocessing's, and the caller's main module, which the forkserver imports first -- so no
caller's garbage is frozen.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from contextlib import contextmanager

#: set once this process has frozen (inherited by processes forked from it)
_FROZEN = False
#: set once :func:`pause_during_first_kernel` has registered its listener
_LISTENING = False
#: imported only by numba's registry set-up (``CPUContext.load_additional_registries``), at the first kernel
_NUMBA_REGISTRIES = "numba.np.arraymath"


def freeze_long_lived(*, force: bool = False, collect: bool = True) -> bool:
    """Freeze the tracked objects once per process, after numba's registries are loaded (or ``force``).

    ``collect=False`` skips the full collection before the freeze (only for a process that has run nothing
    but imports: the forkserver's preload).  Returns True when this call froze them.
    """
    global _FROZEN
    if _FROZEN or not (force or _NUMBA_REGISTRIES in sys.modules):
        return False
    if os.environ.get("DPPOSTERIOR_GC_FREEZE", "1") == "0":  # a library user's opt-out (docs/architecture.md)
        return False
    # a full collection first: garbage frozen now would never be collected, nor its files closed (it costs
    # about 4% of a one-posterior process, measured: what is frozen must be what is alive)
    if collect:
        gc.collect()
    gc.freeze()
    _FROZEN = True
    return True


@contextmanager
def collector_paused(*, imports_only: bool = False, freeze: bool = True):
    """No cyclic collections inside the block; on leaving it, the objects are frozen
    (:func:`freeze_long_lived`) and the collector is restored to its previous state.

    ``imports_only=True``: the block only imports library modules (the forkserver's preload), so the full
    collection comes *before* it, over the few objects alive then (the caller's main module's, which a
    forkserver imports first), and none after it -- the block's own leftovers are frozen with the rest.
    What is frozen is still never a caller's garbage.

    ``freeze=False``: only the pause, nothing frozen -- for a block that builds many containers all still alive at
    its end (parsing and validating a release, whose 10^7-cell table is a million lists: the collections the
    interpreter would run there walk every one of them, again and again, and find no garbage; a third of parsing
    the table's JSON)."""
    enabled = gc.isenabled()
    if imports_only:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            freeze_long_lived(force=True, collect=not imports_only)
        if enabled:
            gc.enable()


def pause_during_first_kernel() -> None:
    """Pause the collector while numba holds its compiler lock, until its registries are loaded; then freeze.

    A no-op once frozen or listening, or while numba is not imported (no kernel can run then)."""
    global _LISTENING
    if _FROZEN or _LISTENING or "numba" not in sys.modules or _NUMBA_REGISTRIES in sys.modules:
        return
    _LISTENING = True
    import numba.core.event as ev

    class FirstHold(ev.Listener):
        """Collector off during each outermost hold of the lock until numba's registries exist, then a freeze;
        a no-op afterwards (it stays registered: unregistering inside a broadcast would skip the next listener)."""

        def __init__(self):
            self.depth = 0  # the lock is re-entrant, and a thread's start comes before it waits for the lock
            self.lock = threading.Lock()
            self.enabled = True
            self.done = False

        def on_start(self, event):
            with self.lock:
                if self.done:
                    return
                if self.depth == 0:
                    self.enabled = gc.isenabled()
                    gc.disable()
                self.depth += 1

        def on_end(self, event):
            with self.lock:
                if self.done:
                    return
                self.depth -= 1
                if self.depth:
                    return
                if _NUMBA_REGISTRIES in sys.modules:
                    self.done = True
                    freeze_long_lived()
                if self.enabled:
                    gc.enable()

    ev.register("numba:compiler_lock", FirstHold())
