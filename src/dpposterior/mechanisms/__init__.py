"""Release mechanisms: Laplace, Gaussian (classical and analytic), binomial trajectory."""

from .base import Mechanism
from .binomial_trajectory import BinomialTrajectory
from .gaussian import Gaussian, analytic_sigma, classical_sigma
from .laplace import Laplace
from .noise import draw_noise

__all__ = ["Mechanism", "Laplace", "Gaussian", "BinomialTrajectory", "analytic_sigma",
           "classical_sigma", "draw_noise", "from_record"]


def from_record(record, sensitivity: float | None = None) -> Mechanism:
    """Build the mechanism described by a release's statistic record (see ``release.py``)."""
    if record.mechanism == "laplace":
        return Laplace(record.epsilon, sensitivity if sensitivity is not None else record.sensitivity)
    if record.mechanism == "gaussian":
        if record.sigma is not None:
            return Gaussian(record.sigma, record.epsilon, record.delta, record.sensitivity)
        return Gaussian.calibrated(record.epsilon, record.delta,
                                   sensitivity if sensitivity is not None else record.sensitivity)
    raise ValueError(f"mechanism: {record.mechanism!r} has no generic builder")
