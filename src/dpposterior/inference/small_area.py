"""Engine ``exact-da`` for family ``small-area``: exact data augmentation over the latent counts (issue 28).

Model (families/small_area.py, docs/small-area.md): y_gc ~ Poisson(E_g lambda_gc), log lambda_gc = alpha_c
+ u_g (+ v_parent(g)), u ~ N(0, tau^2), v ~ N(0, tau_parent^2), released y*_gc = y_gc + e_gc (optionally
max(0, .)), optionally with exact area totals.  A Gibbs sampler over (y, u, alpha, v, tau, tau_parent):

* **latent counts**, each exactly from its full conditional Poisson(y; mu) eta(y* - y), by enumeration
  over the window |y - y*| <= W holding all but ``tail_mass`` of the noise (intersected with the
  Poisson's own 1 - 1e-12 window where that is narrower); a released 0 under ``nonnegative``
  post-processing has likelihood P(e <= -y) (a table of the noise CDF).  With area totals the cells
  move in pairs (c, c+1 mod C) keeping each total: the split s of m = y_c + y_c' is drawn exactly from
  Binomial(s; m, mu_c / (mu_c + mu_c')) eta(y*_c - s) eta(y*_c' - m + s);
* **area effects u_g, parent effects v_p, cell effects alpha_c, log tau, log tau_parent**: one
  univariate slice-sampling step each (Neal 2003, stepping out and shrinkage), on their exact full
  conditionals through sufficient statistics (counts and exposure-weighted sums) -- no tuning, valid
  for any data; plus two moves that leave the likelihood unchanged and fix the slow directions of a
  centred hierarchy: a joint shift (alpha + d, u - d) (and (v + d, u_children - d)) by random-walk
  Metropolis on the priors, and a non-centred slice update of tau with u / tau held fixed
  (interweaving, Yu & Meng 2011), so tau mixes when the areas carry little information.

Randomness is counter-based: every uniform is splitmix64 of (chain key, area or parameter index,
iteration, slot), so an area's draws depend on the seed and its own index only -- identical for any
partitioning of the areas (the Dask path partitions them) and any thread schedule.  Kernels are numba
(``cache=True``); chains run in parallel (``prange``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np

from ..options import MCMCOptions, option
from ..posterior import Posterior

#: the most draws x areas x cells for which the ``rate`` array is stored (beyond it: alpha, u, v only)
MAX_RATE_VALUES = 40_000_000
GAUSS, LAPLACE = 0, 1
#: the most stepping-out steps of a slice update (split at random between the two sides)
STEP_OUT = 50


@dataclass(frozen=True)
class SmallAreaOptions(MCMCOptions):
    """Options of ``exact-da`` (and the small-area ``naive``): draws, warmup, chains, seed; ``tail_mass`` (noise
    mass outside each enumeration window, default 1e-12); ``pair_sweeps`` (pair moves per cell per iteration
    when the release has area totals, default 1)."""

    engine: ClassVar[str] = "exact-da"

    tail_mass: float = option(1e-12, "float", "noise mass allowed outside each enumeration window", low=0.0,
                              high=1e-3, open_high=False)
    pair_sweeps: int = option(1, "int", "pair moves per cell and iteration (area totals)", low=1)


# --------------------------------------------------------------------------- counter-based uniforms
@numba.njit(cache=True, inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def _uniform(key, a, b, c):
    """A uniform in (0, 1) from the counter (a, b, c) under ``key`` (splitmix64 chained)."""
    z = _mix(key ^ (np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)))
    z = _mix(z + np.uint64(b) * np.uint64(0xD1B54A32D192ED03))
    z = _mix(z + np.uint64(c) * np.uint64(0x8CB92BA72F3D8DD7))
    return (np.float64(z >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, inline="always")
def _normal(key, a, b, c):
    u1 = _uniform(key, a, b, 2 * c)
    u2 = _uniform(key, a, b, 2 * c + 1)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


# --------------------------------------------------------------------------- noise and windows
@numba.njit(cache=True, inline="always")
def _log_eta(kind, scale, d):
    if kind == GAUSS:
        return -0.5 * (d / scale) * (d / scale)
    return -abs(d) / scale


@numba.njit(cache=True, inline="always")
def _log_like_obs(kind, scale, ystar, y, zero_pp, zero_tab, zrow):
    """log p(released | latent y) up to a constant in y: eta(y* - y), or P(e <= -y) for a post-processed 0."""
    if zero_pp:
        if y >= zero_tab.shape[1]:
            return -np.inf
        return zero_tab[zrow, y]
    return _log_eta(kind, scale, ystar - y)


@numba.njit(cache=True)
def _draw_latent(mu, kind, scale, ystar, half, zero_pp, zero_tab, zrow, lgam, u, buf):
    """One exact draw of y from Poisson(y; mu) * p(y* | y) over its window (``buf``: scratch of the window's
    width; one exp per value: log-weights, then weights, then the inverse-CDF walk)."""
    if zero_pp:
        lo, hi = 0, zero_tab.shape[1] - 1
    else:
        lo = max(0, int(math.floor(ystar - half)))
        hi = int(math.ceil(ystar + half))
    # the Poisson's own window, where it is narrower (mass outside < 1e-12)
    plo = int(mu - 8.0 * math.sqrt(mu) - 10.0)
    phi = int(mu + 8.0 * math.sqrt(mu) + 10.0)
    if plo > lo and plo <= hi:
        lo = plo
    if phi < hi and phi >= lo:
        hi = phi
    if hi - lo + 1 > buf.shape[0]:
        hi = lo + buf.shape[0] - 1
    logmu = math.log(mu) if mu > 0 else -745.0
    best = -np.inf
    for y in range(lo, hi + 1):
        lg = lgam[y] if y < lgam.shape[0] else math.lgamma(y + 1.0)
        w = y * logmu - lg + _log_like_obs(kind, scale, ystar, y, zero_pp, zero_tab, zrow)
        buf[y - lo] = w
        if w > best:
            best = w
    if best == -np.inf:
        return max(lo, int(ystar))
    total = 0.0
    for i in range(hi - lo + 1):
        w = math.exp(buf[i] - best)
        buf[i] = w
        total += w
    target = u * total
    run = 0.0
    for i in range(hi - lo + 1):
        run += buf[i]
        if run >= target:
            return lo + i
    return hi


@numba.njit(cache=True)
def _draw_pair(m, p, kind, s1, s2, y1, y2, h1, h2, z1, z2, zt, zr1, zr2, lgam, u):
    """The split s of m = y_c + y_c' (y_c = s), exactly: Binomial(s; m, p) eta1(y1* - s) eta2(y2* - m + s)."""
    lo = 0 if z1 else max(0, int(math.floor(y1 - h1)))
    hi = (zt.shape[1] - 1) if z1 else int(math.ceil(y1 + h1))
    if z2:
        lo = max(lo, m - (zt.shape[1] - 1))
    else:
        lo = max(lo, m - int(math.ceil(y2 + h2)))
        hi = min(hi, m - max(0, int(math.floor(y2 - h2))))
    hi = min(hi, m)
    lo = max(lo, 0)
    if hi < lo:
        return -1
    lp = math.log(p) if p > 0 else -745.0
    lq = math.log1p(-p) if p < 1 else -745.0
    best = -np.inf
    for s in range(lo, hi + 1):
        w = (s * lp + (m - s) * lq - _lfact(lgam, s) - _lfact(lgam, m - s) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1)
             + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2))
        if w > best:
            best = w
    if best == -np.inf:
        return -1
    total = 0.0
    for s in range(lo, hi + 1):
        total += math.exp(s * lp + (m - s) * lq - _lfact(lgam, s) - _lfact(lgam, m - s) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1)
                          + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2) - best)
    target = u * total
    run = 0.0
    for s in range(lo, hi + 1):
        run += math.exp(s * lp + (m - s) * lq - _lfact(lgam, s) - _lfact(lgam, m - s) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1)
                        + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2) - best)
        if run >= target:
            return s
    return hi


