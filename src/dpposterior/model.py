"""``dpposterior.Model``: bring your own model of the confidential records.

The private-data posterior of Ju, Awan, Gong & Rao (NeurIPS 2022) and Xiong, Ju &
Zhang (TMLR, eqs. 2-3) needs four ingredients, and a :class:`Model` is exactly those:

* a prior pi(theta)                      -- ``params``: name -> prior (scipy frozen distribution,
  or any object with ``rvs(size=, random_state=)`` and ``logpdf``);
* a record model x_i ~ f(. | theta)       -- ``records(theta, size, rng)`` (and, when it can be
  evaluated, ``record_logpdf(records, theta)``);
* a statistic s = sum_i t(x_i)            -- ``statistic(records)`` gives each t(x_i);
* the mechanism eta(s_dp | s)             -- ``mechanism`` from :mod:`dpposterior.mechanisms`,
  applied to the sum, with ``n`` records.

Optional: ``complete_posterior(records, rng)`` (a conjugate draw of theta | x, used by the
data-augmentation Gibbs sampler instead of a Metropolis step), ``simulate(theta, rng)``
(the summed statistic in one call, when that is cheaper than records; SBI engines only) and
``noncentred(records, theta, theta_new)`` (records moved to theta_new with their noise held
fixed; enables an interweaved non-centred step in da-mcmc).

Likelihood-based engines (``da-mcmc``, :mod:`dpposterior.inference.da_mcmc`) need
``record_logpdf`` or ``complete_posterior``; simulation-based engines (``smc-abc``, ``sppe``,
``sple``) see the model through :meth:`Model.simulator_model`, the internal
:class:`~dpposterior.sbi.SimulatorModel` view on an unconstrained parameter space (a
positive parameter is mapped by log, an interval by logit, a Dirichlet simplex by the additive
log-ratio, with the Jacobian added to the log prior, so the flows and the random-walk kernels
see R^d).

    >>> import numpy as np, scipy.stats as st, dpposterior
    >>> from dpposterior.mechanisms import Laplace
    >>> model = dpposterior.Model(params={"lam": st.gamma(2.0, scale=2.0)},
    ...     records=lambda theta, size, rng: rng.poisson(theta["lam"], size=size),
    ...     statistic=lambda rec: np.clip(rec, 0, 10), mechanism=Laplace(0.5, 10.0), n=200,
    ...     record_logpdf=lambda rec, theta: st.poisson.logpmf(rec, theta["lam"]))
    >>> post = dpposterior.infer(model, observed=[1137.5], method="da-mcmc", seed=1)  # doctest: +SKIP

Every callable is checked on a prior draw before an engine starts; a callable returning the
wrong shape or a non-finite value raises a one-line :class:`~dpposterior.errors.InputError`
naming it and what it returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from .errors import InputError
from .families import EngineSpec
from .mechanisms.base import Mechanism


def _describe(value) -> str:
    """Short description of what a callable returned (for one-line errors)."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of length {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else f"a {type(value).__name__}"


#: a model's ``release_transform``: how the released statistic is computed from the running sums T
#: of the records' t(y) -- the sums themselves, or (T_0 / n, (T_1 - T_0^2 / n) / (n - 1)), the sample
#: mean and variance from sum y and sum y^2 (the Gaussian family's release)
SUMS, MEAN_VARIANCE = 0, 1

#: the engines of every :class:`Model` (``Model.methods``): ``on_model(model, observed, options)`` each
MODEL_METHODS = {
    "da-mcmc": EngineSpec.of("dpposterior.inference.da_mcmc", "on_model", "DaMcmcOptions"),
    "smc-abc": EngineSpec.of("dpposterior.sbi.smc_abc", "on_model", "SmcAbcOptions"),
    "sppe": EngineSpec.of("dpposterior.sbi.sppe", "on_model", "SppeOptions"),
    "sple": EngineSpec.of("dpposterior.sbi.sple", "on_model", "SpleOptions"),
}


#: prior draws, and records per draw (n, up to this many: a statistic is evaluated on data sets of the
#: model's own size where it can be), on which Model.check_privacy_claim checks the contributions
CLAIM_DRAWS, CLAIM_RECORDS = 16, 10_000


