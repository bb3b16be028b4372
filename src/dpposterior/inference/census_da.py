"""Engines of the ``census`` family: exact data augmentation over the latent block histograms, and the per-cell
flat-prior posterior a user who reads each noisy block cell alone would get.

``da`` (the default) -- a Gibbs sampler on x (persons per block and cell) and the hyperparameters of the prior in
``families/census.py`` (Tanner & Wong 1987's data augmentation; for DP releases Ju, Awan, Gong & Rao, NeurIPS 2022).
The block-level parameters (block means, block mixes) are integrated out, so the state is x and
(alpha, beta, M_g, eta_t, tau, pi_t, a, b).  One sweep:

1. **moves on x**, each an exact Gibbs draw of one integer d along a line of the lattice, from its full
   conditional -- the collapsed prior of the one or two blocks it touches (negative-binomial block total times
   Dirichlet-multinomial mix, ``block_log_prior``) times every measurement that changes (discrete-Gaussian noise:
   log-mass -(y - s)^2 / (2 sigma^2) up to its normaliser, so the product over measurements is a quadratic in d):
   - a cell alone, x[b, c] += d (only where no invariant covers block b: it changes every total above it);
   - a person moved between two cells of one block, x[b, c1] += d, x[b, c2] -= d: every block, tract, ... total
     stays; only the queries that separate c1 from c2 see it;
   - a person moved between two blocks of one geounit at level l (a block group, a tract, a county, the state),
     x[b, c] += d, x[b', c] -= d: every measurement at level l and above stays, so aggregates with small noise
     do not freeze the chain (the moves the Census's own hierarchy suggests; exact invariants are kept by
     construction: a move never crosses the geounit of an invariant);
   d is enumerated over a window that grows from the current value (and from the likelihood's peak) until the
   log-density falls 30 below its maximum on both sides, the boundary values (an empty cell, where the
   Dirichlet-multinomial's mass can spike) always checked -- mass left out is below e^-30 relative per value;
   **bounds** (``census_table.CensusBounds``: exact lower and upper limits on the persons of a query cell of a
   geounit, published outside the DP guarantee -- the DAS's ``hhgq_total_lb`` / ``hhgq_total_ub`` in
   ``Constraints_PL94.py``, structural zeros of some blocks only) restrict the posterior to the set where each
   holds, so each move's range [dlo, dhi] (non-negativity's) is narrowed to the d that keep every bound it
   touches (:func:`_bound_window`), from running sums of the bounds kept as the measurement sums are; a draw on
   that range is the exact full conditional of the restricted posterior.  Without bounds the bound arrays are
   empty and the kernels skip them, so such a release gives the draws it always did;
2. **hyperparameters** given x: M_g, tau and alpha by slice sampling (Neal 2003, Ann. Statist. 31, stepping out
   and shrinkage) on the log scale; eta_t exactly (normal-normal conjugate); beta by slice sampling; each tract's
   mix pi_t by slice sampling of one pair's share (pi_c1, pi_c2) -> (s u, s (1 - u)), its sum s kept, under the
   tract mixes' scaled Dirichlet prior (``families/census.py``); then, given the tract mixes, the log shape by
   slice sampling, and the log rates by slice sampling of pair moves log b_c1 += d, log b_c2 -= d (the rates are
   defined up to a common factor: their log sum is held at 0).

Each chain runs in a thread (compiled, ``nogil``), seeded per chunk of sweeps from its own
:class:`numpy.random.SeedSequence`, so the draws are the same whatever the number of threads.

**Partitions** (option ``partition``; on Dask by default at county level).  Given every geounit's cell totals at
the partition level, the geounits are conditionally independent: no measurement below that level and no block
pair inside a geounit reaches another one, and the block parameters are integrated out.  A partitioned sweep is
(1) in the client, the moves that change those totals -- cells alone, cell pairs, block pairs at the levels
above -- then (2) each geounit's block pairs at the partition level and below, with its own generator seeded
from (sweep, geounit), as Dask tasks over runs of geounits (:class:`UnitPart`: with the bounds at the partition
level and below and their sums; a bound above it never changes inside a partition geounit), then (3) the
hyperparameters.
Every step is an exact Gibbs move, and a geounit's moves depend only on its own blocks, stream and the values
sent, so the draws are the same for any number of partitions and workers (another chain than the one-pass
sweep's, with the same target).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import numpy as np

from ..errors import InputError, RefusedError
from ..options import EngineOptions, MCMCOptions, option
from ..progress import status as report_status
from .mcmc_common import pick_from_log_weights, splitmix64

#: log-density drop at which a move's window stops growing
WINDOW_DROP = 30.0
#: sweeps per compiled call (progress and reseeding granularity)
CHUNK = 10


@dataclass(frozen=True)
class CensusDAOptions(MCMCOptions):
    engine = "da"

    draws: int = option(500, "int", "posterior draws per chain", low=1)
    chains: int = option(2, "int", "chains (run in parallel threads)", low=1)
    warmup: int = option(500, "int", "warm-up sweeps per chain", low=0)
    thin: int = option(1, "int", "sweeps per kept draw", low=1)
    checkpoint: Any = option(None, "any", "a folder to keep each chain's state in (about once a minute) and resume "
                                          "from: a killed run started again with the same release and options "
                                          "gives the draws an uninterrupted run gives")
    partition: str | None = option(None, "str", "a level (e.g. county) whose geounits' inner moves run "
                                                "independently each sweep, in parallel on Dask (default: county "
                                                "under --scheduler local or tcp://, else none: one sweep over all "
                                                "blocks); the draws are the same for any number of partitions")
    partitions: int | None = option(None, "int", "Dask partitions of the partition level's geounits (default: one "
                                                 "per worker thread; --scheduler local or tcp:// only)", low=1)

    def __post_init__(self):
        if self.checkpoint is not None and not isinstance(self.checkpoint, (str, os.PathLike)):
            raise InputError("checkpoint", f"must be a folder path (got {self.checkpoint!r})")


@dataclass(frozen=True)
class CensusNaiveOptions(EngineOptions):
    engine = "naive"

    draws: int = option(1000, "int", "posterior draws per chain", low=1)
    chains: int = option(1, "int", "chains (independent draws: only the output's shape)", low=1)


# --------------------------------------------------------------------------- compiled kernels
@numba.njit(cache=True, nogil=True)
def cell_measurements(b, c, block_unit, query_cell, mtab, off, Q, K, out):
    """out[l * Q + q] = the measurement of (level l, query q) that holds block b's cell c, -1 when unmeasured."""
    j = 0
    for l in range(block_unit.shape[0]):
        base = off[l] + block_unit[l, b] * Q * K
        for q in range(Q):
            out[j] = mtab[base + q * K + query_cell[q, c]]
            j += 1


@numba.njit(cache=True, nogil=True)
def move_log_density(d, A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta):
    """log of the conditional of a move by d (module docstring), up to a constant: the measurements' quadratic
    -A d^2 + Bq d plus the collapsed prior of the block(s) touched.  Block 1's cell gains d, block 2's loses d."""
    v = -A * d * d + Bq * d
    if same_block:
        v += math.lgamma(x1 + d + a1) - math.lgamma(x1 + d + 1.0) + math.lgamma(x2 - d + a2) - math.lgamma(x2 - d + 1.0)
        return v
    if has1:
        v += (math.lgamma(alpha + n1 + d) - math.lgamma(n1 + d + beta) + d * lq1
              + math.lgamma(x1 + d + a1) - math.lgamma(x1 + d + 1.0))
    if has2:
        v += (math.lgamma(alpha + n2 - d) - math.lgamma(n2 - d + beta) - d * lq2
              + math.lgamma(x2 - d + a2) - math.lgamma(x2 - d + 1.0))
    return v


@numba.njit(cache=True, nogil=True)
def move_step(d, A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta):
    """f(d + 1) - f(d) of :func:`move_log_density` (each lgamma difference a log: Gamma(z + 1) = z Gamma(z)),
    for d + 1 within the move's bounds."""
    v = -A * (2.0 * d + 1.0) + Bq
    if same_block:
        return v + math.log((x1 + d + a1) / (x1 + d + 1.0)) + math.log((x2 - d) / (x2 - d - 1.0 + a2))
    if has1:
        v += math.log((alpha + n1 + d) / (n1 + d + beta)) + lq1 + math.log((x1 + d + a1) / (x1 + d + 1.0))
    if has2:
        m = -d
        v -= math.log((alpha + n2 + m - 1.0) / (n2 + m - 1.0 + beta)) + lq2 + math.log((x2 + m - 1.0 + a2) / (x2 + m))
    return v


@numba.njit(cache=True, nogil=True)
def _grow(buf, n):
    if n < buf.shape[0]:
        return buf
    out = np.empty(2 * buf.shape[0] + n)
    out[:buf.shape[0]] = buf
    return out