# --------------------------------------------------------------------------- slice sampling
@numba.njit(cache=True)
def _logf(code, x, a, b, c, d, z, Yg, Sg):
    """The univariate log full conditionals, by code:
    0 effect:   a x - b e^x - (x - d)^2 / (2 c^2)     (u_g, v_p, alpha_c: counts a, exposure sum b)
    1 log-sd:   -a x - b e^(-2x) / 2 - e^(2x) / (2 c^2) + x   (centred tau: a = #effects, b = sum of squares)
    2 non-centred log tau, u = e^x z held fixed: sum_g (Y_g e^x z_g - S_g e^(e^x z_g)) - e^(2x) / (2 c^2) + x
    (``z``, ``Yg``, ``Sg`` are read by code 2 only)
    """
    if code == 0:
        return a * x - b * math.exp(x) - (x - d) * (x - d) / (2.0 * c * c)
    if code == 1:
        return -a * x - 0.5 * b * math.exp(-2.0 * x) - math.exp(2.0 * x) / (2.0 * c * c) + x
    tau = math.exp(x)
    out = 0.0
    for g in range(z.shape[0]):
        t = tau * z[g]
        out += Yg[g] * t - Sg[g] * math.exp(t)
    return out - tau * tau / (2.0 * c * c) + x


@numba.njit(cache=True)
def _slice(code, x0, a, b, c, d, w, key, idx, it, slot, z, Yg, Sg):
    """One slice-sampling step (Neal 2003: stepping out, then shrinkage) from x0, on ``_logf(code, ...)``."""
    f0 = _logf(code, x0, a, b, c, d, z, Yg, Sg)
    level = f0 + math.log(_uniform(key, idx, it, slot))
    left = x0 - w * _uniform(key, idx, it, slot + 1)
    right = left + w
    # at most STEP_OUT steps, split at random between the two sides (Neal 2003, Fig. 3): exact when it binds
    j = int(STEP_OUT * _uniform(key, idx, it, slot + 250))
    k = STEP_OUT - 1 - j
    while j > 0 and _logf(code, left, a, b, c, d, z, Yg, Sg) > level:
        left -= w
        j -= 1
    while k > 0 and _logf(code, right, a, b, c, d, z, Yg, Sg) > level:
        right += w
        k -= 1
    for j in range(200):
        x = left + (right - left) * _uniform(key, idx, it, slot + 2 + j)
        if _logf(code, x, a, b, c, d, z, Yg, Sg) > level:
            return x
        if x < x0:
            left = x
        else:
            right = x
    return x0


