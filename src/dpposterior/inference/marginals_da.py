"""Engines of the ``marginals`` family: exact data augmentation over the confidential records, and the naive
posterior that takes the noisy counts as true.

``da`` (the default) -- a Gibbs sampler on (p, x), x the n confidential records (Tanner & Wong 1987's data
augmentation; for DP releases Ju, Awan, Gong & Rao, NeurIPS 2022, whose record-by-record update this is):

1. x | y with p integrated out (collapsed Gibbs; Liu 1994, "The collapsed Gibbs sampler", JASA 89): for each
   record and each attribute in turn, the attribute's new value v drawn from its full conditional,
   proportional to

       prod_C (alpha_C + t_C^{-r})(x_C) / prod_S (alpha_S + t_S^{-r})(x_S)  *  prod_m eta_m(y_m | t_m(x))

   -- the hyper-Dirichlet predictive of one record given the others (Dawid & Lauritzen 1993, Sec. 7) times every
   measurement's exact noise law eta_m (any registered integer law, by its log-mass table over the reachable
   residuals; Laplace or Gaussian noise on the reals by its log-density).  Only the cliques, separators and
   measurements holding attribute a change, so one update costs |dom a| x (those groups) look-ups:
   :func:`record_sweep`, compiled;
1b. group moves (block Gibbs; Liu, Wong & Kong 1994, "Covariance structure of the Gibbs sampler", Biometrika 81,
   on grouping; Liu 1994 above): step 1 moves one record at a time, so a cell's count moves as a Polya-urn random
   walk, slow where the noise is large against the counts and on directions no measurement informs.  After each
   record sweep, per attribute a, a number of moves that each redraw how many records of a block take each of two
   values.  a's blanket B(a) is the union of the other attributes of the junction-tree cliques holding a; every
   clique, separator and measurement holding a lies inside {a} u B(a).  A move draws a blanket cell b uniformly
   among the G cells holding records, a record r uniformly among the cell's records and a value v != u = x_r,a
   uniformly; the block S is the cell's records with a in {u, v}, m = |S|, d0 of them at v.  Given everything
   else (the other attributes of every record, a outside S, and a in {u, v} on S), the target restricted to S
   depends only on d = #{s in S: x_s,a = v}: every table holding a changes only in its two cells (u, b_g) and
   (v, b_g), by -(d - d0) and +(d - d0), whichever records of S are at v.  So the conditional of the labelled
   block is uniform given d, and

       P(d) propto C(m, d) * F(d),
       F(d) = prod_{g holding a} [Gamma(alpha_g + c_g(v) + d - d0) Gamma(alpha_g + c_g(u) - d + d0)]^(sign_g)
              * prod_{m holding a} eta_m(y_m | t_m with its (u, b) and (v, b) cells moved by -+(d - d0)),

   C(m, d) counting the labelled blocks with d records at v.  log F is a running sum over d = 0 .. m of the
   record sweep's ``lg`` entries (counts at most n, the table's length) and noise-law steps; d is drawn by
   enumerating 0 .. m (O(m): no window is needed, and P(d) is not log-concave in general -- the Polya terms
   can make it U-shaped), and then |d - d0| records chosen uniformly among those at the value being left are
   flipped.  That is the block's Gibbs draw up to a uniform relabelling within S: started from a labelled block
   uniform given d0, the flipped block is uniform given d (flipping a uniform k-subset of the u's of a uniform
   arrangement is symmetric under permutations of S), and the kernel is reversible: pi(x) K(x, x') =
   P(d0) P(d) / (C(m, d0) C(m - d0, d - d0)) is symmetric, as C(m, d0) C(m - d0, d - d0) = C(m, d) C(d, d0).
   The block is selected with probability m / (G * |cell b| * (|dom a| - 1)) (the cell, then r in S, then the
   other value of the pair); G, |cell b| and m depend only on the blanket values and on which records of the
   cell have a in {u, v}, none of which the move changes, so every state the move reaches selects the block
   with the same probability, and the mixture over blocks of these reversible kernels is reversible with
   respect to the posterior (a random-scan Gibbs sampler whose selection is invariant under its own move).  A
   block can hold one record, so the moves alone are irreducible (tests/test_marginals.py runs them alone
   against enumeration).  Picking the cell uniformly, not the record, makes a move's cost O(n / G) on average
   and visits the small cells (rare levels) as often as the large ones; the option ``group_moves`` = c makes
   c moves per blanket cell holding records, per attribute and sweep (about c record visits per attribute per
   sweep).  It is 0 -- off -- by default: on Adult's 10 attributes at epsilon 0.1 the moves made the chains
   disagree more, not less (docs/marginals.md, "Limits").  The blanket
   cells are indexed once per attribute and sweep (a counting sort, or a sort, of a mixed-radix code), since
   a's moves never change them.  Uniforms: counter-based, under a key the chain's generator draws per sweep
   only when the moves are on, so ``group_moves=0`` reproduces the record sweep's draws exactly;
2. p | x, where a draw is kept: the hyper-Dirichlet posterior given the records' clique counts -- conjugate,
   one exact draw (:meth:`dpposterior.cliques.JunctionTree.draw_tables`).  Integrating p out of step 1 removes
   the slow coupling of p and the records that an uncollapsed sampler has when the noise is large.

Every step is an exact conditional draw, so the chain targets the exact posterior; the noise likelihood is never
approximated (no CLT), at any domain size -- the records, not the table, are the state (n x k codes).

A release without ``n`` (the total unknown): n gets a prior P(n) -- flat on n >= 1 by default, or uniform on the
prior's ``n_range`` [lo, hi] -- and each sweep adds, after step 1, K birth/death Metropolis-Hastings moves on the
record set (Green 1995's reversible jump, here between record sets of size n and n + 1; Geyer & Moller 1994's
birth-and-death proposal for point processes).  The derivation: on the full table T (counts over every cell,
sum n), the collapsed joint is

    pi(n, T) = P(n) * M(T) * Q(T) * prod_m eta_m(y_m | t_m(T)),

M(T) = n! / prod_x T(x)! the multinomial coefficient and Q(T) the hyper-Dirichlet marginal probability of any one
ordering of the records (Dawid & Lauritzen 1993, Sec. 7), so that M Q = P(T | n) is the Dirichlet-multinomial law.
A birth (proposed with probability 1/2) draws a new record x* from the collapsed predictive
q(x* | T) = Q(T + e_x*) / Q(T) -- clique by clique along the junction tree, each clique's attributes not yet set
drawn from (alpha_C + T_C)(x_S, .), the predictive the record sweep uses (``_draw_predictive``); a death
(probability 1/2) removes one of the n + 1 records uniformly, so it picks the cell x* with probability
(T + e_x*)(x*) / (n + 1).  The Metropolis-Hastings ratio of the birth T -> T' = T + e_x* is

    pi(n+1, T') / pi(n, T) * [(T'(x*) / (n+1)) / q(x* | T)]
      = P(n+1)/P(n) * [(n+1) / T'(x*)] * [Q(T')/Q(T)] * eta-ratio * [T'(x*) / (n+1)] * [Q(T)/Q(T')]
      = P(n+1)/P(n) * prod_m eta_m(y_m | t_m + e_m(x*)) / eta_m(y_m | t_m),

the multinomial coefficients and the predictive cancelling; a death's ratio is its inverse with x* the removed
record.  Under the flat and uniform priors P(n+1)/P(n) is 1 inside the support and 0 outside it, so a move out of
[lo, hi] (or to n = 0) is refused and the others are accepted with min(1, noise-ratio), each measurement's ratio
read as in step 1 (one count up or down in one cell).  The posterior is proper under the flat prior: every
measurement's noisy table sum is the total plus noise, so the likelihood decays in n at least as the noise law's
tail.  tests/test_marginals_unknown_n.py checks the chain against enumeration over every table of every n in
[lo, hi].

``naive`` -- the hyper-Dirichlet posterior with each junction-tree clique's counts taken from its noisy
measurement (negative counts set to 0), as if the noise were not there: the analysis a user who ignores the
mechanism runs (measured cliques only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..cliques import JunctionTree
from ..errors import InputError
from ..options import MCMCOptions, EngineOptions, option
from ..progress import status as report_status
from .mcmc_common import counter_uniform, pick_from_log_weights

#: noise kinds of the compiled sweep
KIND_TABLE, KIND_GAUSSIAN, KIND_LAPLACE = 0, 1, 2
#: up to this many levels the record sweep sums an attribute's log weights level by level; above it, term by term over
#: all levels (both orders add the same terms in the same order, so the draws do not depend on it): level by level
#: was 1.3x faster on Adult's 10 attributes (2-16 levels), term by term 1.6x faster on its 14 (up to 100 levels)
FEW_LEVELS = 16
#: the flat prior's upper end of n (no bound: far beyond any table the records can hold)
N_UNBOUNDED = 2 ** 62
#: the fewest birth/death moves per sweep (the default's floor)
MIN_MOVES = 20


@dataclass(frozen=True)
class MarginalsDAOptions(MCMCOptions):
    engine = "da"

    draws: int = option(1000, "int", "posterior draws per chain", low=1)
    chains: int = option(4, "int", "chains (run in parallel threads)", low=1)
    warmup: int = option(500, "int", "warm-up sweeps per chain", low=0)
    thin: int = option(1, "int", "sweeps per kept draw", low=1)
    n_moves: int | None = option(None, "int", "birth/death moves on the records per sweep, a release without n only "
                                 "(default: 4 x the smallest measurement's total-noise variance, at least 20)",
                                 low=1, nullable=True)
    group_moves: int = option(0, "int", "group moves per blanket cell holding records, per attribute and sweep: "
                              "block Gibbs over how many records of one blanket cell take each of two values (each "
                              "costs about one record visit per attribute; 0, the default: the record sweep alone)",
                              low=0)


@dataclass(frozen=True)
class MarginalsNaiveOptions(EngineOptions):
    engine = "naive"

    draws: int = option(1000, "int", "posterior draws per chain", low=1)


# --------------------------------------------------------------------------- the compiled sweep
@numba.njit(cache=True, nogil=True)
def _log_noise(kind, inv, tab, tab_off, tab_lo, tab_len, resid):
    if kind == KIND_TABLE:
        i = int(resid) - tab_lo
        if i < 0 or i >= tab_len:
            return -np.inf
        return tab[tab_off + i]
    if kind == KIND_GAUSSIAN:
        return -0.5 * resid * resid * inv
    return -abs(resid) * inv


@numba.njit(cache=True, nogil=True)
def _cell_without(rec, r, a, ptr, attr, stride, g):
    """(offset of record r's cell in table g with attribute a at 0, a's stride in g)."""
    base = 0
    sa = 0
    for i in range(ptr[g], ptr[g + 1]):
        b = attr[i]
        if b == a:
            sa = stride[i]
        else:
            base += rec[r, b] * stride[i]
    return base, sa


@numba.njit(cache=True, nogil=True)
def record_sweep(rec, u, sizes,
                 g_ptr, g_attr, g_stride, g_off, g_sign, gc, g_lg_off, lg, a_g_ptr, a_g,
                 m_ptr, m_attr, m_stride, m_off, t, y, a_m_ptr, a_m,
                 m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab):
    """One systematic sweep over every record and attribute, p integrated out: each attribute redrawn from

        prod_C (alpha_C + t_C^{-r})(x_C) / prod_S (alpha_S + t_S^{-r})(x_S)  x  prod_m eta_m(y_m | t_m)

    (the hyper-Dirichlet predictive of one record given the others, times the noise laws).  ``gc`` holds the
    counts of the cliques and separators ("groups", ``g_sign`` +1 / -1), ``lg`` their log(alpha + t) tables;
    ``t`` the measured cliques' counts; both are kept in step."""
    n, k = rec.shape
    dmax = 0
    for a in range(k):
        if sizes[a] > dmax:
            dmax = sizes[a]
    w = np.empty(dmax)
    gb = np.empty(g_off.shape[0], dtype=np.int64)
    gs = np.empty(g_off.shape[0], dtype=np.int64)
    mb = np.empty(m_off.shape[0], dtype=np.int64)
    ms = np.empty(m_off.shape[0], dtype=np.int64)
    for r in range(n):
        for a in range(k):
            cur = rec[r, a]
            d = sizes[a]
            ng = a_g_ptr[a + 1] - a_g_ptr[a]
            nm = a_m_ptr[a + 1] - a_m_ptr[a]
            for j in range(ng):
                g = a_g[a_g_ptr[a] + j]
                base, sa = _cell_without(rec, r, a, g_ptr, g_attr, g_stride, g)
                gb[j] = g_off[g] + base
                gs[j] = sa
                gc[gb[j] + cur * sa] -= 1
            for j in range(nm):
                m = a_m[a_m_ptr[a] + j]
                base, sa = _cell_without(rec, r, a, m_ptr, m_attr, m_stride, m)
                mb[j] = m_off[m] + base
                ms[j] = sa
                t[mb[j] + cur * sa] -= 1
            top = -np.inf
            if d <= FEW_LEVELS:
                for v in range(d):
                    lw = 0.0
                    for j in range(ng):
                        g = a_g[a_g_ptr[a] + j]
                        lw += g_sign[g] * lg[g_lg_off[g] + gc[gb[j] + v * gs[j]]]
                    for j in range(nm):
                        m = a_m[a_m_ptr[a] + j]
                        cell = mb[j] + v * ms[j]
                        lw += _noise_step(m_kind[m], m_inv[m], tab, m_tab_off[m], m_tab_lo[m], m_tab_len[m],
                                          y[cell] - t[cell], 1.0)
                    w[v] = lw
                    if lw > top:
                        top = lw
            else:
                # many levels: one term (group, then measurement) at a time over all levels -- the same sums in
                # the same order, with each group's table offset and stride read once, not once per level
                for v in range(d):
                    w[v] = 0.0
                for j in range(ng):
                    g = a_g[a_g_ptr[a] + j]
                    sign, lg_off, base, stride = g_sign[g], g_lg_off[g], gb[j], gs[j]
                    for v in range(d):
                        w[v] += sign * lg[lg_off + gc[base + v * stride]]
                for j in range(nm):
                    m = a_m[a_m_ptr[a] + j]
                    kind, inv, t_off, t_lo, t_len = m_kind[m], m_inv[m], m_tab_off[m], m_tab_lo[m], m_tab_len[m]
                    base, stride = mb[j], ms[j]
                    for v in range(d):
                        cell = base + v * stride
                        w[v] += _noise_step(kind, inv, tab, t_off, t_lo, t_len, y[cell] - t[cell], 1.0)
                for v in range(d):
                    if w[v] > top:
                        top = w[v]
            new = pick_from_log_weights(w, d, top, u[r, a]) if top > -np.inf else cur
            rec[r, a] = new
            for j in range(ng):
                gc[gb[j] + new * gs[j]] += 1
            for j in range(nm):
                t[mb[j] + new * ms[j]] += 1


