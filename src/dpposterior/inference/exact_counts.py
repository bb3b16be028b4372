"""Engine ``exact``: the exact posterior of a count release under any additive noise, by enumeration.

The released statistic of the count families is an integer s (a count, a table of counts,
a truncated sum of counts), so the likelihood of a release y* is the finite-window sum
p(y* | theta) = sum_s p(s | theta) eta(y* - s), with eta the mechanism's log-mass (discrete Laplace,
discrete Gaussian) or density (Laplace, Gaussian).  No CLT, no scale mixture:

* ``binomial`` (Bernstein & Sheldon's Sec. 3.2 model): with p ~ Beta(a, b) integrated out, s has the
  beta-binomial law, so p(s | y*) ~ BetaBinomial(s; n, a, b) eta(y* - s) is enumerated over s and
  drawn exactly; then p | s ~ Beta(a + s, b + n - s).  IID exact draws.
* ``multinomial``: with p ~ Dirichlet(alpha) integrated out, the counts have the Dirichlet-multinomial
  law, a product over categories of Gamma(s_j + alpha_j) / s_j! under sum_j s_j = n.  The constrained
  sum is a chain: forward messages m_k(t) = sum_s f_k(s) m_{k-1}(t - s) over partial sums t, then
  backward sampling (:func:`knapsack_forward`, :func:`knapsack_sample`; compiled).  Then
  p | s ~ Dirichlet(alpha + s).  IID exact draws.
* ``poisson`` (truncated sum over public bounds [a, b], Sec. 3.3): one record contributes c = x if
  a <= x <= b else 0; the law of s = sum c_i is the n-fold convolution of c's law (FFT), so
  p(y* | lambda) is exact at every lambda, and lambda's posterior (one dimension) is tabulated on a
  grid placed around its mode and drawn by inverse CDF (piecewise-linear density in log lambda).
  The only approximation is the grid quadrature, whose effect on the mean and sd is checked by
  halving the grid (attr ``grid_check``).
* ``naive-bayes`` (counts tables): see :func:`naive_bayes_exact` -- the same chain, nested: each
  table row given its class count, then the class counts.

Windows: each noisy count is enumerated over s in [y* - W, y* + W] with P(|noise| > W) <= ``tail``
(default 1e-12; the mechanism's ``tail_window``).  The posterior mass left outside is bounded by
(sup of eta outside the window) * (prior mass, <= 1) / (mass inside), in log space; the bound is
recorded (attr ``omitted_mass_bound``) and the window doubled until it is below ``tail``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
from scipy import special

from ..errors import RefusedError
from ..options import EngineOptions, option
from ..posterior import Posterior
from .mcmc_common import pick_from_log_weights

#: the largest n * b for which the poisson family's truncated-sum law is convolved by FFT
MAX_POISSON_SUPPORT = 4_000_000
#: grid points of lambda's posterior (poisson)
POISSON_GRID = 801


@dataclass(frozen=True)
class ExactOptions(EngineOptions):
    """Options of engine ``exact`` (all of them; anything else is refused).

    ``draws`` x ``chains`` independent draws (chains only shape the output: every draw is exact and
    independent); ``seed``; ``tail_mass``: the noise mass allowed outside each enumeration window
    (and the bound on the posterior mass omitted), in (0, 1e-3].  No ``constrained`` (its posterior
    needs no constraint) and no ``warmup`` (nothing to warm up).
    """

    engine: ClassVar[str] = "exact"

    tail_mass: float = option(1e-12, "float", "noise mass allowed outside each enumeration window",
                              low=0.0, high=1e-3, open_high=False)


#: the enumeration work (released counts x reachable totals x window points) up to which ``auto`` prefers ``exact``
#: to a sampler on a continuous-Laplace count release: about 1 s of the compiled knapsack chain on one core
AUTO_MAX_WORK = 2e8


def competence(model):
    """Whether ``exact`` analyses this count model exactly and affordably (``Family.auto_order``): a latent statistic
    it can enumerate, one measurement with additive symmetric noise, and an enumeration of at most
    :data:`AUTO_MAX_WORK` (a truncated sum: an FFT support of at most :data:`MAX_POISSON_SUPPORT`)."""
    from ..families import Competence
    from ..observation import ENUMERATE

    if ENUMERATE not in model.latent.capabilities:
        return Competence(False, reason=f"cannot enumerate {model.latent.describe}")
    (measurement,) = model.measurements
    mech = measurement.mechanism
    if not getattr(mech, "additive_symmetric", False):
        return Competence(False, reason=f"needs additive symmetric noise; {mech.name!r} is not")
    n = int(model.n)
    points = min(2.0 * float(mech.tail_window(1e-12)) + 1.0, n + 1.0)
    bounds = model.latent.state.bounds
    if bounds is not None:  # a truncated sum
        support = n * float(bounds[1])
        if support > MAX_POISSON_SUPPORT:
            return Competence(False, support, f"the truncated sum's support {support:.3g} is above "
                              f"{MAX_POISSON_SUPPORT:.3g}")
        return Competence(True, support * max(1.0, math.log2(max(support, 2.0))))
    counts = int(np.asarray(measurement.values).size)
    work = points if counts == 1 else counts * (n + 1.0) * points
    if work > AUTO_MAX_WORK:
        return Competence(False, work, f"the enumeration would take about {work:.3g} steps (more than "
                          f"{AUTO_MAX_WORK:.3g})")
    return Competence(True, work)


# --------------------------------------------------------------------------- windows
def _mechanism(release):
    mech = release.mechanism
    if not getattr(mech, "additive_symmetric", False):
        raise RefusedError("method", f"'exact' needs additive symmetric noise; {mech.name!r} is not")
    return mech


def _window(mech, y: float, lo: int, hi: int, tail: float, widen: int = 0) -> tuple[int, int]:
    """Integer s in [lo, hi] with |y - s| <= W(tail) * 2^widen."""
    w = mech.tail_window(tail) * (2 ** widen)
    return max(lo, int(math.floor(y - w))), min(hi, int(math.ceil(y + w)))


def _log_sup_outside(mech, y: float, s_lo: int, s_hi: int, lo: int, hi: int) -> float:
    """log of the largest eta(y - s) over integers s in [lo, hi] outside [s_lo, s_hi] (-inf if none)."""
    cands = [s for s in (s_lo - 1, s_hi + 1) if lo <= s <= hi]
    if not cands:
        return -math.inf
    return float(max(mech.logpdf(y, float(s)) for s in cands))


# --------------------------------------------------------------------------- the constrained-sum chain
@numba.njit(cache=True)
def knapsack_forward(log_f, lows, t_lo, t_hi):
    """Forward messages of sum_k s_k = t with factor exp(log_f[k, s - lows[k]]) per part.

    log_f (K, L): log factors on each part's window s in [lows[k], lows[k] + L) (-inf beyond its end);
    t_lo, t_hi (K,): the range of partial sums t_k kept.  Returns msg (K, T) with msg[k, t] = log of
    sum over s_0..s_k with s_0 + .. + s_k = t of prod log_f (T = t_hi.max() + 1; -inf outside).
    """
    K, L = log_f.shape
    T = t_hi.max() + 1
    msg = np.full((K, T), -np.inf)
    for s in range(L):
        t = lows[0] + s
        if t_lo[0] <= t <= t_hi[0]:
            msg[0, t] = log_f[0, s]
    for k in range(1, K):
        for t in range(t_lo[k], t_hi[k] + 1):
            # one-pass log-sum-exp: acc is the sum scaled by exp(-m), m the largest term so far
            m = -np.inf
            acc = 0.0
            for s in range(L):
                prev = t - lows[k] - s
                if prev < 0:
                    break
                v = log_f[k, s] + msg[k - 1, prev] if prev <= t_hi[k - 1] else -np.inf
                if v == -np.inf:
                    continue
                if v > m:
                    acc = acc * math.exp(m - v) + 1.0
                    m = v
                else:
                    acc += math.exp(v - m)
            if m > -np.inf:
                msg[k, t] = m + math.log(acc)
    return msg


@numba.njit(cache=True)
def knapsack_sample(log_f, lows, msg, totals, u):
    """Backward sampling of (s_0..s_{K-1}) given sum = totals[d] for each draw d, from the forward messages.

    u (D, K) uniforms.  Returns s (D, K) int64."""
    K, L = log_f.shape
    D = totals.shape[0]
    out = np.zeros((D, K), dtype=np.int64)
    w = np.empty(L)
    for d in range(D):
        t = totals[d]
        for k in range(K - 1, 0, -1):
            m = -np.inf
            for s in range(L):
                prev = t - lows[k] - s
                w[s] = -np.inf
                if prev < 0 or prev >= msg.shape[1]:
                    continue
                v = log_f[k, s] + msg[k - 1, prev]
                w[s] = v
                if v > m:
                    m = v
            pick = pick_from_log_weights(w, L, m, u[d, k])
            out[d, k] = lows[k] + pick
            t -= lows[k] + pick
        out[d, 0] = t
    return out


def _chain_factors(mech, y, alpha, total, tail, widen):
    """log factors f_k(s) = lgamma(s + alpha_k) - lgamma(s + 1) + log eta(y_k - s) on each window."""
    K = len(y)
    bounds = [_window(mech, float(y[k]), 0, total, tail, widen) for k in range(K)]
    lows = np.array([b[0] for b in bounds], dtype=np.int64)
    highs = np.array([b[1] for b in bounds], dtype=np.int64)
    if np.any(highs < lows):
        return None
    L = int((highs - lows).max()) + 1
    log_f = np.full((K, L), -np.inf)
    for k in range(K):
        s = np.arange(lows[k], highs[k] + 1, dtype=float)
        log_f[k, : s.size] = (special.gammaln(s + alpha[k]) - special.gammaln(s + 1.0) - special.gammaln(alpha[k])
                              + mech.logpdf(float(y[k]), s))
    # partial sums reachable from the left and still able to reach `total` on the right
    lo_left, hi_left = np.cumsum(lows), np.cumsum(highs)
    lo_right = total - (highs.sum() - np.cumsum(highs))
    hi_right = total - (lows.sum() - np.cumsum(lows))
    t_lo = np.maximum(np.maximum(lo_left, lo_right), 0)
    t_hi = np.minimum(np.minimum(hi_left, hi_right), total)
    return log_f, lows, highs, t_lo.astype(np.int64), t_hi.astype(np.int64)


def _log_omitted_bound(mech, y, lows, highs, total) -> float:
    """log of an upper bound on the unnormalised mass outside the windows (prior mass <= 1)."""
    log_sup = float(mech.logpdf(0.0, 0.0))
    terms = [(_log_sup_outside(mech, float(y[k]), int(lows[k]), int(highs[k]), 0, total) - log_sup)
             for k in range(len(y))]
    terms = [t for t in terms if t > -math.inf]
    if not terms:
        return -math.inf
    return float(special.logsumexp(terms)) + len(y) * log_sup


def constrained_counts(mech, y, alpha, total: int, tail: float):
    """The chain for counts (K,) summing to ``total`` under a Dirichlet(alpha) prior: returns
    (log_f, lows, msg, log_Z, omitted_bound) with log_Z the log marginal likelihood of ``y``."""
    log_norm = special.gammaln(total + 1.0) + special.gammaln(alpha.sum()) - special.gammaln(total + alpha.sum())
    for widen in range(64):
        parts = _chain_factors(mech, y, alpha, total, tail, widen)
        if parts is not None:
            log_f, lows, highs, t_lo, t_hi = parts
            if t_lo[-1] <= total <= t_hi[-1] and np.all(t_lo <= t_hi):
                msg = knapsack_forward(log_f, lows, t_lo, t_hi)
                log_z = msg[-1, total] + log_norm
                if np.isfinite(log_z):
                    bound = math.exp(min(0.0, _log_omitted_bound(mech, y, lows, highs, total) + log_norm - log_z))
                    whole = bool(np.all(lows == 0) and np.all(highs == total))
                    if bound <= tail or whole:
                        return log_f, lows, msg, float(log_z), (0.0 if whole else bound)
    raise RefusedError("release", "the released counts are too far from any table of n records for the "
                       "enumeration window (is the noise scale right?)")


# --------------------------------------------------------------------------- engines
def _theta_shape(opts: ExactOptions) -> tuple[int, int]:
    return opts.chains, opts.draws


def _posterior(model, theta, attrs, latent=None) -> Posterior:
    """The draws (and the drawn latent statistic) named through the family's observation model."""
    from .gibbs_ss import pack_draws

    stats = {"statistic": latent} if latent is not None else None
    return pack_draws(model, "exact", theta, attrs, sample_stats=stats, iid=True)