# --------------------------------------------------------------------------- one chain
@numba.njit(cache=True)
def _run_chain(key, ystar, E, kind, scale, half, zero_pp, zero_tab, zrow, totals, has_totals, pidx, P,
               alpha_mean, alpha_sd, tau_scale, taup_scale, warmup, draws, pair_sweeps, lgam,
               y, u, alpha, v, log_tau, log_taup,
               out_alpha, out_u, out_v, out_tau, out_taup):
    G, C = ystar.shape
    has_p = P > 0
    buf = np.empty(int(2.0 * half.max()) + zero_tab.shape[1] + 8)
    PARAM = G + 10  # counter index base of the shared parameters (areas use 0..G-1)
    Yg = np.zeros(G)
    Sg = np.zeros(G)
    z = np.zeros(G)  # u / tau, for the non-centred tau update
    ea = np.empty(C)
    for it in range(warmup + draws):
        # ---- latent counts (per area; counters depend on the area only)
        for c in range(C):
            ea[c] = math.exp(alpha[c])
        for g in range(G):
            vg = v[pidx[g]] if has_p else 0.0
            base = E[g] * math.exp(u[g] + vg)
            if has_totals:
                for rep in range(pair_sweeps):
                    for c in range(C):
                        c2 = (c + 1) % C
                        if c2 == c:
                            continue
                        m = y[g, c] + y[g, c2]
                        p = ea[c] / (ea[c] + ea[c2])
                        s = _draw_pair(m, p, kind, scale[g, c], scale[g, c2], ystar[g, c], ystar[g, c2],
                                       half[g, c], half[g, c2], zero_pp[g, c], zero_pp[g, c2], zero_tab,
                                       zrow[g, c], zrow[g, c2], lgam, _uniform(key, g, it, 1000 + rep * C + c))
                        if s >= 0:
                            y[g, c] = s
                            y[g, c2] = m - s
            else:
                for c in range(C):
                    y[g, c] = _draw_latent(base * ea[c], kind, scale[g, c], ystar[g, c], half[g, c], zero_pp[g, c],
                                           zero_tab, zrow[g, c], lgam, _uniform(key, g, it, c), buf)
            tot = 0.0
            for c in range(C):
                tot += y[g, c]
            Yg[g] = tot
        # ---- area effects
        sum_ea = 0.0
        for c in range(C):
            sum_ea += ea[c]
        tau = math.exp(log_tau)
        for g in range(G):
            vg = v[pidx[g]] if has_p else 0.0
            Sg[g] = E[g] * math.exp(vg) * sum_ea
            w = 2.5 / math.sqrt(Yg[g] + 1.0 / (tau * tau))
            u[g] = _slice(0, u[g], Yg[g], Sg[g], tau, 0.0, w, key, g, it, 5000, z, Yg, Sg)
        # ---- parent effects
        if has_p:
            taup = math.exp(log_taup)
            for p in range(P):
                a = 0.0
                b = 0.0
                for g in range(G):
                    if pidx[g] == p:
                        a += Yg[g]
                        b += E[g] * math.exp(u[g]) * sum_ea
                w = 2.5 / math.sqrt(a + 1.0 / (taup * taup))
                v[p] = _slice(0, v[p], a, b, taup, 0.0, w, key, PARAM + 100 + p, it, 0, z, Yg, Sg)
        # ---- cell effects
        A = 0.0
        for g in range(G):
            vg = v[pidx[g]] if has_p else 0.0
            A += E[g] * math.exp(u[g] + vg)
        for c in range(C):
            Yc = 0.0
            for g in range(G):
                Yc += y[g, c]
            w = 2.5 / math.sqrt(Yc + 1.0 / (alpha_sd * alpha_sd))
            alpha[c] = _slice(0, alpha[c], Yc, A, alpha_sd, alpha_mean, w, key, PARAM + 1, it, 300 * c, z, Yg, Sg)
        # ---- tau: centred, then non-centred (interweaving)
        ss = 0.0
        for g in range(G):
            ss += u[g] * u[g]
        log_tau = _slice(1, log_tau, G, ss, tau_scale, 0.0, 1.0, key, PARAM + 2, it, 0, z, Yg, Sg)
        tau = math.exp(log_tau)
        for c in range(C):
            ea[c] = math.exp(alpha[c])
        sum_ea = 0.0
        for c in range(C):
            sum_ea += ea[c]
        for g in range(G):
            z[g] = u[g] / tau
            vg = v[pidx[g]] if has_p else 0.0
            Sg[g] = E[g] * math.exp(vg) * sum_ea
        log_tau = _slice(2, log_tau, 0.0, 0.0, tau_scale, 0.0, 0.5, key, PARAM + 3, it, 0, z, Yg, Sg)
        tau = math.exp(log_tau)
        for g in range(G):
            u[g] = tau * z[g]
        if has_p:
            ssp = 0.0
            for p in range(P):
                ssp += v[p] * v[p]
            log_taup = _slice(1, log_taup, P, ssp, taup_scale, 0.0, 1.0, key, PARAM + 4, it, 0, z, Yg, Sg)
        # ---- the likelihood-invariant shift (alpha + d, u - d): random-walk Metropolis on the priors
        # the mean of u has prior sd tau / sqrt(G): five proposals of 2.4 times that per iteration
        step = 2.4 * tau / math.sqrt(G) + 1e-3
        for rep in range(5):
            d = step * _normal(key, PARAM + 5, it, rep)
            dl = 0.0
            for c in range(C):
                a0 = alpha[c] - alpha_mean
                dl += (a0 * a0 - (a0 + d) * (a0 + d)) / (2.0 * alpha_sd * alpha_sd)
            for g in range(G):
                dl += (u[g] * u[g] - (u[g] - d) * (u[g] - d)) / (2.0 * tau * tau)
            if math.log(_uniform(key, PARAM + 6, it, rep)) < dl:
                for c in range(C):
                    alpha[c] += d
                for g in range(G):
                    u[g] -= d
        if has_p:  # (v_p + d, u_g - d for the children of p)
            taup = math.exp(log_taup)
            for p in range(P):
                n_child = 0
                for g in range(G):
                    if pidx[g] == p:
                        n_child += 1
                d = (0.5 * tau / math.sqrt(max(n_child, 1)) + 1e-3) * _normal(key, PARAM + 200 + p, it, 0)
                dl = (v[p] * v[p] - (v[p] + d) * (v[p] + d)) / (2.0 * taup * taup)
                for g in range(G):
                    if pidx[g] == p:
                        dl += (u[g] * u[g] - (u[g] - d) * (u[g] - d)) / (2.0 * tau * tau)
                if math.log(_uniform(key, PARAM + 200 + p, it, 10)) < dl:
                    v[p] += d
                    for g in range(G):
                        if pidx[g] == p:
                            u[g] -= d
        if it >= warmup:
            k = it - warmup
            out_tau[k] = tau
            out_taup[k] = math.exp(log_taup)
            for c in range(C):
                out_alpha[k, c] = alpha[c]
            for g in range(G):
                out_u[k, g] = u[g]
            for p in range(P):
                out_v[k, p] = v[p]