# --------------------------------------------------------------------------- the group move
@numba.njit(cache=True, nogil=True)
def _dense_codes(keys, n):
    """keys[:n] replaced by their ranks among the distinct values (0 .. distinct - 1); returns distinct."""
    order = np.argsort(keys[:n], kind="mergesort")
    ranks = np.empty(n, dtype=np.int64)
    code = -1
    last = 0
    for i in range(n):
        r = order[i]
        if i == 0 or keys[r] != last:
            code += 1
            last = keys[r]
        ranks[r] = code
    keys[:n] = ranks
    return code + 1


@numba.njit(cache=True, nogil=True)
def _blanket_keys(rec, n, cols, sizes, keys):
    """keys[r] (r < n): a code of record r's values on the attributes ``cols``, equal between two records iff their
    values are (mixed radix, re-coded densely before it would overflow); returns the codes' range."""
    keys[:n] = 0
    span = 1
    for b in cols:
        s = sizes[b]
        if span > (2 ** 62) // s:
            span = _dense_codes(keys, n)
        for r in range(n):
            keys[r] = keys[r] * s + rec[r, b]
        span *= s
    return span


@numba.njit(cache=True, nogil=True)
def _group_index(keys, n, span, order, start):
    """``order``: the records 0 .. n-1 sorted by key; start[0 .. G]: where each of the G groups (distinct keys)
    begins in ``order`` (start[G] = n).  A counting sort where the range is small against n.  Returns G."""
    if span <= 4 * n + 1024:
        count = np.zeros(span + 1, dtype=np.int64)
        for r in range(n):
            count[keys[r] + 1] += 1
        for c in range(span):
            count[c + 1] += count[c]
        for r in range(n):
            order[count[keys[r]]] = r
            count[keys[r]] += 1
    else:
        order[:n] = np.argsort(keys[:n], kind="mergesort")
    groups = 0
    for p in range(n):
        if p == 0 or keys[order[p]] != keys[order[p - 1]]:
            start[groups] = p
            groups += 1
    start[groups] = n
    return groups


