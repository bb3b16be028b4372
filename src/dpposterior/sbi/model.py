"""The simulator interface for simulation-based inference from DP releases.

Xiong, Ju & Zhang, *Simulation-based Bayesian Inference from Privacy Protected
Data* (Sec. 2-3): a model is a prior pi(theta), a confidential-data simulator
x ~ f(. | theta), a statistic s(x) and a public privacy mechanism eta(s_dp | s)
with its inverse-CDF transform tau(u, s) (Sec. 3.4).  No likelihood is ever
evaluated: SMC-ABC (App. C), SPPE (Algorithm 1) and SPLE (Algorithm 2) only call

* ``prior.sample(n, rng)`` -> (n, d) and ``prior.log_prob(theta)`` -> (n,),
* ``simulate(theta, rng)`` -> (n, r) confidential statistics s(x) (vectorised),
* ``mechanism.transform(u, s)`` / ``mechanism.sample(s, rng)``.

Parameters live in an unconstrained space R^d (the flows need it); ``outputs``
maps draws to the named posterior variables the family promises.

:class:`SimulatorModel` is the engines' internal view, not a second public model class.  A
user describes a model once as :class:`dpposterior.Model` (``dpposterior/model.py``: priors,
records, per-record statistic, mechanism, n) and ``dpposterior.infer(model, observed=...)``
builds this view with :meth:`dpposterior.Model.simulator_model` (constrained parameters mapped
to R^d with the Jacobian in the prior) for ``smc-abc``, ``sppe`` and ``sple`` -- see
docs/models.md.  The built-in simulator families construct it directly (their ``sbi_model``
hooks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy import special

from ..errors import InputError
from ..mechanisms.base import Mechanism


class GaussianPrior:
    """Multivariate normal prior N(mean, cov) on the unconstrained parameter."""

    def __init__(self, mean, cov):
        self.mean = np.atleast_1d(np.asarray(mean, float))
        self.cov = np.atleast_2d(np.asarray(cov, float))
        d = self.mean.size
        if self.cov.shape != (d, d):
            raise InputError("prior.cov", f"must be a {d}x{d} matrix")
        try:
            self._chol = np.linalg.cholesky(self.cov)
        except np.linalg.LinAlgError:
            raise InputError("prior.cov", "must be symmetric positive definite") from None
        from scipy import stats  # here: scipy.stats costs ~1 s and only a Gaussian prior needs it

        self._dist = stats.multivariate_normal(self.mean, self.cov)

    @property
    def dim(self) -> int:
        return self.mean.size

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        z = rng.standard_normal((n, self.dim))
        return self.mean + z @ self._chol.T

    def log_prob(self, theta) -> np.ndarray:
        theta = np.asarray(theta, float).reshape(-1, self.dim)
        return np.atleast_1d(self._dist.logpdf(theta))

    def __repr__(self):
        return f"GaussianPrior(mean={self.mean.tolist()}, cov={self.cov.tolist()})"


def alr_to_simplex(z):
    """Inverse additive log-ratio: z (..., J-1) -> p (..., J) with p_J the reference level."""
    z = np.asarray(z, float)
    zpad = np.concatenate([z, np.zeros(z.shape[:-1] + (1,))], axis=-1)
    return special.softmax(zpad, axis=-1)


def simplex_to_alr(p):
    p = np.asarray(p, float)
    return np.log(p[..., :-1]) - np.log(p[..., -1:])


class DirichletALRPrior:
    """Independent Dirichlet priors on several simplices, in additive log-ratio coordinates.

    ``alphas`` is a list of concentration vectors, one per simplex.  The density of
    z = ALR(p) is Dir(p; alpha) * |dp/dz| with |dp/dz| = prod_j p_j (all J parts),
    so log pi(z) = log Dir(p) + sum_j log p_j -- the Jacobian the flows need.
    """

    def __init__(self, alphas: Sequence[Sequence[float]]):
        self.alphas = [np.asarray(a, float) for a in alphas]
        for k, a in enumerate(self.alphas):
            if a.ndim != 1 or a.size < 2 or not np.all(np.isfinite(a)) or np.any(a <= 0):
                raise InputError(f"prior.alpha[{k}]", "must be a list of >= 2 positive numbers")
        self.slices = []
        start = 0
        for a in self.alphas:
            self.slices.append(slice(start, start + a.size - 1))
            start += a.size - 1

    @property
    def dim(self) -> int:
        return sum(a.size - 1 for a in self.alphas)

    def sample(self, n, rng):
        parts = [simplex_to_alr(np.clip(rng.dirichlet(a, size=n), 1e-300, None)) for a in self.alphas]
        return np.concatenate(parts, axis=1)

    def simplices(self, theta) -> list[np.ndarray]:
        theta = np.asarray(theta, float)
        return [alr_to_simplex(theta[..., sl]) for sl in self.slices]

    def log_prob(self, theta):
        theta = np.asarray(theta, float).reshape(-1, self.dim)
        total = np.zeros(len(theta))
        for a, sl in zip(self.alphas, self.slices):
            zpad = np.concatenate([theta[:, sl], np.zeros((len(theta), 1))], axis=1)
            logp = zpad - special.logsumexp(zpad, axis=1, keepdims=True)
            log_norm = special.gammaln(a.sum()) - special.gammaln(a).sum()
            # Dirichlet log-density plus the ALR Jacobian sum_j log p_j
            total += log_norm + ((a - 1.0) * logp).sum(axis=1) + logp.sum(axis=1)
        return total

    def __repr__(self):
        return f"DirichletALRPrior(alphas={[a.tolist() for a in self.alphas]})"


class NoiseIgnored(Mechanism):
    """The "mechanism" assumed by an analyst who ignores differential privacy: no noise.

    The release is taken at face value as the confidential statistic, on the scale the
    release is published in: s itself for additive mechanisms (Laplace, Gaussian), the
    proportion I(t)/K for the binomial trajectory mechanism (its s are counts out of K, its
    releases proportions; the smoothing m is part of the DP mechanism and is ignored too).
    Used by the ``naive`` SBI method (:mod:`dpposterior.sbi.naive`) and by the
    calibration studies as the method that must fail.
    """

    name = "none"

    def __init__(self, mechanism: Mechanism):
        self.mechanism = mechanism

    def noise_free(self, s) -> np.ndarray:
        from ..mechanisms import BinomialTrajectory

        s = np.asarray(s, float)
        if isinstance(self.mechanism, BinomialTrajectory):
            return s / self.mechanism.population
        return s

    def sample(self, s, rng=None) -> np.ndarray:
        return self.noise_free(s)

    def transform(self, u, s) -> np.ndarray:
        value = self.noise_free(s)
        return np.broadcast_to(value, np.broadcast_shapes(value.shape, np.shape(u))).copy()

    def logpdf(self, y, s) -> np.ndarray:
        # a point mass at the noise-free value
        return np.where(np.asarray(y, float) == self.noise_free(s), 0.0, -np.inf)

    def privacy_cost(self):
        return (float("inf"), 0.0)

    def __repr__(self):
        return f"NoiseIgnored({self.mechanism!r})"


#: simulations per batch on an executor (``dpposterior infer --scheduler``); part of the random stream
SIM_BATCH = 250


@dataclass
class SimulatorModel:
    """Prior + vectorised simulator of s(x) + mechanism + observed release (no likelihood).

    ``simulate(theta (n, d), rng) -> s (n, r)`` may be given directly, or as
    ``simulator(theta, rng) -> x`` composed with ``statistic(x) -> s``.
    """

    prior: Any
    mechanism: Mechanism
    observed: Any
    simulate: Callable[[np.ndarray, np.random.Generator], np.ndarray] | None = None
    simulator: Callable[[np.ndarray, np.random.Generator], Any] | None = None
    statistic: Callable[[Any], np.ndarray] | None = None
    parameter_names: list[str] = field(default_factory=list)
    #: theta draws (n, d) -> (posterior dict of arrays with leading n, dims, coords)
    outputs: Callable[[np.ndarray], tuple[dict, dict, dict]] | None = None
    name: str = "model"
    #: variable -> true value for NLOG (unconstrained theta), if known
    truth: np.ndarray | None = None

    def __post_init__(self):
        self.observed = np.atleast_1d(np.asarray(self.observed, float)).ravel()
        if self.simulate is None:
            if self.simulator is None or self.statistic is None:
                raise InputError("model", "give simulate(theta, rng) or both simulator and statistic")
        if not self.parameter_names:
            self.parameter_names = [f"theta_{i}" for i in range(self.prior.dim)]

    @property
    def dim(self) -> int:
        return int(self.prior.dim)

    @property
    def stat_dim(self) -> int:
        return int(self.observed.size)

    def statistics(self, theta, rng) -> np.ndarray:
        """Confidential statistics s(x), x ~ f(. | theta), shape (n, r).

        Inside ``dpposterior.infer`` (``--scheduler``) the simulations run in
        batches of ``SIM_BATCH`` on the current executor, each batch with its own
        ``SeedSequence`` child of one draw from ``rng``: identical on every backend.
        """
        from ..execution import current_executor, map_batches

        theta = np.asarray(theta, float).reshape(-1, self.dim)
        ex = current_executor()
        if ex is not None and len(theta):
            return map_batches(self._batch_statistics, theta, seed=int(rng.integers(2**63)),
                               batch_size=SIM_BATCH, ex=ex)
        return self._batch_statistics(theta, rng)

    def _batch_statistics(self, theta, rng) -> np.ndarray:
        if self.simulate is not None:
            s = self.simulate(theta, rng)
        else:
            s = self.statistic(self.simulator(theta, rng))
        s = np.asarray(s, float).reshape(len(theta), -1)
        if s.shape[1] != self.stat_dim:
            raise ValueError(f"simulator returned {s.shape[1]} statistics, the release has {self.stat_dim}")
        return s

    def privatize(self, s, rng) -> np.ndarray:
        """One release per statistic (noise drawn inside the simulator)."""
        return np.asarray(self.mechanism.sample(s, rng), float)

    def privatize_u(self, s, u) -> np.ndarray:
        """tau(u, s): releases from uniforms u, broadcast over leading axes (eq. 11)."""
        return np.asarray(self.mechanism.transform(u, s), float)

    def without_noise(self) -> "SimulatorModel":
        """The same model with the privacy mechanism ignored (s_dp taken as the noise-free s)."""
        if isinstance(self.mechanism, NoiseIgnored):
            return self
        return dataclasses.replace(self, mechanism=NoiseIgnored(self.mechanism),
                                   name=f"{self.name} (noise ignored)")

    def posterior_variables(self, theta) -> tuple[dict, dict, dict]:
        theta = np.asarray(theta, float)
        if self.outputs is not None:
            return self.outputs(theta)
        post = {name: theta[:, i] for i, name in enumerate(self.parameter_names)}
        return post, {}, {}

    def observation_model(self, family: str | None = None):
        """The model as an :class:`~dpposterior.observation.ObservationModel`: the variables of its posterior
        (as :meth:`posterior_variables` names them; support ``real``, the map from the unconstrained theta being
        the model's own), its prior (draws in those variables; its log density is on theta, not on them), a
        latent statistic that offers simulation only and one measurement, the observed release of the simulated
        statistic through the mechanism.  The SBI engines name their draws through its ``pack``; it adds no
        attrs.  ``family``: the name the posterior carries (default the model's name)."""
        from ..observation import SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior, Variable

        # the variables read off one unconstrained theta of zeros: posterior_variables is the one map
        arrays, dims, coords = self.posterior_variables(np.zeros((1, self.dim)))
        variables = [Variable.from_draw(name, arr, 1, dims, coords) for name, arr in arrays.items()]

        def sample(rng) -> dict:
            drawn, _, _ = self.posterior_variables(self.prior.sample(1, rng))
            return {k: np.asarray(v)[0] for k, v in drawn.items()}

        prior = Prior(sample, {"prior": repr(self.prior)}, None, repr(self.prior))
        latent = LatentStatistic(f"the simulated statistic of model {self.name!r}", frozenset({SIMULATE}), self)
        measurement = Measurement("observed", self.observed, SimulatedStatistic(self.stat_dim), self.mechanism)
        return ObservationModel(family or self.name, tuple(variables), prior, latent, (measurement,))


class SimulatedStatistic:
    """Query of a :class:`SimulatorModel`'s measurement: the simulated statistic s itself (the ``r`` numbers the
    mechanism perturbed; the simulator gives s, not records)."""

    def __init__(self, r: int):
        self.shape = (int(r),)

    def __call__(self, statistic) -> np.ndarray:
        return np.asarray(statistic, float).reshape(self.shape)
