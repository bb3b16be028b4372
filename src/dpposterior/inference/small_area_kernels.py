"""Compiled kernels of the small-area engine ``exact-da``: the four phases of an iteration.

The model, the sampler and its references are in inference/small_area.py (the engine); this module
holds what runs in the hot loop -- the exact draws of the latent counts (enumeration over a window),
the slice and Metropolis updates of the effects -- split into phases that run in one compiled loop
(:func:`run_serial`) or with phases 1 and 3 on Dask partitions (inference/small_area_dask.py), with
the same arithmetic and the same counter-based random numbers (splitmix64 of (chain key, area or
parameter index, iteration, slot); Salmon et al. 2011 for counter-based generators) either way.  The
phases read named records (``Sampler``, ``Table``, ``Noise``, ``Units``, ``Prior``, ``Shared``, ``Areas``,
``Sums``, ``Draws``), which the engine's :class:`Plan` holds for all areas and :meth:`Plan.part` for a
partition's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from .mcmc_common import counter_uniform

#: the most stepping-out steps of a slice update (split at random between the two sides)
STEP_OUT = 50
#: the noise kinds: Gaussian- and Laplace-shaped log-mass (recurrences), or an integer law tabulated by its
#: log-mass (``gtab`` then holds, per distinct noise, log P(d) at d = -W..W in column d + W)
GAUSS, LAPLACE, TABLE = 0, 1, 2
#: the arrays a slice update of codes 0 and 1 does not read
NO_ARRAY = np.zeros(0)

#: log k! is tabulated up to this k; beyond it the kernels call lgamma (counts that large are rare)
LGAMMA_TABLE = 2_000_000


@numba.njit(cache=True, inline="always")
def _lfact(lgam, k):
    return lgam[k] if k < lgam.shape[0] else math.lgamma(k + 1.0)


# --------------------------------------------------------------------------- counter-based uniforms
#: a uniform in (0, 1) from the counter (a, b, c) under ``key``
_uniform = counter_uniform


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
def _log_like_obs(kind, scale, ystar, y, zero_pp, zero_tab, zrow, gtab):
    """log p(released | latent y) up to a constant in y: eta(y* - y), or P(e <= -y) for a post-processed 0."""
    if zero_pp:
        if y >= zero_tab.shape[1]:
            return -np.inf
        return zero_tab[zrow, y]
    if kind == TABLE:
        w = (gtab.shape[1] - 1) // 2
        j = int(ystar - y) + w
        if j < 0 or j >= gtab.shape[1]:
            return -np.inf
        return gtab[zrow, j]
    return _log_eta(kind, scale, ystar - y)


@numba.njit(cache=True, inline="always")
def _window(mu, ystar, half, zero_pp, zero_tab, buf, N):
    """The enumeration window of a latent count: the noise's (|y - y*| <= half), or every y with a tabulated
    P(e <= -y) for a post-processed 0; intersected with the Poisson's own (mass outside < 1e-12) where that is
    narrower -- a binomial's variance N p (1 - p) is below its mean mu = N p, so the same window holds it --
    capped at N (binomial, N >= 0) and at the scratch buffer's width."""
    if zero_pp:
        lo, hi = 0, zero_tab.shape[1] - 1
    else:
        lo = max(0, int(math.floor(ystar - half)))
        hi = int(math.ceil(ystar + half))
    plo = int(mu - 8.0 * math.sqrt(mu) - 10.0)
    phi = int(mu + 8.0 * math.sqrt(mu) + 10.0)
    if plo > lo and plo <= hi:
        lo = plo
    if phi < hi and phi >= lo:
        hi = phi
    if N >= 0 and hi > N:
        hi = N
        if lo > hi:  # a release far above the population at risk: only y = N remains
            lo = hi
    if hi - lo + 1 > buf.shape[0]:
        hi = lo + buf.shape[0] - 1
    return lo, hi


#: column of gtab holding exp((d - 0.5) / sigma^2) for d = y* - lo = 0 is GTAB_OFFSET (columns 0, 1: the steps)
GTAB_OFFSET = 66


def noise_steps(kind: int, scales: np.ndarray, half_max: float) -> np.ndarray:
    """Per noise scale, the recurrence's constants (no exp per draw): Gaussian -- exp(-1/sigma^2), then
    exp((d - 0.5)/sigma^2) for d = y* - lo from -64 to half_max + 2 (column d + GTAB_OFFSET); Laplace --
    exp(1/b), exp(-1/b)."""
    width = GTAB_OFFSET + int(math.ceil(half_max)) + 3
    out = np.ones((len(scales), width))
    for r, sc in enumerate(np.asarray(scales, float)):
        if kind == GAUSS:
            out[r, 0] = math.exp(-1.0 / (sc * sc))
            d = np.arange(width) - GTAB_OFFSET
            with np.errstate(over="ignore"):
                out[r, 2:] = np.exp((d[2:] - 0.5) / (sc * sc))
        else:
            out[r, 0] = math.exp(1.0 / sc)
            out[r, 1] = math.exp(-1.0 / sc)
    return out


#: 1 / (k + 1) for small k: a table lookup instead of a division in the latent-count recurrence
RECIPROCALS = 1.0 / np.arange(1.0, 4097.0)


@numba.njit(cache=True, inline="always")
def _count_ratio(mu, N, odds, y):
    """P(y + 1) / P(y) of the latent count's own law: Poisson(mu), or Binomial(N, p) (N >= 0, odds p / (1 - p))."""
    inv = RECIPROCALS[y] if y < RECIPROCALS.shape[0] else 1.0 / (y + 1.0)
    if N < 0:
        return mu * inv
    return (N - y) * inv * odds