@numba.njit(cache=True, nogil=True)
def _noise_step(kind, inv, tab, tab_off, tab_lo, tab_len, resid, step):
    """log eta(resid - step) - log eta(resid): one measurement cell's change when its count moves by ``step``."""
    return (_log_noise(kind, inv, tab, tab_off, tab_lo, tab_len, resid - step)
            - _log_noise(kind, inv, tab, tab_off, tab_lo, tab_len, resid))


@numba.njit(cache=True, nogil=True)
def _group_weights(w, m, d0, u, v, logk, ng, nm, a, a_g_ptr, a_g, gb, gs, gc, g_sign, g_lg_off, lg,
                   a_m_ptr, a_m, mb, ms, t, y, m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab):
    """w[d] = log C(m, d) + log F(d), d = 0 .. m: the block's conditional of d, the number of its m records at v
    (d0 of them now), up to a constant.  F moves one record from u to v per step: each clique or separator g
    holding a gains sign_g (log(alpha + c_v) - log(alpha + c_u - 1)) at its current counts c, each measurement
    its two cells' noise-law changes; ``logk[i]`` = log i.  Returns max_d w[d]."""
    w[0] = 0.0
    top = 0.0
    _shift(gc, t, gb, gs, mb, ms, ng, nm, v, u, d0)  # the counts at d = 0: the block's d0 records at v back at u
    for d in range(m):
        lw = w[d] + logk[m - d] - logk[d + 1]
        for j in range(ng):
            g = a_g[a_g_ptr[a] + j]
            cu = gc[gb[j] + u * gs[j]] - d
            cv = gc[gb[j] + v * gs[j]] + d
            lw += g_sign[g] * (lg[g_lg_off[g] + cv] - lg[g_lg_off[g] + cu - 1])
        for j in range(nm):
            mm = a_m[a_m_ptr[a] + j]
            cu = mb[j] + u * ms[j]
            cv = mb[j] + v * ms[j]
            ru = y[cu] - (t[cu] - d)
            rv = y[cv] - (t[cv] + d)
            lw += (_noise_step(m_kind[mm], m_inv[mm], tab, m_tab_off[mm], m_tab_lo[mm], m_tab_len[mm], ru, -1.0)
                   + _noise_step(m_kind[mm], m_inv[mm], tab, m_tab_off[mm], m_tab_lo[mm], m_tab_len[mm], rv, 1.0))
        w[d + 1] = lw
        if lw > top:
            top = lw
    _shift(gc, t, gb, gs, mb, ms, ng, nm, u, v, d0)
    return top


