"""Data-augmentation MCMC for DP releases (Ju, Awan, Gong & Rao, NeurIPS 2022).

The private-data posterior pi(theta | s_dp) of Xiong, Ju & Zhang eq. (3) has an intractable
likelihood f(s_dp | theta) = int f(x | theta) eta(s_dp | x) dx (their eq. 2).  Ju et al. sample
the joint p(theta, x | s_dp) propto pi(theta) prod_i f(x_i | theta) eta(s_dp | sum_i t(x_i))
by Gibbs over (theta, x_1..x_n):

1. theta | x: from the model's ``complete_posterior(records, rng)`` (a conjugate draw) when it
   has one; otherwise ``theta_steps`` adaptive random-walk Metropolis steps on the
   unconstrained theta targeting sum_i log f(x_i | theta) + log pi(theta) (+ log Jacobian).
   The proposal covariance and scale adapt during warm-up only (Haario et al. 2001 with a
   Robbins-Monro scale toward acceptance 0.3), then stay fixed, so the kept draws come from
   a time-homogeneous kernel.
1b. (models with ``noncentred``) theta | e, s_dp with the records' underlying noise e held fixed
   (x = g(theta, e), e ~ p(e) free of theta): ``theta_steps`` random-walk Metropolis steps on
   log pi(theta) + log eta(s_dp | T(g(theta, e))).  Interweaving this non-centred update with
   the centred one of step 1 (Papaspiliopoulos, Roberts & Skold 2007; Yu & Meng 2011) keeps the
   chain moving when the noise is large and theta | x is much tighter than theta | s_dp, where
   plain data augmentation crawls (linreg-ju eps = 0.1: worst ESS 72 -> 4,864 per 20,000 draws).
2. x_i | theta, x_{-i}, s_dp, for i = 1..n in turn: an independent Metropolis-Hastings step
   (Ju et al. Sec. 3, "record-wise update") with proposal x_i* ~ f(. | theta).  The f terms
   cancel, leaving the acceptance ratio

       eta(s_dp | T - t(x_i) + t(x_i*)) / eta(s_dp | T),     T = sum_j t(x_j),

   so each update costs O(r) given the running sum T, which is updated incrementally when a
   proposal is accepted (and recomputed from scratch at the start of each sweep so rounding
   cannot drift).

The proposals for a sweep do not depend on the current records, so all n of them are drawn in
one vectorised ``records(theta, n, rng)`` call; the sequential accept/reject sweep over records
and chains is one numba kernel (:func:`record_sweep`, ``cache=True``) for the additive
mechanisms (Laplace- and Gaussian-shaped noise, independent per coordinate, one scale per coordinate;
any other integer noise law through a table of its log-mass over its tail window;
the released statistic is the sums T, or -- gaussian family -- the sample mean and variance
computed from T = (sum y, sum y^2)).  ``record_sweeps`` passes share one draw of proposals.
The record acceptance
rate of each iteration goes to ``sample_stats["record_acceptance"]``.

Engines: :func:`run_da_mcmc` on a :class:`dpposterior.Model` and an observed release;
:func:`da_mcmc` (``method="da-mcmc"``) for the built-in families, which expose their record
model through the family's ``da_model`` hook ``(release, prior) -> (Model, observed)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

import numba
import numpy as np

from ..errors import InputError
from ..mechanisms.base import NoiseShape
from ..options import MCMCOptions, option
from ..posterior import Posterior
from .mcmc_common import robbins_monro

#: mechanism kinds of the compiled sweep: Laplace- or Gaussian-shaped log-mass, or a tabulated integer law
LAPLACE, GAUSSIAN, TABLE = 0, 1, 2
#: the table argument of the shaped kinds (they do not read it)
NO_TABLE = np.zeros(0)
#: tail mass of an integer law left outside its log-mass table (the likelihood is 0 beyond it)
TABLE_TAIL = 1e-15
#: the widest log-mass table (entries) da-mcmc builds
MAX_TABLE = 20_000_001
#: target acceptance of the adaptive random-walk step on theta
TARGET_ACCEPT = 0.3


# how the released statistic is computed from the running sums T (a model's ``release_transform``)
from ..model import MEAN_VARIANCE, SUMS  # noqa: E402


@numba.njit(cache=True)
def log_eta(observed, total, kind, inv_scale, transform, nrel, table):
    """log eta(s_dp | g(T)) up to a constant, for one vector of sums ``total`` (r,); ``table`` (kind TABLE): the
    law's log-mass at k = -W..W (index k + W), -inf beyond it."""
    out = 0.0
    if kind == TABLE:
        w = (table.shape[0] - 1) // 2
        for k in range(total.shape[0]):
            idx = int(round(observed[k] - total[k])) + w
            if idx < 0 or idx >= table.shape[0]:
                return -np.inf
            out += table[idx]
        return out
    if transform == MEAN_VARIANCE:
        m = total[0] / nrel
        v = (total[1] - total[0] * total[0] / nrel) / (nrel - 1.0)
        d0 = (observed[0] - m) * inv_scale[0]
        d1 = (observed[1] - v) * inv_scale[1]
        return -(abs(d0) + abs(d1)) if kind == 0 else -0.5 * (d0 * d0 + d1 * d1)
    for k in range(total.shape[0]):
        d = (observed[k] - total[k]) * inv_scale[k]
        out += -abs(d) if kind == 0 else -0.5 * d * d
    return out