@numba.njit(cache=True)
def _draw_latent(mu, kind, scale, ystar, half, zero_pp, zero_tab, gtab, zrow, lgam, u, buf, N, odds):
    """One exact draw of y from Poisson(y; mu) -- or Binomial(y; N, p) with odds = p / (1 - p) and mu = N p when
    N >= 0 -- times p(y* | y), over its window (``buf``: scratch of the window's width).  The weights follow a
    recurrence -- w(y+1) / w(y) = mu / (y+1) (binomial: (N - y) / (y + 1) * odds) * eta(y* - y - 1) / eta(y* - y),
    whose noise factor is geometric in y (exp(-1/sigma^2) per step for the Gaussian, e^(+-1/b) for the
    Laplace) -- so a value costs three multiplications instead of a lgamma lookup and an exp; a released 0
    under post-processing (tabulated likelihood) and a vanishing mean take :func:`_draw_latent_logspace`."""
    if zero_pp or mu < 1e-300 or kind == TABLE:
        return _draw_latent_logspace(mu, kind, scale, ystar, half, zero_pp, zero_tab, gtab, zrow, lgam, u, buf, N,
                                     odds)
    lo, hi = _window(mu, ystar, half, False, zero_tab, buf, N)
    n = hi - lo + 1
    w = 1.0
    total = 0.0
    if kind == GAUSS:
        q = gtab[zrow, 0]  # exp(-1 / sigma^2)
        # eta ratio from lo to lo + 1, exp((y* - lo - 0.5) / sigma^2): tabulated for integer y* - lo
        k = ystar - lo
        j = int(k) + GTAB_OFFSET
        if k == int(k) and 2 <= j < gtab.shape[1]:
            g = gtab[zrow, j]
        else:
            g = math.exp((k - 0.5) / (scale * scale))
        for i in range(n):
            total += w
            buf[i] = total  # the cumulative weights: the draw is then a search
            w *= _count_ratio(mu, N, odds, lo + i) * g
            g *= q
    else:
        up = gtab[zrow, 0]  # exp(1 / b)
        down = gtab[zrow, 1]
        for i in range(n):
            total += w
            buf[i] = total
            d = ystar - (lo + i)  # eta(d - 1) / eta(d) = exp((|d| - |d - 1|) / b)
            if d >= 1.0:
                r = up
            elif d <= 0.0:
                r = down
            else:
                r = math.exp((2.0 * d - 1.0) / scale)
            w *= _count_ratio(mu, N, odds, lo + i) * r
    if not total < 1e300:  # the window starts far below the mode (overflow): the log-space draw (rare)
        return _draw_latent_logspace(mu, kind, scale, ystar, half, zero_pp, zero_tab, gtab, zrow, lgam, u, buf, N,
                                     odds)
    # the first i whose cumulative weight reaches u * total (the inverse-CDF walk's answer; a linear scan
    # over ~30 values, its one branch miss, beats a bisection's several)
    target = u * total
    for i in range(n):
        if buf[i] >= target:
            return lo + i
    return hi


@numba.njit(cache=True)
def _draw_latent_logspace(mu, kind, scale, ystar, half, zero_pp, zero_tab, gtab, zrow, lgam, u, buf, N, odds):
    """:func:`_draw_latent` in log space (one lgamma lookup and one exp per value): post-processed zeros,
    a vanishing mean, a tabulated noise law, and the reference the recurrence is tested against."""
    lo, hi = _window(mu, ystar, half, zero_pp, zero_tab, buf, N)
    if N < 0:
        logmu = math.log(mu) if mu > 0 else -745.0
    else:
        logmu = math.log(odds) if odds > 0 else -745.0
    best = -np.inf
    for y in range(lo, hi + 1):
        lg = _lfact(lgam, y) + (_lfact(lgam, N - y) if N >= 0 else 0.0)
        w = y * logmu - lg + _log_like_obs(kind, scale, ystar, y, zero_pp, zero_tab, zrow, gtab)
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


@numba.njit(cache=True, inline="always")
def _pair_term(s, m, l1, l2, N1, N2, lgam):
    """log of the split's own law at y_c = s, y_c' = m - s, up to a constant: Poisson means e^l1, e^l2 (the
    split is Binomial(m, e^l1 / (e^l1 + e^l2))), or binomials with log odds l1, l2 and sizes N1, N2 (N >= 0)."""
    out = s * l1 + (m - s) * l2 - _lfact(lgam, s) - _lfact(lgam, m - s)
    if N1 >= 0:
        out -= _lfact(lgam, N1 - s) + _lfact(lgam, N2 - m + s)
    return out


@numba.njit(cache=True)
def _draw_pair(m, l1, l2, N1, N2, kind, s1, s2, y1, y2, h1, h2, z1, z2, zt, zr1, zr2, lgam, u, gtab):
    """The split s of m = y_c + y_c' (y_c = s), exactly: its own law (:func:`_pair_term`) times
    eta1(y1* - s) eta2(y2* - m + s); -1 when no split is possible."""
    lo = 0 if z1 else max(0, int(math.floor(y1 - h1)))
    hi = (zt.shape[1] - 1) if z1 else int(math.ceil(y1 + h1))
    if z2:
        lo = max(lo, m - (zt.shape[1] - 1))
    else:
        lo = max(lo, m - int(math.ceil(y2 + h2)))
        hi = min(hi, m - max(0, int(math.floor(y2 - h2))))
    hi = min(hi, m)
    lo = max(lo, 0)
    if N1 >= 0:
        hi = min(hi, N1)
        lo = max(lo, m - N2)
    if hi < lo:
        return -1
    best = -np.inf
    for s in range(lo, hi + 1):
        w = (_pair_term(s, m, l1, l2, N1, N2, lgam) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1, gtab)
             + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2, gtab))
        if w > best:
            best = w
    if best == -np.inf:
        return -1
    total = 0.0
    for s in range(lo, hi + 1):
        total += math.exp(_pair_term(s, m, l1, l2, N1, N2, lgam) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1, gtab)
                          + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2, gtab) - best)
    target = u * total
    run = 0.0
    for s in range(lo, hi + 1):
        run += math.exp(_pair_term(s, m, l1, l2, N1, N2, lgam) + _log_like_obs(kind, s1, y1, s, z1, zt, zr1, gtab)
                        + _log_like_obs(kind, s2, y2, m - s, z2, zt, zr2, gtab) - best)
        if run >= target:
            return s
    return hi


# --------------------------------------------------------------------------- slice sampling
@numba.njit(cache=True, inline="always")
def _logf(code, x, a, b, c, d, nn, aa, n):
    """The univariate log full conditionals, by code:
    0 effect:   a x - b e^x - (x - d)^2 / (2 c^2)     (u_g, v_p, alpha_c: counts a, exposure sum b)
    1 log-sd:   -a x - b e^(-2x) / 2 - e^(2x) / (2 c^2) + x   (centred tau: a = #effects, b = sum of squares)
    2 binomial effect: a x - sum_k<n nn_k log(1 + e^(aa_k + x)) - (x - d)^2 / (2 c^2)   (a = sum of the counts,
      nn the sizes, aa the other terms of each count's log odds)
    """
    if code == 0:
        return a * x - b * math.exp(x) - (x - d) * (x - d) / (2.0 * c * c)
    if code == 1:
        return -a * x - 0.5 * b * math.exp(-2.0 * x) - math.exp(2.0 * x) / (2.0 * c * c) + x
    out = a * x - (x - d) * (x - d) / (2.0 * c * c)
    for k in range(n):
        out -= nn[k] * _log1pexp(aa[k] + x)
    return out


@numba.njit(cache=True, inline="always")
def _log1pexp(z):
    return z + math.log1p(math.exp(-z)) if z > 0 else math.log1p(math.exp(z))