@numba.njit(cache=True, nogil=True)
def _shift(gc, t, gb, gs, mb, ms, ng, nm, src, dst, k):
    """k records of one blanket cell moved from value ``src`` to ``dst`` of the attribute: the counts of the
    groups (``gb``/``gs``: the cell's base offsets and the attribute's strides) and measurements holding it."""
    for j in range(ng):
        gc[gb[j] + src * gs[j]] -= k
        gc[gb[j] + dst * gs[j]] += k
    for j in range(nm):
        t[mb[j] + src * ms[j]] -= k
        t[mb[j] + dst * ms[j]] += k


@numba.njit(cache=True, nogil=True)
def _flip(rec, a, buf, size, count, new, key, a_idx, move):
    """rec[., a] <- ``new`` for a uniformly random ``count`` of the ``size`` records in buf (a partial
    Fisher-Yates shuffle, uniforms 4 + i of the move's counter)."""
    for i in range(count):
        j = i + min(int(counter_uniform(key, a_idx, move, 4 + i) * (size - i)), size - i - 1)
        r = buf[j]
        buf[j] = buf[i]
        buf[i] = r
        rec[r, a] = new


@numba.njit(cache=True, nogil=True)
def group_moves(rec, n, key, moves, sizes, bl_ptr, bl_attr,
                g_ptr, g_attr, g_stride, g_off, g_sign, gc, g_lg_off, lg, a_g_ptr, a_g,
                m_ptr, m_attr, m_stride, m_off, t, y, a_m_ptr, a_m,
                m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab):
    """Group moves on the first n rows of ``rec``, per attribute a ``moves`` of them (negative: one per blanket
    cell holding records) -- the module docstring derives them: a blanket cell (the records' values on
    ``bl_attr[bl_ptr[a]:bl_ptr[a+1]]``) drawn uniformly among those holding records, a record r in it and a value
    v != u = rec[r, a] drawn uniformly; the block is the cell's records with a in {u, v}; the number d of them at
    v is drawn from its exact conditional and |d - d0| uniformly chosen records flipped.  Uniforms: the counter
    (a, move, slot) under ``key``.  ``gc`` and ``t`` are kept in step.  Returns the records flipped."""
    k = rec.shape[1]
    keys = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    start = np.empty(n + 1, dtype=np.int64)
    at_u = np.empty(n, dtype=np.int64)
    at_v = np.empty(n, dtype=np.int64)
    w = np.empty(n + 1)
    logk = np.log(np.arange(n + 1.0))
    gb = np.empty(g_off.shape[0], dtype=np.int64)
    gs = np.empty(g_off.shape[0], dtype=np.int64)
    mb = np.empty(m_off.shape[0], dtype=np.int64)
    ms = np.empty(m_off.shape[0], dtype=np.int64)
    flipped = 0
    for a in range(k):
        da = sizes[a]
        if da < 2 or n == 0:
            continue
        span = _blanket_keys(rec, n, bl_attr[bl_ptr[a]:bl_ptr[a + 1]], sizes, keys)
        cells = _group_index(keys, n, span, order, start)
        ng = a_g_ptr[a + 1] - a_g_ptr[a]
        nm = a_m_ptr[a + 1] - a_m_ptr[a]
        for mv in range(moves if moves >= 0 else -moves * cells):
            c = min(int(counter_uniform(key, a, mv, 0) * cells), cells - 1)
            lo, hi = start[c], start[c + 1]
            r = order[min(lo + int(counter_uniform(key, a, mv, 1) * (hi - lo)), hi - 1)]
            u = rec[r, a]
            v = min(int(counter_uniform(key, a, mv, 2) * (da - 1)), da - 2)
            if v >= u:
                v += 1
            nu = 0
            nv = 0
            for p in range(lo, hi):
                s = order[p]
                if rec[s, a] == u:
                    at_u[nu] = s
                    nu += 1
                elif rec[s, a] == v:
                    at_v[nv] = s
                    nv += 1
            for j in range(ng):
                g = a_g[a_g_ptr[a] + j]
                base, sa = _cell_without(rec, r, a, g_ptr, g_attr, g_stride, g)
                gb[j] = g_off[g] + base
                gs[j] = sa
            for j in range(nm):
                mm = a_m[a_m_ptr[a] + j]
                base, sa = _cell_without(rec, r, a, m_ptr, m_attr, m_stride, mm)
                mb[j] = m_off[mm] + base
                ms[j] = sa
            m = nu + nv
            top = _group_weights(w, m, nv, u, v, logk, ng, nm, a, a_g_ptr, a_g, gb, gs, gc, g_sign, g_lg_off, lg,
                                 a_m_ptr, a_m, mb, ms, t, y, m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab)
            d = pick_from_log_weights(w, m + 1, top, counter_uniform(key, a, mv, 3))
            step = d - nv  # records moving from u to v (negative: from v to u)
            if step > 0:
                _flip(rec, a, at_u, nu, step, v, key, a, mv)
            elif step < 0:
                _flip(rec, a, at_v, nv, -step, u, key, a, mv)
            _shift(gc, t, gb, gs, mb, ms, ng, nm, u, v, step)
            flipped += abs(step)
    return flipped


@numba.njit(cache=True, nogil=True)
def _cell_of(rec, r, ptr, attr, stride, g):
    """Offset of record r's cell in table g (a group or a measurement)."""
    c = 0
    for i in range(ptr[g], ptr[g + 1]):
        c += rec[r, attr[i]] * stride[i]
    return c


