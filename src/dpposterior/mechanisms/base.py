"""Common interface of the release mechanisms (``scipy.stats``-like).

A mechanism maps a confidential statistic ``s`` (array, last axis = coordinates)
to a released value.  Every mechanism offers

* ``sample(s, rng)``      -- draw a release,
* ``logpdf(y, s)``        -- elementwise log-density (or log-mass) of released ``y`` given ``s``,
* ``transform(u, s)``     -- the inverse-CDF map tau(u, s) from uniforms ``u`` in [0,1]^r,
  so that ``transform(U, s)`` with ``U ~ Uniform`` has the law of ``sample(s)``
  (Xiong, Ju & Zhang, eq. 11: it lets randomized quasi-Monte Carlo integrate the noise),
* ``privacy_cost()``      -- the (epsilon, delta) it spends.

All methods broadcast ``y``, ``s`` and ``u`` with numpy rules, so leading axes can
be chains, trials or RQMC replicates.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Mechanism(ABC):
    name: str = "mechanism"

    @abstractmethod
    def sample(self, s, rng: np.random.Generator | None = None) -> np.ndarray:
        """Draw one release for each statistic in ``s``."""

    @abstractmethod
    def logpdf(self, y, s) -> np.ndarray:
        """Elementwise log-density of the released value ``y`` given the true ``s``."""

    @abstractmethod
    def transform(self, u, s) -> np.ndarray:
        """Inverse-CDF transform tau(u, s); ``u`` has the shape of the release."""

    @abstractmethod
    def privacy_cost(self) -> tuple[float, float]:
        """(epsilon, delta) spent by one release."""

    def log_likelihood(self, y, s, axis=-1) -> np.ndarray:
        """Sum of :meth:`logpdf` over the coordinate axis."""
        return np.sum(self.logpdf(y, s), axis=axis)


def as_rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)