@numba.njit(cache=True)
def _slice(code, x0, a, b, c, d, w, key, idx, it, slot, nn, aa, n):
    """One slice-sampling step (Neal 2003: stepping out, then shrinkage) from x0, on ``_logf(code, ...)``."""
    f0 = _logf(code, x0, a, b, c, d, nn, aa, n)
    level = f0 + math.log(_uniform(key, idx, it, slot))
    left = x0 - w * _uniform(key, idx, it, slot + 1)
    right = left + w
    # at most STEP_OUT steps, split at random between the two sides (Neal 2003, Fig. 3): exact when it binds
    j = int(STEP_OUT * _uniform(key, idx, it, slot + 250))
    k = STEP_OUT - 1 - j
    while j > 0 and _logf(code, left, a, b, c, d, nn, aa, n) > level:
        left -= w
        j -= 1
    while k > 0 and _logf(code, right, a, b, c, d, nn, aa, n) > level:
        right += w
        k -= 1
    for j in range(200):
        x = left + (right - left) * _uniform(key, idx, it, slot + 2 + j)
        if _logf(code, x, a, b, c, d, nn, aa, n) > level:
            return x
        if x < x0:
            left = x
        else:
            right = x
    return x0


# --------------------------------------------------------------------------- one iteration, in four phases
# The iteration is split where the areas meet the shared parameters, so that the same arithmetic runs
# in one compiled loop (serial) or on Dask partitions (inference/small_area_dask.py):
#   1. sweep (per area): apply the pending moves of the last iteration to u_g, record u_g, draw the
#      latent counts and u_g; sum per *unit* (a parent, or a block of BLOCK areas) the counts, the
#      exposure-weighted e^u, sum u and sum u^2;
#   2. shared_a (client): v_p, alpha_c, tau, tau_parent from the unit sums; propose a non-centred tau;
#   3. nc_delta (per area): the log-likelihood change of that proposal, per unit;
#   4. shared_b (client): accept or not; the likelihood-invariant shifts; the pending moves for 1.
# Unit sums are added up in unit order, and a partition is a run of whole units, so every sum -- and
# so every draw -- is the same for any partitioning.
#: counter index of the shared parameters (areas use their own index, < 2^40)
SHARED = 1 << 40
#: areas per unit when the release has no parents
BLOCK = 256
#: target acceptance of the non-centred tau proposal during warm-up (Robbins-Monro on its log step)
NC_TARGET = 0.44


# --------------------------------------------------------------------------- the named state
# The phases read and write a few named records -- numba takes a NamedTuple of arrays and scalars as one
# argument, and a numpy structured record by field name -- so a kernel's signature says which parts of
# the state it touches, and the serial driver, the Dask partitions and the client hand over the same
# records (a partition's are its run of units cut out of the whole, :meth:`Plan.part`).
class Sampler(NamedTuple):
    """The run: one counter key per chain, the likelihood, the pair moves, the iterations."""

    keys: np.ndarray      # (chains,) uint64: the key of each chain's random numbers
    binom: bool           # binomial counts (E holds the sizes N_gc), else Poisson
    has_totals: bool      # exact area totals: the cells move in pairs
    pair_sweeps: int
    warmup: int
    draws: int


class Table(NamedTuple):
    """The released table, per area (the engine's internal order) and cell: what a partition cuts."""

    ystar: np.ndarray     # (G, C) released counts
    E: np.ndarray         # (G, C) exposures; binomial: the sizes N_gc (whole numbers)
    scale: np.ndarray     # (G, C) noise scale
    half: np.ndarray      # (G, C) half-width of the enumeration window
    zero_pp: np.ndarray   # (G, C) bool: a released 0 under post-processing (likelihood P(e <= -y))
    zrow: np.ndarray      # (G, C) the cell's row of the noise tables (its distinct noise)
    akey: np.ndarray      # (G,) original index of each area: the counter of its random numbers


class Noise(NamedTuple):
    """The noise law's tables, shared by every area."""

    kind: int             # GAUSS, LAPLACE or TABLE
    zero_tab: np.ndarray  # per distinct noise: log P(e <= -y), y = 0, 1, ... (post-processed zeros)
    gtab: np.ndarray      # per distinct noise: the recurrence's constants (noise_steps), or TABLE's log-mass
    lgam: np.ndarray      # log k! (LGAMMA_TABLE)


class Units(NamedTuple):
    """The units (a parent's areas, or a block of BLOCK areas) of the areas in hand."""

    ubase: int            # global index of the first unit (the counter of a parent's binomial v_p)
    ustart: np.ndarray    # (U + 1,) unit u holds areas ustart[u] .. ustart[u + 1] - 1 (local indices)
    uparent: np.ndarray   # (U,) parent of each unit, local to the v in hand (0 when there are no parents)
    n_unit: np.ndarray    # (U,) areas per unit
    has_p: bool           # the units are parents


class Prior(NamedTuple):
    alpha_mean: float
    alpha_sd: float
    tau_scale: float
    taup_scale: float


#: a chain's scalar hyperparameters, read and written by name by the phases
HYP = np.dtype([("log_tau", np.float64), ("log_taup", np.float64),
                ("log_nc_step", np.float64),  # log step of the non-centred tau proposal
                ("proposal", np.float64),     # that proposal (phase 2 -> 3, 4)
                ("scale", np.float64),        # the moves u makes at the next sweep: u * scale - shift - dp
                ("shift", np.float64)])


class Shared(NamedTuple):
    """The shared parameters of every chain (leading chain axis): what the client holds and sends each
    partition (v and dp: the partition's parents only)."""

    alpha: np.ndarray       # (chains, C)
    v: np.ndarray           # (chains, max(P, 1)); v[:, 0] stays 0 without parents
    dp: np.ndarray          # (chains, max(P, 1)): the move of each v_p that its areas' u make at the next sweep
    hyp: np.ndarray         # (chains,) HYP records
    alpha_prop: np.ndarray  # (chains, C) that proposal (phase 2 -> 3, 4)


class Areas(NamedTuple):
    """The per-area state of every chain: what a partition keeps between iterations."""

    y: np.ndarray           # (chains, G, C) latent counts
    u: np.ndarray           # (chains, G)
    Ysum: np.ndarray        # (chains, G) the area's total count, from phase 1 to 3
    out_u: np.ndarray       # (chains, draws, G) the recorded u


class Sums(NamedTuple):
    """Per unit and chain: what the areas tell the shared parameters (phases 1 and 3)."""

    UY: np.ndarray          # (chains, U, C) counts
    UB: np.ndarray          # (chains, U, C) Poisson: exposure-weighted e^u
    UG: np.ndarray          # (chains, U, C) binomial: the gradient in alpha_c of the log-likelihood alpha_c's move
    UH: np.ndarray          # (chains, U, C) targets (:func:`_collapsed`), and minus its curvature
    USU: np.ndarray         # (chains, U) sum of u
    USS: np.ndarray         # (chains, U) sum of u^2
    UD: np.ndarray          # (chains, U) Poisson: the non-centred proposal's log-likelihood change
    DA: np.ndarray          # (chains, U, C) binomial: the alpha_c proposal's change
    DT0: np.ndarray         # (chains, U, C) binomial: the tau proposal's change at the current alpha_c
    DT1: np.ndarray         # (chains, U, C) ... and at the proposed one
    DG: np.ndarray          # (chains, U, C) binomial: UG at the alpha_c proposal
    DH: np.ndarray          # (chains, U, C) ... and UH there