@numba.njit(cache=True, nogil=True)
def _draw_predictive(rec, r, sizes, nq, g_ptr, g_attr, g_stride, g_off, gc, g_lg_off, lg, u, done, free, w):
    """rec[r] <- one draw from the hyper-Dirichlet predictive of a further record given the counts ``gc``:
    the cliques (groups 0 .. nq - 1, root first) in turn, each clique's attributes not yet set drawn jointly with
    weights (alpha_C + t_C)(x_S, .) given those already set (its separator; the separator's own factor is the
    same for every candidate) -- the weights the record sweep reads from ``lg``.  ``u[q]``: clique q's uniform."""
    for a in range(rec.shape[1]):
        done[a] = False
    for q in range(nq):
        base = 0
        nf = 0
        for i in range(g_ptr[q], g_ptr[q + 1]):
            if done[g_attr[i]]:
                base += rec[r, g_attr[i]] * g_stride[i]
            else:
                free[nf] = i
                nf += 1
        if nf == 0:
            continue
        cells = 1
        for j in range(nf):
            cells *= sizes[g_attr[free[j]]]
        top = -np.inf
        for c in range(cells):
            rem = c
            off = base
            for j in range(nf - 1, -1, -1):
                i = free[j]
                d = sizes[g_attr[i]]
                off += (rem % d) * g_stride[i]
                rem //= d
            w[c] = lg[g_lg_off[q] + gc[g_off[q] + off]]
            if w[c] > top:
                top = w[c]
        rem = pick_from_log_weights(w, cells, top, u[q])
        for j in range(nf - 1, -1, -1):
            i = free[j]
            d = sizes[g_attr[i]]
            rec[r, g_attr[i]] = rem % d
            rem //= d
            done[g_attr[i]] = True


@numba.njit(cache=True, nogil=True)
def birth_death(rec, n, n_lo, n_hi, u, sizes, nq,
                g_ptr, g_attr, g_stride, g_off, gc, g_lg_off, lg,
                m_ptr, m_attr, m_stride, m_off, t, y,
                m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab):
    """``u.shape[0]`` birth/death Metropolis-Hastings moves on the first ``n`` rows of ``rec`` (the module
    docstring derives the ratio): a birth (u[j, 0] < 1/2) draws a record from the collapsed predictive into row n,
    a death removes row floor(u[j, 2] n) (the last row moves into its place); either is accepted with
    min(1, prod_m eta_m(y_m | t_m +- e) / eta_m(y_m | t_m)) when the new n is in [n_lo, n_hi] (flat prior ratio)
    and refused otherwise.  ``rec`` must have at least n + u.shape[0] rows.  ``gc`` and ``t`` are kept in step.
    Returns (n, accepted moves)."""
    k = rec.shape[1]
    wmax = 1
    for q in range(nq):
        cells = 1
        for i in range(g_ptr[q], g_ptr[q + 1]):
            cells *= sizes[g_attr[i]]
        if cells > wmax:
            wmax = cells
    w = np.empty(wmax)
    done = np.zeros(k, dtype=np.bool_)
    free = np.empty(k, dtype=np.int64)
    ng = g_off.shape[0]
    nm = m_off.shape[0]
    accepted = 0
    for j in range(u.shape[0]):
        if u[j, 0] < 0.5:
            if n + 1 > n_hi:
                continue
            r = n
            step = 1
            _draw_predictive(rec, r, sizes, nq, g_ptr, g_attr, g_stride, g_off, gc, g_lg_off, lg, u[j, 3:], done,
                             free, w)
        else:
            if n - 1 < n_lo:
                continue
            r = min(int(u[j, 2] * n), n - 1)
            step = -1
        dl = 0.0
        for m in range(nm):
            cell = m_off[m] + _cell_of(rec, r, m_ptr, m_attr, m_stride, m)
            resid = y[cell] - t[cell]
            dl += _noise_step(m_kind[m], m_inv[m], tab, m_tab_off[m], m_tab_lo[m], m_tab_len[m], resid, step)
        if not (dl >= 0.0 or u[j, 1] < math.exp(dl)):
            continue
        for g in range(ng):
            gc[g_off[g] + _cell_of(rec, r, g_ptr, g_attr, g_stride, g)] += step
        for m in range(nm):
            t[m_off[m] + _cell_of(rec, r, m_ptr, m_attr, m_stride, m)] += step
        accepted += 1
        if step == 1:
            n += 1
        else:
            n -= 1
            for a in range(k):
                rec[r, a] = rec[n, a]
    return n, accepted


@numba.njit(cache=True, nogil=True)
def noise_loglik(t, y, m_off, m_len, m_kind, m_inv, m_tab_off, m_tab_lo, m_tab_len, tab):
    """log prod_m eta_m(y_m | t_m) up to each law's normalising constant (a chain diagnostic)."""
    out = 0.0
    for m in range(m_off.shape[0]):
        for c in range(m_off[m], m_off[m] + m_len[m]):
            out += _log_noise(m_kind[m], m_inv[m], tab, m_tab_off[m], m_tab_lo[m], m_tab_len[m], y[c] - t[c])
    return out


# --------------------------------------------------------------------------- the problem, flattened
def _strides(shape) -> list[int]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= int(s)
    return out[::-1]


