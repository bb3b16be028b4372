"""dpposterior: valid Bayesian inference from differentially private releases.

The data flow is the architecture::

    mechanisms -> release file -> family (model + prior) -> inference engine -> Posterior (ArviZ) -> report

Entry point: :func:`infer` (``dpposterior.api``); the rooms and what each may import:
docs/architecture.md.
"""

from ._version import __version__
from .errors import InputError, PosteriorWarning, RefusedError  # noqa: E402
from .api import infer  # noqa: E402
from .options import InferenceOptions  # noqa: E402
from .model import Model  # noqa: E402
from .posterior import Posterior  # noqa: E402
from .release import load_release  # noqa: E402

__all__ = ["infer", "Model", "load_release", "Posterior", "InferenceOptions", "InputError", "RefusedError",
           "PosteriorWarning", "__version__"]