def _bounds_text(v: np.ndarray) -> str:
    return f"{v[0]:g}" if np.all(v == v[0]) else "(" + ", ".join(f"{x:g}" for x in v) + ")"


def _largest_replacement(mechanism, t: np.ndarray) -> float:
    """The largest change ``norm(t_a - t_b)`` among contributions ``t`` (rows), in the mechanism's norm:
    exact along each coordinate's extremes (every row against the rows holding a minimum or maximum)."""
    extremes = np.unique(np.concatenate([t.argmin(axis=0), t.argmax(axis=0)]))
    kind = getattr(mechanism, "sensitivity_norm", "Linf")
    best = 0.0
    for j in extremes:
        diff = t - t[j]
        if kind == "L1":
            sizes = np.abs(diff).sum(axis=1)
        elif kind == "L2":
            sizes = np.sqrt((diff * diff).sum(axis=1))
        elif kind == "Linf":
            sizes = np.abs(diff).max(axis=1)
        else:  # a mechanism with its own norm: one difference at a time
            sizes = np.array([mechanism.norm(d) for d in diff])
        best = max(best, float(sizes.max()))
    return best


# --------------------------------------------------------------------------- parameter transforms
class _Param:
    """One named parameter: its prior, event shape and map to the unconstrained space.

    Kinds: ``real`` (identity), ``positive`` (log, lower bound a), ``negative`` (log of b - x),
    ``interval`` (logit), ``simplex`` (additive log-ratio, Dirichlet priors).  ``log_jacobian``
    is log |d value / d z|, added to the log prior of z (change of variables).
    """

    def __init__(self, name: str, dist, rng: np.random.Generator):
        self.name = name
        self.dist = dist
        for attr in ("rvs", "logpdf"):
            if not callable(getattr(dist, attr, None)):
                raise InputError(f"params.{name}", f"the prior has no {attr}() (got {type(dist).__name__}); "
                                 "give a scipy frozen distribution or an object with rvs and logpdf")
        try:
            draw = np.asarray(dist.rvs(size=1, random_state=rng), float)
        except Exception as exc:  # noqa: BLE001 - one line naming the prior
            raise InputError(f"params.{name}", f"prior.rvs(size=1) raised {type(exc).__name__}: {exc}") from None
        self.kind = "real"
        self.lower, self.upper = -np.inf, np.inf
        tname = type(dist).__name__
        if "dirichlet" in tname:
            self.kind = "simplex"
            self.shape = (np.asarray(dist.alpha).size,)
        elif hasattr(dist, "support") and hasattr(dist, "dist") and hasattr(dist.dist, "numargs"):
            # a univariate scipy distribution: its support decides the transform
            self.shape = ()
            a, b = (float(v) for v in dist.support())
            self.lower, self.upper = a, b
            if np.isfinite(a) and np.isfinite(b):
                self.kind = "interval"
            elif np.isfinite(a):
                self.kind = "positive"
            elif np.isfinite(b):
                self.kind = "negative"
        else:
            # a multivariate or user prior: the shape of one draw, on R^k unless it says otherwise
            self.shape = draw.shape[1:] if draw.ndim >= 1 and draw.shape[:1] == (1,) else draw.shape
        self.size = int(np.prod(self.shape)) if self.shape else 1
        self.usize = self.size - 1 if self.kind == "simplex" else self.size
        if not np.all(np.isfinite(draw)):
            raise InputError(f"params.{name}", f"prior.rvs returned non-finite values ({_describe(draw)})")

    # values: (N, *shape); z: (N, usize)
    def sample(self, n: int, rng) -> np.ndarray:
        v = np.asarray(self.dist.rvs(size=n, random_state=rng), float)
        return v.reshape(n, *self.shape)

    def to_unconstrained(self, v) -> np.ndarray:
        v = np.asarray(v, float).reshape(len(v), -1)
        if self.kind == "real":
            return v
        if self.kind == "positive":
            return np.log(v - self.lower)
        if self.kind == "negative":
            return np.log(self.upper - v)
        if self.kind == "interval":
            from scipy import special  # imported where used: docs/architecture.md, "Imports stay light"

            return special.logit((v - self.lower) / (self.upper - self.lower))
        p = np.clip(v, 1e-300, None)
        return np.log(p[:, :-1]) - np.log(p[:, -1:])

    def from_unconstrained(self, z) -> tuple[np.ndarray, np.ndarray]:
        """(values (N, *shape), log |Jacobian| (N,))."""
        z = np.asarray(z, float).reshape(len(z), self.usize)
        if self.kind == "real":
            return z.reshape(len(z), *self.shape), np.zeros(len(z))
        if self.kind == "positive":
            return (self.lower + np.exp(z[:, 0])), z[:, 0]
        if self.kind == "negative":
            return (self.upper - np.exp(z[:, 0])), z[:, 0]
        from scipy import special

        if self.kind == "interval":
            w = self.upper - self.lower
            return (self.lower + w * special.expit(z[:, 0]),
                    np.log(w) + special.log_expit(z[:, 0]) + special.log_expit(-z[:, 0]))
        zpad = np.concatenate([z, np.zeros((len(z), 1))], axis=1)
        logp = zpad - special.logsumexp(zpad, axis=1, keepdims=True)
        return np.exp(logp), logp.sum(axis=1)  # ALR Jacobian: prod_j p_j over all parts

    def logpdf(self, v) -> np.ndarray:
        """log prior density of values (N, *shape) -> (N,)."""
        v = np.asarray(v, float)
        n = len(v)
        if self.kind == "simplex":  # scipy's Dirichlet wants the parts on the first axis
            out = np.array([self.dist.logpdf(row) for row in v], float)
        else:
            out = np.asarray(self.dist.logpdf(v if self.shape else v.reshape(n)), float)
            if out.shape != (n,):
                out = np.array([float(self.dist.logpdf(row)) for row in v])
        return out


