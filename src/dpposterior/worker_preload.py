"""What a ``processes`` worker finds already imported: the forkserver imports this module once per pool
owner and forks every worker from itself (``execution.process_context``).

Source: Python's ``multiprocessing`` forkserver start method and ``set_forkserver_preload``.  A spawned
worker starts a fresh interpreter and pays numpy, pydantic, scipy.special, numba and numba's CPU target
registries (~0.5 s: the first cached kernel loads them) again -- about 1.9 s per worker here, the constant C
of docs/scaling.md.  The forkserver is single-threaded when it forks (one BLAS thread: the pool sets
``execution.WORKER_THREAD_ENV`` before it starts), so forking it is safe where forking the caller -- which
may hold numba, BLAS or torch threads -- is not.

Only what every calibration unit and simulation batch uses on the CPU is preloaded: never torch (an SBI engine
imports it in the worker that needs it), matplotlib, pandas, ArviZ or Dask.
"""

from __future__ import annotations

from .long_lived import collector_paused

# the pre-fork recipe (long_lived.py): no collections while preloading (they find almost nothing), then the
# preloaded objects are frozen -- collected before the imports, not after (a collection after them cost 0.06-0.08 s
# of every pool's start-up for ~0.3 MB of import leftovers) -- so no worker's collections walk them (nor copy
# their pages on write)
with collector_paused(imports_only=True):
    import numpy  # noqa: F401
    import scipy.special  # noqa: F401

    from . import execution, families, release  # noqa: F401  (seeds; the family registry; pydantic and the schema)
    from .diagnostics import calibration, distance_kernels, metrics  # noqa: F401  (the MMD's distances: no scipy.spatial)
    from .inference import truncated  # noqa: F401  (numba, and scipy's special functions bound for the kernels)

    from numba.core.registry import cpu_target

    # numba's typing and lowering registries: loaded on the first compile or cache load of any kernel.
    # No family module: a study runs one family, and its worker imports it at its first unit (~0.02 s);
    # importing all eleven here cost every pool ~0.07 s
    cpu_target.target_context.refresh()