class Draws(NamedTuple):
    """The recorded shared parameters (leading chain axis, then draws)."""

    alpha: np.ndarray       # (chains, draws, C)
    v: np.ndarray           # (chains, draws, P)
    tau: np.ndarray
    taup: np.ndarray


class Scratch(NamedTuple):
    """One chain's work buffers in phase 1."""

    buf: np.ndarray         # an enumeration window
    n: np.ndarray           # binomial v_p: the sizes of a parent's cells
    a: np.ndarray           # ... and the other terms of their log odds


@numba.njit(cache=True)
def _scratch(run, table, noise, units):
    width = int(2.0 * table.half.max()) + noise.zero_tab.shape[1] + 8 if table.half.size else 8
    C = table.ystar.shape[1]
    U = units.ustart.shape[0] - 1
    biggest = int(np.diff(units.ustart).max()) * C if run.binom and units.has_p and U > 0 else 0
    return Scratch(np.empty(width), np.empty(biggest), np.empty(biggest))


@numba.njit(cache=True, inline="always")
def _n_areas(units):
    return units.ustart[units.ustart.shape[0] - 1]


# --------------------------------------------------------------------------- the four phases, per chain
@numba.njit(cache=True)
def _sweep_chain(ch, it, run, table, noise, units, shared, areas, sums, scratch):
    """Phase 1 for chain ``ch`` over the units in hand.

    Poisson: the latent counts and u_g.  Binomial (``run.binom``: E holds the sizes N_gc, the log odds are
    alpha_c + u_g + v_p): the same, and then -- the units being the parents -- v_p from its full conditional
    over the parent's areas (it has no sufficient statistic), left in ``shared.v`` for the client."""
    key = run.keys[ch]
    warmup, binom, has_p = run.warmup, run.binom, units.has_p
    ystar, E, scale, half, zero_pp, zrow, akey = table
    kind, zero_tab, gtab, lgam = noise
    ustart, uparent = units.ustart, units.uparent
    alpha, v, dp, hyp = shared.alpha[ch], shared.v[ch], shared.dp[ch], shared.hyp[ch]
    y, u, Ysum, out_u = areas.y[ch], areas.u[ch], areas.Ysum[ch], areas.out_u[ch]
    UY, UB, UG, UH, USU, USS = sums.UY[ch], sums.UB[ch], sums.UG[ch], sums.UH[ch], sums.USU[ch], sums.USS[ch]
    buf = scratch.buf
    collapsed = _collapsed(run)
    C = ystar.shape[1]
    tau = math.exp(hyp.log_tau)
    move_scale, move_shift = hyp.scale, hyp.shift
    ea = np.empty(C)
    av = np.empty(C)
    for c in range(C):
        ea[c] = math.exp(alpha[c])
    for un in range(ustart.shape[0] - 1):
        p = uparent[un]
        ev = math.exp(v[p])
        for c in range(C):
            UY[un, c] = 0.0
            UB[un, c] = 0.0
            UG[un, c] = 0.0
            UH[un, c] = 0.0
            av[c] = alpha[c] + v[p]
        su = 0.0
        sq = 0.0
        for g in range(ustart[un], ustart[un + 1]):
            ag = akey[g]
            if it > 0:
                u[g] = u[g] * move_scale - move_shift - dp[p]
                if it - 1 >= warmup:
                    out_u[it - 1 - warmup, g] = u[g]
            if it == warmup + out_u.shape[0]:  # the closing call: only the last draw's pending moves
                continue
            eu = math.exp(u[g])
            if run.has_totals:
                for rep in range(run.pair_sweeps):
                    for c in range(C):
                        c2 = (c + 1) % C
                        if c2 == c:
                            continue
                        m = y[g, c] + y[g, c2]
                        if binom:
                            s = _draw_pair(m, av[c] + u[g], av[c2] + u[g], int(E[g, c]), int(E[g, c2]), kind,
                                           scale[g, c], scale[g, c2], ystar[g, c], ystar[g, c2], half[g, c],
                                           half[g, c2], zero_pp[g, c], zero_pp[g, c2], zero_tab, zrow[g, c],
                                           zrow[g, c2], lgam, _uniform(key, ag, it, 1000 + rep * C + c), gtab)
                        else:
                            s = _draw_pair(m, math.log(E[g, c]) + alpha[c], math.log(E[g, c2]) + alpha[c2], -1, -1,
                                           kind, scale[g, c], scale[g, c2], ystar[g, c], ystar[g, c2], half[g, c],
                                           half[g, c2], zero_pp[g, c], zero_pp[g, c2], zero_tab, zrow[g, c],
                                           zrow[g, c2], lgam, _uniform(key, ag, it, 1000 + rep * C + c), gtab)
                        if s >= 0:
                            y[g, c] = s
                            y[g, c2] = m - s
            else:
                for c in range(C):
                    if binom:
                        odds = math.exp(av[c] + u[g])
                        y[g, c] = _draw_latent(E[g, c] * odds / (1.0 + odds), kind, scale[g, c], ystar[g, c],
                                               half[g, c], zero_pp[g, c], zero_tab, gtab, zrow[g, c], lgam,
                                               _uniform(key, ag, it, c), buf, int(E[g, c]), odds)
                    else:
                        y[g, c] = _draw_latent(E[g, c] * ea[c] * eu * ev, kind, scale[g, c], ystar[g, c], half[g, c],
                                               zero_pp[g, c], zero_tab, gtab, zrow[g, c], lgam, _uniform(key, ag, it, c),
                                               buf, -1, 0.0)
            tot = 0.0
            sg = 0.0
            for c in range(C):
                tot += y[g, c]
                sg += E[g, c] * ea[c]
            Ysum[g] = tot
            if binom:
                # the slice width: a binomial count carries at most the information of a Poisson one
                w = 2.5 / math.sqrt(min(tot, 1e300) + 1.0 + 1.0 / (tau * tau))
                u[g] = _slice(2, u[g], tot, 0.0, tau, 0.0, w, key, ag, it, 5000, E[g], av, C)
            else:
                w = 2.5 / math.sqrt(tot + 1.0 / (tau * tau))
                u[g] = _slice(0, u[g], tot, sg * ev, tau, 0.0, w, key, ag, it, 5000, NO_ARRAY, NO_ARRAY, 0)
            eu = math.exp(u[g])
            for c in range(C):
                UY[un, c] += y[g, c]
                if not binom:
                    UB[un, c] += E[g, c] * eu
            su += u[g]
            sq += u[g] * u[g]
        USU[un] = su
        USS[un] = sq
        if binom and has_p and it < warmup + out_u.shape[0]:
            # v_p over the parent's areas x cells (units are the parents)
            scratch_n, scratch_a = scratch.n, scratch.a
            k = 0
            a = 0.0
            for g in range(ustart[un], ustart[un + 1]):
                for c in range(C):
                    scratch_n[k] = E[g, c]
                    scratch_a[k] = alpha[c] + u[g]
                    a += y[g, c]
                    k += 1
            taup = math.exp(hyp.log_taup)
            w = 2.5 / math.sqrt(a + 1.0 + 1.0 / (taup * taup))
            # (counter: the parent's global index, ubase + un, so that draws do not depend on the partitioning)
            v[p] = _slice(2, v[p], a, 0.0, taup, 0.0, w, key, SHARED + 100 + units.ubase + un, it, 0, scratch_n,
                          scratch_a, k)
        if binom and it < warmup + out_u.shape[0]:
            # the gradient and minus the curvature of the log-likelihood alpha_c's move targets, at the state phase
            # 2 updates alpha_c in (this sweep's u and, with parents, v_p), for its Newton proposal
            vp = v[p]
            for g in range(ustart[un], ustart[un + 1]):
                for c in range(C):
                    eta = alpha[c] + vp + u[g]
                    if collapsed:
                        _, _, _, _, dg, dh = _cell_marginals(table, g, c, kind, lgam, zero_tab, gtab, zrow[g, c], buf,
                                                             eta, 0.0, 0.0, 0.0, 1)
                    else:
                        pr = 1.0 / (1.0 + math.exp(-eta))
                        dg = y[g, c] - E[g, c] * pr
                        dh = E[g, c] * pr * (1.0 - pr)
                    UG[un, c] += dg
                    UH[un, c] += dh