@numba.njit(cache=True, nogil=True)
def draw_move(dlo, dhi, A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta, bufL, bufR):
    """One exact draw of d in [dlo, dhi] (dlo <= 0 <= dhi) from the move's conditional, over the window of
    :data:`WINDOW_DROP` (module docstring), the log-density walked outward from d = 0 by :func:`move_step`.
    ``bufL``, ``bufR``: scratch for the log weights left and right of 0 (grown when needed)."""
    if dlo == dhi:
        return 0, bufL, bufR
    peak = 0.0
    if A > 0.0:
        peak = Bq / (2.0 * A)
    top = 0.0
    # right of 0: f(d) - f(0) for d = 1..hi
    hi = 0
    cur = 0.0
    while hi < dhi:
        cur += move_step(float(hi), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta)
        bufR = _grow(bufR, hi + 1)
        bufR[hi] = cur
        hi += 1
        if cur > top:
            top = cur
        if cur < top - WINDOW_DROP and hi > peak:
            break
    if hi < dhi:  # the boundary, where an emptied cell's Dirichlet-multinomial mass may spike
        f = (move_log_density(float(dhi), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha,
                              beta)
             - move_log_density(0.0, A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta))
        if f > top - WINDOW_DROP:
            while hi < dhi:
                cur += move_step(float(hi), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha,
                                 beta)
                bufR = _grow(bufR, hi + 1)
                bufR[hi] = cur
                hi += 1
                if cur > top:
                    top = cur
    # left of 0: f(-k) - f(0) for k = 1..-lo
    lo = 0
    cur = 0.0
    while lo > dlo:
        cur -= move_step(float(lo - 1), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta)
        bufL = _grow(bufL, -lo + 1)
        bufL[-lo] = cur
        lo -= 1
        if cur > top:
            top = cur
        if cur < top - WINDOW_DROP and lo < peak:
            break
    if lo > dlo:
        f = (move_log_density(float(dlo), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha,
                              beta)
             - move_log_density(0.0, A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2, alpha, beta))
        if f > top - WINDOW_DROP:
            while lo > dlo:
                cur -= move_step(float(lo - 1), A, Bq, same_block, has1, n1, x1, a1, lq1, has2, n2, x2, a2, lq2,
                                 alpha, beta)
                bufL = _grow(bufL, -lo + 1)
                bufL[-lo] = cur
                lo -= 1
                if cur > top:
                    top = cur
    # inverse-CDF draw over lo..hi
    acc = 0.0
    for k in range(-lo):
        acc += math.exp(bufL[k] - top)
    acc += math.exp(-top)
    for k in range(hi):
        acc += math.exp(bufR[k] - top)
    target = np.random.random() * acc
    run = 0.0
    for k in range(-lo - 1, -1, -1):
        run += math.exp(bufL[k] - top)
        if run >= target:
            return -(k + 1), bufL, bufR
    run += math.exp(-top)
    if run >= target:
        return 0, bufL, bufR
    for k in range(hi):
        run += math.exp(bufR[k] - top)
        if run >= target:
            return k + 1, bufL, bufR
    return hi, bufL, bufR


@numba.njit(cache=True, nogil=True)
def _quadratic(S1, S2, y, s, w, use2):
    """(A, Bq) of the measurements a move changes: those of S1 gain d, those of S2 lose d (positions holding the
    same measurement in both cancel)."""
    A = 0.0
    Bq = 0.0
    for j in range(S1.shape[0]):
        m1 = S1[j]
        m2 = S2[j] if use2 else -1
        if m1 == m2:
            continue
        if m1 >= 0:
            r = y[m1] - s[m1]
            A += w[m1]
            Bq += 2.0 * w[m1] * r
        if m2 >= 0:
            r = y[m2] - s[m2]
            A += w[m2]
            Bq -= 2.0 * w[m2] * r
    return A, Bq


@numba.njit(cache=True, nogil=True)
def _apply(S1, S2, s, d, use2):
    for j in range(S1.shape[0]):
        m1 = S1[j]
        m2 = S2[j] if use2 else -1
        if m1 == m2:
            continue
        if m1 >= 0:
            s[m1] += d
        if m2 >= 0:
            s[m2] -= d


@numba.njit(cache=True, nogil=True)
def _bound_window(T1, T2, bsum, blow, bupp, dlo, dhi, use2):
    """[dlo, dhi] narrowed to the d that keep every bound a move touches: the bounds of T1 gain d, those of T2 lose
    d (positions holding the same bound in both cancel); ``bsum`` the bounds' current sums."""
    for j in range(T1.shape[0]):
        k1 = T1[j]
        k2 = T2[j] if use2 else -1
        if k1 == k2:
            continue
        if k1 >= 0:
            dlo = max(dlo, blow[k1] - bsum[k1])
            dhi = min(dhi, bupp[k1] - bsum[k1])
        if k2 >= 0:
            dlo = max(dlo, bsum[k2] - bupp[k2])
            dhi = min(dhi, bsum[k2] - blow[k2])
    return dlo, dhi


@numba.njit(cache=True, nogil=True)
def cells_alone(x, N, s, y, w, block_unit, query_cell, mtab, off, K, inv_level, block_bg, block_tract, alpha, beta,
                M, pi, bufL, bufR, S1, S2, lo, hi, btab, bsum, blow, bupp, T1, T2):
    """Move 1a of the module docstring on blocks ``lo`` to ``hi``: each cell alone, where no invariant covers the
    block.  ``btab``, ``bsum``, ``blow``, ``bupp``: the bounds (:class:`Problem`), their index laid out as ``mtab``,
    their current sums and their limits (empty arrays: no bounds); ``T1``, ``T2``: scratch as ``S1``, ``S2``."""
    C = x.shape[1]
    Q = query_cell.shape[0]
    bounded = bsum.shape[0] > 0
    for b in range(lo, hi):
        if inv_level[b] >= 0:
            continue
        g = block_bg[b]
        t = block_tract[b]
        lq = math.log(M[g] / (M[g] + alpha))
        for c in range(C):
            cell_measurements(b, c, block_unit, query_cell, mtab, off, Q, K, S1)
            A, Bq = _quadratic(S1, S2, y, s, w, False)
            dlo, dhi = -x[b, c], np.int64(1 << 40)
            if bounded:
                cell_measurements(b, c, block_unit, query_cell, btab, off, Q, K, T1)
                dlo, dhi = _bound_window(T1, T2, bsum, blow, bupp, dlo, dhi, False)
            d, bufL, bufR = draw_move(dlo, dhi, A, Bq, False, True, float(N[b]), float(x[b, c]),
                                      beta * pi[t, c], lq, False, 0.0, 0.0, 1.0, 0.0, alpha, beta, bufL, bufR)
            if d != 0:
                x[b, c] += d
                N[b] += d
                _apply(S1, S2, s, d, False)
                if bounded:
                    _apply(T1, T2, bsum, d, False)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def cell_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, block_tract, alpha, beta, pi, bufL, bufR, S1, S2,
               lo, hi, btab, bsum, blow, bupp, T1, T2):
    """Move 1b on blocks ``lo`` to ``hi``: a person moved between two cells of one block."""
    C = x.shape[1]
    Q = query_cell.shape[0]
    bounded = bsum.shape[0] > 0
    for b in range(lo, hi):
        if N[b] == 0:
            continue
        t = block_tract[b]
        for k in range(C):
            c1 = np.random.randint(C)
            c2 = np.random.randint(C - 1)
            if c2 >= c1:
                c2 += 1
            if x[b, c1] == 0 and x[b, c2] == 0:
                continue
            cell_measurements(b, c1, block_unit, query_cell, mtab, off, Q, K, S1)
            cell_measurements(b, c2, block_unit, query_cell, mtab, off, Q, K, S2)
            A, Bq = _quadratic(S1, S2, y, s, w, True)
            dlo, dhi = -x[b, c1], x[b, c2]
            if bounded:
                cell_measurements(b, c1, block_unit, query_cell, btab, off, Q, K, T1)
                cell_measurements(b, c2, block_unit, query_cell, btab, off, Q, K, T2)
                dlo, dhi = _bound_window(T1, T2, bsum, blow, bupp, dlo, dhi, True)
            d, bufL, bufR = draw_move(dlo, dhi, A, Bq, True, True, float(N[b]), float(x[b, c1]),
                                      beta * pi[t, c1], 0.0, True, float(N[b]), float(x[b, c2]), beta * pi[t, c2],
                                      0.0, alpha, beta, bufL, bufR)
            if d != 0:
                x[b, c1] += d
                x[b, c2] -= d
                _apply(S1, S2, s, d, True)
                if bounded:
                    _apply(T1, T2, bsum, d, True)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def block_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end, inv_level, block_bg,
                block_tract, alpha, beta, M, pi, bufL, bufR, S1, S2, lo, hi, lmax, lmin, btab, bsum, blow, bupp, T1,
                T2):
    """Move 1c on blocks ``lo`` to ``hi``, at levels ``lmax`` down to ``lmin``: a person moved between two blocks
    of one geounit of the level (the partner drawn among the geounit's blocks)."""
    C = x.shape[1]
    Q = query_cell.shape[0]
    bounded = bsum.shape[0] > 0
    for l in range(lmax, lmin - 1, -1):
        for b in range(lo, hi):
            ulo = unit_start[l, block_unit[l, b]]
            uhi = unit_end[l, block_unit[l, b]]
            if uhi - ulo < 2:
                continue
            p = ulo + np.random.randint(uhi - ulo - 1)
            if p >= b:
                p += 1
            if l < inv_level[b] or l < inv_level[p]:
                continue
            g1, g2 = block_bg[b], block_bg[p]
            t1, t2 = block_tract[b], block_tract[p]
            lq1 = math.log(M[g1] / (M[g1] + alpha))
            lq2 = math.log(M[g2] / (M[g2] + alpha))
            for c in range(C):
                if x[b, c] == 0 and x[p, c] == 0:
                    continue
                cell_measurements(b, c, block_unit, query_cell, mtab, off, Q, K, S1)
                cell_measurements(p, c, block_unit, query_cell, mtab, off, Q, K, S2)
                A, Bq = _quadratic(S1, S2, y, s, w, True)
                dlo, dhi = -x[b, c], x[p, c]
                if bounded:
                    cell_measurements(b, c, block_unit, query_cell, btab, off, Q, K, T1)
                    cell_measurements(p, c, block_unit, query_cell, btab, off, Q, K, T2)
                    dlo, dhi = _bound_window(T1, T2, bsum, blow, bupp, dlo, dhi, True)
                d, bufL, bufR = draw_move(dlo, dhi, A, Bq, False, True, float(N[b]), float(x[b, c]),
                                          beta * pi[t1, c], lq1, True, float(N[p]), float(x[p, c]), beta * pi[t2, c],
                                          lq2, alpha, beta, bufL, bufR)
                if d != 0:
                    x[b, c] += d
                    x[p, c] -= d
                    N[b] += d
                    N[p] -= d
                    _apply(S1, S2, s, d, True)
                    if bounded:
                        _apply(T1, T2, bsum, d, True)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def sweep_counts(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end, inv_level,
                 block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, S1, S2, btab, bsum, blow, bupp, T1, T2):
    """Step 1 of the module docstring: every move on x once (cells alone, pairs of cells, pairs of blocks at
    every level above the block, deepest first).  ``s`` (the measurements' current sums) is kept equal to the
    sums of x, and ``bsum`` (the bounds') to their sums."""
    B = x.shape[0]
    L = block_unit.shape[0]
    bufL, bufR = cells_alone(x, N, s, y, w, block_unit, query_cell, mtab, off, K, inv_level, block_bg, block_tract,
                             alpha, beta, M, pi, bufL, bufR, S1, S2, 0, B, btab, bsum, blow, bupp, T1, T2)
    bufL, bufR = cell_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, block_tract, alpha, beta, pi, bufL,
                            bufR, S1, S2, 0, B, btab, bsum, blow, bupp, T1, T2)
    return block_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end, inv_level,
                       block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, S1, S2, 0, B, L - 2, 0, btab, bsum, blow,
                       bupp, T1, T2)