def _attrs(release, prior, opts, bound, extra=None) -> dict:
    out = {"algorithm": "exact enumeration over the latent integer statistic",
           "prior": str(prior.to_dict()), "mechanism": release.mechanism.name, "tail_mass": opts.tail_mass,
           "omitted_mass_bound": float(bound)}
    out.update(extra or {})
    return out


#: float64 arrays as long as the enumeration window alive at once (measured peak of exact_binomial / multinomial)
WINDOW_ARRAYS = 16


def _check_window_memory(mech, y, total: int, tail: float, draws_bytes: float, extra_per_point: float = 0.0):
    """Refuse, before allocating, windows |y_k - s| <= W(tail) on [0, total] that would not fit in memory."""
    from ..memory import available_bytes, check_fits, size

    points = 0.0
    for yk in np.atleast_1d(np.asarray(y, float)):
        lo, hi = _window(mech, float(yk), 0, total, tail)
        points = max(points, float(max(hi - lo + 1, 0)))
    K = np.atleast_1d(y).size
    need = 8.0 * points * (WINDOW_ARRAYS + K - 1) + extra_per_point * K + draws_bytes
    avail = available_bytes()
    if avail is not None and need > avail:
        width = mech.tail_window(tail)
        check_fits(need, "method", f"exact: the enumeration window of the noise (+-{width:g} counts around each "
                   f"released value, {points:.3g} points on [0, {total}], and the draws)",
                   "the noise is too wide to enumerate here: use --method gibbs-ss (Laplace releases) or da-mcmc, a "
                   "release with less noise, or a machine with more memory")


