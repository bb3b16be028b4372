"""Family ``sir``: stochastic SIR epidemic released through the binomial trajectory mechanism.

Xiong, Ju & Zhang Sec. 4.1, Prop. 4 and App. E.1.  Parameters theta =
(log beta, log gamma) with priors log beta ~ N(log 0.4, 0.5) and
log gamma ~ N(log 0.125, 0.2) (variances).  Confidential data: the Markov jump
process of :mod:`dpposterior.sbi.sir_simulator` (K = 10^6, start (K-1, 1, 0),
at most 2,000,000 events), observed as I(t) at t = 0, 17, ..., 153.  Release:
s_i = Binomial(N, (I(t_i) + m)/(K + 2m)) / N, N = 1000, m = N L / epsilon.
Output variables ``log_beta``, ``log_gamma`` and ``R0`` = beta / gamma.

Release file::

    {"format": "dpposterior-release/1", "family": "sir", "population": 1000000,
     "initial_infected": 1, "times": [0, 17, ..., 153], "event_cap": 2000000,
     "statistics": {"infected": {"value": [10 numbers in [0, 1]], "mechanism": "binomial-trajectory",
                                 "epsilon": 10.0, "trials": 1000, "m": 1000.0}}}
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Annotated

from ..errors import InputError
from ..inference.sbi_common import sbi_family
from ..mechanisms import BinomialTrajectory
from ..release import FiniteFloat, ReleaseBase, StatisticRecord
from ..sbi import GaussianPrior, SimulatorModel
from ..sbi.sir_simulator import simulate_sir
from . import SimulatedRelease

DEFAULT_TIMES = [float(t) for t in range(0, 154, 17)]
PRIOR_MEAN = (float(np.log(0.4)), float(np.log(0.125)))
PRIOR_VARIANCE = (0.5, 0.2)


class SIRStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    infected: StatisticRecord


class SIRRelease(ReleaseBase):
    family: Literal["sir"]
    population: Annotated[int, Field(strict=True, ge=2)] = 1_000_000
    initial_infected: Annotated[int, Field(strict=True, ge=1)] = 1
    times: list[FiniteFloat] = Field(default_factory=lambda: list(DEFAULT_TIMES))
    event_cap: Annotated[int, Field(strict=True, ge=1)] = 2_000_000
    statistics: SIRStatistics

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.infected
        times = np.asarray(self.times, float)
        if times.size < 1 or np.any(times < 0) or np.any(np.diff(times) <= 0):
            raise ValueError("times must be non-negative and strictly increasing")
        if self.initial_infected > self.population:
            raise ValueError("initial_infected must be <= population")
        if rec.mechanism != "binomial-trajectory":
            raise ValueError("statistics.infected.mechanism must be 'binomial-trajectory'")
        if rec.trials is None:
            raise ValueError("statistics.infected.trials (binomial N) is required")
        value = rec.array()
        if value.shape != times.shape:
            raise ValueError(f"statistics.infected.value must have one entry per time ({times.size})")
        if np.any(value < 0) or np.any(value > 1):
            raise ValueError("statistics.infected.value must lie in [0, 1] (binomial proportions)")
        k = value * rec.trials
        if np.any(np.abs(k - np.rint(k)) > 1e-6 * rec.trials):
            raise ValueError("statistics.infected.value must be multiples of 1/trials")
        m_implied = rec.trials * times.size / rec.epsilon
        if rec.m is not None and not np.isclose(rec.m, m_implied, rtol=1e-6):
            raise ValueError(f"statistics.infected: m = {rec.m:g} disagrees with epsilon = N L / m "
                             f"(N L / epsilon = {m_implied:g})")
        return self

    def mechanism(self) -> BinomialTrajectory:
        rec = self.statistics.infected
        return BinomialTrajectory(self.population, rec.trials, len(self.times), epsilon=rec.epsilon)


def parse_prior(prior, release=None):
    if prior is None:
        return GaussianPrior(PRIOR_MEAN, np.diag(PRIOR_VARIANCE))
    if isinstance(prior, GaussianPrior):
        if prior.dim != 2:
            raise InputError("prior", "must be a 2-dimensional Gaussian prior on (log beta, log gamma)")
        return prior
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table with log_beta_mean, log_beta_variance, ...")
    keys = {"log_beta_mean": PRIOR_MEAN[0], "log_beta_variance": PRIOR_VARIANCE[0],
            "log_gamma_mean": PRIOR_MEAN[1], "log_gamma_variance": PRIOR_VARIANCE[1]}
    unknown = set(prior) - set(keys) - {"kind"}
    if unknown:
        raise InputError(f"prior.{sorted(unknown)[0]}", f"unknown key (use {', '.join(keys)})")
    vals = {}
    for key, default in keys.items():
        v = prior.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise InputError(f"prior.{key}", "must be a finite number")
        if key.endswith("variance") and v <= 0:
            raise InputError(f"prior.{key}", "must be > 0")
        vals[key] = float(v)
    return GaussianPrior([vals["log_beta_mean"], vals["log_gamma_mean"]],
                         np.diag([vals["log_beta_variance"], vals["log_gamma_variance"]]))


def _outputs(theta):
    return ({"log_beta": theta[:, 0], "log_gamma": theta[:, 1], "R0": np.exp(theta[:, 0] - theta[:, 1])},
            {}, {})


def sbi_model(release: SIRRelease, prior) -> SimulatorModel:
    times = np.asarray(release.times, float)

    def simulate(theta, rng):
        return simulate_sir(np.exp(theta[:, 0]), np.exp(theta[:, 1]), rng, release.population,
                            release.initial_infected, times, release.event_cap).astype(float)

    return SimulatorModel(prior=prior, mechanism=release.mechanism(), observed=release.statistics.infected.array(),
                          simulate=simulate, parameter_names=["log_beta", "log_gamma"], outputs=_outputs,
                          name="sir")


def make_release(values, epsilon: float, trials: int = 1000, population: int = 1_000_000, times=None,
                 description: str | None = None) -> dict:
    times = list(DEFAULT_TIMES if times is None else times)
    rel = {"format": "dpposterior-release/1", "family": "sir", "population": population, "initial_infected": 1,
           "times": times, "event_cap": 2_000_000,
           "statistics": {"infected": {"value": [float(v) for v in values], "mechanism": "binomial-trajectory",
                                       "epsilon": float(epsilon), "trials": int(trials),
                                       "m": trials * len(times) / float(epsilon)}}}
    if description:
        rel["description"] = description
    return rel


def simulate(prior, n, epsilon, rng) -> SimulatedRelease:
    """Calibration hook: ``n`` is the population K."""
    from ..release import load_release

    prior = parse_prior(prior)
    theta = prior.sample(1, rng)
    counts = simulate_sir(np.exp(theta[:, 0]), np.exp(theta[:, 1]), rng, population=n)[0]
    mech = BinomialTrajectory(n, 1000, len(DEFAULT_TIMES), epsilon=epsilon)
    rel = make_release(mech.sample(counts, rng), epsilon, population=n)
    return SimulatedRelease(theta={"log_beta": theta[0, 0], "log_gamma": theta[0, 1]},
                            release=load_release(rel), confidential={"infected": counts})


FAMILY = sbi_family("sir", SIRRelease, parse_prior, simulate, sbi_model,
                    "stochastic SIR epidemic, binomial trajectory mechanism (Xiong, Ju & Zhang Sec. 4.1)")