# ------------------------------------------------------------------ hyperparameters
@numba.njit(cache=True, nogil=True)
def _nb_group(lm, n_g, S_g, alpha, eta, tau):
    """log density of log M_g: its blocks' negative-binomial totals (n_g blocks summing to S_g) and its prior."""
    m = math.exp(lm)
    return S_g * lm - (n_g * alpha + S_g) * math.log(alpha + m) - 0.5 * ((lm - eta) / tau) ** 2


@numba.njit(cache=True, nogil=True)
def _alpha_logdens(la, N, block_bg, n_g, S_g, M, mu, sd):
    a = math.exp(la)
    v = -0.5 * ((la - mu) / sd) ** 2
    for b in range(N.shape[0]):
        if N[b] > 0:
            v += math.lgamma(N[b] + a) - math.lgamma(a)
    for g in range(M.shape[0]):
        if n_g[g] > 0:
            v += n_g[g] * a * math.log(a) - (n_g[g] * a + S_g[g]) * math.log(a + M[g])
    return v


@numba.njit(cache=True, nogil=True)
def _beta_logdens(lb, x, N, block_tract, pi, mu, sd):
    bt = math.exp(lb)
    v = -0.5 * ((lb - mu) / sd) ** 2
    B, C = x.shape
    for b in range(B):
        if N[b] == 0:
            continue
        v += math.lgamma(bt) - math.lgamma(N[b] + bt)
        t = block_tract[b]
        for c in range(C):
            if x[b, c] > 0:
                a = bt * pi[t, c]
                v += math.lgamma(x[b, c] + a) - math.lgamma(a)
    return v


@numba.njit(cache=True, nogil=True)
def _tau_logdens(lt, lM, eta, bg_tract, scale):
    tau = math.exp(lt)
    G = lM.shape[0]
    v = -G * lt - 0.5 * (tau / scale) ** 2 + lt
    for g in range(G):
        v -= 0.5 * ((lM[g] - eta[bg_tract[g]]) / tau) ** 2
    return v


@numba.njit(cache=True, nogil=True)
def _share_logdens(z, x, lo, hi, c1, c2, bs, t, pi, shape, rate, dsum):
    """log density of z = logit(u), the share of pi_c1 in pi_c1 + pi_c2 (= s; ``bs`` = beta * s) over tract t's
    blocks [lo, hi).  Under the scaled Dirichlet prior of pi_t (shapes a, rates b; ``dsum[t]`` = sum_c b_c pi_t,c)
    the pair's terms are pi_c1^(a_c1 - 1) pi_c2^(a_c2 - 1) (sum_c b_c pi_t,c)^(-sum_c a_c); on the logit scale z
    gets u (1 - u) more."""
    u = 1.0 / (1.0 + math.exp(-z))
    a1 = bs * u
    a2 = bs * (1.0 - u)
    if a1 <= 1e-300 or a2 <= 1e-300:
        return -np.inf
    s = pi[t, c1] + pi[t, c2]
    rest = dsum[t] - rate[c1] * pi[t, c1] - rate[c2] * pi[t, c2]
    v = (shape[c1] * math.log(u) + shape[c2] * math.log1p(-u)
         - shape.sum() * math.log(max(rest, 0.0) + s * (rate[c1] * u + rate[c2] * (1.0 - u))))
    for b in range(lo, hi):
        if x[b, c1] > 0:
            v += math.lgamma(x[b, c1] + a1) - math.lgamma(a1)
        if x[b, c2] > 0:
            v += math.lgamma(x[b, c2] + a2) - math.lgamma(a2)
    return v


@numba.njit(cache=True, nogil=True)
def _shape_logdens(z, T, C, rate, lsum, ldsum, mu, sd):
    """log density of z = log a, the shape every cell shares in the scaled Dirichlet of the T tract mixes over C
    cells (``lsum[c]`` = sum_t log pi_t,c, ``ldsum`` = sum_t log sum_c b_c pi_t,c): its normal prior times the T
    densities, terms free of a left out."""
    a = math.exp(z)
    v = -0.5 * ((z - mu) / sd) ** 2 + T * math.lgamma(C * a) - T * C * math.lgamma(a) - C * a * ldsum
    for c in range(C):
        v += a * (lsum[c] + T * math.log(rate[c]))
    return v


@numba.njit(cache=True, nogil=True)
def _rate_logdens(d, c1, c2, pi, shape, rate, dsum, sd):
    """log density of d, the move log b_c1 += d, log b_c2 -= d of the scaled Dirichlet's log rates (their sum
    kept: the rates are fixed only up to a common factor, pinned by sum_c log b_c = 0), given the tract mixes.
    The law's T (a_c1 - a_c2) d term is 0: every cell has the same shape."""
    l1 = math.log(rate[c1]) + d
    l2 = math.log(rate[c2]) - d
    T = pi.shape[0]
    v = -0.5 * (l1 * l1 + l2 * l2) / (sd * sd)
    e1 = math.expm1(d)
    e2 = math.expm1(-d)
    A = shape.sum()
    for t in range(T):
        v -= A * math.log(max(dsum[t] + rate[c1] * pi[t, c1] * e1 + rate[c2] * pi[t, c2] * e2, 1e-300))
    return v


#: what :func:`_slice_step` samples: a block group's log mean, log tau, log alpha, log beta, a pair's share of a
#: tract mix, the mixes' log shape, a pair of log rates
KIND_LOG_M, KIND_LOG_TAU, KIND_LOG_ALPHA, KIND_LOG_BETA, KIND_SHARE, KIND_LOG_SHAPE, KIND_LOG_RATES = range(7)


@numba.njit(cache=True, nogil=True)
def _hyper_log_density(kind, z, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior, alpha, tau,
                       g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum):
    """The conditional log-density of the hyperparameter ``kind`` at ``z`` (the other arguments: the state; ``g``
    the block group, or the tract of a share; ``bs`` beta times the pair's sum, or for a shape sum_t log
    dsum[t])."""
    if kind == KIND_LOG_M:
        return _nb_group(z, n_g[g], S_g[g], alpha, eta[bg_tract[g]], tau)
    if kind == KIND_LOG_TAU:
        return _tau_logdens(z, lM, eta, bg_tract, prior[2])
    if kind == KIND_LOG_ALPHA:
        return _alpha_logdens(z, N, block_bg, n_g, S_g, M, prior[3], prior[4])
    if kind == KIND_LOG_BETA:
        return _beta_logdens(z, x, N, block_tract, pi, prior[5], prior[6])
    if kind == KIND_LOG_SHAPE:
        return _shape_logdens(z, eta.shape[0], shape.shape[0], rate, lsum, bs, prior[7], prior[8])
    if kind == KIND_LOG_RATES:
        return _rate_logdens(z, c1, c2, pi, shape, rate, dsum, prior[9])
    return _share_logdens(z, x, lo, hi, c1, c2, bs, g, pi, shape, rate, dsum)


@numba.njit(cache=True, nogil=True)
def _slice_step(kind, x0, width, steps, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior,
                alpha, tau, g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum):
    """One slice-sampling update of ``x0`` (Neal 2003: stepping out by ``width``, at most ``steps`` each side,
    then shrinkage); ``x0`` itself when 200 shrinkage proposals are all refused."""
    level = _hyper_log_density(kind, x0, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior,
                               alpha, tau, g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum)
    level += math.log(np.random.random())
    left = x0 - width * np.random.random()
    right = left + width
    for _ in range(steps):
        if _hyper_log_density(kind, left, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior,
                              alpha, tau, g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum) <= level:
            break
        left -= width
    for _ in range(steps):
        if _hyper_log_density(kind, right, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior,
                              alpha, tau, g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum) <= level:
            break
        right += width
    for _ in range(200):
        z = left + (right - left) * np.random.random()
        if _hyper_log_density(kind, z, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta, pi, prior,
                              alpha, tau, g, lo, hi, c1, c2, bs, shape, rate, dsum, lsum) > level:
            return z
        if z < x0:
            left = z
        else:
            right = z
    return x0