def exact_binomial(model, opts: ExactOptions, rng):
    release, prior = model.release, model.prior.spec
    mech = _mechanism(release)
    y, n = float(release.released[0]), int(release.n)
    a, b = prior.alpha, prior.beta
    _check_window_memory(mech, y, n, opts.tail_mass, 2.0 * 8.0 * opts.draws * opts.chains)
    for widen in range(64):
        lo, hi = _window(mech, y, 0, n, opts.tail_mass, widen)
        if hi < lo:
            continue
        s = np.arange(lo, hi + 1, dtype=float)
        log_bb = (special.gammaln(n + 1.0) - special.gammaln(s + 1.0) - special.gammaln(n - s + 1.0)
                  + special.betaln(s + a, n - s + b) - special.betaln(a, b))
        logw = log_bb + mech.logpdf(y, s)
        log_z = float(special.logsumexp(logw))
        bound = 0.0 if (lo == 0 and hi == n) else math.exp(min(0.0, _log_sup_outside(mech, y, lo, hi, 0, n) - log_z))
        if bound <= opts.tail_mass or (lo == 0 and hi == n):
            break
    p_s = np.exp(logw - log_z)
    shape = _theta_shape(opts)
    s_draw = s[rng.choice(s.size, size=shape, p=p_s / p_s.sum())]
    theta = rng.beta(a + s_draw, b + n - s_draw)
    return _posterior(model, theta, _attrs(release, prior, opts, bound, {"log_evidence": log_z}), s_draw)


