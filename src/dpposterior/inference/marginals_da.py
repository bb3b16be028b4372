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
2. p | x, where a draw is kept: the hyper-Dirichlet posterior given the records' clique counts -- conjugate,
   one exact draw (:meth:`dpposterior.cliques.JunctionTree.draw_tables`).  Integrating p out of step 1 removes
   the slow coupling of p and the records that an uncollapsed sampler has when the noise is large.

Every step is an exact conditional draw, so the chain targets the exact posterior; the noise likelihood is never
approximated (no CLT), at any domain size -- the records, not the table, are the state (n x k codes).

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
from .mcmc_common import pick_from_log_weights

#: noise kinds of the compiled sweep
KIND_TABLE, KIND_GAUSSIAN, KIND_LAPLACE = 0, 1, 2


@dataclass(frozen=True)
class MarginalsDAOptions(MCMCOptions):
    engine = "da"

    draws: int = option(1000, "int", "posterior draws per chain", low=1)
    chains: int = option(4, "int", "chains (run in parallel threads)", low=1)
    warmup: int = option(500, "int", "warm-up sweeps per chain", low=0)
    thin: int = option(1, "int", "sweeps per kept draw", low=1)


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
            for v in range(d):
                lw = 0.0
                for j in range(ng):
                    g = a_g[a_g_ptr[a] + j]
                    lw += g_sign[g] * lg[g_lg_off[g] + gc[gb[j] + v * gs[j]]]
                for j in range(nm):
                    m = a_m[a_m_ptr[a] + j]
                    cell = mb[j] + v * ms[j]
                    resid = y[cell] - t[cell]
                    lw += (_log_noise(m_kind[m], m_inv[m], tab, m_tab_off[m], m_tab_lo[m], m_tab_len[m], resid - 1.0)
                           - _log_noise(m_kind[m], m_inv[m], tab, m_tab_off[m], m_tab_lo[m], m_tab_len[m], resid))
                w[v] = lw
                if lw > top:
                    top = lw
            new = pick_from_log_weights(w, d, top, u[r, a]) if top > -np.inf else cur
            rec[r, a] = new
            for j in range(ng):
                gc[gb[j] + new * gs[j]] += 1
            for j in range(nm):
                t[mb[j] + new * ms[j]] += 1


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
        self.n = int(model.n)
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
        # measurements
        m_ptr, m_attr, m_stride, m_off, m_len, off = [0], [], [], [], [], 0
        y = []
        kinds, invs, tab_off, tab_lo, tab_len, tabs, toff = [], [], [], [], [], [], 0
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
                lo, hi = int(np.floor(vals.min())) - self.n - 2, int(np.ceil(vals.max())) + 2
                table = meas.residual_log_mass(lo, hi)
                kinds.append(KIND_TABLE)
                invs.append(0.0)
                tab_off.append(toff)
                tab_lo.append(lo)
                tab_len.append(len(table))
                tabs.append(table)
                toff += len(table)
            else:
                shape_scale = mech.log_mass_shape()
                if shape_scale is None:
                    raise InputError("method", f"da needs a noise law it can evaluate; {meas.name} has "
                                     f"{mech.name!r}")
                from ..mechanisms.base import NoiseShape

                form, scale = shape_scale
                kinds.append(KIND_GAUSSIAN if form is NoiseShape.GAUSSIAN else KIND_LAPLACE)
                invs.append(1.0 / scale ** 2 if form is NoiseShape.GAUSSIAN else 1.0 / scale)
                tab_off.append(0)
                tab_lo.append(0)
                tab_len.append(0)
        self.m_ptr, self.m_attr = np.array(m_ptr, np.int64), np.array(m_attr, np.int64)
        self.m_stride, self.m_off = np.array(m_stride, np.int64), np.array(m_off, np.int64)
        self.m_len = np.array(m_len, np.int64)
        self.y = np.concatenate(y)
        self.t_size = off
        self.a_m_ptr, self.a_m = _inverse(k, [[col[a] for a in m.query.clique] for m in model.measurements])
        self.m_kind, self.m_inv = np.array(kinds, np.int64), np.array(invs, float)
        self.m_tab_off, self.m_tab_lo = np.array(tab_off, np.int64), np.array(tab_lo, np.int64)
        self.m_tab_len = np.array(tab_len, np.int64)
        self.tab = np.concatenate(tabs) if tabs else np.zeros(1)

    def log_tables(self, concentration: float):
        """log(alpha_g + t), t = 0..n, of every group (alpha_g = A / |dom g|, uniform within a group)."""
        t = np.arange(self.n + 1, dtype=float)
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

    def sweep(self, rec, gc, lg_off, lg, t, u):
        record_sweep(rec, u, self.sizes, self.g_ptr, self.g_attr, self.g_stride, self.g_off, self.g_sign, gc, lg_off,
                     lg, self.a_g_ptr, self.a_g, self.m_ptr, self.m_attr, self.m_stride, self.m_off, t, self.y,
                     self.a_m_ptr, self.a_m, self.m_kind, self.m_inv, self.m_tab_off, self.m_tab_lo, self.m_tab_len,
                     self.tab)

    def loglik(self, t) -> float:
        return noise_loglik(t, self.y, self.m_off, self.m_len, self.m_kind, self.m_inv, self.m_tab_off,
                            self.m_tab_lo, self.m_tab_len, self.tab)

    def initial_records(self, rng) -> np.ndarray:
        """Each attribute drawn independently from its noisy one-way margin (any measurement holding it, negative
        counts set to zero, half a count added): a start the warm-up moves to the two-way structure."""
        tree = self.tree
        rec = np.empty((self.n, len(tree.attributes)), dtype=np.int64)
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
            rec[:, i] = np.searchsorted(cdf, rng.random(self.n), side="right")
        return np.minimum(rec, self.sizes[None, :] - 1)