# --------------------------------------------------------------------------- the model
#: records drawn to measure a record's bytes before the n of a model are (``Model.check_records_fit``)
PILOT_RECORDS = 64
#: their random stream, apart from every run's
PILOT_SEED = 20240531


def _nbytes(obj) -> int:
    """Bytes of the arrays in a record draw (an array, or tuples, lists and dicts of them)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, dict):
        return sum(_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v) for v in obj)
    return int(np.asarray(obj).nbytes)


@dataclass(eq=False)
class Model:
    """A user model of n confidential records released through a DP mechanism (see module doc)."""

    params: Any
    records: Callable | None
    statistic: Callable | None
    mechanism: Mechanism
    n: int
    record_logpdf: Callable | None = None
    complete_posterior: Callable | None = None
    simulate: Callable | None = None
    #: optional ``noncentred(records, theta, theta_new) -> records``: the same records under
    #: theta_new with their underlying noise held fixed (e.g. y + X (beta_new - beta) in a
    #: regression, mu' + sigma'/sigma (y - mu) for normal records), where the noise's distribution
    #: does not depend on theta (x = g(theta, e), e ~ p(e)).  da-mcmc then interweaves a
    #: non-centred theta step (Papaspiliopoulos, Roberts & Skold 2007; Yu & Meng 2011), which
    #: mixes where the plain Gibbs step crawls (large noise: theta | x much tighter than theta | s_dp)
    noncentred: Callable | None = None
    #: shown in posteriors and reports
    name: str = "model"
    #: variable -> names of its event dims (vector parameters); default ``<name>_dim``
    dims: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)
    #: optional ``(lo, hi)``: the bounds the statistic clamps each record's contribution t(x) to
    #: (numbers, or one per coordinate).  Stated, the privacy check is exact: the mechanism's
    #: sensitivity must cover the replace-one change ``norm(hi - lo)`` and every contribution drawn
    #: must lie inside; unstated, the check uses the contributions seen on prior-predictive records
    clamp: Any = None
    #: how the released statistic is computed from the summed contributions T: ``SUMS`` (the sums
    #: themselves) or ``MEAN_VARIANCE`` (T = (sum y, sum y^2) released as sample mean and variance)
    release_transform: int = SUMS
    #: optional: one noise scale per released coordinate, where they differ (default: the mechanism's)
    noise_scales: Any = None
    #: the support of posterior variables that are not parameters themselves (a subclass whose
    #: ``posterior_variables`` maps the parameters to other variables), for :meth:`observation_model`
    derived_support: ClassVar[dict] = {}

    def __post_init__(self):
        if isinstance(self.n, bool) or not isinstance(self.n, (int, np.integer)) or self.n < 1:
            raise InputError("model.n", f"must be an integer >= 1 (got {self.n!r})")
        self.n = int(self.n)
        if not isinstance(self.mechanism, Mechanism):
            raise InputError("model.mechanism", f"must be a mechanism from dpposterior.mechanisms "
                             f"(got {type(self.mechanism).__name__})")
        if not isinstance(self.params, dict) or not self.params:
            raise InputError("model.params", "must be a non-empty dict: name -> prior")
        for name in ("records", "statistic", "record_logpdf", "complete_posterior", "simulate", "noncentred"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise InputError(f"model.{name}", f"must be callable (got {type(value).__name__})")
        if self.simulate is None and (self.records is None or self.statistic is None):
            raise InputError("model.records", "give records and statistic (or simulate, for SBI only)")
        if self.clamp is not None:
            self._clamp_bounds()
        rng = np.random.default_rng(0)
        self._params = [_Param(str(k), v, rng) for k, v in self.params.items()]
        self._uslices = []
        start = 0
        for p in self._params:
            self._uslices.append(slice(start, start + p.usize))
            start += p.usize
        self.udim = start

    # ----------------------------------------------------------------- parameters
    @property
    def names(self) -> list[str]:
        return [p.name for p in self._params]

    @property
    def has_likelihood(self) -> bool:
        return self.records is not None and self.statistic is not None and (
            self.record_logpdf is not None or self.complete_posterior is not None)

    @property
    def methods(self) -> dict:
        """The engines of a model, in the families' :class:`~dpposterior.families.EngineSpec` form (run:
        ``on_model(model, observed, options)``): ``da-mcmc`` and the simulation-based engines."""
        return MODEL_METHODS

    @property
    def auto_method(self) -> str:
        """What ``method="auto"`` runs: ``da-mcmc`` with a record likelihood, ``sppe`` otherwise."""
        return "da-mcmc" if self.has_likelihood else "sppe"

    def theta_dict(self, values: dict, i: int | None = None) -> dict:
        """Row i of batched values as the dict the user callables see (floats for scalars)."""
        out = {}
        for p in self._params:
            v = values[p.name] if i is None else values[p.name][i]
            out[p.name] = float(v) if p.shape == () else np.asarray(v, float)
        return out

    def sample_prior(self, n: int, rng) -> dict:
        return {p.name: p.sample(n, rng) for p in self._params}

    def to_unconstrained(self, values: dict) -> np.ndarray:
        return np.concatenate([p.to_unconstrained(np.asarray(values[p.name], float)) for p in self._params], axis=1)

    def from_unconstrained(self, z) -> tuple[dict, np.ndarray]:
        z = np.asarray(z, float).reshape(-1, self.udim)
        values, logjac = {}, np.zeros(len(z))
        for p, sl in zip(self._params, self._uslices):
            v, lj = p.from_unconstrained(z[:, sl])
            values[p.name] = v
            logjac += lj
        return values, logjac

    def log_prior(self, values: dict) -> np.ndarray:
        return sum(p.logpdf(values[p.name]) for p in self._params)

    def log_prior_unconstrained(self, z) -> np.ndarray:
        values, logjac = self.from_unconstrained(z)
        with np.errstate(all="ignore"):
            out = self.log_prior(values) + logjac
        return np.where(np.isfinite(out), out, -np.inf)

    def check_complete_draw(self, draw) -> dict:
        """The dict returned by ``complete_posterior``, checked and with arrays of the params' shapes."""
        if not isinstance(draw, dict) or set(draw) != set(self.names):
            raise InputError("model.complete_posterior", f"must return a dict with keys {self.names} "
                             f"(got {_describe(draw)})")
        out = {}
        for p in self._params:
            v = np.asarray(draw[p.name], float)
            if v.size != p.size or not np.all(np.isfinite(v)):
                raise InputError("model.complete_posterior", f"returned {p.name} = {_describe(v)}, expected "
                                 f"{p.size} finite number(s)")
            out[p.name] = v.reshape(p.shape)
        return out

    # ----------------------------------------------------------------- records and statistics
    def draw_records(self, theta: dict, size: int, rng) -> np.ndarray:
        try:
            rec = self.records(theta, size, rng)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's callable: one line naming it
            raise InputError("model.records", f"records(theta, {size}, rng) raised {type(exc).__name__}: {exc}") \
                from None
        rec = np.asarray(rec)
        if rec.ndim == 0 or rec.shape[0] != size:
            raise InputError("model.records", f"records(theta, size={size}, rng) returned {_describe(rec)}; "
                             f"expected {size} records along the first axis")
        return rec

    def contributions(self, rec, r: int | None = None) -> np.ndarray:
        """t(x_i) of each record as a float array (size, r)."""
        try:
            t = self.statistic(rec)
        except Exception as exc:  # noqa: BLE001
            raise InputError("model.statistic", f"statistic(records) raised {type(exc).__name__}: {exc}") from None
        try:
            t = np.asarray(t, float)
        except (TypeError, ValueError):  # e.g. records that are strings, passed through
            raise InputError("model.statistic", f"statistic(records) returned {_describe(t)} of non-numbers; "
                             "each record's contribution must be a number") from None
        size = len(rec)
        if t.ndim == 0 or t.shape[0] != size or t.ndim > 2:
            raise InputError("model.statistic", f"statistic(records) returned {_describe(t)} for {size} records; "
                             f"expected shape ({size},) or ({size}, r)")
        t = t.reshape(size, -1)
        if r is not None and t.shape[1] != r:
            raise InputError("model.statistic", f"statistic(records) gives {t.shape[1]} number(s) per record; "
                             f"the observed release has {r}")
        if not np.all(np.isfinite(t)):
            raise InputError("model.statistic", "statistic(records) returned non-finite values")
        return t

    def record_loglik(self, rec, theta: dict) -> float:
        try:
            lp = np.asarray(self.record_logpdf(rec, theta), float)
        except Exception as exc:  # noqa: BLE001
            raise InputError("model.record_logpdf", f"record_logpdf(records, theta) raised "
                             f"{type(exc).__name__}: {exc}") from None
        if lp.ndim > 0 and lp.shape[0] != len(rec):
            raise InputError("model.record_logpdf", f"record_logpdf(records, theta) returned {_describe(lp)} for "
                             f"{len(rec)} records; expected ({len(rec)},) or a number")
        total = float(lp.sum())
        if np.isnan(total):
            raise InputError("model.record_logpdf", "record_logpdf(records, theta) returned NaN")
        return total

    def summed_statistic(self, theta: dict, rng, r: int) -> np.ndarray:
        """One s = sum_i t(x_i) given theta (``simulate`` when given, else from records)."""
        if self.simulate is not None:
            try:
                s = np.asarray(self.simulate(theta, rng), float).ravel()
            except Exception as exc:  # noqa: BLE001
                raise InputError("model.simulate", f"simulate(theta, rng) raised {type(exc).__name__}: {exc}") \
                    from None
            if s.size != r or not np.all(np.isfinite(s)):
                raise InputError("model.simulate", f"simulate(theta, rng) returned {_describe(s)}; expected {r} "
                                 "finite number(s)")
            return s
        return self.contributions(self.draw_records(theta, self.n, rng), r).sum(axis=0)

    # ----------------------------------------------------------------- checks
    def check_records_fit(self, r: int, copies: int, what: str) -> None:
        """Refuse, before n records are drawn, ``copies`` sets of them (da-mcmc: one per chain) that would not fit
        in memory: a pilot of :data:`PILOT_RECORDS` records, drawn from a prior draw with their own random
        stream (no draw of a run changes), gives a record's bytes; each set is held about three times over (the
        records, a proposal's, the sweep's temporaries), with its r contributions and the sweep's state."""
        if self.records is None or self.statistic is None:
            return
        from .memory import check_fits

        rng = np.random.default_rng(PILOT_SEED)
        theta = self.theta_dict(self.sample_prior(1, rng), 0)
        pilot = max(1, min(int(self.n), PILOT_RECORDS))
        per_record = _nbytes(self.draw_records(theta, pilot, rng)) / pilot
        estimate = copies * float(self.n) * (3.0 * per_record + 8.0 * max(1, int(r)) + 16.0)
        check_fits(estimate, "method" if copies > 1 else "model.n",
                   f"{what}: " + (f"{copies} chains x " if copies > 1 else "") +
                   f"{int(self.n):,} records of about {per_record:.0f} bytes",
                   ("fewer --chains, or " if copies > 1 else "") +
                   "an engine that does not hold the records (exact, gibbs-ss, smc-abc)")

    def check(self, observed, likelihood: bool = False, holding: tuple[int, str] = (1, "checking the model")
              ) -> np.ndarray:
        """Validate the callables on a prior draw; returns the observed release as (r,) floats.  The n records it
        draws are first checked to fit (:meth:`check_records_fit`) as ``holding`` = (sets of n records the caller
        will hold, its name): da-mcmc holds one set per chain."""
        try:
            obs = np.atleast_1d(np.asarray(observed, float)).ravel()
        except (TypeError, ValueError):
            raise InputError("observed", f"must be a list of numbers (got {_describe(observed)})") from None
        if obs.size == 0 or not np.all(np.isfinite(obs)):
            raise InputError("observed", "must be a non-empty list of finite numbers")
        self.check_records_fit(obs.size, *holding)
        rng = np.random.default_rng(12345)
        theta = self.theta_dict(self.sample_prior(1, rng), 0)
        if self.records is not None and self.statistic is not None:
            rec = self.draw_records(theta, self.n, rng)
            self.contributions(rec, obs.size)
            if likelihood and self.record_logpdf is not None:
                if not np.isfinite(self.record_loglik(rec, theta)):
                    raise InputError("model.record_logpdf", "record_logpdf(records, theta) is -inf at records "
                                     "drawn by records(theta, ...)")
            if likelihood and self.complete_posterior is not None:
                try:
                    draw = self.complete_posterior(rec, rng)
                except Exception as exc:  # noqa: BLE001
                    raise InputError("model.complete_posterior", f"complete_posterior(records, rng) raised "
                                     f"{type(exc).__name__}: {exc}") from None
                self.check_complete_draw(draw)
        else:
            self.summed_statistic(theta, rng, obs.size)
        return obs

    def _clamp_bounds(self, r: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The stated clamp as two float arrays (broadcast to ``r`` coordinates when given)."""
        try:
            lo, hi = (np.asarray(v, float).ravel() for v in self.clamp)
        except (TypeError, ValueError):
            raise InputError("model.clamp", f"must be (lo, hi): numbers or one per coordinate "
                             f"(got {_describe(self.clamp)})") from None
        if lo.size != hi.size or lo.size == 0 or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) \
                or np.any(lo > hi):
            raise InputError("model.clamp", "must be (lo, hi) with finite lo <= hi, numbers or one per coordinate")
        if r is not None and lo.size not in (1, r):
            raise InputError("model.clamp", f"gives {lo.size} bound(s); the observed release has {r} coordinates")
        return (np.broadcast_to(lo, (r,)), np.broadcast_to(hi, (r,))) if r is not None else (lo, hi)

    def check_privacy_claim(self, obs) -> None:
        """Hold the model to its privacy claim before any work (``infer`` and ``calibrate`` on a Model).

        * The mechanism's sensitivity must cover the change of the summed statistic when one record
          is replaced by another: ``norm(hi - lo)`` for a stated :attr:`clamp` (whose bounds every
          contribution drawn must respect), else the largest change seen among the contributions of
          records drawn from the prior predictive (:data:`CLAIM_DRAWS` prior draws, up to
          :data:`CLAIM_RECORDS` records each) -- a lower bound, so a refusal is never wrong.
        * The observed release must lie within reach of what the statistic can produce: the rule of
          release files (:func:`dpposterior.release.require_within_reach`), on the range of the sum
          of n contributions (n x the clamp; else the contributions seen, widened to the sensitivity).

        A model given only ``simulate`` has no per-record contributions to check.
        """
        from .release import require_within_reach

        reach = self._sum_range(obs.size)
        if reach is not None:
            require_within_reach("observed", obs, *reach, float(self.mechanism.noise_scale),
                                 f"the statistic summed over n = {self.n} records")

    def _sum_range(self, r: int):
        """The checked range (lo, hi) of the summed statistic (None: nothing to check); computed once
        per model and coordinate count (a calibration study checks every trial's release)."""
        cache = self.__dict__.setdefault("_sum_range_cache", {})
        if r not in cache:
            cache[r] = self._check_sensitivity(r)
        return cache[r]

    def _check_sensitivity(self, r: int):
        mech = self.mechanism
        sensitivity = getattr(mech, "sensitivity", None)
        if self.records is None or self.statistic is None or (sensitivity is None and self.clamp is None):
            return None
        rng = np.random.default_rng(54321)
        values = self.sample_prior(CLAIM_DRAWS, rng)
        size = min(self.n, CLAIM_RECORDS)
        t = np.concatenate([self.contributions(self.draw_records(self.theta_dict(values, i), size, rng), r)
                            for i in range(CLAIM_DRAWS)])
        if self.clamp is not None:
            lo, hi = self._clamp_bounds(r)
            outside = (t < lo) | (t > hi)
            if outside.any():
                row, col = np.argwhere(outside)[0]
                raise InputError("model.statistic", f"returned {t[row, col]:g} (coordinate {col}) outside the stated "
                                 f"clamp [{lo[col]:g}, {hi[col]:g}] on records drawn from the prior predictive")
            needed, seen = float(mech.norm(hi - lo)), f"the stated clamp [{_bounds_text(lo)}, {_bounds_text(hi)}]"
        else:
            needed, seen = _largest_replacement(mech, t), "records drawn from the prior predictive"
        if sensitivity is not None and needed > float(sensitivity) * (1.0 + 1e-9):
            raise InputError("model.mechanism", f"sensitivity {float(sensitivity):g} is below {needed:g}, the change of "
                             f"the summed statistic when one record is replaced (from {seen}): the release would not "
                             "be DP as stated; clamp the statistic to the sensitivity (and state clamp=(lo, hi))")
        if self.clamp is not None:
            return self.n * lo, self.n * hi
        # every contribution lies in an interval of width <= sensitivity holding those seen
        return self.n * (t.max(axis=0) - sensitivity), self.n * (t.min(axis=0) + sensitivity)

    def prior_moments(self, draws: int = 4000) -> dict:
        """``{variable: (mean, sd)}`` of the prior in the posterior's variables, from ``draws`` prior
        draws (fixed seed): the prior-equals-posterior check (``dpposterior.checks``) on a Model."""
        cache = self.__dict__.setdefault("_prior_moments_cache", {})
        if draws not in cache:
            variables, _, _ = self.posterior_variables(self.sample_prior(draws, np.random.default_rng(20240601)))
            with np.errstate(all="ignore"):
                cache[draws] = {name: (np.asarray(v, float).mean(axis=0), np.asarray(v, float).std(axis=0))
                                for name, v in variables.items()}
        return cache[draws]

    # ----------------------------------------------------------------- outputs
    def posterior_variables(self, values: dict) -> tuple[dict, dict, dict]:
        """Named posterior arrays (N, *shape), their dims and coords."""
        dims, coords = {}, {}
        for p in self._params:
            if p.shape:
                names = list(self.dims.get(p.name, [f"{p.name}_dim_{k}" for k in range(len(p.shape))]))
                dims[p.name] = names
                for k, d in enumerate(names):
                    coords[d] = list(self.coords.get(d, range(p.shape[k])))
        return {p.name: np.asarray(values[p.name]) for p in self._params}, dims, coords

    def observation_model(self, observed, family: str | None = None):
        """The model as an :class:`~dpposterior.observation.ObservationModel`: the variables of its posterior
        (names, dims, coords and support, as :meth:`posterior_variables` names them), its prior, the latent
        statistic s = sum_i t(x_i) and one measurement, the ``observed`` release of s through the mechanism.

        Engines name their draws through its :meth:`~dpposterior.observation.ObservationModel.pack`.  It adds
        no attrs of its own: what a posterior records is the engine's to write.  ``family``: the name the
        posterior carries (default the model's name)."""
        from .observation import RECORDS, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior, Variable

        obs = np.atleast_1d(np.asarray(observed, float)).ravel()
        # the variables as posterior_variables names them, read off one (chain, draw) of zeros: a subclass
        # that maps the parameters to other variables (a joint prior split into its parts) is followed exactly
        zeros = {p.name: np.zeros((1, 1, *p.shape)) for p in self._params}
        arrays, dims, coords = self.posterior_variables(zeros)
        kinds = {p.name: p for p in self._params}
        variables = []
        for name, arr in arrays.items():
            support = _param_support(kinds[name]) if name in kinds else self.derived_support.get(name, "real")
            variables.append(Variable.from_draw(name, arr, 2, dims, coords, support))
        reparametrised = type(self).posterior_variables is not Model.posterior_variables

        def sample(rng) -> dict:
            drawn, _, _ = self.posterior_variables(self.sample_prior(1, rng))
            return {k: np.asarray(v)[0] for k, v in drawn.items()}

        def log_density(values) -> float:
            return float(self.log_prior({p.name: np.asarray(values[p.name], float)[None] for p in self._params})[0])

        parameters = {p.name: _prior_text(p.dist) for p in self._params}
        prior = Prior(sample, parameters, None if reparametrised else log_density,
                      "; ".join(f"{k} ~ {v}" for k, v in parameters.items()))
        capabilities = {SIMULATE} | ({RECORDS} if self.has_likelihood else set())
        latent = LatentStatistic(f"the statistic summed over the n = {self.n} records of model {self.name!r}",
                                 frozenset(capabilities), self)
        measurement = Measurement("observed", obs, SummedStatistic(self, obs.size), self.mechanism)
        return ObservationModel(family or self.name, tuple(variables), prior, latent, (measurement,), self.n)

    def simulator_model(self, observed, name: str | None = None):
        """The internal SBI view (:class:`~dpposterior.sbi.SimulatorModel`) on unconstrained theta."""
        from .sbi.model import SimulatorModel

        obs = np.atleast_1d(np.asarray(observed, float)).ravel()
        r = obs.size

        def simulate(z, rng):
            values, _ = self.from_unconstrained(z)
            return np.stack([self.summed_statistic(self.theta_dict(values, i), rng, r) for i in range(len(z))]) \
                if len(z) else np.zeros((0, r))

        def outputs(z):
            values, _ = self.from_unconstrained(z)
            return self.posterior_variables(values)

        return SimulatorModel(prior=_UnconstrainedPrior(self), mechanism=self.mechanism, observed=obs,
                              simulate=simulate, parameter_names=[f"z_{i}" for i in range(self.udim)],
                              outputs=outputs, name=name or self.name)


def _param_support(param: _Param) -> str:
    """A parameter's support in the observation model's words (``real`` where its bounds are other than
    (0, inf), [0, 1] or a simplex)."""
    if param.kind == "simplex":
        return "simplex"
    if param.kind == "positive" and param.lower == 0.0:
        return "positive"
    if param.kind == "interval" and (param.lower, param.upper) == (0.0, 1.0):
        return "unit"
    return "real"


def _prior_text(dist) -> str:
    """A prior in one phrase: a scipy frozen distribution's name and arguments, else its type (scipy's
    multivariate frozen distributions keep no arguments list: their type's name, e.g. ``dirichlet``)."""
    inner = getattr(dist, "dist", None)
    name = getattr(inner, "name", None) or type(dist).__name__.removesuffix("_frozen")
    args = [f"{a:g}" if isinstance(a, (int, float)) else np.array2string(np.asarray(a), separator=", ")
            for a in getattr(dist, "args", ())]
    args += [f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v!r}"
             for k, v in getattr(dist, "kwds", {}).items()]
    return f"{name}({', '.join(args)})"


class SummedStatistic:
    """Query of a :class:`Model`'s measurement: records -> s = sum_i t(x_i), the ``r`` numbers the mechanism
    perturbed (before the model's ``release_transform``, e.g. sums released as a mean and variance)."""

    def __init__(self, model: Model, r: int):
        self.model = model
        self.shape = (int(r),)

    def __call__(self, records) -> np.ndarray:
        return self.model.contributions(records, self.shape[0]).sum(axis=0)


class _UnconstrainedPrior:
    """The prior of a :class:`Model` on its unconstrained parameter z (log density with Jacobian)."""

    def __init__(self, model: Model):
        self.model = model

    @property
    def dim(self) -> int:
        return self.model.udim

    def sample(self, n: int, rng) -> np.ndarray:
        return self.model.to_unconstrained(self.model.sample_prior(n, rng))

    def log_prob(self, z) -> np.ndarray:
        return self.model.log_prior_unconstrained(np.asarray(z, float).reshape(-1, self.dim))