class Problem:
    """The junction tree, the measurements and their noise laws as the flat arrays the compiled sweep reads."""

    def __init__(self, model):
        tree: JunctionTree = model.latent.state
        self.model = model
        self.tree = tree
        attrs = list(tree.attributes)
        col = {a: i for i, a in enumerate(attrs)}
        self.sizes = np.array([tree.sizes[a] for a in attrs], dtype=np.int64)
        #: None: the total is unknown (birth/death moves on the records, prior on [n_lo, n_hi])
        self.n = None if model.n is None else int(model.n)
        k = len(attrs)
        # the groups of the collapsed update: every clique (+1) and every child's separator (-1)
        groups = [(tuple(c), 1) for c in tree.cliques]
        groups += [(tuple(tree.separators[q]), -1) for q in range(len(tree.cliques))
                   if tree.parents[q] >= 0 and tree.separators[q]]
        self.groups = groups
        g_ptr, g_attr, g_stride, g_off, g_sign, off = [0], [], [], [], [], 0
        for c, sign in groups:
            shape = tree.shape(c)
            g_attr += [col[a] for a in c]
            g_stride += _strides(shape)
            g_ptr.append(len(g_attr))
            g_off.append(off)
            g_sign.append(float(sign))
            off += int(math.prod(shape))
        self.g_ptr, self.g_attr = np.array(g_ptr, np.int64), np.array(g_attr, np.int64)
        self.g_stride, self.g_off = np.array(g_stride, np.int64), np.array(g_off, np.int64)
        self.g_sign = np.array(g_sign, float)
        self.gc_size = off
        self.a_g_ptr, self.a_g = _inverse(k, [[col[a] for a in c] for c, _ in groups])
        # each attribute's blanket: the other attributes of the junction-tree cliques holding it (every group and
        # measurement holding it lies inside it and the blanket), the grouping key of its group moves
        blankets = [sorted({col[b] for c in tree.cliques if a in c for b in c} - {col[a]}) for a in attrs]
        self.bl_ptr = np.cumsum([0] + [len(b) for b in blankets]).astype(np.int64)
        self.bl_attr = np.array([b for bl in blankets for b in bl], dtype=np.int64)
        # measurements
        m_ptr, m_attr, m_stride, m_off, m_len, off = [0], [], [], [], [], 0
        y = []
        kinds, invs, self._table_range = [], [], []
        for meas in model.measurements:
            clique = meas.query.clique
            shape = meas.query.shape
            m_attr += [col[a] for a in clique]
            m_stride += _strides(shape)
            m_ptr.append(len(m_attr))
            m_off.append(off)
            size = int(math.prod(shape))
            m_len.append(size)
            off += size
            vals = np.asarray(meas.values, float).ravel()
            y.append(vals)
            mech = meas.mechanism
            if meas.integer_noise:
                self._table_range.append((int(np.floor(vals.min())), int(np.ceil(vals.max()))))
                kinds.append(KIND_TABLE)
                invs.append(0.0)
            else:
                self._table_range.append(None)
                shape_scale = mech.log_mass_shape()
                if shape_scale is None:
                    raise InputError("method", f"da needs a noise law it can evaluate; {meas.name} has "
                                     f"{mech.name!r}")
                from ..mechanisms.base import NoiseShape

                form, scale = shape_scale
                kinds.append(KIND_GAUSSIAN if form is NoiseShape.GAUSSIAN else KIND_LAPLACE)
                invs.append(1.0 / scale ** 2 if form is NoiseShape.GAUSSIAN else 1.0 / scale)
        self.m_ptr, self.m_attr = np.array(m_ptr, np.int64), np.array(m_attr, np.int64)
        self.m_stride, self.m_off = np.array(m_stride, np.int64), np.array(m_off, np.int64)
        self.m_len = np.array(m_len, np.int64)
        self.y = np.concatenate(y)
        self.t_size = off
        self.a_m_ptr, self.a_m = _inverse(k, [[col[a] for a in m.query.clique] for m in model.measurements])
        self.m_kind, self.m_inv = np.array(kinds, np.int64), np.array(invs, float)
        # the n prior (a release without n): flat on n >= 1, or uniform on the prior's n_range
        self.n_lo, self.n_hi = n_bounds(model)
        self.n_start = self.n if self.n is not None else self.start_n()
        # the noise look-ups for a public n; with n unknown each chain builds them for its records' capacity
        self.noise = self.noise_tables(self.n) if self.n is not None else None

    def noise_tables(self, cap: int):
        """(offsets, lowest residuals, lengths, the tables) of the integer noise laws' log-mass over every residual
        y - t reachable with at most ``cap`` records: the look-ups of the compiled sweeps."""
        tab_off, tab_lo, tab_len, tabs, toff = [], [], [], [], 0
        for meas, rng in zip(self.model.measurements, self._table_range):
            if rng is None:
                tab_off.append(0)
                tab_lo.append(0)
                tab_len.append(0)
                continue
            lo, hi = rng[0] - cap - 2, rng[1] + 2
            table = meas.residual_log_mass(lo, hi)
            tab_off.append(toff)
            tab_lo.append(lo)
            tab_len.append(len(table))
            tabs.append(table)
            toff += len(table)
        return (np.array(tab_off, np.int64), np.array(tab_lo, np.int64), np.array(tab_len, np.int64),
                np.concatenate(tabs) if tabs else np.zeros(1))

    def start_n(self) -> int:
        return noisy_total(self.model, self.n_lo, self.n_hi)

    def default_moves(self) -> int:
        """Birth/death moves per sweep: n moves by +-1 steps, so crossing a few posterior sds of n (at most the
        smallest measurement's total-noise sd s, the sd of its table sum) takes about (2 s)^2 steps; at least
        :data:`MIN_MOVES`."""
        sds = []
        for meas, ln in zip(self.model.measurements, self.m_len):
            try:
                var = float(meas.mechanism.noise_variance)
            except (ValueError, AttributeError, NotImplementedError):
                var = float(meas.mechanism.noise_scale) ** 2
            sds.append(math.sqrt(float(ln) * var))
        return max(MIN_MOVES, int(math.ceil(4.0 * min(sds) ** 2)))

    def log_tables(self, concentration: float, cap: int | None = None):
        """log(alpha_g + t), t = 0..cap (default n), of every group (alpha_g = A / |dom g|, uniform within a
        group)."""
        t = np.arange((self.n if cap is None else cap) + 1, dtype=float)
        tabs = [np.log(concentration / math.prod(self.tree.shape(c)) + t) for c, _ in self.groups]
        offs = np.cumsum([0] + [len(x) for x in tabs[:-1]]).astype(np.int64)
        return offs, np.concatenate(tabs)

    def group_counts(self, rec: np.ndarray) -> np.ndarray:
        return np.concatenate([self.tree.counts(rec, c).ravel() for c, _ in self.groups]).astype(np.int64)

    def measured_counts(self, rec: np.ndarray) -> np.ndarray:
        out = np.empty(self.t_size, dtype=np.int64)
        for j, meas in enumerate(self.model.measurements):
            out[self.m_off[j]:self.m_off[j] + self.m_len[j]] = meas.query(rec).ravel().astype(np.int64)
        return out

    def sweep(self, rec, gc, lg_off, lg, t, u, noise=None):
        tab_off, tab_lo, tab_len, tab = self.noise if noise is None else noise
        record_sweep(rec, u, self.sizes, self.g_ptr, self.g_attr, self.g_stride, self.g_off, self.g_sign, gc, lg_off,
                     lg, self.a_g_ptr, self.a_g, self.m_ptr, self.m_attr, self.m_stride, self.m_off, t, self.y,
                     self.a_m_ptr, self.a_m, self.m_kind, self.m_inv, tab_off, tab_lo, tab_len, tab)

    def group(self, rec, n, gc, lg_off, lg, t, key, moves, noise) -> int:
        """``moves`` group moves per attribute on rec[:n] (uniforms from the counter under ``key``); returns the
        records flipped."""
        tab_off, tab_lo, tab_len, tab = noise
        return int(group_moves(rec, n, np.uint64(key), moves, self.sizes, self.bl_ptr, self.bl_attr,
                               self.g_ptr, self.g_attr, self.g_stride, self.g_off, self.g_sign, gc, lg_off, lg,
                               self.a_g_ptr, self.a_g, self.m_ptr, self.m_attr, self.m_stride, self.m_off, t, self.y,
                               self.a_m_ptr, self.a_m, self.m_kind, self.m_inv, tab_off, tab_lo, tab_len, tab))

    def moves(self, rec, n, gc, lg_off, lg, t, u, noise) -> tuple[int, int]:
        """Birth/death moves (``u``: one row of 3 + cliques uniforms per move); returns (n, accepted)."""
        tab_off, tab_lo, tab_len, tab = noise
        n, acc = birth_death(rec, n, self.n_lo, self.n_hi, u, self.sizes, len(self.tree.cliques),
                             self.g_ptr, self.g_attr, self.g_stride, self.g_off, gc, lg_off, lg,
                             self.m_ptr, self.m_attr, self.m_stride, self.m_off, t, self.y,
                             self.m_kind, self.m_inv, tab_off, tab_lo, tab_len, tab)
        return int(n), int(acc)

    def loglik(self, t, noise=None) -> float:
        tab_off, tab_lo, tab_len, tab = self.noise if noise is None else noise
        return noise_loglik(t, self.y, self.m_off, self.m_len, self.m_kind, self.m_inv, tab_off, tab_lo, tab_len,
                            tab)

    def initial_records(self, rng, n: int | None = None) -> np.ndarray:
        """Each attribute drawn independently from its noisy one-way margin (any measurement holding it, negative
        counts set to zero, half a count added): a start the warm-up moves to the two-way structure."""
        tree = self.tree
        n = self.n if n is None else n
        rec = np.empty((n, len(tree.attributes)), dtype=np.int64)
        for i, a in enumerate(tree.attributes):
            w = np.full(tree.sizes[a], 0.5)
            for meas in self.model.measurements:
                if a in meas.query.clique:
                    axis = meas.query.clique.index(a)
                    other = tuple(j for j in range(len(meas.query.clique)) if j != axis)
                    w = w + np.clip(np.asarray(meas.values, float).sum(axis=other), 0.0, None)
                    break
            cdf = np.cumsum(w / w.sum())
            cdf[-1] = 1.0
            rec[:, i] = np.searchsorted(cdf, rng.random(n), side="right")
        return np.minimum(rec, self.sizes[None, :] - 1)