@numba.njit(cache=True, inline="always")
def _collapsed(run):
    """Whether the binomial's alpha_c and non-centred tau moves target the likelihood with the latent counts
    summed out (each cell's y* given its log odds).  Valid because phase 1 of the next iteration draws every
    y_g afresh from its full conditional before anything reads it: the moves of phases 2-4 leave the
    marginal posterior of the effects invariant, and the fresh y completes a draw of the joint (partial
    collapse, van Dyk & Park 2008).  With area totals the cells move in pairs -- no fresh draw of y_g --
    so there the moves condition on y."""
    return run.binom and not run.has_totals


@numba.njit(cache=True, inline="always")
def _marginal_window(table, g, c, zero_tab):
    """The y of cell (g, c) that the summed-out likelihood enumerates: the noise window within 0..N."""
    N = int(table.E[g, c])
    if table.zero_pp[g, c]:
        lo, hi = 0, zero_tab.shape[1] - 1
    else:
        lo = int(math.floor(table.ystar[g, c] - table.half[g, c]))
        hi = int(math.ceil(table.ystar[g, c] + table.half[g, c]))
    hi = max(min(hi, N), 0)
    lo = min(max(lo, 0), hi)
    return lo, hi


@numba.njit(cache=True)
def _marginal_base(table, g, c, zrow, kind, zero_tab, gtab, lgam, lo, hi, buf):
    """buf[y - lo] = log C(N, y) + log p(y* | y) for y = lo..hi: the part of each term of the summed-out
    likelihood that does not depend on the log odds."""
    N = int(table.E[g, c])
    lN = _lfact(lgam, N)
    for y in range(lo, hi + 1):
        buf[y - lo] = (lN - _lfact(lgam, y) - _lfact(lgam, N - y)
                       + _log_like_obs(kind, table.scale[g, c], table.ystar[g, c], y, table.zero_pp[g, c], zero_tab,
                                       zrow, gtab))


@numba.njit(cache=True)
def _marginal(eta, n, lo, hi, buf, moments):
    """log sum_y Binomial(y; n, logistic(eta)) p(y* | y) over y = lo..hi (``buf``: :func:`_marginal_base`), and
    with ``moments`` its derivative in eta, E[y | y*] - n p, and minus its second, n p (1 - p) - Var[y | y*]."""
    best = -np.inf
    for i in range(hi - lo + 1):
        w = (lo + i) * eta + buf[i]
        if w > best:
            best = w
    lp = n * _log1pexp(eta)
    if best == -np.inf:
        return -np.inf, 0.0, 0.0
    total = 0.0
    m1 = 0.0
    m2 = 0.0
    for i in range(hi - lo + 1):
        w = math.exp((lo + i) * eta + buf[i] - best)
        total += w
        if moments:
            m1 += i * w
            m2 += i * i * w
    out = best + math.log(total) - lp
    if not moments:
        return out, 0.0, 0.0
    mean = m1 / total
    var = max(m2 / total - mean * mean, 0.0)
    pr = math.exp(eta - _log1pexp(eta))
    return out, lo + mean - n * pr, n * pr * (1.0 - pr) - var


@numba.njit(cache=True)
def _cell_marginals(table, g, c, kind, lgam, zero_tab, gtab, zrow, buf, e0, e1, e2, e3, n_eta):
    """Cell (g, c)'s summed-out likelihood (:func:`_marginal`) at the log odds e0 .. e3 (the first ``n_eta``; the
    rest come back 0), and its derivative and minus its second derivative at e0.  For Gaussian- and
    Laplace-shaped noise (no post-processed 0) in one pass of :func:`_draw_latent`'s recurrence, relative to
    the y = lo term (no exp per value); where that overflows, and otherwise, in log space (``buf``)."""
    N = int(table.E[g, c])
    n = table.E[g, c]
    scale = table.scale[g, c]
    ystar = table.ystar[g, c]
    zero_pp = table.zero_pp[g, c]
    lo, hi = _marginal_window(table, g, c, zero_tab)
    if not zero_pp and kind != TABLE:
        z0 = math.exp(e0)
        z1 = math.exp(e1) if n_eta > 1 else 0.0
        z2 = math.exp(e2) if n_eta > 2 else 0.0
        z3 = math.exp(e3) if n_eta > 3 else 0.0
        w0 = w1 = w2 = w3 = 1.0
        t0 = t1 = t2 = t3 = 1.0
        s1 = 0.0
        s2 = 0.0
        q = 1.0
        r = 1.0
        up = down = 1.0
        if kind == GAUSS:
            q = math.exp(-1.0 / (scale * scale))
            r = math.exp((ystar - lo - 0.5) / (scale * scale))
        else:
            up = math.exp(1.0 / scale)
            down = math.exp(-1.0 / scale)
        for i in range(1, hi - lo + 1):
            y = lo + i - 1  # the ratio of the term at y + 1 to that at y, without the odds
            if kind == GAUSS:
                rho = _count_ratio(0.0, N, 1.0, y) * r
                r *= q
            else:
                d = ystar - y
                if d >= 1.0:
                    rho = _count_ratio(0.0, N, 1.0, y) * up
                elif d <= 0.0:
                    rho = _count_ratio(0.0, N, 1.0, y) * down
                else:
                    rho = _count_ratio(0.0, N, 1.0, y) * math.exp((2.0 * d - 1.0) / scale)
            w0 *= rho * z0
            t0 += w0
            s1 += i * w0
            s2 += i * i * w0
            if n_eta > 1:
                w1 *= rho * z1
                t1 += w1
                w2 *= rho * z2
                t2 += w2
                w3 *= rho * z3
                t3 += w3
        if max(max(t0, t1), max(t2, t3)) < 1e300:
            base = (_lfact(lgam, N) - _lfact(lgam, lo) - _lfact(lgam, N - lo)
                    + _log_like_obs(kind, scale, ystar, lo, False, zero_tab, zrow, gtab))
            m0 = base + lo * e0 + math.log(t0) - n * _log1pexp(e0)
            m1 = base + lo * e1 + math.log(t1) - n * _log1pexp(e1) if n_eta > 1 else 0.0
            m2 = base + lo * e2 + math.log(t2) - n * _log1pexp(e2) if n_eta > 2 else 0.0
            m3 = base + lo * e3 + math.log(t3) - n * _log1pexp(e3) if n_eta > 3 else 0.0
            mean = s1 / t0
            var = max(s2 / t0 - mean * mean, 0.0)
            pr = math.exp(e0 - _log1pexp(e0))
            return m0, m1, m2, m3, lo + mean - n * pr, n * pr * (1.0 - pr) - var
    _marginal_base(table, g, c, zrow, kind, zero_tab, gtab, lgam, lo, hi, buf)
    m0, dg, dh = _marginal(e0, n, lo, hi, buf, True)
    m1 = _marginal(e1, n, lo, hi, buf, False)[0] if n_eta > 1 else 0.0
    m2 = _marginal(e2, n, lo, hi, buf, False)[0] if n_eta > 2 else 0.0
    m3 = _marginal(e3, n, lo, hi, buf, False)[0] if n_eta > 3 else 0.0
    return m0, m1, m2, m3, dg, dh