def exact_multinomial(model, opts: ExactOptions, rng):
    release, prior = model.release, model.prior.spec
    mech = _mechanism(release)
    y = release.released
    n, K = int(release.n), len(y)
    alpha = prior.vector(K)
    # log_f (K x window) and the forward messages (K x (n + 1) partial sums at most)
    _check_window_memory(mech, y, n, opts.tail_mass, 8.0 * (K + 2) * opts.draws * opts.chains,
                         extra_per_point=8.0 * (n + 1))
    log_f, lows, msg, log_z, bound = constrained_counts(mech, y, alpha, n, opts.tail_mass)
    C, D = _theta_shape(opts)
    u = rng.random((C * D, K))
    s = knapsack_sample(log_f, lows, msg, np.full(C * D, n, dtype=np.int64), u).astype(float)
    g = rng.gamma(alpha[None, :] + s)
    theta = (g / g.sum(axis=1, keepdims=True)).reshape(C, D, K)
    return _posterior(model, theta, _attrs(release, prior, opts, bound, {"log_evidence": log_z}),
                      s.reshape(C, D, K))


# ------------------------------------------------------------------ poisson: truncated sum by FFT
def truncated_sum_log_pmf(lam: float, n: int, lo: int, hi: int) -> np.ndarray:
    """log P(s = 0..n*hi) of s = sum of n records' contributions c = x 1{lo <= x <= hi}, x ~ Poisson(lam)."""
    from scipy import fft, stats

    x = np.arange(0, hi + 1)
    pmf = np.zeros(hi + 1)
    inside = (x >= max(lo, 1))
    pmf[inside] = stats.poisson.pmf(x[inside], lam)
    pmf[0] = max(0.0, 1.0 - pmf[1:].sum())
    size = fft.next_fast_len(n * hi + 1, real=True)
    spec = fft.rfft(pmf, size) ** n
    out = fft.irfft(spec, size)[: n * hi + 1]
    with np.errstate(divide="ignore"):
        return np.log(np.clip(out, 0.0, None))


