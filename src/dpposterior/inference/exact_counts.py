"""Engine ``exact``: the exact posterior of a count release under any additive noise, by enumeration.

Issue 27.  The released statistic of the count families is an integer s (a count, a table of counts,
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

import numba
import numpy as np
from scipy import special

from ..errors import InputError, RefusedError
from ..posterior import Posterior

#: the largest n * b for which the poisson family's truncated-sum law is convolved by FFT
MAX_POISSON_SUPPORT = 4_000_000
#: grid points of lambda's posterior (poisson)
POISSON_GRID = 801


@dataclass(frozen=True)
class ExactOptions:
    """Options of engine ``exact`` (all of them; anything else is refused).

    ``draws`` x ``chains`` independent draws (chains only shape the output: every draw is exact and
    independent); ``seed``; ``tail_mass``: the noise mass allowed outside each enumeration window
    (and the bound on the posterior mass omitted), in (0, 1e-3].
    """

    draws: int = 5000
    chains: int = 4
    seed: object = None
    tail_mass: float = 1e-12

    @classmethod
    def from_inference(cls, options) -> "ExactOptions":
        extra = dict(options.extra or {})
        extra.pop("confidential", None)  # passed by calibrate to every engine; exact does not need it
        tail = extra.pop("tail_mass", 1e-12)
        if extra:
            key = sorted(extra)[0]
            raise InputError(key, f"not an option of engine 'exact' (options: draws, chains, seed, tail_mass)")
        if options.constrained:
            raise InputError("constrained", "not an option of engine 'exact' (its posterior needs no constraint)")
        if isinstance(tail, bool) or not isinstance(tail, (int, float)) or not (0 < tail <= 1e-3):
            raise InputError("tail_mass", f"must be a number in (0, 1e-3] (got {tail!r})")
        return cls(int(options.draws), int(options.chains), options.seed, float(tail))


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
            m = -np.inf
            for s in range(L):
                prev = t - lows[k] - s
                if prev < 0:
                    break
                if prev > t_hi[k - 1] or log_f[k, s] == -np.inf:
                    continue
                m = max(m, log_f[k, s] + msg[k - 1, prev])
            if m == -np.inf:
                continue
            acc = 0.0
            for s in range(L):
                prev = t - lows[k] - s
                if prev < 0:
                    break
                if prev > t_hi[k - 1] or log_f[k, s] == -np.inf:
                    continue
                acc += math.exp(log_f[k, s] + msg[k - 1, prev] - m)
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
            acc = 0.0
            for s in range(L):
                w[s] = math.exp(w[s] - m) if w[s] > -np.inf else 0.0
                acc += w[s]
            target = u[d, k] * acc
            run = 0.0
            pick = L - 1
            for s in range(L):
                run += w[s]
                if run >= target and w[s] > 0.0:
                    pick = s
                    break
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


def _posterior(release, theta, attrs, latent=None) -> Posterior:
    from .gibbs_ss import make_posterior

    stats = {"statistic": latent} if latent is not None else None
    return make_posterior(release, "exact", theta, attrs, sample_stats=stats, iid=True)


def _attrs(release, prior, opts, bound, extra=None) -> dict:
    out = {"algorithm": "exact enumeration over the latent integer statistic (issue 27)",
           "prior": str(prior.to_dict()), "mechanism": release.mechanism.name, "tail_mass": opts.tail_mass,
           "omitted_mass_bound": float(bound)}
    out.update(extra or {})
    return out


def exact_binomial(release, prior, opts: ExactOptions, rng):
    mech = _mechanism(release)
    y, n = float(release.released[0]), int(release.n)
    a, b = prior.alpha, prior.beta
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
    return _posterior(release, theta, _attrs(release, prior, opts, bound, {"log_evidence": log_z}), s_draw)


def exact_multinomial(release, prior, opts: ExactOptions, rng):
    mech = _mechanism(release)
    y = release.released
    n, K = int(release.n), len(y)
    alpha = prior.vector(K)
    log_f, lows, msg, log_z, bound = constrained_counts(mech, y, alpha, n, opts.tail_mass)
    C, D = _theta_shape(opts)
    u = rng.random((C * D, K))
    s = knapsack_sample(log_f, lows, msg, np.full(C * D, n, dtype=np.int64), u).astype(float)
    g = rng.gamma(alpha[None, :] + s)
    theta = (g / g.sum(axis=1, keepdims=True)).reshape(C, D, K)
    return _posterior(release, theta, _attrs(release, prior, opts, bound, {"log_evidence": log_z}),
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


def exact_poisson(release, prior, opts: ExactOptions, rng):
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
    return _posterior(release, np.exp(draws), attrs)


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


def exact(release, prior, options) -> Posterior:
    """Engine ``exact`` (binomial, multinomial, poisson): exact iid posterior draws by enumeration."""
    opts = ExactOptions.from_inference(options)
    rng = np.random.default_rng(np.random.SeedSequence(opts.seed) if not isinstance(opts.seed, np.random.SeedSequence)
                                else opts.seed)
    run = {"binomial": exact_binomial, "multinomial": exact_multinomial, "poisson": exact_poisson}.get(release.family)
    if run is None:
        raise RefusedError("method", f"'exact' does not serve family {release.family!r}")
    return run(release, prior, opts, rng)