@numba.njit(cache=True, inline="always")
def _newton(x, c, UG, UH, prior):
    """The Newton proposal of alpha_c = x under the binomial, from the unit sums of the gradient (UG) and minus
    the curvature (UH) of the log-likelihood at x: N(x + g / h, 1 / h), g and h those of the log full
    conditional (prior included) -- for a Gaussian conditional an exact draw, and close to one for the
    near-Gaussian logistic one.  Returns (mean, precision); h is kept at least the prior's precision (the
    summed-out likelihood need not be log-concave)."""
    g = 0.0
    h = 0.0
    for un in range(UG.shape[0]):
        g += UG[un, c]
        h += UH[un, c]
    prec0 = 1.0 / (prior.alpha_sd * prior.alpha_sd)
    g -= (x - prior.alpha_mean) * prec0
    h = max(h, 0.0) + prec0
    return x + g / h, h


@numba.njit(cache=True)
def _shared_a_chain(ch, it, run, prior, units, shared, sums):
    """Phase 2 for chain ``ch``, on the unit sums of every area.  Poisson: v_p and alpha_c by slice steps on
    their exact full conditionals (sufficient statistics: the unit sums).  Binomial: a Newton proposal for
    each alpha_c (:func:`_newton`, decided in phase 4 on the per-unit log-likelihood changes of phase 3).  Both: log tau,
    log tau_parent by slice steps, then a non-centred tau proposal."""
    key = run.keys[ch]
    alpha, v, hyp = shared.alpha[ch], shared.v[ch], shared.hyp[ch]
    UY, UB, UG, UH, USS = sums.UY[ch], sums.UB[ch], sums.UG[ch], sums.UH[ch], sums.USS[ch]
    uparent = units.uparent
    G = _n_areas(units)
    U, C = UY.shape
    P = v.shape[0]
    if units.has_p and not run.binom:  # units are the parents
        taup = math.exp(hyp.log_taup)
        for p in range(P):
            a = 0.0
            b = 0.0
            for c in range(C):
                a += UY[p, c]
                b += math.exp(alpha[c]) * UB[p, c]
            w = 2.5 / math.sqrt(a + 1.0 / (taup * taup))
            v[p] = _slice(0, v[p], a, b, taup, 0.0, w, key, SHARED + 100 + p, it, 0, NO_ARRAY, NO_ARRAY, 0)
    for c in range(C):
        if run.binom:
            mean, prec = _newton(alpha[c], c, UG, UH, prior)
            shared.alpha_prop[ch, c] = mean + _normal(key, SHARED + 1, it, 300 * c) / math.sqrt(prec)
            continue
        a = 0.0
        b = 0.0
        for un in range(U):
            a += UY[un, c]
            b += math.exp(v[uparent[un]]) * UB[un, c]
        w = 2.5 / math.sqrt(a + 1.0 / (prior.alpha_sd * prior.alpha_sd))
        alpha[c] = _slice(0, alpha[c], a, b, prior.alpha_sd, prior.alpha_mean, w, key, SHARED + 1, it, 300 * c,
                          NO_ARRAY, NO_ARRAY, 0)
    ss = 0.0
    for un in range(U):
        ss += USS[un]
    hyp.log_tau = _slice(1, hyp.log_tau, G, ss, prior.tau_scale, 0.0, 1.0, key, SHARED + 2, it, 0, NO_ARRAY,
                         NO_ARRAY, 0)
    if units.has_p:
        ssp = 0.0
        for p in range(P):
            ssp += v[p] * v[p]
        hyp.log_taup = _slice(1, hyp.log_taup, P, ssp, prior.taup_scale, 0.0, 1.0, key, SHARED + 4, it, 0,
                              NO_ARRAY, NO_ARRAY, 0)
    hyp.proposal = hyp.log_tau + math.exp(hyp.log_nc_step) * _normal(key, SHARED + 3, it, 0)