def exact_poisson(model, opts: ExactOptions, rng):
    release, prior = model.release, model.prior.spec
    mech = _mechanism(release)
    y, n = float(release.released[0]), int(release.n)
    lo, hi = int(math.ceil(release.bounds[0])), int(math.floor(release.bounds[1]))
    top = n * hi
    if top + 1 > MAX_POISSON_SUPPORT:
        raise RefusedError("method", f"'exact' convolves the truncated sum's law over n * b + 1 = {top + 1} values, "
                           f"more than {MAX_POISSON_SUPPORT}; use gibbs-ss (Laplace) or da-mcmc")
    s_lo, s_hi = _window(mech, y, 0, top, opts.tail_mass)
    s = np.arange(s_lo, s_hi + 1, dtype=float)
    log_eta = mech.logpdf(y, s)
    log_sup_out = _log_sup_outside(mech, y, s_lo, s_hi, 0, top)

    def loglik(log_lam):
        lp = truncated_sum_log_pmf(math.exp(log_lam), n, lo, hi)[s_lo:s_hi + 1]
        return float(special.logsumexp(lp + log_eta))

    def log_post(log_lam):  # Gamma(shape, rate) prior on lambda, in log lambda (Jacobian lambda)
        return loglik(log_lam) + prior.shape * log_lam - prior.rate * math.exp(log_lam)

    grid, logp = _grid_posterior(log_post, y, n, lo, hi, prior)
    dens = np.exp(logp - logp.max())
    # mass check by halving the grid: mean and sd of log lambda from every other point
    mean_sd = [_grid_moments(grid[::step], dens[::step]) for step in (1, 2)]
    shift = abs(mean_sd[0][0] - mean_sd[1][0]) / mean_sd[0][1]
    draws = _inverse_cdf_piecewise_linear(grid, dens, rng.random(_theta_shape(opts)))
    # the omitted mass bound: sup of eta outside the window over the mass inside, at the grid's mode
    mode = grid[int(np.argmax(logp))]
    bound = math.exp(min(0.0, log_sup_out - loglik(mode))) if log_sup_out > -math.inf else 0.0
    attrs = _attrs(release, prior, opts, bound, {"grid_points": int(grid.size),
                                                 "grid_check": f"mean of log rate moves {shift:.2g} sd "
                                                               "when the grid is halved"})
    return _posterior(model, np.exp(draws), attrs)


