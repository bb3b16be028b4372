"""dpposterior: valid Bayesian inference from differentially private releases.

The data flow is the architecture::

    mechanisms -> release file -> family (model + prior) -> inference engine -> Posterior (ArviZ) -> report

Entry points: :func:`infer` (``dpposterior.api``), the analyst's; :func:`release_from_csv` and
:func:`release_from_measurements` (``dpposterior.curator_api``), the curator's; the rooms and what each may import:
docs/architecture.md.
"""

from ._version import __version__
from .errors import InputError, MemoryRefusedError, PosteriorWarning, RefusedError  # noqa: E402

#: the public names, imported on first use (PEP 562): ``import dpposterior`` and ``dpposterior --help``
#: load neither numpy nor pydantic, and a command imports only what it runs (docs/architecture.md,
#: "Imports stay light").  ``from dpposterior import infer`` imports the orchestrator as before.
_LAZY = {"infer": "api", "InferenceOptions": "options", "Model": "model", "Posterior": "posterior",
         "load_release": "release", "release_from_csv": "curator_api", "release_from_measurements": "curator_api",
         "synthesize": "synthetic", "combine": "combine"}

__all__ = ["infer", "Model", "load_release", "release_from_csv", "release_from_measurements", "Posterior",
           "synthesize", "combine",
           "InferenceOptions", "InputError", "RefusedError", "MemoryRefusedError", "PosteriorWarning", "__version__"]


def __getattr__(name):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    try:  # a subpackage or module, e.g. dpposterior.mechanisms after a bare ``import dpposterior``
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
