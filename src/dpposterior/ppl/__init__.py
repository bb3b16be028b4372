"""Differential-privacy noise laws inside the probabilistic programming languages (docs/ppl.md).

``dpposterior.ppl.numpyro`` and ``dpposterior.ppl.pymc`` give the same names, each in its own language:
``DiscreteGaussian(loc, sigma)``, ``DiscreteLaplace(loc, scale)``, ``Noise(name, loc=..., **fields)`` (any
registered noise law), ``NoisyCount(count, noise)`` (a latent count plus integer noise, the count summed out
exactly over the window that holds all but ``tail`` of the noise) and ``NoisySum(n, mean, sd, noise)`` (a
clamped sum by its central limit plus Laplace or Gaussian noise, convolved in closed form).  Each is imported
only when used; this package itself needs numpy only.

:func:`from_release` reads a release file into its observed values and noise laws.
"""

from ._laws import DEFAULT_TAIL, NoiseLaw
from ._release import ReleaseData, ReleasedTable, from_release

__all__ = ["DEFAULT_TAIL", "NoiseLaw", "ReleaseData", "ReleasedTable", "from_release"]