@numba.njit(cache=True, nogil=True)
def sweep_hyper(x, N, block_bg, block_tract, bg_tract, tract_start, tract_end, M, eta, hyp, pi, prior):
    """Step 2 of the module docstring.  ``hyp`` = [alpha, beta, tau, a, ..., a, log b_0, ..., log b_{C-1}]
    (updated in place; the tract mixes' scaled Dirichlet: the shape a every cell shares, written once per cell so
    the density's code reads a per-cell array, and the rates b); ``prior`` = [log
    size_mean, size_sd, tau_scale, log alpha_median, alpha_log_sd, log beta_median, beta_log_sd, log
    mix_shape_median, mix_shape_log_sd, mix_rate_log_sd]."""
    G = M.shape[0]
    T = eta.shape[0]
    B, C = x.shape
    alpha, beta, tau = hyp[0], hyp[1], hyp[2]
    shape = hyp[3:3 + C]  # a view: the shape updates write through to hyp
    rate = np.exp(hyp[3 + C:3 + 2 * C])
    lsum = np.zeros(C)
    dsum = np.zeros(T)
    for t in range(T):
        for c in range(C):
            dsum[t] += rate[c] * pi[t, c]
    n_g = np.zeros(G)
    S_g = np.zeros(G)
    for b in range(B):
        n_g[block_bg[b]] += 1.0
        S_g[block_bg[b]] += N[b]
    # M_g: slice on log M_g
    lM = np.log(M)
    for g in range(G):
        lM[g] = _slice_step(KIND_LOG_M, lM[g], 1.0, 50, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta,
                            pi, prior, alpha, tau, g, 0, 0, 0, 0, 0.0, shape, rate, dsum, lsum)
        M[g] = math.exp(lM[g])
    # eta_t: normal-normal conjugate
    sum_t = np.zeros(T)
    cnt_t = np.zeros(T)
    for g in range(G):
        sum_t[bg_tract[g]] += lM[g]
        cnt_t[bg_tract[g]] += 1.0
    for t in range(T):
        prec = 1.0 / prior[1] ** 2 + cnt_t[t] / tau ** 2
        mean = (prior[0] / prior[1] ** 2 + sum_t[t] / tau ** 2) / prec
        eta[t] = mean + np.random.standard_normal() / math.sqrt(prec)
    # tau, alpha, beta: slice on the log scale
    tau = math.exp(_slice_step(KIND_LOG_TAU, math.log(tau), 0.5, 40, x, N, block_bg, block_tract, bg_tract, n_g, S_g,
                               M, lM, eta, pi, prior, alpha, tau, 0, 0, 0, 0, 0, 0.0, shape, rate, dsum, lsum))
    alpha = math.exp(_slice_step(KIND_LOG_ALPHA, math.log(alpha), 0.5, 40, x, N, block_bg, block_tract, bg_tract, n_g,
                                 S_g, M, lM, eta, pi, prior, alpha, tau, 0, 0, 0, 0, 0, 0.0, shape, rate, dsum, lsum))
    beta = math.exp(_slice_step(KIND_LOG_BETA, math.log(beta), 0.5, 40, x, N, block_bg, block_tract, bg_tract, n_g,
                                S_g, M, lM, eta, pi, prior, alpha, tau, 0, 0, 0, 0, 0, 0.0, shape, rate, dsum, lsum))
    # pi_t: pairs of cells, the share of their sum (z = logit of pi_c1 / (pi_c1 + pi_c2))
    for t in range(T):
        lo, hi = tract_start[t], tract_end[t]
        for k in range(C):
            c1 = np.random.randint(C)
            c2 = np.random.randint(C - 1)
            if c2 >= c1:
                c2 += 1
            ssum = pi[t, c1] + pi[t, c2]
            u0 = pi[t, c1] / ssum
            if u0 <= 0.0 or u0 >= 1.0:
                continue
            z0 = math.log(u0) - math.log1p(-u0)
            z = _slice_step(KIND_SHARE, z0, 2.0, 40, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta,
                            pi, prior, alpha, tau, t, lo, hi, c1, c2, beta * ssum, shape, rate, dsum, lsum)
            if z != z0:
                u = 1.0 / (1.0 + math.exp(-z))
                dsum[t] -= rate[c1] * pi[t, c1] + rate[c2] * pi[t, c2]
                pi[t, c1] = ssum * u
                pi[t, c2] = ssum * (1.0 - u)
                dsum[t] += rate[c1] * pi[t, c1] + rate[c2] * pi[t, c2]
    # the scaled Dirichlet's shapes and rates given the tract mixes
    for t in range(T):
        for c in range(C):
            lsum[c] += math.log(max(pi[t, c], 1e-300))
    ldsum = 0.0
    for t in range(T):
        ldsum += math.log(dsum[t])
    a = math.exp(_slice_step(KIND_LOG_SHAPE, math.log(shape[0]), 0.5, 40, x, N, block_bg, block_tract, bg_tract,
                             n_g, S_g, M, lM, eta, pi, prior, alpha, tau, 0, 0, 0, 0, 0, ldsum, shape, rate, dsum,
                             lsum))
    shape[:] = a
    for k in range(C):
        c1 = np.random.randint(C)
        c2 = np.random.randint(C - 1)
        if c2 >= c1:
            c2 += 1
        d = _slice_step(KIND_LOG_RATES, 0.0, 0.5, 40, x, N, block_bg, block_tract, bg_tract, n_g, S_g, M, lM, eta,
                        pi, prior, alpha, tau, 0, 0, 0, c1, c2, 0.0, shape, rate, dsum, lsum)
        if d != 0.0:
            e1 = math.expm1(d)
            e2 = math.expm1(-d)
            for t in range(T):
                dsum[t] += rate[c1] * pi[t, c1] * e1 + rate[c2] * pi[t, c2] * e2
            hyp[3 + C + c1] += d
            hyp[3 + C + c2] -= d
            rate[c1] = math.exp(hyp[3 + C + c1])
            rate[c2] = math.exp(hyp[3 + C + c2])
    hyp[0], hyp[1], hyp[2] = alpha, beta, tau


@numba.njit(cache=True, nogil=True)
def run_sweeps(n, seed, x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end, inv_level,
               block_bg, block_tract, bg_tract, tract_start, tract_end, M, eta, hyp, pi, prior, bufL, bufR,
               update_hyper, btab, bsum, blow, bupp):
    """``n`` sweeps (step 1, then step 2 when ``update_hyper``), numba's generator of this thread seeded with
    ``seed`` first."""
    np.random.seed(seed)
    L = block_unit.shape[0]
    S1 = np.empty(L * query_cell.shape[0], dtype=np.int64)
    S2 = np.empty(L * query_cell.shape[0], dtype=np.int64)
    T1 = np.empty_like(S1)
    T2 = np.empty_like(S1)
    for _ in range(n):
        bufL, bufR = sweep_counts(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end,
                                  inv_level, block_bg, block_tract, hyp[0], hyp[1], M, pi, bufL, bufR, S1, S2, btab,
                                  bsum, blow, bupp, T1, T2)
        if update_hyper:
            sweep_hyper(x, N, block_bg, block_tract, bg_tract, tract_start, tract_end, M, eta, hyp, pi, prior)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def global_moves(seed, x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end, inv_level,
                 block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, lmin, btab, bsum, blow, bupp):
    """The partitioned sweep's moves that change a partition geounit's cell totals: cells alone and pairs of
    cells in every block, pairs of blocks at the levels above the partition level ``lmin``."""
    np.random.seed(seed)
    B = x.shape[0]
    S1 = np.empty(block_unit.shape[0] * query_cell.shape[0], dtype=np.int64)
    S2 = np.empty_like(S1)
    T1 = np.empty_like(S1)
    T2 = np.empty_like(S1)
    bufL, bufR = cells_alone(x, N, s, y, w, block_unit, query_cell, mtab, off, K, inv_level, block_bg, block_tract,
                             alpha, beta, M, pi, bufL, bufR, S1, S2, 0, B, btab, bsum, blow, bupp, T1, T2)
    bufL, bufR = cell_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, block_tract, alpha, beta, pi, bufL,
                            bufR, S1, S2, 0, B, btab, bsum, blow, bupp, T1, T2)
    if lmin > 0:
        bufL, bufR = block_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end,
                                 inv_level, block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, S1, S2, 0, B,
                                 lmin - 1, 0, btab, bsum, blow, bupp, T1, T2)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def unit_moves(seeds, starts, ends, x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end,
               inv_level, block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, lmin, btab, bsum, blow, bupp):
    """The partitioned sweep's moves inside each partition geounit (blocks ``starts[u]`` to ``ends[u]``): pairs
    of blocks at the partition level ``lmin`` and below, each geounit with its own generator seeded ``seeds[u]``
    -- so a geounit's moves are the same whichever other geounits share its partition."""
    L = block_unit.shape[0]
    S1 = np.empty(L * query_cell.shape[0], dtype=np.int64)
    S2 = np.empty_like(S1)
    T1 = np.empty_like(S1)
    T2 = np.empty_like(S1)
    for u in range(seeds.shape[0]):
        np.random.seed(seeds[u])
        bufL, bufR = block_pairs(x, N, s, y, w, block_unit, query_cell, mtab, off, K, unit_start, unit_end,
                                 inv_level, block_bg, block_tract, alpha, beta, M, pi, bufL, bufR, S1, S2, starts[u],
                                 ends[u], L - 2, lmin, btab, bsum, blow, bupp, T1, T2)
    return bufL, bufR


@numba.njit(cache=True, nogil=True)
def hyper_step(seed, x, N, block_bg, block_tract, bg_tract, tract_start, tract_end, M, eta, hyp, pi, prior):
    np.random.seed(seed)
    sweep_hyper(x, N, block_bg, block_tract, bg_tract, tract_start, tract_end, M, eta, hyp, pi, prior)


# --------------------------------------------------------------------------- the problem, in arrays
@numba.njit(cache=True)
def _fill_cell_bounds(b, c, btab, off, K, block_unit, query_cell, out):
    """out[l * Q + q]: the bound on block b's engine cell c at level l and query q (-1 where none)."""
    L = block_unit.shape[0]
    Q = query_cell.shape[0]
    for l in range(L):
        u = block_unit[l, b]
        for q in range(Q):
            out[l * Q + q] = btab[off[l] + (u * Q + q) * K + query_cell[q, c]]


@numba.njit(cache=True)
def _trade_bounds(x, bsum, blow, bupp, k, need, fb, fc, tb, tc, src, dst):
    """Move up to ``need`` persons from cell (fb, fc) to (tb, tc) if that changes bound k and breaks no other bound
    (``src``, ``dst``: the two cells' bounds, position by position; a bound both hold does not change)."""
    if fb == tb and fc == tc:
        return False
    touches = False
    amt = min(need, x[fb, fc])
    for j in range(src.shape[0]):
        if src[j] == dst[j]:
            continue
        if src[j] >= 0:
            touches = touches or src[j] == k
            amt = min(amt, bsum[src[j]] - blow[src[j]])
        if dst[j] >= 0:
            touches = touches or dst[j] == k
            amt = min(amt, bupp[dst[j]] - bsum[dst[j]])
    if not touches or amt <= 0:
        return False
    x[fb, fc] -= amt
    x[tb, tc] += amt
    for j in range(src.shape[0]):
        if src[j] == dst[j]:
            continue
        if src[j] >= 0:
            bsum[src[j]] -= amt
        if dst[j] >= 0:
            bsum[dst[j]] += amt
    return True