@numba.njit(cache=True, parallel=True)
def _run_chains(keys, ystar, E, kind, scale, half, zero_pp, zero_tab, zrow, totals, has_totals, pidx, P,
                alpha_mean, alpha_sd, tau_scale, taup_scale, warmup, draws, pair_sweeps, lgam,
                y0, u0, alpha0, v0, log_tau0, log_taup0, out_alpha, out_u, out_v, out_tau, out_taup):
    for ch in numba.prange(keys.shape[0]):
        _run_chain(keys[ch], ystar, E, kind, scale, half, zero_pp, zero_tab, zrow, totals, has_totals, pidx, P,
                   alpha_mean, alpha_sd, tau_scale, taup_scale, warmup, draws, pair_sweeps, lgam,
                   y0[ch], u0[ch], alpha0[ch], v0[ch], log_tau0[ch], log_taup0[ch],
                   out_alpha[ch], out_u[ch], out_v[ch], out_tau[ch], out_taup[ch])


# --------------------------------------------------------------------------- the engine
def _noise_arrays(release, tail):
    """kind, per-cell scale and enumeration half-width, and the post-processing table of log P(e <= -y)."""
    from ..mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace

    rec = release.statistics.counts
    sigma = release.noise_sigma()
    kind = GAUSS if rec.mechanism in ("discrete-gaussian", "gaussian") else LAPLACE
    distinct, inverse = np.unique(sigma, return_inverse=True)
    inverse = inverse.reshape(sigma.shape)

    def mech_of(s):
        if rec.mechanism == "discrete-gaussian":
            return DiscreteGaussian(float(s))
        if rec.mechanism == "discrete-laplace":
            return DiscreteLaplace(1.0, float(s))
        if rec.mechanism == "gaussian":
            return Gaussian(float(s))
        return Laplace(1.0, float(s))

    mechs = [mech_of(s) for s in distinct]
    half = np.array([m.tail_window(tail) for m in mechs], float)[inverse]
    ystar = release.released()
    zero_pp = (ystar == 0) & (release.postprocessing == "nonnegative")
    width = int(np.ceil(half.max())) + 2
    zero_tab = np.full((len(distinct), width), -np.inf)
    if zero_pp.any():
        yy = np.arange(width, dtype=float)
        for i, m in enumerate(mechs):
            if hasattr(m, "cdf"):
                with np.errstate(divide="ignore"):
                    zero_tab[i] = np.log(np.clip(m.cdf(-yy), 0.0, 1.0))
            else:  # continuous: P(e <= -y)
                from scipy import stats

                dist = stats.norm(scale=m.sigma) if kind == GAUSS else stats.laplace(scale=m.scale)
                zero_tab[i] = dist.logcdf(-yy)
    return kind, sigma, half, zero_pp, zero_tab, inverse.astype(np.int64), ystar


