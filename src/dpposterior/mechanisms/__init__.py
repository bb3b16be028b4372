"""Release mechanisms: Laplace, Gaussian (classical and analytic), binomial trajectory, and the integer
mechanisms for counts: discrete Laplace and discrete Gaussian (zCDP; Canonne, Kamath & Steinke 2020).

The names a release file may use are registered in :mod:`.registry` (``MECHANISMS``); a new integer noise law
subclasses :class:`IntegerNoise` and is added with :func:`register` (docs/adding-a-mechanism.md).
"""

from .base import Mechanism
from .binomial_trajectory import BinomialTrajectory
from .discrete_gaussian import DiscreteGaussian
from .discrete_laplace import DiscreteLaplace
from .base import NoiseShape
from .gaussian import Gaussian, analytic_sigma, classical_sigma
from .integer import IntegerNoise
from .laplace import Laplace
from .noise import draw_noise
from .registry import MECHANISMS, from_record, get_mechanism, register

__all__ = ["Mechanism", "Laplace", "Gaussian", "BinomialTrajectory", "DiscreteGaussian", "DiscreteLaplace", "IntegerNoise",
           "NoiseShape", "analytic_sigma", "classical_sigma", "draw_noise", "from_record", "get_mechanism", "register",
           "MECHANISMS"]