@numba.njit(cache=True)
def _repair_step(x, bsum, blow, bupp, k, btab, off, K, block_unit, query_cell, unit_start, unit_end, inv_level,
                 blevel, bunit, bquery, bcell, src, dst, cursor):
    """One step towards bound k (see :meth:`Problem._meet_bounds`); False when none is possible.  The partners
    of block b: b itself, then the blocks of the geounit of b's deepest invariant that no deeper one covers (where
    none covers b: every block none covers in b's top-level geounit), in turn from ``cursor[0]``, the last block
    traded with (so the search does not rescan the blocks already drained or filled: linear, not quadratic, in
    the blocks over a whole repair)."""
    C = x.shape[1]
    li, u, q, cell = blevel[k], bunit[k], bquery[k], bcell[k]
    grow = bsum[k] < blow[k]  # persons into bound k's cells, else out of them
    need = blow[k] - bsum[k] if grow else bsum[k] - bupp[k]
    mine = dst if grow else src  # the bounds of the cell of bound k that gives or takes
    other = src if grow else dst  # those of its partner cell
    sign = 1 if grow else -1
    for b in range(unit_start[li, u], unit_end[li, u]):
        lv = inv_level[b]
        l0 = max(lv, 0)
        pu = block_unit[l0, b]
        for c in range(C):
            if query_cell[q, c] != cell or (not grow and x[b, c] == 0):
                continue
            _fill_cell_bounds(b, c, btab, off, K, block_unit, query_cell, mine)
            if lv < 0:  # no invariant covers block b: persons come from or go to outside
                amt = need if grow else min(need, x[b, c])
                for j in range(mine.shape[0]):
                    if mine[j] >= 0:
                        amt = min(amt, bupp[mine[j]] - bsum[mine[j]] if grow else bsum[mine[j]] - blow[mine[j]])
                if amt > 0:
                    x[b, c] += sign * amt
                    for j in range(mine.shape[0]):
                        if mine[j] >= 0:
                            bsum[mine[j]] += sign * amt
                    return True
            lo, n = unit_start[l0, pu], unit_end[l0, pu] - unit_start[l0, pu]
            at = cursor[0] - lo if lo <= cursor[0] < lo + n else 0
            for i in range(-1, n):
                p = b if i < 0 else lo + (at + i) % n
                if i >= 0 and (p == b or inv_level[p] != lv):
                    continue
                for c2 in range(C):
                    if grow and x[p, c2] <= 0:
                        continue
                    _fill_cell_bounds(p, c2, btab, off, K, block_unit, query_cell, other)
                    if grow:
                        moved = _trade_bounds(x, bsum, blow, bupp, k, need, p, c2, b, c, src, dst)
                    else:
                        moved = _trade_bounds(x, bsum, blow, bupp, k, need, b, c, p, c2, src, dst)
                    if moved:
                        cursor[0] = p
                        return True
    return False


@numba.njit(cache=True)
def meet_bounds(x, bsum, blow, bupp, btab, off, K, block_unit, query_cell, unit_start, unit_end, inv_level, blevel,
                bunit, bquery, bcell):
    """The greedy repair of :meth:`Problem._meet_bounds`, in place: the violated bounds in turn, each as long as a
    step moves it, until a whole round of the bounds moves none; -1 when every bound then holds, else the first
    violated bound."""
    J = block_unit.shape[0] * query_cell.shape[0]
    src = np.empty(J, dtype=np.int64)
    dst = np.empty(J, dtype=np.int64)
    cursor = np.zeros(1, dtype=np.int64)
    nb = bsum.shape[0]
    k = 0
    idle = 0  # bounds looked at since the last step
    while idle < nb:
        if blow[k] <= bsum[k] <= bupp[k] or not _repair_step(
                x, bsum, blow, bupp, k, btab, off, K, block_unit, query_cell, unit_start, unit_end, inv_level,
                blevel, bunit, bquery, bcell, src, dst, cursor):
            idle += 1
            k = (k + 1) % nb
        else:
            idle = 0
    for k in range(nb):
        if not blow[k] <= bsum[k] <= bupp[k]:
            return k
    return -1


def index_sizes(structure) -> np.ndarray:
    """Entries per level of :class:`Problem`'s measurement index ``mtab`` (and of its bound index ``btab``, laid
    out alike): one per geounit x query x cell of the largest query."""
    K = int(structure.query_sizes.max())
    return np.array([len(u) * structure.Q * K for u in structure.units], dtype=np.int64)


class Problem:
    """The arrays the kernels read, built once from the release's :class:`CensusStructure`.

    The kernels see only the cells that may hold persons: structural zeros are dropped from the engine's cell index
    (``allowed``, ``C``, ``query_cell`` -- the histogram-to-query-cell map restricted to those columns), so no move
    proposes them and the tract mixes and block Dirichlet-multinomials run over the allowed cells only.
    :meth:`full` puts the zeros back for the output.  Without structural zeros the index is the histogram's own
    and every array is the one the kernels always read.

    Bounds: ``btab`` (laid out as ``mtab``: level, geounit, query, query cell -> bound index, -1 where none),
    ``blow`` and ``bupp`` their limits; all three empty when the release has none.  :meth:`initial_counts` gives a
    start that meets them."""

    def __init__(self, structure, prior):
        from ..families.census import bg_parent, pooling_levels

        s = structure
        self.structure = s
        self.prior = prior
        self.allowed = s.allowed_cells
        self.C = int(self.allowed.size)
        self.query_cell = (s.query_cell if self.C == s.C
                           else np.ascontiguousarray(s.query_cell[:, self.allowed]))
        if self.C < 2:
            # the moves between two cells of a block and the tract mixes' pair updates need two cells
            raise RefusedError("structural_zeros" if self.C < s.C else "attributes",
                               f"leave {self.C} cell that may hold persons; the da engine needs at least two")
        self.y = s.noisy.astype(np.float64)
        self.w = 1.0 / (2.0 * s.sigma.astype(np.float64) ** 2)
        self.K = int(s.query_sizes.max())
        sizes = index_sizes(s)
        self.off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        mtab = np.full(int(sizes.sum()), -1, dtype=np.int64)
        mtab[self.off[s.level] + (s.unit * s.Q + s.query) * self.K + s.cell] = np.arange(s.M)
        self.mtab = mtab
        U = max(len(u) for u in s.units)
        self.unit_start = np.zeros((s.L, U), dtype=np.int64)
        self.unit_end = np.zeros((s.L, U), dtype=np.int64)
        for li in range(s.L):
            bu = s.block_unit[li]  # blocks are sorted by GEOID, so a geounit's blocks are contiguous
            n_u = len(s.units[li])
            self.unit_start[li, :n_u] = np.searchsorted(bu, np.arange(n_u), side="left")
            self.unit_end[li, :n_u] = np.searchsorted(bu, np.arange(n_u), side="right")
        gi, ti = pooling_levels(s)
        self.block_bg = s.block_unit[gi].copy()
        self.block_tract = s.block_unit[ti].copy()
        self.bg_tract = bg_parent(s)
        T = len(s.units[ti])
        self.tract_start = self.unit_start[ti, :T].copy()
        self.tract_end = self.unit_end[ti, :T].copy()
        self.inv_level = np.full(s.B, -1, dtype=np.int64)
        for lv, (units, _) in s.invariants.items():
            li = s.levels.index(lv)
            covered = np.isin(s.block_unit[li], units)
            self.inv_level[covered] = np.maximum(self.inv_level[covered], li)
        self.prior_vec = np.array([math.log(prior.size_mean), prior.size_sd, prior.tau_scale,
                                   math.log(prior.alpha_median), prior.alpha_log_sd, math.log(prior.beta_median),
                                   prior.beta_log_sd, math.log(prior.mix_shape_median), prior.mix_shape_log_sd,
                                   prior.mix_rate_log_sd])
        # the bounds' index, laid out as mtab (a bound is a sum over one geounit and query cell, as a measurement
        # is); without bounds every bounds array is empty and the kernels skip them
        bounds = s.bounds
        if bounds is None or bounds.size == 0:
            self.btab = np.empty(0, dtype=np.int64)
            self.blow = np.empty(0, dtype=np.int64)
            self.bupp = np.empty(0, dtype=np.int64)
        else:
            btab = np.full(int(sizes.sum()), -1, dtype=np.int64)
            btab[self.off[bounds.level] + (bounds.unit * s.Q + bounds.query) * self.K + bounds.cell] = \
                np.arange(bounds.size)
            self.btab = btab
            self.blow = bounds.lower.astype(np.int64)
            self.bupp = bounds.upper.astype(np.int64)

    @property
    def bounded(self) -> bool:
        return self.blow.shape[0] > 0

    def bound_sums(self, x) -> np.ndarray:
        """Every bound's sum under x (over the engine's cells); empty without bounds."""
        if not self.bounded:
            return np.empty(0, dtype=np.int64)
        return self.structure.bounds.sums(self.structure, self.full(x))

    def full(self, x: np.ndarray) -> np.ndarray:
        """Counts over the engine's cells ``[..., C]`` as the histogram's ``[..., structure.C]``: 0 at the
        structural zeros (``x`` itself when there are none)."""
        s = self.structure
        if self.C == s.C:
            return x
        out = np.zeros(x.shape[:-1] + (s.C,), dtype=x.dtype)
        out[..., self.allowed] = x
        return out

    def initial_counts(self, rng) -> np.ndarray:
        """x (over the engine's cells) from the block-level detailed-cell measurements where they exist (clipped at
        0; those of structural zeros left out), else each block's noisy total spread over the cells; then the
        invariants met exactly (persons added or removed at random among the geounit's blocks and cells, deepest
        invariant level first); then the bounds met, invariants kept (:meth:`_meet_bounds`, deterministic: no
        random numbers drawn, so a release without bounds starts where it always did)."""
        s = self.structure
        C = self.C
        x = np.zeros((s.B, C), dtype=np.int64)
        Lb = s.L - 1
        q = s.detailed_query()
        if q is not None:
            rows, units, cells = s.measured(Lb, q)
            cell_of = np.argsort(s.query_cell[q])  # query cell -> histogram cell
            xf = np.zeros((s.B, s.C), dtype=np.int64)
            xf[units, cell_of[cells]] = np.maximum(s.noisy[rows], 0)
            x[...] = xf[:, self.allowed]
        else:
            tot = [q for q in range(s.Q) if s.query_sizes[q] == 1]
            if tot:
                rows, units, _ = s.measured(Lb, tot[0])
                for r, u in zip(rows, units):
                    n = max(int(s.noisy[r]), 0)
                    x[u] = rng.multinomial(n, np.full(C, 1.0 / C))
        for lv in sorted(s.invariants, key=lambda v: -s.levels.index(v)):
            li = s.levels.index(lv)
            units, totals = s.invariants[lv]
            for u, total in zip(units, totals):
                members = np.flatnonzero(s.block_unit[li] == u)
                free = members[self.inv_level[members] <= li]
                cur = int(x[members].sum())
                gap = int(total) - cur
                if gap > 0:
                    if free.size == 0:
                        raise InputError(f"invariants.{lv}_total", f"{s.units[li][u]}: its blocks are all fixed by "
                                         "deeper invariants whose sum is not this total")
                    add = rng.multinomial(gap, np.full(free.size * C, 1.0 / (free.size * C)))
                    x[free] += add.reshape(free.size, C)
                elif gap < 0:
                    flat = x[free].ravel()
                    if flat.sum() < -gap:
                        raise InputError(f"invariants.{lv}_total", f"{s.units[li][u]}: the deeper invariants hold "
                                         "more persons than this total")
                    take = rng.multivariate_hypergeometric(flat, -gap)
                    x[free] = (flat - take).reshape(free.size, C)
        if self.bounded:
            self._meet_bounds(x)
        return x

    def _meet_bounds(self, x: np.ndarray) -> None:
        """Moves persons (in place) until x meets every bound, keeping every invariant (:func:`meet_bounds`, compiled):
        into the cells of a bound below its lower limit, out of those of one above its upper limit -- from or to
        outside where no invariant covers the block, or from or to another cell of a block that may trade persons
        with it (the same block, one in the same geounit of its deepest invariant not covered deeper, or any block
        no invariant covers where none covers it).  A step moves as many persons as it can without breaking
        another bound, so the total shortfall falls at every step; when no step is left the bounds are refused
        (one line) -- they may still be met by a start this greedy search does not find."""
        s = self.structure
        bounds = s.bounds
        bsum = self.bound_sums(x)
        k = meet_bounds(x, bsum, self.blow, self.bupp, self.btab, self.off, self.K, s.block_unit, self.query_cell,
                        self.unit_start, self.unit_end, self.inv_level, bounds.level.astype(np.int64),
                        bounds.unit.astype(np.int64), bounds.query.astype(np.int64), bounds.cell.astype(np.int64))
        if k >= 0:
            li, qi = int(bounds.level[k]), int(bounds.query[k])
            q = s.query_names[qi]
            upper = "" if self.bupp[k] >= 2 ** 62 else f", at most {int(self.bupp[k])}"
            raise RefusedError("bounds", f"no start meets every bound and invariant: {s.levels[li]} "
                               f"{s.units[li][bounds.unit[k]]} {q} cell {s.cell_labels(q)[bounds.cell[k]]!r} "
                               f"needs at least {int(self.blow[k])}{upper} persons and moving persons one step "
                               f"at a time cannot give it that (it holds {int(bsum[k])}); check the bounds "
                               "against the invariants and structural zeros")

    def sums(self, x) -> np.ndarray:
        """Every measurement's true sum under x (over the engine's cells)."""
        s = self.structure
        x = self.full(x)
        out = np.zeros(s.M, dtype=np.int64)
        for li in range(s.L):
            for qi in range(s.Q):
                rows, units, cells = s.measured(li, qi)
                if rows.size:
                    agg = s.aggregate(x, li, qi)
                    out[rows] = agg[units, cells]
        return out