def _grid_moments(x, dens):
    w = dens / dens.sum()
    m = float((w * x).sum())
    return m, float(math.sqrt(max((w * (x - m) ** 2).sum(), 1e-300)))


def _grid_posterior(log_post, y, n, lo, hi, prior):
    """A grid in log lambda holding all but a negligible part of the posterior.

    The truncated sum is not monotone in lambda (records above the upper bound contribute 0), so the
    posterior can have two distant modes (Bernstein & Sheldon, Sec. 3.3): a coarse grid over the prior's
    central 1 - 2e-14 finds every region within exp(-40) of the top; a local search refines the highest
    mode's width; the fine grid spans both, with a spacing of at most 1/20 of that width.
    """
    from scipy import stats
    from scipy.optimize import minimize_scalar

    gam = stats.gamma(prior.shape, scale=1.0 / prior.rate)
    coarse = np.linspace(math.log(max(gam.ppf(1e-14), 1e-12)), math.log(gam.isf(1e-14)), 400)
    lp = np.array([log_post(g) for g in coarse])
    k = int(np.argmax(lp))
    step = coarse[1] - coarse[0]
    res = minimize_scalar(lambda t: -log_post(t), bounds=(coarse[max(k - 1, 0)], coarse[min(k + 1, 399)]),
                          method="bounded", options={"xatol": 1e-9})
    mode = float(res.x)
    h = 1e-4
    curv = -(log_post(mode + h) - 2 * log_post(mode) + log_post(mode - h)) / (h * h)
    sd = 1.0 / math.sqrt(curv) if curv > 0 else step
    top = max(float(lp.max()), log_post(mode))
    keep = np.flatnonzero(lp - top > -40.0)
    left = min(coarse[max(keep.min() - 1, 0)], mode - 12 * sd)
    right = max(coarse[min(keep.max() + 1, 399)], mode + 12 * sd)
    points = int(min(20001, max(POISSON_GRID, math.ceil((right - left) / (sd / 20.0)))))
    grid = np.linspace(left, right, points)
    return grid, np.array([log_post(g) for g in grid])