def record_sweep(t, tp, total, u, observed, kind, inv_scale, last, nacc, transform=SUMS, nrel=1.0, table=None):
    """:func:`_record_sweep` (compiled); ``table``: the log-mass table of kind TABLE."""
    return _record_sweep(t, tp, total, u, observed, kind, inv_scale, last, nacc, transform, nrel,
                         NO_TABLE if table is None else table)


@numba.njit(cache=True)
def _record_sweep(t, tp, total, u, observed, kind, inv_scale, last, nacc, transform, nrel, table):
    """``m / n`` passes over the records of every chain (Ju et al. record-wise independent MH).

    t (C, n, r): current contributions t(x_i), updated in place; tp (C, m, r): proposals
    t(x*), proposal j for record j % n (m a multiple of n: several sweeps from one vectorised
    draw of f(. | theta)); total (C, r): running sums T, updated in place; u (C, m) uniforms;
    observed (r,); kind LAPLACE or GAUSSIAN with 1 / noise scale per coordinate ``inv_scale``
    (r,); last (C, n) int64, written: the index of the last accepted proposal of each record,
    -1 if none; nacc (C,) int64, written: accepted proposals per chain; ``transform`` SUMS or
    MEAN_VARIANCE (with ``nrel`` records) maps T to the released statistic.  Returns the total
    number of accepted proposals.
    """
    C, n, r = t.shape
    m = tp.shape[1]
    cand = np.empty(r)
    count = 0
    for c in range(C):
        cur = log_eta(observed, total[c], kind, inv_scale, transform, nrel, table)
        for i in range(n):
            last[c, i] = -1
        nacc[c] = 0
        for j in range(m):
            i = j % n
            for k in range(r):
                cand[k] = total[c, k] - t[c, i, k] + tp[c, j, k]
            if transform == SUMS and kind != TABLE:  # the common case, inline (the hot loop of every user model)
                new = 0.0
                for k in range(r):
                    d = (observed[k] - cand[k]) * inv_scale[k]
                    new += -abs(d) if kind == 0 else -0.5 * d * d
            else:
                new = log_eta(observed, cand, kind, inv_scale, transform, nrel, table)
            if new >= cur or u[c, j] < np.exp(new - cur):
                for k in range(r):
                    total[c, k] = cand[k]
                    t[c, i, k] = tp[c, j, k]
                cur = new
                last[c, i] = j
                nacc[c] += 1
                count += 1
    return count