def n_bounds(model) -> tuple[int, int]:
    """The support [lo, hi] of the prior on n: the prior's ``n_range``, else n >= 1 (flat)."""
    n_range = model.prior.parameters.get("n_range")
    return (1, N_UNBOUNDED) if n_range is None else (int(n_range[0]), int(n_range[1]))


def noisy_total(model, lo: int = 1, hi: int = N_UNBOUNDED) -> int:
    """The rounded median of the measurements' noisy table sums (each is the total plus noise), in [lo, hi] and
    at least 1: da's first n when the release has none, and the total the naive posterior takes as true."""
    sums = [float(np.sum(np.asarray(m.values, float))) for m in model.measurements]
    return int(min(max(round(float(np.median(sums))), lo, 1), hi))


def _inverse(k: int, members: list[list[int]]):
    """attribute -> the groups (cliques or measurements) holding it, as (ptr, flat) CSR arrays."""
    lists = [[g for g, m in enumerate(members) if a in m] for a in range(k)]
    ptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    flat = np.array([g for x in lists for g in x], dtype=np.int64)
    return ptr, flat


def _memory_check(model, chains: int, draws: int, n: int) -> None:
    from ..memory import check_fits

    cells = sum(int(math.prod(len(v.coords[d]) for d in v.dims)) for v in model.variables)
    est = 8.0 * cells * chains * draws + 8.0 * n * len(model.latent.state.attributes) * (chains + 1)
    check_fits(est, "draws", f"{draws} draws x {chains} chains of {cells:,} table cells",
               "give fewer --draws or --chains, or a larger --thin with fewer draws")


def _run_chain(prob: Problem, concentration: float, warmup: int, draws: int, thin: int, seed, progress=None,
               moves: int = 0, group: int = 0, record_sweep: bool = True):
    """One chain: ``warmup + draws * thin`` sweeps, each the record sweep, then ``group`` group moves per attribute
    (-c: c per blanket cell; their uniforms from a key the chain's generator draws only when ``group`` is not 0,
    so that 0 gives the draws of the record sweep alone); with the total unknown (``prob.n`` None) each sweep ends in ``moves`` birth/death
    moves, the records array grown (capacity doubled, look-up tables rebuilt) between sweeps whenever fewer than
    ``moves`` free rows are left, so a birth never finds it full.  ``record_sweep`` False leaves the group moves
    alone (a test of their kernel)."""
    rng = np.random.default_rng(seed)
    tree = prob.tree
    alpha = tree.prior_alpha(concentration)
    n = prob.n_start
    unknown = prob.n is None
    cap = n + 2 * moves if unknown else n
    lg_off, lg = prob.log_tables(concentration, cap)
    noise = prob.noise if not unknown else prob.noise_tables(cap)
    rec = prob.initial_records(rng, n)
    if unknown:
        rec = np.concatenate([rec, np.zeros((cap - n, rec.shape[1]), np.int64)])
    t = prob.measured_counts(rec[:n])
    gc = prob.group_counts(rec[:n])
    k = len(tree.attributes)
    out = [np.empty((draws, *tree.shape(c)), dtype=np.float64) for c in tree.cliques]
    counts = [np.empty((draws, *tree.shape(c)), dtype=np.int64) for c in tree.cliques]
    loglik = np.empty(draws)
    n_draws = np.empty(draws, dtype=np.int64)
    accept = np.empty(draws)
    total = warmup + draws * thin
    kept = 0
    nq = len(tree.cliques)
    for it in range(total):
        if record_sweep:
            prob.sweep(rec[:n], gc, lg_off, lg, t, rng.random((n, k)), noise)
        if group:
            prob.group(rec, n, gc, lg_off, lg, t, rng.integers(0, 2 ** 63), group, noise)
        acc = 0
        if unknown:
            if n + moves > cap:
                cap = max(2 * cap, n + moves)
                rec = np.concatenate([rec[:n], np.zeros((cap - n, k), np.int64)])
                lg_off, lg = prob.log_tables(concentration, cap)
                noise = prob.noise_tables(cap)
            n, acc = prob.moves(rec, n, gc, lg_off, lg, t, rng.random((moves, 3 + nq)), noise)
        if it >= warmup and (it - warmup) % thin == thin - 1:
            # p | records, drawn where a draw is kept: the records' chain does not need it (p integrated out)
            tc = tree.clique_counts(rec[:n])
            tables = tree.draw_tables([a + c for a, c in zip(alpha, tc)], rng)
            for q in range(len(tables)):
                out[q][kept] = tables[q]
                counts[q][kept] = tc[q]
            loglik[kept] = prob.loglik(t, noise)
            n_draws[kept] = n
            accept[kept] = acc / moves if moves else np.nan
            kept += 1
        if progress is not None:
            progress(it + 1, total)
    return out, counts, loglik, n_draws, accept