#: log k! is tabulated up to this k; beyond it the kernels call lgamma (counts that large are rare)
LGAMMA_TABLE = 2_000_000


def _lgamma_table(ymax: int) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(np.arange(min(ymax, LGAMMA_TABLE) + 1, dtype=float) + 1.0)


@numba.njit(cache=True, inline="always")
def _lfact(lgam, k):
    return lgam[k] if k < lgam.shape[0] else math.lgamma(k + 1.0)


def _data_start(y, E, chains, rng):
    """Starts near the data, dispersed: alpha_c the log rate of cell c over all areas, u_g the log ratio of
    area g's count to what alpha predicts (so the chains need not climb from 0 to large area effects)."""
    alpha = np.log(np.maximum(y.sum(0), 0.5) / E.sum())
    u = np.log(np.maximum(y.sum(1), 0.5) / (E * np.exp(alpha).sum()))
    u -= u.mean()
    return (alpha[None, :] + rng.normal(0, 0.3, size=(chains, alpha.size)),
            u[None, :] + rng.normal(0, 0.1, size=(chains, u.size)))


def _initial_counts(ystar, totals):
    y = np.maximum(np.round(ystar), 0).astype(np.int64)
    if totals is None:
        return y
    for g in range(y.shape[0]):  # adjust to the exact total: add to / take from the largest cells
        diff = int(totals[g] - y[g].sum())
        while diff != 0:
            c = int(np.argmax(y[g])) if diff < 0 else int(np.argmin(y[g]))
            step = max(-y[g, c], diff) if diff < 0 else diff
            y[g, c] += step
            diff -= step
    return y