# --------------------------------------------------------------------------- partitions
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def sweep_seeds(seed: int, count: int) -> np.ndarray:
    """``count`` generator seeds in [0, 2^31) from one sweep's seed, by the splitmix64 finaliser of (seed, index):
    index 0 the global moves, 1 the hyperparameters, 2 + u partition geounit u."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) * np.uint64(1 << 32) + np.arange(count, dtype=np.uint64) + _GOLDEN
    return (splitmix64(z) >> np.uint64(33)).astype(np.int64)


@dataclass
class UnitPart:
    """A run of partition geounits (blocks ``lo`` to ``hi``) with the arrays its moves read, indexed locally:
    the measurements of its geounits at the partition level and below (``rows``: their global indices), the
    geounits above it collapsed to one unmeasured geounit (a move inside a partition geounit never changes them).
    A Dask task gets this once and, each sweep, the part's counts, sums and the hyperparameters."""

    lo: int
    hi: int
    units: np.ndarray          # global indices of its partition geounits (their seeds)
    starts: np.ndarray         # each geounit's first and end block, local
    ends: np.ndarray
    rows: np.ndarray           # global measurement indices of the local ones
    brows: np.ndarray          # global indices of its bounds (those at the partition level and below)
    g0: int
    g1: int                    # block groups [g0, g1) and tracts [t0, t1) its blocks belong to
    t0: int
    t1: int
    lmin: int
    arrays: dict

    def sweep(self, seeds, x, N, s, M, pi, alpha, beta, bsum):
        """The unit moves of one sweep on this part's counts (updated and returned with the measurement and
        bound sums)."""
        a = self.arrays
        buf = np.empty(4096), np.empty(4096)
        unit_moves(seeds, self.starts, self.ends, x, N, s, a["y"], a["w"], a["block_unit"], a["query_cell"],
                   a["mtab"], a["off"], a["K"], a["unit_start"], a["unit_end"], a["inv_level"], a["block_bg"],
                   a["block_tract"], alpha, beta, M, pi, buf[0], buf[1], self.lmin, a["btab"], bsum, a["blow"],
                   a["bupp"])
        return x, N, s, bsum


def _part_sweep(part: UnitPart, seeds, x, N, s, M, pi, alpha, beta, bsum):
    return part.sweep(seeds, x, N, s, M, pi, alpha, beta, bsum)


def make_parts(prob, lmin: int, count: int) -> list[UnitPart]:
    """The geounits of level ``lmin`` cut into ``count`` runs of about equal block counts (blocks are sorted by
    GEOID, so a geounit's blocks, and a run's, are contiguous)."""
    s = prob.structure
    n_units = len(s.units[lmin])
    starts, ends = prob.unit_start[lmin, :n_units], prob.unit_end[lmin, :n_units]
    count = max(1, min(count, n_units))
    # cut after the geounit whose end first reaches each of count - 1 evenly spaced block positions
    cuts = np.clip(np.searchsorted(ends, np.linspace(0, s.B, count + 1)[1:-1], side="left") + 1, 1, n_units)
    bounds = np.unique(np.concatenate([[0], cuts, [n_units]]).astype(np.int64))
    parts = []
    QK = s.Q * prob.K
    for ua, ub in zip(bounds[:-1], bounds[1:]):
        lo, hi = int(starts[ua]), int(ends[ub - 1])
        block_unit = np.zeros((s.L, hi - lo), dtype=np.int64)
        segs, offs = [], []
        n_loc = np.ones(s.L, dtype=np.int64)
        for li in range(s.L):
            offs.append(sum(len(g) for g in segs))
            if li < lmin:
                segs.append(np.full(QK, -1, dtype=np.int64))
                continue
            u0, u1 = int(s.block_unit[li, lo]), int(s.block_unit[li, hi - 1]) + 1
            block_unit[li] = s.block_unit[li, lo:hi] - u0
            n_loc[li] = u1 - u0
            segs.append(prob.mtab[prob.off[li] + u0 * QK: prob.off[li] + u1 * QK])
        seg = np.concatenate(segs)
        rows = np.unique(seg[seg >= 0])
        mtab = np.where(seg >= 0, np.searchsorted(rows, np.maximum(seg, 0)), -1).astype(np.int64)
        # the bounds the same way: those above the partition level never change inside a partition geounit
        if prob.bounded:
            bseg = np.concatenate([np.full(QK, -1, dtype=np.int64) if li < lmin else
                                   prob.btab[prob.off[li] + int(s.block_unit[li, lo]) * QK:
                                             prob.off[li] + (int(s.block_unit[li, hi - 1]) + 1) * QK]
                                   for li in range(s.L)])
            brows = np.unique(bseg[bseg >= 0])
            btab = np.where(bseg >= 0, np.searchsorted(brows, np.maximum(bseg, 0)), -1).astype(np.int64)
        else:
            brows, btab = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        U = int(n_loc.max())
        unit_start = np.zeros((s.L, U), dtype=np.int64)
        unit_end = np.zeros((s.L, U), dtype=np.int64)
        for li in range(lmin, s.L):
            u0 = int(s.block_unit[li, lo])
            unit_start[li, :n_loc[li]] = prob.unit_start[li, u0:u0 + n_loc[li]] - lo
            unit_end[li, :n_loc[li]] = prob.unit_end[li, u0:u0 + n_loc[li]] - lo
        g0, g1 = int(prob.block_bg[lo]), int(prob.block_bg[hi - 1]) + 1
        t0, t1 = int(prob.block_tract[lo]), int(prob.block_tract[hi - 1]) + 1
        arrays = {"y": prob.y[rows], "w": prob.w[rows], "block_unit": block_unit, "query_cell": prob.query_cell,
                  "mtab": mtab, "off": np.array(offs, dtype=np.int64), "K": prob.K, "unit_start": unit_start,
                  "unit_end": unit_end, "inv_level": prob.inv_level[lo:hi].copy(),
                  "block_bg": prob.block_bg[lo:hi] - g0, "block_tract": prob.block_tract[lo:hi] - t0,
                  "btab": btab, "blow": prob.blow[brows], "bupp": prob.bupp[brows]}
        parts.append(UnitPart(lo, hi, np.arange(ua, ub), (starts[ua:ub] - lo).astype(np.int64),
                              (ends[ua:ub] - lo).astype(np.int64), rows, brows, g0, g1, t0, t1, lmin, arrays))
    return parts