def mechanism_kernel(mechanism, r: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(kind, 1 / scale per coordinate, log-mass table) of the compiled sweep for an additive mechanism."""
    # the sweep only needs log-ratios: a Laplace- or Gaussian-shaped law (discrete ones included) states its
    # form; any other integer law is tabulated from its own mass function
    shape = mechanism.log_mass_shape() if hasattr(mechanism, "log_mass_shape") else None
    if shape is not None:
        kind, scale = shape
        return (LAPLACE if kind is NoiseShape.LAPLACE else GAUSSIAN), np.full(r, 1.0 / scale), NO_TABLE
    if getattr(mechanism, "integer_valued", False) and getattr(mechanism, "additive_symmetric", False):
        w = int(mechanism.tail_window(TABLE_TAIL))
        if 2 * w + 1 > MAX_TABLE:
            raise InputError("model.mechanism", f"{mechanism.name}'s noise is too wide for da-mcmc's log-mass table "
                             f"({2 * w + 1} entries; at most {MAX_TABLE})")
        table = np.asarray(mechanism.logpmf(np.arange(-w, w + 1, dtype=float)), float)
        return TABLE, np.ones(r), table
    raise InputError("model.mechanism", f"da-mcmc needs additive noise: Laplace- or Gaussian-shaped, or an integer "
                     f"noise law (got {type(mechanism).__name__})")


def check_integer_release(mechanism, observed, contributions) -> None:
    """Integer noise: the release and every record's contribution must be integers, or the likelihood is 0."""
    if not getattr(mechanism, "integer_valued", False):
        return
    from ..mechanisms.integer import is_integral

    if not np.all(is_integral(observed)):
        raise InputError("observed", f"must hold integers: {mechanism.name} releases integer counts")
    if not np.all(is_integral(contributions)):
        raise InputError("model.statistic", f"must be integer-valued: {mechanism.name} adds integer noise "
                         "(a non-integer statistic has likelihood 0)")


@dataclass
class DAResult:
    #: name -> (chains, draws, *shape)
    values: dict
    sample_stats: dict
    attrs: dict = field(default_factory=dict)


def _log_eta(total, observed, noise, transform=SUMS, nrel=1.0) -> np.ndarray:
    """log eta(s_dp | g(T)) up to a constant, rows of total (C, r); ``noise``: (kind, inv_scale, table)."""
    kind, inv_scale, table = noise
    total = np.atleast_2d(total)
    return np.array([log_eta(observed, row, kind, inv_scale, transform, float(nrel), table) for row in total])


def _records_and_stats(model, thetas, n, r, rng):
    recs = [model.draw_records(th, n, rng) for th in thetas]
    return recs, np.stack([model.contributions(x, r) for x in recs])


def run_da_mcmc(model, observed, draws: int = 1000, warmup: int = 1000, chains: int = 4, seed=0,
                thin: int = 1, record_sweeps: int = 1, theta_steps: int = 3, init=None) -> DAResult:
    """Gibbs over (theta, x) for a :class:`dpposterior.Model` given the release ``observed``.

    ``init``: optional dict of starting parameter values (name -> (chains, *shape)); by default
    each chain starts from a prior draw with records drawn from f(. | theta).
    """
    from ..model import Model

    if not isinstance(model, Model):
        raise InputError("model", "da-mcmc needs a dpposterior.Model")
    if not model.has_likelihood:
        raise InputError("method", "da-mcmc needs records, statistic and record_logpdf or complete_posterior "
                         "(use smc-abc, sppe or sple for a simulator-only model)")
    obs = model.check(observed, likelihood=True, holding=(chains, "da-mcmc"))  # every chain's records must fit
    r, n = obs.size, model.n
    kind, inv_scale, table = mechanism_kernel(model.mechanism, r)
    # a family may release a non-linear function of the sums with per-coordinate noise scales
    # (gaussian: sample mean and variance); a user model releases the sums through its mechanism
    transform = int(model.release_transform)
    if model.noise_scales is not None:
        inv_scale = 1.0 / np.asarray(model.noise_scales, float)
    noise = (kind, inv_scale, table)
    rng = np.random.default_rng(np.random.SeedSequence(seed) if not isinstance(seed, np.random.SeedSequence)
                                else seed)
    values = model.sample_prior(chains, rng) if init is None else {k: np.asarray(v, float) for k, v in init.items()}
    thetas = [model.theta_dict(values, c) for c in range(chains)]
    recs, t = _records_and_stats(model, thetas, n, r, rng)
    check_integer_release(model.mechanism, obs, t)
    use_conjugate = model.complete_posterior is not None
    z = model.to_unconstrained(values)
    d = z.shape[1]
    # random-walk state (used only without a complete posterior)
    log_scale = np.full(chains, np.log(2.38 / np.sqrt(d)))
    zs = model.to_unconstrained(model.sample_prior(2000, np.random.default_rng(0)))
    # start narrow: theta | x is much tighter than the prior for n records; the scale adapts up
    chol = np.linalg.cholesky(np.cov(zs.T).reshape(d, d) * 0.01 + 1e-12 * np.eye(d))
    history = []
    z_sd = zs.std(axis=0)
    nc_log_scale = np.full(chains, np.log(0.5))
    nc_acc = np.zeros(chains)

    total_iter = warmup + draws * thin
    out = {name: np.empty((chains, draws, *np.shape(values[name])[1:])) for name in model.names}
    rec_acc = np.empty((chains, draws))
    th_acc = np.empty((chains, draws))
    nc_rate = np.empty((chains, draws))
    last = np.zeros((chains, n), dtype=np.int64)
    nacc = np.zeros(chains, dtype=np.int64)
    sweep_seconds, updates = 0.0, 0
    for it in range(total_iter):
        # ---- 1. theta | x
        if use_conjugate:
            for c in range(chains):
                draw = model.check_complete_draw(model.complete_posterior(recs[c], rng))
                thetas[c] = model.theta_dict({k: v[None] for k, v in draw.items()}, 0)
            acc_theta = np.ones(chains)
        else:
            loglik = np.array([model.record_loglik(recs[c], thetas[c]) for c in range(chains)])
            logpost = loglik + model.log_prior_unconstrained(z)
            acc_theta = np.zeros(chains)
            for _ in range(theta_steps):
                prop = z + np.exp(log_scale)[:, None] * (rng.standard_normal((chains, d)) @ chol.T)
                lp_prior = model.log_prior_unconstrained(prop)
                pvals, _ = model.from_unconstrained(prop)
                new = np.full(chains, -np.inf)
                for c in range(chains):
                    if np.isfinite(lp_prior[c]):
                        new[c] = model.record_loglik(recs[c], model.theta_dict(pvals, c)) + lp_prior[c]
                a = np.log(rng.random(chains)) < new - logpost
                z[a] = prop[a]
                logpost[a] = new[a]
                acc_theta += a
                if it < warmup:  # Robbins-Monro on the log scale, warm-up only
                    prob = np.exp(np.minimum(0.0, np.where(np.isfinite(new), new - logpost, -np.inf)))
                    prob = np.where(a, 1.0, prob)
                    log_scale = robbins_monro(log_scale, prob, TARGET_ACCEPT, it + 1)
            acc_theta /= theta_steps
            vals, _ = model.from_unconstrained(z)
            thetas = [model.theta_dict(vals, c) for c in range(chains)]
            if it < warmup:
                history.append(z.copy())
                if it >= 100 and it % 50 == 0:  # Haario: proposal shaped like the chains' spread
                    h = np.concatenate(history[len(history) // 2:])
                    cov = np.cov(h.T).reshape(d, d) + 1e-10 * np.eye(d)
                    try:
                        chol = np.linalg.cholesky(cov)
                    except np.linalg.LinAlgError:
                        pass
        # ---- 1b. non-centred theta step (records' noise held fixed): target
        # pi(theta) eta(s_dp | T(x(theta, e))); interweaved with step 1 it mixes at large noise
        if model.noncentred is not None:
            zc = model.to_unconstrained({k: np.stack([np.asarray(th[k], float) for th in thetas])
                                         for k in model.names})
            lp_cur = model.log_prior_unconstrained(zc) + _log_eta(t.sum(axis=1), obs, noise, transform, n)
            nc_acc = np.zeros(chains)
            for _ in range(theta_steps):
                prop = zc + np.exp(nc_log_scale)[:, None] * rng.standard_normal((chains, d)) * z_sd
                lp_prior = model.log_prior_unconstrained(prop)
                pvals, _ = model.from_unconstrained(prop)
                new = np.full(chains, -np.inf)
                moved = [None] * chains
                for c in range(chains):
                    if np.isfinite(lp_prior[c]):
                        th_new = model.theta_dict(pvals, c)
                        moved[c] = np.asarray(model.noncentred(recs[c], thetas[c], th_new))
                        tc = model.contributions(moved[c], r)
                        new[c] = lp_prior[c] + _log_eta(tc.sum(axis=0)[None], obs, noise, transform, n)[0]
                        moved[c] = (moved[c], tc, th_new)
                a = np.log(rng.random(chains)) < new - lp_cur
                for c in np.flatnonzero(a):
                    recs[c], t[c], thetas[c] = moved[c]
                prob = np.where(a, 1.0, np.exp(np.minimum(0.0, new - lp_cur)))
                zc[a], lp_cur[a] = prop[a], new[a]
                nc_acc += a
                if it < warmup:
                    nc_log_scale = robbins_monro(nc_log_scale, prob, TARGET_ACCEPT, it + 1)
            if not use_conjugate:
                z = zc
        # ---- 2. x | theta, s_dp: record-wise independent MH, proposals f(. | theta); the
        # record_sweeps passes share one vectorised draw of n * record_sweeps proposals
        prop_recs, tp = _records_and_stats(model, thetas, n * record_sweeps, r, rng)
        total = t.sum(axis=1)
        u = rng.random((chains, n * record_sweeps))
        t0 = time.perf_counter()
        record_sweep(t, tp, total, u, obs, kind, inv_scale, last, nacc, transform, float(n), table)
        sweep_seconds += time.perf_counter() - t0
        updates += chains * n * record_sweeps
        for c in range(chains):
            hit = last[c] >= 0
            recs[c][hit] = prop_recs[c][last[c][hit]]
        acc_frac = nacc / (n * record_sweeps)
        if it >= warmup and (it - warmup) % thin == thin - 1:
            j = (it - warmup) // thin
            cur = {k: np.stack([np.asarray(th[k], float) for th in thetas]) for k in model.names}
            for k in model.names:
                out[k][:, j] = cur[k]
            rec_acc[:, j] = acc_frac
            th_acc[:, j] = acc_theta
            nc_rate[:, j] = nc_acc / theta_steps
    stats = {"record_acceptance": rec_acc}
    if not use_conjugate:
        stats["theta_acceptance"] = th_acc
    if model.noncentred is not None:
        stats["noncentred_acceptance"] = nc_rate
    attrs = {"record_sweeps": record_sweeps, "thin": thin,
             "theta_update": "complete_posterior" if use_conjugate else f"adaptive random-walk MH x {theta_steps}",
             "record_acceptance_mean": float(rec_acc.mean()),
             "record_updates_per_second_sweep": float(updates / sweep_seconds) if sweep_seconds > 0 else 0.0}
    return DAResult(values=out, sample_stats=stats, attrs=attrs)


@dataclass(frozen=True)
class DaMcmcOptions(MCMCOptions):
    """Options of engine ``da-mcmc`` (families with a record model, and user Models): draws, warmup, chains,
    seed, and the sweep plan -- ``record_sweeps`` record-update sweeps and ``theta_steps`` parameter steps per
    iteration, keeping every ``thin``-th iteration.  It samples the unconstrained analysis model, so it takes
    no ``constrained``."""

    engine: ClassVar[str] = "da-mcmc"

    record_sweeps: int = option(1, "int", "record-update sweeps per iteration", low=1)
    theta_steps: int = option(3, "int", "parameter steps per iteration (random-walk MH without a "
                              "complete_posterior)", low=1)
    thin: int = option(1, "int", "keep every thin-th iteration", low=1)

    def run_kwargs(self) -> dict:
        """The keyword arguments of :func:`run_da_mcmc`."""
        return {"draws": self.draws, "warmup": self.warmup, "chains": self.chains, "seed": self.seed,
                "record_sweeps": self.record_sweeps, "theta_steps": self.theta_steps, "thin": self.thin}


def to_posterior(family_name: str, model, observed, res: DAResult, attrs: dict | None = None) -> Posterior:
    """The posterior of a run, its draws named by the model's observation model (:meth:`Model.observation_model
    <dpposterior.model.Model.observation_model>`): the parameters mapped to the posterior's variables by
    ``posterior_variables``, then dimensioned and labelled by the view's :meth:`~ObservationModel.pack`."""
    variables, _, _ = model.posterior_variables(res.values)
    view = model.observation_model(observed, family=family_name)
    return view.pack(variables, "da-mcmc", sample_stats=res.sample_stats, attrs={**res.attrs, **(attrs or {})})


def on_model(model, observed, options) -> Posterior:
    """Engine ``da-mcmc`` of a user :class:`~dpposterior.Model` (``Model.methods``), on its checked release."""
    opts = options
    return to_posterior(model.name, model, observed, run_da_mcmc(model, observed, **opts.run_kwargs()))


def da_mcmc(model, options) -> Posterior:
    """Engine ``da-mcmc`` of the built-in families: on the family's record model (its ``da_model`` hook, asked with
    the model's release and parsed prior).  The draws are named through the record model's view, whose variables
    are the observation model's (tests/test_observation_model_view.py)."""
    from ..families import get_family

    release, prior = model.release, model.prior.spec
    hook = get_family(release.family, field="release.family").hooks.get("da_model")
    if hook is None:
        raise InputError("method", f"family {release.family!r} has no record model for da-mcmc")
    records, observed = hook(release, prior)
    res = run_da_mcmc(records, observed, **options.run_kwargs())
    return to_posterior(release.family, records, observed, res)