def exact_da(release, prior, options) -> Posterior:
    """Engine ``exact-da`` (small-area): the Gibbs sampler of the module docstring."""
    opts = SmallAreaOptions.from_inference(options, "small-area/exact-da")
    totals = release.area_totals()
    return _sample(release, prior, opts, _noise_arrays(release, opts.tail_mass), totals, "exact-da",
                   {"algorithm": "exact data augmentation over the latent counts + slice/interweaving (issue 28)",
                    "tail_mass": opts.tail_mass, "mechanism": release.statistics.counts.mechanism,
                    "postprocessing": release.postprocessing, "invariants": int(totals is not None)})


def naive(release, prior, options) -> Posterior:
    """Engine ``naive``: the noisy counts taken as true (negatives set to 0), the same model and sampler --
    the latent counts are held at the clean table (a zero-width window)."""
    opts = SmallAreaOptions.from_inference(options, "small-area/naive")
    G, C = release.G, release.C
    clean = np.maximum(np.round(release.released()), 0)
    noise = (GAUSS, np.full((G, C), 1e-3), np.zeros((G, C)), np.zeros((G, C), dtype=bool), np.full((1, 2), -np.inf),
             np.zeros((G, C), dtype=np.int64), clean)
    return _sample(release, prior, opts, noise, None, "naive",
                   {"algorithm": "noise-ignoring", "naive_statistic": "noisy counts taken as the true counts, "
                                                                      "negatives set to 0"})


def _sample(release, prior, opts: SmallAreaOptions, noise, totals, method: str, attrs: dict) -> Posterior:
    """Starts, seeds and output arrays, then the compiled chains (:func:`_run_chains`)."""
    kind, scale, half, zero_pp, zero_tab, zrow, ystar = noise
    G, C = release.G, release.C
    E = release.exposures()
    pidx, parent_ids = release.parent_index()
    P = len(parent_ids)
    if P == 0:
        pidx = np.zeros(G, dtype=np.int64)
    ss = opts.seed if isinstance(opts.seed, np.random.SeedSequence) else np.random.SeedSequence(opts.seed)
    keys = ss.generate_state(opts.chains, dtype=np.uint64)
    rng = np.random.default_rng(ss.spawn(1)[0])
    ymax = int(max(ystar.max() + half.max(), 0)) + 64
    if totals is not None:
        ymax = max(ymax, int(totals.max()) + 2)
    lgam = _lgamma_table(ymax)
    y0 = np.stack([_initial_counts(ystar, totals) for _ in range(opts.chains)])
    alpha0, u0 = _data_start(y0[0], E, opts.chains, rng)
    v0 = rng.normal(0, 0.1, size=(opts.chains, P))
    log_tau0 = np.log(rng.uniform(0.2, 1.0, size=opts.chains))
    log_taup0 = np.log(rng.uniform(0.2, 1.0, size=opts.chains))
    D = opts.draws
    out = (np.empty((opts.chains, D, C)), np.empty((opts.chains, D, G)), np.empty((opts.chains, D, P)),
           np.empty((opts.chains, D)), np.empty((opts.chains, D)))
    _run_chains(keys, ystar, E, kind, scale, half, zero_pp, zero_tab, zrow,
                totals if totals is not None else np.zeros(G, dtype=np.int64), totals is not None, pidx, P,
                prior.alpha_mean, prior.alpha_sd, prior.tau_scale, prior.tau_parent_scale, opts.warmup, D,
                opts.pair_sweeps, lgam, y0, u0, alpha0, v0, log_tau0, log_taup0, *out)
    return _posterior(release, method, *out, parent_ids, pidx, attrs)


def _posterior(release, method, alpha, u, v, tau, taup, parent_ids, pidx, attrs, iid=False) -> Posterior:
    post = {"alpha": alpha, "tau": tau, "u": u}
    dims = {"alpha": ["cell"], "u": ["area"], "rate": ["area", "cell"]}
    coords = {"cell": list(release.cells), "area": list(release.areas)}
    log_rate = alpha[:, :, None, :] + u[:, :, :, None]
    if parent_ids:
        post["tau_parent"] = taup
        post["v"] = v
        dims["v"] = ["parent"]
        coords["parent"] = parent_ids
        log_rate = log_rate + v[:, :, pidx][:, :, :, None]
    if log_rate.size <= MAX_RATE_VALUES:
        post["rate"] = np.exp(log_rate)
    else:
        attrs = {**attrs, "rate_omitted": "rate = exp(alpha[cell] + u[area] (+ v[parent])), not stored: "
                                          f"{log_rate.size} values exceed {MAX_RATE_VALUES}"}
    return Posterior(family="small-area", method=method, posterior=post, dims=dims, coords=coords, attrs=attrs,
                     iid=iid)