@numba.njit(cache=True)
def _nc_delta_chain(ch, run, table, noise, units, shared, areas, sums):
    """Phase 3 for chain ``ch``, per unit: the log-likelihood change of scaling u by tau' / tau (u / tau fixed)
    -- Poisson: ``UD``; binomial, per cell: ``DT0`` at the current alpha_c, ``DT1`` at the proposed one,
    ``DA`` the change of the alpha_c proposal itself (phase 4 decides alpha first, then tau with the
    matching change), and the gradient and curvature at the proposal (``DG``, ``DH``: its way back).  The
    binomial's likelihood has the latent counts summed out (:func:`_collapsed`) or is given them."""
    E = table.E
    kind, zero_tab, gtab, lgam = noise
    collapsed = _collapsed(run)
    buf = _scratch(run, table, noise, units).buf if collapsed else np.empty(0)
    ustart, uparent = units.ustart, units.uparent
    alpha, v, hyp, alpha_prop = shared.alpha[ch], shared.v[ch], shared.hyp[ch], shared.alpha_prop[ch]
    u, Ysum, y = areas.u[ch], areas.Ysum[ch], areas.y[ch]
    UD, DA, DT0, DT1, DG, DH = sums.UD[ch], sums.DA[ch], sums.DT0[ch], sums.DT1[ch], sums.DG[ch], sums.DH[ch]
    C = E.shape[1]
    r = math.exp(hyp.proposal - hyp.log_tau)
    ea = np.empty(C)
    for c in range(C):
        ea[c] = math.exp(alpha[c])
    for un in range(ustart.shape[0] - 1):
        vp = v[uparent[un]]
        if run.binom:
            for c in range(C):
                a0 = alpha[c] + vp
                a1 = alpha_prop[c] + vp
                da = 0.0
                d0 = 0.0
                d1 = 0.0
                dg = 0.0
                dh = 0.0
                for g in range(ustart[un], ustart[un + 1]):
                    n = E[g, c]
                    ru = r * u[g]
                    if collapsed:
                        m10, m00, m1r, m0r, g1, h1 = _cell_marginals(table, g, c, kind, lgam, zero_tab, gtab,
                                                                      table.zrow[g, c], buf, a1 + u[g], a0 + u[g],
                                                                      a1 + ru, a0 + ru, 4)
                        da += m10 - m00
                        d0 += m0r - m00
                        d1 += m1r - m10
                        dg += g1
                        dh += h1
                        continue
                    l00 = _log1pexp(a0 + u[g])
                    l10 = _log1pexp(a1 + u[g])
                    da += y[g, c] * (a1 - a0) - n * (l10 - l00)
                    d0 += y[g, c] * (ru - u[g]) - n * (_log1pexp(a0 + ru) - l00)
                    d1 += y[g, c] * (ru - u[g]) - n * (_log1pexp(a1 + ru) - l10)
                    pr = math.exp(a1 + u[g] - l10)  # logistic(a1 + u_g), from its log1pexp
                    dg += y[g, c] - n * pr
                    dh += n * pr * (1.0 - pr)
                DA[un, c] = da
                DT0[un, c] = d0
                DT1[un, c] = d1
                DG[un, c] = dg
                DH[un, c] = dh
            continue
        ev = math.exp(vp)
        d = 0.0
        for g in range(ustart[un], ustart[un + 1]):
            sg = 0.0
            for c in range(C):
                sg += E[g, c] * ea[c]
            d += Ysum[g] * (r - 1.0) * u[g] - sg * ev * (math.exp(r * u[g]) - math.exp(u[g]))
        UD[un] = d


@numba.njit(cache=True)
def _shared_b_chain(ch, it, run, prior, units, shared, sums, out):
    """Phase 4 for chain ``ch``: (binomial: each alpha_c's proposal, Metropolis-Hastings); the non-centred tau
    (interweaving, Yu & Meng 2011); then the shifts (alpha + d, u - d) and (v_p + d, u_children - d) by
    random-walk Metropolis on the priors (they leave the likelihood unchanged); ``hyp`` and ``dp`` carry the
    moves u must make at the next sweep; after warm-up, the draw goes to ``out``."""
    key = run.keys[ch]
    warmup = run.warmup
    alpha, v, dp, hyp = shared.alpha[ch], shared.v[ch], shared.dp[ch], shared.hyp[ch]
    alpha_prop = shared.alpha_prop[ch]
    USU, UD, DA, DT0, DT1 = sums.USU[ch], sums.UD[ch], sums.DA[ch], sums.DT0[ch], sums.DT1[ch]
    UG, UH, DG, DH = sums.UG[ch], sums.UH[ch], sums.DG[ch], sums.DH[ch]
    alpha_mean, alpha_sd, tau_scale = prior.alpha_mean, prior.alpha_sd, prior.tau_scale
    n_unit = units.n_unit
    G = _n_areas(units)
    U = USU.shape[0]
    P = v.shape[0]
    C = alpha.shape[0]
    x = hyp.log_tau
    xp = hyp.proposal
    delta = 0.0
    if run.binom:
        for c in range(C):
            prop = alpha_prop[c]
            dl = 0.0
            for un in range(U):
                dl += DA[un, c]
            a0 = alpha[c] - alpha_mean
            a1 = prop - alpha_mean
            dl += (a0 * a0 - a1 * a1) / (2.0 * alpha_sd * alpha_sd)
            # Metropolis-Hastings: the Newton proposals there (from the current alpha_c) and back (from the
            # proposal, on the sums phase 3 made there)
            mean0, prec0 = _newton(alpha[c], c, UG, UH, prior)
            mean1, prec1 = _newton(prop, c, DG, DH, prior)
            dl += (0.5 * math.log(prec1) - 0.5 * prec1 * (alpha[c] - mean1) * (alpha[c] - mean1)
                   - 0.5 * math.log(prec0) + 0.5 * prec0 * (prop - mean0) * (prop - mean0))
            took = math.log(_uniform(key, SHARED + 1, it, 300 * c + 7)) < dl
            if took:
                alpha[c] = prop
            for un in range(U):
                delta += DT1[un, c] if took else DT0[un, c]
    else:
        for un in range(U):
            delta += UD[un]
    s2 = 2.0 * tau_scale * tau_scale
    log_acc = delta - math.exp(2.0 * xp) / s2 + xp + math.exp(2.0 * x) / s2 - x
    accepted = math.log(_uniform(key, SHARED + 3, it, 10)) < log_acc
    scale = 1.0
    if accepted:
        scale = math.exp(xp - x)
        hyp.log_tau = xp
    if it < warmup:  # Robbins-Monro on the log step (warm-up only: the chain is Markov afterwards)
        hyp.log_nc_step += ((1.0 if accepted else 0.0) - NC_TARGET) / (it + 1.0) ** 0.6
    hyp.scale = scale
    tau = math.exp(hyp.log_tau)
    su = 0.0
    for un in range(U):
        su += USU[un] * scale
    # the mean of u has prior sd tau / sqrt(G): five proposals of 2.4 times that per iteration
    step = 2.4 * tau / math.sqrt(G) + 1e-3
    shift = 0.0
    for rep in range(5):
        d = step * _normal(key, SHARED + 5, it, rep)
        dl = (2.0 * d * su - G * d * d) / (2.0 * tau * tau)
        for c in range(C):
            a0 = alpha[c] - alpha_mean
            dl += (a0 * a0 - (a0 + d) * (a0 + d)) / (2.0 * alpha_sd * alpha_sd)
        if math.log(_uniform(key, SHARED + 6, it, rep)) < dl:
            for c in range(C):
                alpha[c] += d
            su -= G * d
            shift += d
    hyp.shift = shift
    for p in range(P):
        dp[p] = 0.0
    if units.has_p:  # units are the parents
        taup = math.exp(hyp.log_taup)
        for p in range(P):
            n = n_unit[p]
            sup = USU[p] * scale - n * shift
            d = (0.5 * tau / math.sqrt(max(n, 1)) + 1e-3) * _normal(key, SHARED + 200 + p, it, 0)
            dl = (v[p] * v[p] - (v[p] + d) * (v[p] + d)) / (2.0 * taup * taup) + (2.0 * d * sup - n * d * d) / (2.0 * tau * tau)
            if math.log(_uniform(key, SHARED + 200 + p, it, 10)) < dl:
                v[p] += d
                dp[p] = d
    if it >= warmup:
        k = it - warmup
        out.tau[ch, k] = tau
        out.taup[ch, k] = math.exp(hyp.log_taup)
        for c in range(C):
            out.alpha[ch, k, c] = alpha[c]
        if units.has_p:
            for p in range(P):
                out.v[ch, k, p] = v[p]


