"""What a ``processes`` worker finds already imported: the forkserver imports this module once per pool
owner and forks every worker from itself (``execution.process_context``; issue 29).

Source: Python's ``multiprocessing`` forkserver start method and ``set_forkserver_preload``.  A spawned
worker starts a fresh interpreter and pays numpy, pydantic, scipy.special, numba and numba's CPU target
registries (~0.5 s: the first cached kernel loads them) again -- about 1.9 s per worker here, the constant C
of docs/scaling.md.  The forkserver is single-threaded when it forks (one BLAS thread: the pool sets
``execution.WORKER_THREAD_ENV`` before it starts), so forking it is safe where forking the caller -- which
may hold numba, BLAS or torch threads -- is not.

Only what calibration units and simulation batches use on the CPU is preloaded: never torch (an SBI engine
imports it in the worker that needs it), matplotlib, pandas, ArviZ or Dask.
"""

from __future__ import annotations

from .long_lived import collector_paused

# the pre-fork recipe (long_lived.py): no collections while preloading (they find almost nothing), then the
# preloaded objects are frozen, so no worker's collections walk them (nor copy their pages on write)
with collector_paused():
    import numpy  # noqa: F401
    import scipy.special  # noqa: F401
    from scipy.spatial import distance  # noqa: F401  (diagnostics.metrics: the calibration studies' MMD)

    from . import release  # noqa: F401  (pydantic and the release schema)
    from .diagnostics import calibration  # noqa: F401
    from .families import FAMILY_MODULES
    from .inference import truncated  # noqa: F401  (numba, and scipy's special functions bound for the kernels)

    def _warm() -> None:
        import importlib

        from numba.core.registry import cpu_target

        # numba's typing and lowering registries: loaded on the first compile or cache load of any kernel
        cpu_target.target_context.refresh()
        for module in FAMILY_MODULES.values():  # the family modules are light (schemas, priors, simulators)
            try:
                importlib.import_module(module)
            except ImportError:  # an optional family (its own extra): the worker imports it if it runs it
                pass

    _warm()
