"""Release mechanisms: Laplace, Gaussian (classical and analytic), binomial trajectory.

The names a release file may use are registered in :mod:`.registry` (``MECHANISMS``).
"""

from .base import Mechanism
from .binomial_trajectory import BinomialTrajectory
from .gaussian import Gaussian, analytic_sigma, classical_sigma
from .laplace import Laplace
from .noise import draw_noise
from .registry import MECHANISMS, from_record, get_mechanism

__all__ = ["Mechanism", "Laplace", "Gaussian", "BinomialTrajectory", "analytic_sigma",
           "classical_sigma", "draw_noise", "from_record", "get_mechanism", "MECHANISMS"]