#: called as ``AFTER_SWEEP(sweeps, client)`` after each Dask sweep of the parts (tests kill a worker from it)
AFTER_SWEEP = None


class PartRunner:
    """Runs one sweep's unit moves of every part: in this process, or as Dask tasks (each part's arrays sent to
    a worker once).  Either way a part gets copies of its counts and sums and returns them: the same
    computation, so the draws are the same for any number of parts and workers.

    A task is a pure function of what the client sends, so a lost worker costs only a resend: the parts are
    scattered again over the live workers and the sweep's tasks submitted again (``rebuilt`` counts it)."""

    def __init__(self, parts: list[UnitPart], client=None, worker_timeout: float = 120.0):
        import threading

        self.parts = parts
        self.client = client
        self.worker_timeout = worker_timeout
        self.handles, self.where = parts, [None] * len(parts)
        self.generation = self.rebuilt = self.sweeps = 0
        self._lock = threading.Lock()
        if client is not None:
            self._place()

    def _place(self) -> None:
        # each part, and each sweep's data for it, on one worker in turn (no copy between workers)
        import time
        from concurrent.futures import CancelledError

        from ..execution import ClusterError

        start = time.monotonic()
        while True:
            names = self._workers()
            try:
                self.where = [[names[i % len(names)]] for i in range(len(self.parts))]
                self.handles = [self.client.scatter(p, workers=w) for p, w in zip(self.parts, self.where)]
                return
            except (KeyError, CancelledError, OSError):
                # a worker listed a moment ago is gone (the scheduler refuses a scatter to it with KeyError):
                # list the live ones again, up to --worker-timeout
                if time.monotonic() - start > self.worker_timeout:
                    raise ClusterError(f"could not place the partitions on a live Dask worker for "
                                       f"{self.worker_timeout:g} s (--worker-timeout)") from None
                time.sleep(0.2)

    def _workers(self) -> list[str]:
        from ..execution import live_workers

        return live_workers(self.client, self.worker_timeout)

    def _replace(self, generation: int) -> None:
        with self._lock:
            if self.generation == generation:  # (another chain's thread may have re-placed them already)
                self._place()
                self.generation += 1
                self.rebuilt += 1

    def _dask(self, seeds, args, hyp) -> list:
        from concurrent.futures import CancelledError

        from distributed import KilledWorker

        for attempt in range(4):
            generation, handles, where = self.generation, self.handles, self.where
            try:
                futures = []
                for h, w, (u, *data) in zip(handles, where, args):
                    xs, Ns, ss, Ms, ps, bs = self.client.scatter(data, workers=w, hash=False)
                    futures.append(self.client.submit(_part_sweep, h, seeds[2 + u], xs, Ns, ss, Ms, ps,
                                                      float(hyp[0]), float(hyp[1]), bs, pure=False, workers=w,
                                                      allow_other_workers=True))
                return self.client.gather(futures)
            except (CancelledError, KilledWorker, OSError, KeyError):
                # a worker lost with a part (OSError: its comm; KeyError: the scheduler refusing a scatter to it)
                if attempt == 3:
                    raise
                self._replace(generation)

    def sweep(self, seeds, x, N, s, M, pi, hyp, bsum):
        args = [(p.units, x[p.lo:p.hi].copy(), N[p.lo:p.hi].copy(), s[p.rows], M[p.g0:p.g1], pi[p.t0:p.t1],
                 bsum[p.brows]) for p in self.parts]
        if self.client is None:
            out = [_part_sweep(h, seeds[2 + u], xs, Ns, ss, Ms, ps, hyp[0], hyp[1], bs)
                   for h, (u, xs, Ns, ss, Ms, ps, bs) in zip(self.handles, args)]
        else:
            out = self._dask(seeds, args, hyp)
        for p, (xs, Ns, ss, bs) in zip(self.parts, out):
            x[p.lo:p.hi] = xs
            N[p.lo:p.hi] = Ns
            s[p.rows] = ss
            bsum[p.brows] = bs
        if self.client is not None:
            with self._lock:
                self.sweeps += 1
                done = self.sweeps
            if AFTER_SWEEP is not None:
                AFTER_SWEEP(done, self.client)


def partitioned_sweep(prob, runner: PartRunner, seed: int, x, N, sums, M, eta, hyp, pi, bufL, bufR, lmin: int,
                      update_hyper: bool, bsum=None):
    """One sweep with the moves split at partition level ``lmin``: the moves that change a partition geounit's
    cell totals over all blocks, then every partition geounit's inner block pairs (independent given those
    totals, so in parallel), then the hyperparameters."""
    s = prob.structure
    if bsum is None:
        bsum = prob.bound_sums(x)
    seeds = sweep_seeds(seed, 2 + len(s.units[lmin]))
    bufL, bufR = global_moves(seeds[0], x, N, sums, prob.y, prob.w, s.block_unit, prob.query_cell, prob.mtab, prob.off,
                              prob.K, prob.unit_start, prob.unit_end, prob.inv_level, prob.block_bg, prob.block_tract,
                              hyp[0], hyp[1], M, pi, bufL, bufR, lmin, prob.btab, bsum, prob.blow, prob.bupp)
    runner.sweep(seeds, x, N, sums, M, pi, hyp, bsum)
    if update_hyper:
        hyper_step(seeds[1], x, N, prob.block_bg, prob.block_tract, prob.bg_tract, prob.tract_start, prob.tract_end,
                   M, eta, hyp, pi, prob.prior_vec)
    return bufL, bufR


def _memory_check(structure, chains: int, draws: int) -> None:
    from ..memory import check_fits

    cells = structure.B * structure.C
    index = float(index_sizes(structure).sum())  # int64 entries of the measurement index; the bounds' alike
    tables = 1 + (structure.bounds is not None and structure.bounds.size > 0)
    est = 4.0 * cells * chains * draws + 8.0 * cells * (chains + 2) + 8.0 * structure.M * 6 + 8.0 * index * tables
    check_fits(est, "draws", f"{draws} draws x {chains} chains of {cells:,} block cells",
               "give fewer --draws or --chains, or a larger --thin with fewer draws")


class ChainCheckpoint:
    """One chain's state at a chunk boundary (counts, hyperparameters, its generator's state and the draws kept
    so far) in ``folder/chain<c>.npz``, written atomically; a file of another run (``fingerprint``: the release's
    sha256, the prior and the options) is refused.  Resuming at a chunk boundary with the generator's state
    restored continues the same stream of random numbers, so the draws equal an uninterrupted run's."""

    #: seconds between saves
    every = 60.0

    def __init__(self, folder: Path, chain: int, fingerprint: str):
        self.path = folder / f"chain{chain}.npz"
        self.fingerprint = fingerprint
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError("checkpoint", f"cannot create folder {folder} ({exc.strerror})") from None

    def load(self) -> dict | None:
        if not self.path.exists():
            return None
        try:
            with np.load(self.path, allow_pickle=False) as data:
                saved = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise InputError("checkpoint", f"{self.path} cannot be read ({exc}); remove it to start afresh") from None
        if str(saved.get("fingerprint")) != self.fingerprint:
            raise InputError("checkpoint", f"{self.path} was written by another run (release, prior, options or "
                                           "--seed differ); remove it or give another folder")
        out = {k: saved[k] for k in ("x", "M", "eta", "hyp", "pi", "out_x", "out_h", "out_M", "out_pi")}
        out.update(done=int(saved["done"]), kept=int(saved["kept"]), rng=json.loads(str(saved["rng"])))
        return out

    def save(self, **state) -> None:
        from ..files import atomic_path

        state["rng"] = json.dumps(state["rng"])
        with atomic_path(self.path, field="checkpoint") as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, fingerprint=self.fingerprint, **state)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def _run_chain(prob: Problem, options: CensusDAOptions, seed, progress=None, fixed: dict | None = None,
               chain: int = 0, fingerprint: str = "", runner: PartRunner | None = None, lmin: int = 0):
    """One chain: (counts, [alpha, beta, tau, a (once per cell), log b], M, pi) at each kept draw, counts and
    mixes over the histogram's cells (0 at structural zeros; a and log b, the mixes' shape and log rates, over the
    engine's cells).  ``fixed``: hyperparameters held at these values (``alpha``, ``beta``, ``block_group_mean``,
    ``tract_mix`` over the histogram's cells) -- the conditional of x alone, which the brute-force reference test
    enumerates (a and b reach x only through the tract mixes, so they are not needed)."""
    s = prob.structure
    rng = np.random.default_rng(seed)
    x = prob.initial_counts(rng)
    N = x.sum(axis=1)
    sums = prob.sums(x)
    bsum = prob.bound_sums(x)
    G = int(prob.block_bg.max()) + 1
    T = int(prob.block_tract.max()) + 1
    # start the hyperparameters at their prior medians, block-group means at the data's
    M = np.maximum(np.bincount(prob.block_bg, weights=N, minlength=G) / np.bincount(prob.block_bg, minlength=G), 0.5)
    eta = np.full(T, math.log(prob.prior.size_mean))
    # hyp = [alpha, beta, tau, the mixes' shape a once per engine cell, their log rates log b] (sweep_hyper)
    hyp = np.concatenate([[prob.prior.alpha_median, prob.prior.beta_median, prob.prior.tau_scale * 0.5],
                          np.full(prob.C, prob.prior.mix_shape_median), np.zeros(prob.C)])
    pi = np.full((T, prob.C), 1.0 / prob.C)
    if fixed is not None:
        hyp[0], hyp[1] = fixed["alpha"], fixed["beta"]
        M = np.array(fixed["block_group_mean"], dtype=float)
        pi = np.ascontiguousarray(np.array(fixed["tract_mix"], dtype=float)[:, prob.allowed])
    bufL, bufR = np.empty(4096), np.empty(4096)
    draws = options.draws
    out_x = np.empty((draws, s.B, s.C), dtype=np.int32)
    out_h = np.empty((draws, hyp.size))
    out_M = np.empty((draws, G))
    out_pi = np.empty((draws, T, s.C))
    total = options.warmup + draws * options.thin
    done = kept = 0
    store = None if options.checkpoint is None else ChainCheckpoint(Path(options.checkpoint), chain, fingerprint)
    if store is not None:
        saved = store.load()
        if saved is not None:
            done, kept = saved["done"], saved["kept"]
            x[...] = saved["x"]
            N = x.sum(axis=1)
            sums = prob.sums(x)
            bsum = prob.bound_sums(x)
            M, eta, hyp, pi = saved["M"], saved["eta"], saved["hyp"], saved["pi"]
            rng.bit_generator.state = saved["rng"]
            out_x[:kept], out_h[:kept], out_M[:kept], out_pi[:kept] = (saved["out_x"], saved["out_h"],
                                                                       saved["out_M"], saved["out_pi"])
    last_save = time.monotonic()
    while done < total:
        # sweeps up to the next kept draw or chunk end
        if done < options.warmup:
            n = min(CHUNK if runner is None else 1, options.warmup - done)
        else:
            n = options.thin
        if runner is None:
            bufL, bufR = run_sweeps(n, int(rng.integers(2 ** 31)), x, N, sums, prob.y, prob.w, s.block_unit,
                                    prob.query_cell, prob.mtab, prob.off, prob.K, prob.unit_start, prob.unit_end,
                                    prob.inv_level, prob.block_bg, prob.block_tract, prob.bg_tract, prob.tract_start,
                                    prob.tract_end, M, eta, hyp, pi, prob.prior_vec, bufL, bufR, fixed is None,
                                    prob.btab, bsum, prob.blow, prob.bupp)
        else:
            for _ in range(n):
                bufL, bufR = partitioned_sweep(prob, runner, int(rng.integers(2 ** 31)), x, N, sums, M, eta, hyp, pi,
                                               bufL, bufR, lmin, fixed is None, bsum)
        done += n
        if done > options.warmup:
            out_x[kept] = prob.full(x)
            out_h[kept] = hyp
            out_M[kept] = M
            out_pi[kept] = prob.full(pi)
            kept += 1
        if progress is not None:
            progress(done, total)
        if store is not None and done < total and time.monotonic() - last_save >= store.every:
            store.save(done=done, kept=kept, x=x, M=M, eta=eta, hyp=hyp, pi=pi, rng=rng.bit_generator.state,
                       out_x=out_x[:kept], out_h=out_h[:kept], out_M=out_M[:kept], out_pi=out_pi[:kept])
            last_save = time.monotonic()
    return out_x, out_h, out_M, out_pi