def _require_hyper_dirichlet(model, method: str) -> None:
    """``da`` and ``naive`` draw p by the hyper-Dirichlet's conjugate update; the log-linear prior has none."""
    kind = model.prior.spec.kind
    if kind != "hyper-dirichlet":
        raise InputError("method", f"{method} samples the hyper-Dirichlet model (conjugate given the records); the "
                                   f"prior is {kind!r}: use method clt")


def marginals_da(model, options: MarginalsDAOptions):
    """Engine ``da`` (marginals): the sampler of the module docstring, over the model's junction tree
    (``model.latent.state``), measurements (the noisy tables and their noise laws), ``n`` (None: n is sampled) and
    prior (concentration, ``n_range``); the draws are named through the model."""
    from ..execution import spawn_seeds
    from .mcmc_common import chain_workers, map_chains

    model.competent({"records"}, "da")
    _require_hyper_dirichlet(model, "da")
    if model.n is not None and options.n_moves is not None:
        raise InputError("n_moves", f"birth/death moves apply only to a release without n; this one states "
                         f"n = {model.n}: drop n_moves")
    prob = Problem(model)
    moves = 0 if model.n is not None else (options.n_moves or prob.default_moves())
    _memory_check(model, options.chains, options.draws, prob.n_start)
    seeds = spawn_seeds(options.seed, options.chains)
    conc = float(model.prior.parameters["concentration"])
    workers = chain_workers(options.chains, (options.warmup + options.draws * options.thin) * (prob.n_start + moves))
    def progress(done, total):
        if done % max(1, total // 20) == 0:
            report_status(f"da: sweep {done}/{total}")

    results = map_chains(lambda c: _run_chain(prob, conc, options.warmup, options.draws, options.thin, seeds[c],
                                              progress if c == 0 and not options.quiet else None, moves,
                                              -options.group_moves),
                         options.chains, workers)
    tree = prob.tree
    draws = {}
    for q, c in enumerate(tree.cliques):
        from ..families.marginals import variable_name

        draws[variable_name(c)] = np.stack([r[0][q] for r in results])
    stats = {"noise_loglik": np.stack([r[2] for r in results])}
    attrs = {"algorithm": "data augmentation over the confidential records (hyper-Dirichlet | records; each "
                          "record's attributes | parameters, exact noise laws)",
             "options_warmup": options.warmup, "options_thin": options.thin,
             "options_group_moves": options.group_moves}
    if model.n is None:
        draws["n"] = np.stack([r[3] for r in results])
        stats["n_move_accept"] = np.stack([r[4] for r in results])
        attrs["algorithm"] += f"; n unknown: {moves} birth/death moves per sweep"
        attrs["options_n_moves"] = moves
    post = model.pack(draws, "da", sample_stats=stats, attrs=attrs)
    post.extras["clique_counts"] = {variable_name(c): np.stack([r[1][q] for r in results])
                                    for q, c in enumerate(tree.cliques)}
    return post


def marginals_naive(model, options: MarginalsNaiveOptions):
    """The hyper-Dirichlet posterior given each junction-tree clique's noisy counts as if they were true: reads the
    model's junction tree, measurements, ``n`` and concentration; the draws are named through the model."""
    from ..families.marginals import variable_name

    _require_hyper_dirichlet(model, "naive")
    tree: JunctionTree = model.latent.state
    conc = float(model.prior.parameters["concentration"])
    alpha = tree.prior_alpha(conc)
    noisy = []
    for c in tree.cliques:
        found = [m for m in model.measurements if tuple(m.query.clique) == tuple(c)]
        if not found:
            raise InputError("method", f"naive needs a measurement of every clique of the model; ({', '.join(c)}) "
                             "was not measured (it joins measured cliques in the decomposable model)")
        noisy.append(np.clip(np.mean([np.asarray(m.values, float) for m in found], axis=0), 0.0, None))
    from ..execution import spawn_seeds

    seeds = spawn_seeds(options.seed, options.chains)
    draws = {variable_name(c): np.empty((options.chains, options.draws, *tree.shape(c))) for c in tree.cliques}
    if model.n is None:  # the total unknown: the noisy total taken as true, as the counts are
        draws["n"] = np.full((options.chains, options.draws), noisy_total(model, *n_bounds(model)), dtype=np.int64)
    for ch in range(options.chains):
        rng = np.random.default_rng(seeds[ch])
        for d in range(options.draws):
            tables = tree.draw_tables([a + t for a, t in zip(alpha, noisy)], rng)
            for c, tab in zip(tree.cliques, tables):
                draws[variable_name(c)][ch, d] = tab
    return model.pack(draws, "naive", iid=True,
                      attrs={"algorithm": "hyper-Dirichlet posterior of the noisy counts taken as true (ignores the "
                                          "noise)"})