def _inverse_cdf_piecewise_linear(x, dens, u):
    """Draws from the density that is linear between grid points (x, dens), by its exact inverse CDF."""
    dx = np.diff(x)
    seg = 0.5 * (dens[1:] + dens[:-1]) * dx
    cdf = np.concatenate([[0.0], np.cumsum(seg)])
    target = u * cdf[-1]
    i = np.clip(np.searchsorted(cdf, target, side="right") - 1, 0, seg.size - 1)
    r = target - cdf[i]
    f0, f1, w = dens[i], dens[i + 1], dx[i]
    slope = (f1 - f0) / w
    # solve f0 t + slope t^2 / 2 = r for t in [0, w]
    disc = np.sqrt(np.maximum(f0 * f0 + 2.0 * slope * r, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(np.abs(slope) > 1e-300, (disc - f0) / slope, r / np.maximum(f0, 1e-300))
    return x[i] + np.clip(t, 0.0, w)


def _rng(opts):
    return np.random.default_rng(np.random.SeedSequence(opts.seed) if not isinstance(opts.seed, np.random.SeedSequence)
                                 else opts.seed)


def exact(model, options) -> Posterior:
    """Engine ``exact`` of the count families (binomial, multinomial, poisson): exact iid posterior draws by
    enumeration, the chain chosen by the release's record law (``release.expfam.record_law``)."""
    from ..families._expfam import RecordLaw

    expfam = getattr(model.release, "expfam", None)
    run = {RecordLaw.BERNOULLI: exact_binomial, RecordLaw.CATEGORICAL: exact_multinomial,
           RecordLaw.POISSON: exact_poisson}.get(getattr(expfam, "record_law", None))
    if run is None:
        raise RefusedError("method", f"'exact' does not serve family {model.family!r}")
    return run(model, options, _rng(options))


def exact_naive_bayes(model, options) -> Posterior:
    """Engine ``exact`` of the naive-bayes family (:func:`naive_bayes_exact`)."""
    return naive_bayes_exact(model, options, _rng(options))


# ------------------------------------------------------------------ naive-bayes: the chain, nested
def _free_chain(mech, y, alpha, n: int, tail: float, widen: int = 0):
    """Forward messages of one table row (cells y, Dirichlet(alpha)) for every row total t in [0, n].

    Returns (log_f, lows, msg, log_r) with log_r[t] = log sum over rows summing to t of
    DirMult(row; t, alpha) prod_j eta(y_j - row_j) (-inf where no row in the windows sums to t)."""
    J = len(y)
    bounds = [_window(mech, float(y[j]), 0, n, tail, widen) for j in range(J)]
    lows = np.array([b[0] for b in bounds], dtype=np.int64)
    highs = np.array([max(b[1], b[0]) for b in bounds], dtype=np.int64)
    L = int((highs - lows).max()) + 1
    log_f = np.full((J, L), -np.inf)
    for j in range(J):
        s = np.arange(lows[j], highs[j] + 1, dtype=float)
        log_f[j, : s.size] = (special.gammaln(s + alpha[j]) - special.gammaln(s + 1.0) - special.gammaln(alpha[j])
                              + mech.logpdf(float(y[j]), s))
    t_lo = np.cumsum(lows).astype(np.int64)
    t_hi = np.minimum(np.cumsum(highs), n).astype(np.int64)
    msg = knapsack_forward(log_f, lows, t_lo, np.maximum(t_hi, t_lo))
    t = np.arange(msg.shape[1], dtype=float)
    A = float(np.sum(alpha))
    log_r = np.full(n + 1, -np.inf)
    top = min(n + 1, msg.shape[1])
    log_r[:top] = (msg[-1, :top] + special.gammaln(t[:top] + 1.0) + special.gammaln(A)
                   - special.gammaln(t[:top] + A))
    return log_f, lows, highs, msg, log_r


def _naive_bayes_chains(mech, release, m, alpha_c, alpha_f, n, tail, widen):
    """The row chains and the class chain at one window width; returns them with log Z and the bound."""
    I, K = release.classes, release.K
    rows = {}
    h = np.zeros((I, n + 1))
    log_sup = float(mech.logpdf(0.0, 0.0))
    omitted_terms = []
    for k in range(K):
        J = release.levels[k]
        for i in range(I):
            log_f, lows, highs, msg, log_r = _free_chain(mech, m[k, i, :J], alpha_f[k, i, :J], n, tail, widen)
            rows[k, i] = (log_f, lows, msg)
            h[i] += log_r
            for j in range(J):
                out = _log_sup_outside(mech, float(m[k, i, j]), int(lows[j]), int(highs[j]), 0, n)
                if out > -math.inf:
                    omitted_terms.append(out - log_sup)
    class_f = np.empty((I, n + 1))
    N = np.arange(n + 1, dtype=float)
    for i in range(I):
        class_f[i] = special.gammaln(N + alpha_c[i]) - special.gammaln(N + 1.0) - special.gammaln(alpha_c[i]) + h[i]
    lows0 = np.zeros(I, dtype=np.int64)
    msg_c = knapsack_forward(class_f, lows0, np.zeros(I, dtype=np.int64), np.full(I, n, dtype=np.int64))
    log_z = float(msg_c[-1, n] + special.gammaln(n + 1.0) + special.gammaln(alpha_c.sum())
                  - special.gammaln(n + alpha_c.sum()))
    if not np.isfinite(log_z):
        raise RefusedError("release", "the released tables are too far from any tables of n records for the "
                           "enumeration windows (is the noise scale right?)")
    n_cells = sum(release.levels) * I
    bound = 0.0
    if omitted_terms:  # (sup outside / sup) for one cell times sup for every cell, over the evidence
        bound = math.exp(min(0.0, float(special.logsumexp(omitted_terms)) + n_cells * log_sup - log_z))
    return rows, class_f, lows0, msg_c, log_z, bound


def naive_bayes_exact(model, opts: ExactOptions, rng):
    """Exact iid draws for the naive Bayes tables (Karwa et al. Sec. 4 model) under any additive noise.

    Given the class counts N (I,), each table row k, i is a Dirichlet-multinomial of N_i records, so
    p(tables | N) = prod_i h_i(N_i) with h_i(t) = prod_k R_ki(t), R_ki from a row chain over its cells
    (:func:`_free_chain`); the class counts are a Dirichlet-multinomial chain over classes with factors
    Gamma(N_i + alpha_i)/N_i! h_i(N_i) and sum n.  Draw N backwards, then each row given N_i, then the
    probabilities by conjugacy."""
    from ..mechanisms import Laplace

    release, prior = model.release, model.prior.spec
    mech = release.mechanism
    if not mech.integer_valued:  # proportions are analysed on the count scale (Laplace rescales exactly)
        mech = Laplace(1.0, release.noise_scale_counts())
    m, mask = release.released_counts()
    n, I, K = int(release.n), release.classes, release.K
    alpha_c = np.asarray(prior.class_alpha, float)
    alpha_f = np.asarray(prior.feature_alpha_filled(), float)
    for widen in range(12):  # double the windows until the omitted posterior mass is below tail_mass
        rows, class_f, lows0, msg_c, log_z, bound = _naive_bayes_chains(mech, release, m, alpha_c, alpha_f, n,
                                                                       opts.tail_mass, widen)
        if bound <= opts.tail_mass:
            break
    else:
        raise RefusedError("tail_mass", f"the enumeration windows leave up to {bound:.2g} of the posterior out")
    C, D = _theta_shape(opts)
    total = C * D
    counts = knapsack_sample(class_f, lows0, msg_c, np.full(total, n, dtype=np.int64), rng.random((total, I)))
    g = rng.gamma(alpha_c[None, :] + counts)
    class_prob = (g / g.sum(axis=1, keepdims=True)).reshape(C, D, I)
    jmax = max(release.levels)
    feature_prob = np.full((total, K, I, jmax), np.nan)
    for (k, i), (log_f, lows, msg) in rows.items():
        J = release.levels[k]
        row = knapsack_sample(log_f, lows, msg, counts[:, i].astype(np.int64), rng.random((total, J)))
        g = rng.gamma(alpha_f[k, i, :J][None, :] + row)
        feature_prob[:, k, i, :J] = g / g.sum(axis=1, keepdims=True)
    from .naive_bayes_vb import posterior_from_draws

    return posterior_from_draws(model, "exact", class_prob, feature_prob.reshape(C, D, K, I, jmax),
                                attrs={"algorithm": "exact enumeration over the latent tables",
                                       "mechanism": release.statistics.tables.mechanism, "tail_mass": opts.tail_mass,
                                       "omitted_mass_bound": bound, "log_evidence": log_z})