# --------------------------------------------------------------------------- the in-process driver
@numba.njit(cache=True, parallel=True)
def _run_chains(run, table, noise, units, prior, shared, areas, sums, out):
    """All four phases of every iteration in one compiled loop, chains in parallel."""
    last = run.warmup + run.draws
    for ch in numba.prange(run.keys.shape[0]):
        scratch = _scratch(run, table, noise, units)
        for it in range(last + 1):
            _sweep_chain(ch, it, run, table, noise, units, shared, areas, sums, scratch)
            if it == last:
                break
            _shared_a_chain(ch, it, run, prior, units, shared, sums)
            _nc_delta_chain(ch, run, table, noise, units, shared, areas, sums)
            _shared_b_chain(ch, it, run, prior, units, shared, sums, out)


# --------------------------------------------------------------------------- the phases over all chains (Dask)
@numba.njit(cache=True, parallel=True)
def sweep_partition(it, run, table, noise, units, shared, areas, sums):
    """Phase 1 of every chain over one partition's areas."""
    for ch in numba.prange(run.keys.shape[0]):
        _sweep_chain(ch, it, run, table, noise, units, shared, areas, sums, _scratch(run, table, noise, units))


@numba.njit(cache=True, parallel=True)
def nc_delta_partition(run, table, noise, units, shared, areas, sums):
    """Phase 3 of every chain over one partition's areas."""
    for ch in numba.prange(run.keys.shape[0]):
        _nc_delta_chain(ch, run, table, noise, units, shared, areas, sums)


@numba.njit(cache=True)
def shared_a(it, run, prior, units, shared, sums):
    """Phase 2 of every chain (the client), on the unit sums of all partitions in unit order."""
    for ch in range(run.keys.shape[0]):
        _shared_a_chain(ch, it, run, prior, units, shared, sums)


@numba.njit(cache=True)
def shared_b(it, run, prior, units, shared, sums, out):
    """Phase 4 of every chain (the client)."""
    for ch in range(run.keys.shape[0]):
        _shared_b_chain(ch, it, run, prior, units, shared, sums, out)


# --------------------------------------------------------------------------- the plan
def _copy(record):
    """A record of the same kind holding copies of its arrays (a message must not change once sent)."""
    return type(record)(*(a.copy() if isinstance(a, np.ndarray) else a for a in record))


@dataclass(frozen=True)
class Plan:
    """Everything the phases read, in the engine's internal area order (areas sorted by parent, so a
    parent's areas form one unit), and the starting state of every chain -- as the records the kernels
    take, for all areas or (:meth:`part`) for a run of whole units."""

    run: Sampler
    table: Table
    noise: Noise
    units: Units
    prior: Prior
    shared: Shared        # each chain's starting shared parameters
    y: np.ndarray         # (chains, G, C) starting latent counts
    u: np.ndarray         # (chains, G) starting area effects

    @property
    def chains(self) -> int:
        return self.run.keys.shape[0]

    @property
    def G(self) -> int:
        return self.table.ystar.shape[0]

    def parents(self, u0: int, u1: int) -> slice:
        """The columns of v (and dp) that units u0 .. u1 - 1 read: their parents, or v's one column."""
        if not self.units.has_p:
            return slice(None)
        return slice(int(self.units.uparent[u0]), int(self.units.uparent[u1 - 1]) + 1)

    def shared_part(self, shared: Shared, u0: int, u1: int) -> Shared:
        """A copy of ``shared`` for units u0 .. u1 - 1 (their parents' v and dp)."""
        cols = self.parents(u0, u1)
        return _copy(shared._replace(v=shared.v[:, cols], dp=shared.dp[:, cols]))

    def part(self, u0: int, u1: int) -> "Plan":
        """The plan of units u0 .. u1 - 1 (a Dask partition): their areas, their units with local indices."""
        s = slice(int(self.units.ustart[u0]), int(self.units.ustart[u1]))
        base = self.parents(u0, u1).start or 0
        units = Units(ubase=u0, ustart=self.units.ustart[u0:u1 + 1] - self.units.ustart[u0],
                      uparent=self.units.uparent[u0:u1] - base, n_unit=self.units.n_unit[u0:u1].copy(),
                      has_p=self.units.has_p)
        return Plan(run=self.run, table=_copy(Table(*(a[s] for a in self.table))), noise=self.noise, units=units,
                    prior=self.prior, shared=self.shared_part(self.shared, u0, u1),
                    y=np.ascontiguousarray(self.y[:, s]), u=np.ascontiguousarray(self.u[:, s]))

    def areas(self) -> Areas:
        """Fresh per-area state: the starting y and u (copies), and room for the recorded u."""
        return Areas(y=self.y.copy(), u=self.u.copy(), Ysum=np.zeros(self.u.shape),
                     out_u=np.empty((self.chains, self.run.draws, self.G)))

    def sums(self) -> Sums:
        ch, U, C = self.chains, self.units.ustart.shape[0] - 1, self.table.ystar.shape[1]
        return Sums(UY=np.zeros((ch, U, C)), UB=np.zeros((ch, U, C)), UG=np.zeros((ch, U, C)), UH=np.zeros((ch, U, C)),
                    USU=np.zeros((ch, U)), USS=np.zeros((ch, U)), UD=np.zeros((ch, U)), DA=np.zeros((ch, U, C)),
                    DT0=np.zeros((ch, U, C)), DT1=np.zeros((ch, U, C)), DG=np.zeros((ch, U, C)),
                    DH=np.zeros((ch, U, C)))

    def draws(self) -> Draws:
        ch, D = self.chains, self.run.draws
        P = self.shared.v.shape[1] if self.units.has_p else 0
        return Draws(alpha=np.empty((ch, D, self.shared.alpha.shape[1])), v=np.empty((ch, D, P)),
                     tau=np.empty((ch, D)), taup=np.empty((ch, D)))


def draws_dict(out: Draws, out_u: np.ndarray, plan: Plan) -> dict:
    """The draws by name, u back in the release's area order."""
    return {**out._asdict(), "u": unpermute(plan, out_u)}


def run_serial(plan: Plan) -> dict:
    """Every phase in one compiled loop per chain, chains in parallel threads."""
    out = plan.draws()
    areas = plan.areas()
    _run_chains(plan.run, plan.table, plan.noise, plan.units, plan.prior, _copy(plan.shared), areas, plan.sums(),
                out)
    return draws_dict(out, areas.out_u, plan)


def unpermute(plan: Plan, out_u: np.ndarray) -> np.ndarray:
    order = plan.table.akey
    if np.array_equal(order, np.arange(plan.G)):
        return out_u
    res = np.empty_like(out_u)
    res[:, :, order] = out_u
    return res