def _inverse(k: int, members: list[list[int]]):
    """attribute -> the groups (cliques or measurements) holding it, as (ptr, flat) CSR arrays."""
    lists = [[g for g, m in enumerate(members) if a in m] for a in range(k)]
    ptr = np.cumsum([0] + [len(x) for x in lists]).astype(np.int64)
    flat = np.array([g for x in lists for g in x], dtype=np.int64)
    return ptr, flat


def _memory_check(model, chains: int, draws: int) -> None:
    from ..memory import check_fits

    cells = sum(int(math.prod(len(v.coords[d]) for d in v.dims)) for v in model.variables)
    est = 8.0 * cells * chains * draws + 8.0 * model.n * len(model.latent.state.attributes) * (chains + 1)
    check_fits(est, "draws", f"{draws} draws x {chains} chains of {cells:,} table cells",
               "give fewer --draws or --chains, or a larger --thin with fewer draws")


def _run_chain(prob: Problem, concentration: float, warmup: int, draws: int, thin: int, seed, progress=None):
    rng = np.random.default_rng(seed)
    tree = prob.tree
    alpha = tree.prior_alpha(concentration)
    lg_off, lg = prob.log_tables(concentration)
    rec = prob.initial_records(rng)
    t = prob.measured_counts(rec)
    gc = prob.group_counts(rec)
    k = len(tree.attributes)
    out = [np.empty((draws, *tree.shape(c)), dtype=np.float64) for c in tree.cliques]
    counts = [np.empty((draws, *tree.shape(c)), dtype=np.int64) for c in tree.cliques]
    loglik = np.empty(draws)
    total = warmup + draws * thin
    kept = 0
    for it in range(total):
        prob.sweep(rec, gc, lg_off, lg, t, rng.random((prob.n, k)))
        if it >= warmup and (it - warmup) % thin == thin - 1:
            # p | records, drawn where a draw is kept: the records' chain does not need it (p integrated out)
            tc = tree.clique_counts(rec)
            tables = tree.draw_tables([a + c for a, c in zip(alpha, tc)], rng)
            for q in range(len(tables)):
                out[q][kept] = tables[q]
                counts[q][kept] = tc[q]
            loglik[kept] = prob.loglik(t)
            kept += 1
        if progress is not None:
            progress(it + 1, total)
    return out, counts, loglik


def marginals_da(release, prior, options: MarginalsDAOptions):
    from ..families.marginals import observation_model
    from ..execution import spawn_seeds
    from .mcmc_common import chain_workers, map_chains

    model = observation_model(release, prior)
    model.competent({"records"}, "da")
    prob = Problem(model)
    _memory_check(model, options.chains, options.draws)
    seeds = spawn_seeds(options.seed, options.chains)
    conc = float(model.prior.parameters["concentration"])
    workers = chain_workers(options.chains, (options.warmup + options.draws * options.thin) * prob.n)
    def progress(done, total):
        if done % max(1, total // 20) == 0:
            report_status(f"da: sweep {done}/{total}")

    results = map_chains(lambda c: _run_chain(prob, conc, options.warmup, options.draws, options.thin, seeds[c],
                                              progress if c == 0 and not options.quiet else None), options.chains, workers)
    tree = prob.tree
    draws = {}
    for q, c in enumerate(tree.cliques):
        from ..families.marginals import variable_name

        draws[variable_name(c)] = np.stack([r[0][q] for r in results])
    post = model.pack(draws, "da", sample_stats={"noise_loglik": np.stack([r[2] for r in results])},
                      attrs={"algorithm": "data augmentation over the confidential records (hyper-Dirichlet | "
                                          "records; each record's attributes | parameters, exact noise laws)",
                             "options_warmup": options.warmup, "options_thin": options.thin})
    post.extras["clique_counts"] = {variable_name(c): np.stack([r[1][q] for r in results])
                                    for q, c in enumerate(tree.cliques)}
    return post


def marginals_naive(release, prior, options: MarginalsNaiveOptions):
    """The hyper-Dirichlet posterior given each junction-tree clique's noisy counts as if they were true."""
    from ..families.marginals import observation_model, variable_name

    model = observation_model(release, prior)
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
    for ch in range(options.chains):
        rng = np.random.default_rng(seeds[ch])
        for d in range(options.draws):
            tables = tree.draw_tables([a + t for a, t in zip(alpha, noisy)], rng)
            for c, tab in zip(tree.cliques, tables):
                draws[variable_name(c)][ch, d] = tab
    return model.pack(draws, "naive", iid=True,
                      attrs={"algorithm": "hyper-Dirichlet posterior of the noisy counts taken as true (ignores the "
                                          "noise)"})