def census_da(model, options: CensusDAOptions):
    """Engine ``da`` (census): the Gibbs sampler of the module docstring over the model's block histogram structure
    (``model.latent.state``: the release's measured rows, geography and cells) and its parsed prior
    (``model.prior.spec``); a checkpoint is keyed by the model's release (its sha256).  The draws are named through
    the model."""
    from ..execution import spawn_seeds
    from .mcmc_common import chain_workers, map_chains

    release, prior = model.release, model.prior.spec
    s = model.latent.state
    _memory_check(s, options.chains, options.draws)
    prob = Problem(s, prior)
    seeds = spawn_seeds(options.seed, options.chains)
    workers = chain_workers(options.chains, (options.warmup + options.draws * options.thin) * s.B * s.C)
    last = [0]

    def progress(done, total):
        if done * 20 // total > last[0] * 20 // total or done == total:
            report_status(f"da: sweep {done}/{total}")
        last[0] = done

    fingerprint = ""
    if options.checkpoint is not None:
        if options.seed is None:
            raise InputError("checkpoint", "a resumable run needs a --seed (the resumed chains continue its streams)")
        import hashlib

        fingerprint = hashlib.sha256(json.dumps([release.sha256, prior.as_dict(), options.draws, options.warmup,
                                                 options.thin, options.chains, str(options.seed),
                                                 options.partition]).encode()
                                     ).hexdigest()
    lmin, runner, part_attrs = _partitions(prob, options)
    results = map_chains(lambda c: _run_chain(prob, options, seeds[c], progress if c == 0 and not options.quiet
                                              else None, chain=c, fingerprint=fingerprint, runner=runner, lmin=lmin),
                         options.chains, workers)
    if options.checkpoint is not None:  # the run finished: its states are not needed again
        for c in range(options.chains):
            ChainCheckpoint(Path(options.checkpoint), c, fingerprint).remove()
    return model.pack(
        # the hyperparameters first: what the printed summary and the report's table show
        {"alpha": np.stack([r[1][:, 0] for r in results]),
         "beta": np.stack([r[1][:, 1] for r in results]),
         "tau": np.stack([r[1][:, 2] for r in results]),
         "block_group_mean": np.stack([r[2] for r in results]),
         "tract_mix": np.stack([r[3] for r in results]),
         "mix_shape": np.stack([r[1][:, 3] for r in results]),
         "mix_rate": np.stack([prob.full(np.exp(r[1][:, 3 + prob.C:])) for r in results]),
         "counts": np.stack([r[0] for r in results])},
        "da",
        attrs=census_attrs(s) | {"algorithm": "data augmentation over the block histograms (exact discrete-Gaussian "
                                              "likelihood; cell, cell-pair and block-pair moves; collapsed "
                                              "negative-binomial / Dirichlet-multinomial prior)",
                                 "options_warmup": options.warmup, "options_thin": options.thin} | part_attrs
              | ({"partitions_rebuilt": runner.rebuilt} if runner is not None and runner.client is not None else {}),
        float32=("tract_mix", "block_group_mean"))


def _partitions(prob: Problem, options: CensusDAOptions):
    """(partition level index, runner, attributes) of the run: no runner (the one-pass sweep) unless a partition
    level is asked for or the scheduler is Dask.  Refusals before any work."""
    from ..execution import current_executor

    s = prob.structure
    ex = current_executor()
    # (a Dask executor's client; asked only of one that runs actors, so a process pool is never started here)
    client = ex.dask_client() if ex is not None and ex.runs_actors else None
    if options.partitions is not None and client is None:
        raise RefusedError("partitions", "is an option of the Dask schedulers (--scheduler local or tcp://HOST:PORT)")
    level = options.partition
    if level is None:
        if client is None:
            return 0, None, {}
        level = "county" if "county" in s.levels[:-1] else s.levels[min(1, s.L - 2)]
    above = s.levels[:-1]
    if level not in above:
        raise InputError("partition", f"must be a level above the block, one of {', '.join(above)} (got {level!r})")
    lmin = s.levels.index(level)
    if client is None:
        count = 1
    else:
        count = options.partitions or max(1, sum(client.nthreads().values()))
    parts = make_parts(prob, lmin, count)
    if client is not None and not options.quiet:
        report_status(f"da: {len(parts)} partitions of {len(s.units[lmin]):,} {level} geounits on Dask")
    return lmin, PartRunner(parts, client, getattr(ex, "worker_timeout", 120.0)), {"partition": level,
                                                                                  "partitions": len(parts)}


def census_attrs(structure) -> dict:
    """What a posterior file needs to tabulate any geounit and query without the release: attributes, queries,
    levels (JSON text)."""
    import json

    return {"census_attributes": json.dumps(structure.attributes), "census_queries": json.dumps(structure.queries),
            "census_levels": json.dumps(structure.levels)}


def census_naive(model, options: CensusNaiveOptions):
    """Each block cell alone: a flat prior on the non-negative integers times its own block-level measurement's
    exact discrete-Gaussian likelihood (what a user reading one noisy cell at a time gets; the ``noisyvalue``
    package's posterior); structural zeros are 0.  A block cell without a block-level detailed measurement is
    refused.  Reads the model's block histogram structure (``model.latent.state``) and packs on its marginal of the
    counts."""
    from ..execution import spawn_seeds

    s = model.latent.state
    Lb = s.L - 1
    q = s.detailed_query()
    if q is None:
        raise InputError("method", "naive needs a block-level measurement of every histogram cell (a detailed query)")
    rows, units, cells = s.measured(Lb, q)
    if rows.size != s.B * s.C:
        raise InputError("method", f"naive needs every block's {s.query_names[q]} cells measured; "
                         f"{s.B * s.C - rows.size} are not")
    cell_of = np.argsort(s.query_cell[q])
    y = np.zeros((s.B, s.C))
    sig = np.zeros((s.B, s.C))
    y[units, cell_of[cells]] = s.noisy[rows]
    sig[units, cell_of[cells]] = s.sigma[rows]
    width = int(np.ceil(12 * sig.max())) + 1
    if width * s.B * s.C > 2e8:
        raise InputError("method", f"naive would enumerate {width * s.B * s.C:.3g} values (sigma {sig.max():.3g})")
    seeds = spawn_seeds(options.seed, options.chains)
    out = np.empty((options.chains, options.draws, s.B, s.C), dtype=np.int32)
    lo = np.maximum(np.floor(np.maximum(y, 0) - 12 * sig), 0).astype(np.int64)
    for ch in range(options.chains):
        rng = np.random.default_rng(seeds[ch])
        for b in range(s.B):
            k = lo[b][:, None] + np.arange(width)[None, :]
            logw = -(y[b][:, None] - k) ** 2 / (2 * sig[b][:, None] ** 2)
            p = np.exp(logw - logw.max(axis=1, keepdims=True))
            cdf = np.cumsum(p, axis=1)
            u = rng.random((options.draws, s.C)) * cdf[:, -1][None, :]
            for c in range(s.C):
                out[ch, :, b, c] = k[c][np.searchsorted(cdf[c], u[:, c])]
    if s.structural_zero is not None:
        # a structural zero is known to be 0, whatever its noisy cell reads (the draws above leave the others as
        # they would be without it)
        out[..., s.structural_zero] = 0
    # the model's marginal of the counts: naive draws no hyperparameters
    counts_model = model.marginal(["counts"])
    return counts_model.pack({"counts": out}, "naive", iid=True,
                             attrs=census_attrs(s) | {"algorithm": "each block cell alone: flat prior on k >= 0, "
                                                                   "exact discrete-Gaussian likelihood of its own "
                                                                   "measurement"})
