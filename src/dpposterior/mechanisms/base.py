"""Common interface of the release mechanisms (``scipy.stats``-like).

A mechanism maps a confidential statistic ``s`` (array, last axis = coordinates)
to a released value.  Every mechanism offers

* ``sample(s, rng)``      -- draw a release,
* ``logpdf(y, s)``        -- elementwise log-density (or log-mass) of released ``y`` given ``s``,
* ``transform(u, s)``     -- the inverse-CDF map tau(u, s) from uniforms ``u`` in [0,1]^r,
  so that ``transform(U, s)`` with ``U ~ Uniform`` has the law of ``sample(s)``
  (Xiong, Ju & Zhang, eq. 11: it lets randomized quasi-Monte Carlo integrate the noise),
* ``privacy_cost()``      -- the (epsilon, delta) it spends,

and, for the registry (``mechanisms/registry.py``), its release-file side:

* ``from_record(record, sensitivity=None)`` -- the mechanism a release's statistic record states,
* ``noise_scale``         -- the scale of its noise (Laplace b, Gaussian sigma),
* ``numpy_noise(scale, shape, rng)`` / ``opendp_noise(values, scale)`` -- the curator's noise draw
  (seeded and reproducible / OpenDP's floating-point-safe sampler; ``mechanisms.draw_noise``).

and, for ``dpposterior audit`` (``privacy.py``), its privacy accounting: ``sensitivity_norm``/``norm``,
``audit_noise``, ``audit_epsilon`` and ``audit_log_density``.

All methods broadcast ``y``, ``s`` and ``u`` with numpy rules, so leading axes can
be chains, trials or RQMC replicates.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod

import numpy as np


class NoiseShape(enum.Enum):
    """The form of an additive noise law's log-density (or log-mass on the integers) up to a constant: what an
    engine with a closed form or a compiled sweep for that form asks for, instead of a mechanism's name."""

    #: log p(d) = -|d| / b + const (Laplace, discrete Laplace)
    LAPLACE = "laplace-shaped"
    #: log p(d) = -d^2 / (2 sigma^2) + const (Gaussian, discrete Gaussian)
    GAUSSIAN = "gaussian-shaped"


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

    #: whether released values are integers (integer noise on an integer statistic)
    integer_valued: bool = False
    #: whether the noise is additive, symmetric about 0 and log-concave in its argument (so a window
    #: |y - s| <= W bounds the mass outside it by the density at W: the exact count engines need it)
    additive_symmetric: bool = False

    def privacy_losses(self, shifts) -> tuple | None:
        """The worst neighbouring pair as :class:`~dpposterior.mechanisms.accounting.Loss` components, one per
        coordinate moved by ``shifts``; None where this mechanism has no privacy loss distribution."""
        return None

    def privacy_accounting(self, delta: float | None = None, dim: int = 1, shifts=None):
        """:class:`~dpposterior.mechanisms.accounting.PrivacyCost` of one release (``dim`` coordinates; ``shifts``:
        the coordinates' moves in the worst neighbouring pair, default the sensitivity for one coordinate and
        unit moves for an integer vector); ``delta`` is where a zCDP mechanism reports its (epsilon, delta)."""
        from .accounting import PrivacyCost

        eps, dlt = self.privacy_cost()
        shifts = self.worst_shifts(dim, shifts)
        losses = (self.privacy_losses(shifts) if shifts else None) or ()
        return PrivacyCost(float(eps), float(dlt), None, "approximate" if dlt > 0 else "pure",
                           "approximate (epsilon, delta)-DP" if dlt > 0 else "pure epsilon-DP", losses=losses)

    def worst_shifts(self, dim: int = 1, shifts=None, sensitivity: float | None = None) -> tuple | None:
        """The coordinates' moves in the worst neighbouring pair: ``shifts`` as given; else ``sensitivity`` (default:
        this mechanism's) for one coordinate, and unit moves of that norm for an integer vector
        (``accounting.unit_shifts``); None where they are not known."""
        if shifts is not None:
            return tuple(float(s) for s in shifts)
        sens = getattr(self, "sensitivity", None) if sensitivity is None else sensitivity
        if not sens:
            return None
        if dim == 1:
            return (float(sens),)
        if self.integer_valued:
            from .accounting import unit_shifts

            return unit_shifts(float(sens), self.sensitivity_norm)
        return None

    def tail_window(self, tail: float = 1e-12) -> float:
        """A half-width W with P(|noise| > W) <= tail (additive mechanisms)."""
        raise ValueError(f"mechanism: {self.name!r} has no additive noise window")

    #: the form of the noise's log-density (:class:`NoiseShape`); None: neither Laplace- nor Gaussian-shaped
    noise_shape: NoiseShape | None = None
    #: accounted natively in zCDP (rho = sensitivity^2 / (2 sigma^2)): the curator's ``--rho`` sets its noise
    accounts_rho: bool = False

    def log_mass_shape(self):
        """(NoiseShape, scale) when log p(y | s) is -|y - s|/scale or -(y - s)^2/(2 scale^2) up to a constant on the
        release's support -- what the compiled sweeps need; None otherwise."""
        if self.noise_shape is None:
            return None
        return (self.noise_shape, self.noise_scale)

    # ------------------------------------------------------------------ the release-file side
    @classmethod
    def check_record(cls, record) -> None:
        """Refuse a statistic record whose fields do not describe this mechanism (ValueError, field first).

        The default: an (epsilon, delta) mechanism; ``rho`` belongs to zCDP mechanisms only."""
        if record.epsilon is None:
            raise ValueError(f"epsilon: is required by mechanism {cls.name!r}")
        if getattr(record, "rho", None) is not None:
            raise ValueError(f"rho: not a field of mechanism {cls.name!r} (only discrete-gaussian is accounted in rho)")

    @classmethod
    def from_record(cls, record, sensitivity: float | None = None) -> "Mechanism":
        """The mechanism described by a release's statistic record (``release.StatisticRecord``)."""
        raise ValueError(f"mechanism: {cls.name!r} has no generic builder (its family builds it)")

    @property
    def noise_scale(self) -> float:
        """The scale of the noise (Laplace b, Gaussian sigma)."""
        raise ValueError(f"mechanism: {self.name!r} has no single noise scale")

    @property
    def noise_variance(self) -> float:
        """Var(noise) of an additive mechanism."""
        raise ValueError(f"mechanism: {self.name!r} has no additive noise variance")

    @classmethod
    def with_scale(cls, scale: float) -> "Mechanism":
        """The mechanism of this law whose :attr:`noise_scale` is ``scale`` (a law with one scale parameter: a
        table whose cells differ only in their noise scale is described by it)."""
        raise ValueError(f"mechanism: {cls.name!r} has no single scale parameter")

    # ------------------------------------------------------------------ the privacy audit's side
    #: the norm its sensitivity is measured in (``dpposterior audit``): "L1", "L2" or "Linf"
    sensitivity_norm: str = "Linf"

    @staticmethod
    def norm(diff: np.ndarray) -> float:
        """``diff``'s size in :attr:`sensitivity_norm` (here the sup norm)."""
        return float(np.abs(diff).max()) if diff.size else 0.0

    @classmethod
    def audit_noise(cls, release: dict, record: dict) -> tuple:
        """(epsilon, delta, scale, recorded sensitivity) of a statistic record as released (a dict);
        ``scale`` is whatever :meth:`audit_epsilon` and :meth:`audit_log_density` need."""
        from ..errors import InputError

        raise InputError("audit", f"no audit for mechanism {cls.name!r}")

    @classmethod
    def audit_epsilon(cls, noise: tuple, sensitivity: float) -> float:
        """The epsilon this noise gives a statistic of ``sensitivity`` (at the noise's delta)."""
        raise NotImplementedError

    @classmethod
    def audit_log_density(cls, noise: tuple, out: np.ndarray, s: np.ndarray) -> np.ndarray:
        """log p(out | s) up to a constant in ``s``, summed over the last axis (the empirical test)."""
        raise NotImplementedError

    #: the noise law of its privacy loss distribution (``accounting.Loss.kind``); None: it has none
    loss_kind: str | None = None

    @classmethod
    def audit_losses(cls, noise: tuple, diff: np.ndarray):
        """The privacy loss components of a found neighbouring pair (``diff`` = s(D) - s(D'), one entry per
        coordinate) under the recorded noise (its scale: ``noise[2]``); None where the mechanism has no
        privacy loss distribution."""
        if cls.loss_kind is None:
            return None
        from .accounting import Loss

        return tuple(Loss(cls.loss_kind, float(noise[2]), float(abs(d))) for d in np.ravel(diff) if abs(d) > 0)

    @classmethod
    def noise_for_budget(cls, sensitivity: float, epsilon: float | None = None,
                         rho: float | None = None) -> tuple[float, dict]:
        """(noise scale, the record's budget fields) of a statistic of ``sensitivity`` (in :attr:`sensitivity_norm`)
        released at the budget this mechanism is accounted in: ``epsilon`` here, ``rho`` for one accounted in rho
        (:attr:`accounts_rho`, which overrides this) -- what a curator draws (``draw_noise(name, values, scale)``)
        and writes beside the value.  Callers pass the budget they have; the mechanism takes its own."""
        if epsilon is None:
            from ..errors import InputError

            raise InputError("epsilon", f"is the budget of mechanism {cls.name!r}")
        return float(sensitivity) / float(epsilon), {"epsilon": float(epsilon)}

    @classmethod
    def numpy_noise(cls, scale: float, shape, rng: np.random.Generator) -> np.ndarray:
        """Seeded (reproducible, not for publication) additive noise of ``scale``."""
        raise ValueError(f"mechanism: cannot draw noise for {cls.name!r}")

    @classmethod
    def publication_sampler(cls) -> str:
        """The ``sampler`` string of :meth:`opendp_noise`'s draws (a release records which sampler drew it)."""
        return opendp_sampler_name()

    @classmethod
    def opendp_noise(cls, values: np.ndarray, scale: float) -> np.ndarray:
        """``values`` plus OpenDP's (floating-point-safe) noise of ``scale``."""
        raise ValueError(f"mechanism: cannot draw noise for {cls.name!r}")


def as_rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)


def opendp_vector(values, make_measurement) -> np.ndarray:
    """Apply an OpenDP measurement over float vectors (``make_measurement(domain)``) to ``values``."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = np.asarray(values, dtype=float)
    meas = make_measurement(dp.vector_domain(dp.atom_domain(T=float, nan=False)))
    flat = [float(v) for v in values.ravel()]
    return np.asarray(meas(flat), dtype=float).reshape(values.shape)


def opendp_sampler_name() -> str:
    """'opendp-VERSION': the sampler string of OpenDP's draws."""
    import opendp

    version = getattr(opendp, "__version__", None)
    if version is None:  # opendp 0.16 has no __version__; the installed distribution knows it
        from importlib.metadata import PackageNotFoundError, version as dist_version

        try:
            version = dist_version("opendp")
        except PackageNotFoundError:  # pragma: no cover
            version = "unknown"
    return f"opendp-{version}"
