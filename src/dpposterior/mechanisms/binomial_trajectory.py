"""Binomial infection-trajectory mechanism (Xiong, Ju & Zhang, Proposition 4).

For infected counts I(t_1..t_L) of a population of size K, release
s_i = Binomial(N, (I(t_i) + m) / (K + 2m)) / N independently.  It is
epsilon-DP with epsilon = N L / m (App. B), so m = N L / epsilon.
The release lives on the grid {0, 1/N, ..., 1}; ``logpdf`` is a log-mass.
"""

from __future__ import annotations

import numpy as np

from ..errors import require
from .base import Mechanism, as_rng


class BinomialTrajectory(Mechanism):
    name = "binomial-trajectory"

    def __init__(self, population: int, trials: int, points: int, epsilon: float | None = None,
                 m: float | None = None):
        """``population`` = K, ``trials`` = N, ``points`` = L; give ``epsilon`` or ``m``."""
        require(int(population) >= 1, "population", "must be >= 1")
        require(int(trials) >= 1, "trials", "must be >= 1")
        require(int(points) >= 1, "points", "must be >= 1")
        self.population = int(population)
        self.trials = int(trials)
        self.points = int(points)
        if m is None:
            require(epsilon is not None and np.isfinite(epsilon) and epsilon > 0,
                    "epsilon", "must be a finite number > 0")
            m = self.trials * self.points / float(epsilon)
        require(np.isfinite(m) and m > 0, "m", "must be a finite number > 0")
        self.m = float(m)
        self.epsilon = self.trials * self.points / self.m

    def success_prob(self, s):
        return (np.asarray(s, float) + self.m) / (self.population + 2.0 * self.m)

    def sample(self, s, rng=None):
        p = self.success_prob(s)
        return as_rng(rng).binomial(self.trials, p) / self.trials

    def logpdf(self, y, s):
        k = np.rint(np.asarray(y, float) * self.trials)
        from scipy import stats  # here, not at import: scipy.stats costs ~1 s (docs/architecture.md)

        return stats.binom.logpmf(k, self.trials, self.success_prob(s))

    def transform(self, u, s):
        from scipy import stats

        k = stats.binom.ppf(np.asarray(u, float), self.trials, self.success_prob(s))
        return k / self.trials

    def privacy_cost(self):
        return (self.epsilon, 0.0)

    # the audit: sup norm (base class); the Prop. 4 bound assumes |I(t) - I'(t)| <= 1 at every t
    @classmethod
    def audit_noise(cls, release, record):
        eps = float(record["epsilon"])
        mech = cls(release["population"], int(record["trials"]), len(record["value"]), epsilon=eps)
        return eps, 0.0, mech, 1.0

    @classmethod
    def audit_epsilon(cls, noise, sensitivity):
        mech = noise[2]
        return mech.trials * mech.points * sensitivity / mech.m

    @classmethod
    def audit_log_density(cls, noise, out, s):
        return noise[2].logpdf(out, s).sum(-1)

    def __repr__(self):
        return (f"BinomialTrajectory(K={self.population}, N={self.trials}, L={self.points}, "
                f"m={self.m:g}, epsilon={self.epsilon:g})")
