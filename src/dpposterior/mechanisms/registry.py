"""The mechanisms a release file may name, in one place (docs/architecture.md).

A statistic record's ``mechanism`` string is looked up here -- by the release schema
(``release.StatisticRecord``), by :func:`from_record` and by the curator's noise draw
(``mechanisms.draw_noise``).  Each class brings its own record parsing (``from_record``), noise
scale and noise samplers (numpy, seeded; OpenDP, for publication).  Adding a mechanism is one
module and one entry below (docs/adding-a-mechanism.md); families and engines opt in to it.
"""

from __future__ import annotations

from ..errors import InputError
from .base import Mechanism
from .binomial_trajectory import BinomialTrajectory
from .discrete_gaussian import DiscreteGaussian
from .discrete_laplace import DiscreteLaplace
from .gaussian import Gaussian
from .laplace import Laplace

#: release-file name -> mechanism class
MECHANISMS: dict[str, type[Mechanism]] = {cls.name: cls for cls in (Laplace, Gaussian, BinomialTrajectory,
                                                                  DiscreteLaplace, DiscreteGaussian)}


def get_mechanism(name, field: str = "mechanism") -> type[Mechanism]:
    """The class registered under ``name``; a one-line error naming ``field`` otherwise."""
    if not isinstance(name, str) or name not in MECHANISMS:
        raise InputError(field, f"unknown mechanism {name!r} (one of: {', '.join(MECHANISMS)})")
    return MECHANISMS[name]


def from_record(record, sensitivity: float | None = None) -> Mechanism:
    """Build the mechanism described by a release's statistic record (see ``release.py``)."""
    return get_mechanism(record.mechanism).from_record(record, sensitivity)
