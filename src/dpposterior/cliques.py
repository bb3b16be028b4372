"""Decomposable models over cliques of categorical attributes: triangulation, junction tree, the
hyper-Dirichlet law on its clique tables, marginals and forward sampling.

A table of k categorical attributes whose joint law is Markov with respect to a chordal graph factorises over
the maximal cliques of the graph arranged in a junction tree (Lauritzen 1996, Prop. 2.17):

    p(x) = prod_C p_C(x_C) / prod_S p_S(x_S)          (C the cliques, S the separators)
         = p_root(x_root) prod_{C != root} p(x_{C \\ S} | x_S)

The hyper-Dirichlet law (Dawid & Lauritzen 1993, "Hyper Markov laws in the statistical analysis of
decomposable graphical models", Ann. Statist. 21, Sec. 7) puts a Dirichlet on p_root and independent Dirichlets
on each conditional table p(. | x_S); with pseudo-counts alpha_C(x_C) = A / |dom C| (the same total A on every
clique, so the laws agree on every separator) it is conjugate: given complete data with clique counts t_C the
posterior is hyper-Dirichlet with alpha_C + t_C.  :class:`JunctionTree` draws from it, evaluates the log
conditionals a record-level Gibbs step needs, computes any marginal of the joint by variable elimination
(``numpy.einsum``) and samples records forward from the root.  For a log-linear law on the tree's graph,
p(x) proportional to exp(sum of log-potentials on cliques), it gives the same conditionals by sum-product
(Lauritzen & Spiegelhalter 1988, "Local computations with probabilities on graphical structures", JRSS B 50),
in numpy or in JAX.

Only numpy here: the module sits beside :mod:`dpposterior.posterior`, whose ``marginal`` uses it.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass

import numpy as np

from .errors import InputError

#: the most cells a clique table of the model may have (the triangulated model's cliques are held as dense tables,
#: once per draw in the posterior)
MAX_CLIQUE_CELLS = 2_000_000


def _cells(attrs, sizes: dict) -> int:
    return int(math.prod(int(sizes[a]) for a in attrs))


def _is_clique(vertices: set, adjacent: dict) -> bool:
    return all(b in adjacent[a] for a in vertices for b in vertices if a != b)


def triangulate(attributes: list[str], cliques: list[tuple[str, ...]], sizes: dict[str, int]) -> list[tuple[str, ...]]:
    """The maximal cliques of a chordal graph containing every pair in ``cliques`` (greedy elimination).  Each step
    removes a simplicial vertex (its neighbours already a clique: no fill-in) where there is one, else the vertex
    whose elimination clique has the fewest cells (the min-weight heuristic); among simplicial vertices, also the
    fewest cells.  Every chordal graph has a simplicial vertex and stays chordal without it, so a graph that is
    already chordal (a tree of measured pairs, as MST selects) gets no fill: its cliques are the model's cliques,
    with no interaction that no measurement informs.  Attributes in no clique come back as singletons.  Cliques
    list attributes in ``attributes`` order."""
    position = {a: i for i, a in enumerate(attributes)}
    adjacent: dict[str, set[str]] = {a: set() for a in attributes}
    for clique in cliques:
        for a in clique:
            adjacent[a].update(b for b in clique if b != a)
    remaining = set(attributes)
    found: list[frozenset] = []
    while remaining:
        best = min(remaining, key=lambda v: (not _is_clique(adjacent[v], adjacent), _cells([v, *adjacent[v]], sizes),
                                             position[v]))
        clique = frozenset([best, *adjacent[best]])
        neighbours = list(adjacent[best])
        for i, a in enumerate(neighbours):  # fill in: the neighbours become a clique
            for b in neighbours[i + 1:]:
                adjacent[a].add(b)
                adjacent[b].add(a)
        for a in neighbours:
            adjacent[a].discard(best)
        remaining.discard(best)
        del adjacent[best]
        if not any(clique <= other for other in found):
            found = [other for other in found if not other < clique]
            found.append(clique)
    return [tuple(sorted(c, key=position.__getitem__)) for c in found]


@dataclass(frozen=True)
class JunctionTree:
    """Cliques in topological order (the root first), each clique's parent (-1 for a root; a forest of
    independent components has several roots) and separator (its intersection with the parent, in the clique's
    order).  ``sizes``: attribute -> number of categories; ``attributes``: all of them, in the table's order."""

    attributes: tuple[str, ...]
    sizes: dict
    cliques: tuple[tuple[str, ...], ...]
    parents: tuple[int, ...]
    separators: tuple[tuple[str, ...], ...]

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, attributes, cliques, sizes, max_cells: int = MAX_CLIQUE_CELLS) -> "JunctionTree":
        """The junction tree of the triangulation of ``cliques`` (every attribute covered); a clique of more than
        ``max_cells`` cells is refused in one line (field ``cliques``)."""
        attributes = tuple(attributes)
        maximal = triangulate(list(attributes), [tuple(c) for c in cliques], sizes)
        # a model clique that is a given clique keeps the given order (its table reads as the measurement does)
        given = {frozenset(c): tuple(c) for c in reversed([tuple(c) for c in cliques])}
        maximal = [given.get(frozenset(c), c) for c in maximal]
        big = [c for c in maximal if _cells(c, sizes) > max_cells]
        if big:
            c = max(big, key=lambda q: _cells(q, sizes))
            raise InputError("cliques", f"the model needs the clique ({', '.join(c)}) of {_cells(c, sizes):,} cells "
                             f"(more than {max_cells:,}) to hold these measurements in a decomposable model; "
                             "measure fewer overlapping cliques")
        # maximum spanning tree of the clique graph weighted by separator cells (Prim, from the largest clique);
        # for the maximal cliques of a chordal graph it has the running-intersection property
        order_by_size = sorted(range(len(maximal)), key=lambda i: (-_cells(maximal[i], sizes), i))
        placed: list[int] = []
        parent_of: dict[int, int] = {}
        pending = list(order_by_size)
        while pending:
            best, best_parent, best_weight = None, -1, -1.0
            for i in pending:
                for j in placed:
                    shared = set(maximal[i]) & set(maximal[j])
                    weight = float(_cells(shared, sizes)) if shared else 0.0
                    if shared and weight > best_weight:
                        best, best_parent, best_weight = i, j, weight
            if best is None:  # a new component: its largest clique is a root
                best, best_parent = pending[0], -1
            pending.remove(best)
            placed.append(best)
            parent_of[best] = best_parent
        index = {old: new for new, old in enumerate(placed)}
        ordered = tuple(maximal[i] for i in placed)
        parents = tuple(index[parent_of[i]] if parent_of[i] >= 0 else -1 for i in placed)
        seps = tuple(tuple(a for a in ordered[k] if parents[k] >= 0 and a in ordered[parents[k]])
                     for k in range(len(ordered)))
        return cls(attributes, {a: int(sizes[a]) for a in attributes}, ordered, parents, seps)

    def shape(self, attrs) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in attrs)

    def to_record(self) -> dict:
        """JSON-ready: what a posterior file keeps to rebuild the tree."""
        return {"attributes": list(self.attributes), "sizes": [self.sizes[a] for a in self.attributes],
                "cliques": [list(c) for c in self.cliques], "parents": list(self.parents),
                "separators": [list(s) for s in self.separators]}

    @classmethod
    def from_record(cls, record: dict) -> "JunctionTree":
        attrs = tuple(record["attributes"])
        return cls(attrs, dict(zip(attrs, (int(s) for s in record["sizes"]))),
                   tuple(tuple(c) for c in record["cliques"]), tuple(int(p) for p in record["parents"]),
                   tuple(tuple(s) for s in record["separators"]))

    def containing(self, attrs) -> int | None:
        """Index of the first clique holding every attribute of ``attrs``, or None."""
        want = set(attrs)
        return next((k for k, c in enumerate(self.cliques) if want <= set(c)), None)

    # ------------------------------------------------------------------ the hyper-Dirichlet law
    def prior_alpha(self, concentration: float) -> list[np.ndarray]:
        """Pseudo-counts alpha_C(x_C) = A / |dom C| of each clique (A = ``concentration``)."""
        return [np.full(self.shape(c), float(concentration) / _cells(c, self.sizes)) for c in self.cliques]

    def counts(self, records: np.ndarray, attrs) -> np.ndarray:
        """The count table (int64, ``attrs`` order) of records (n, k) of codes in ``attributes`` order."""
        shape = self.shape(attrs)
        col = {a: i for i, a in enumerate(self.attributes)}
        flat = (np.ravel_multi_index(tuple(records[:, col[a]] for a in attrs), shape) if attrs
                else np.zeros(len(records), np.int64))
        return np.bincount(flat, minlength=max(1, math.prod(shape))).reshape(shape)

    def clique_counts(self, records: np.ndarray) -> list[np.ndarray]:
        """Counts t_C of each clique from records (n, k) of codes in ``attributes`` order."""
        return [self.counts(records, c).astype(float) for c in self.cliques]

    def draw_tables(self, alpha: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
        """One draw of the clique tables p_C from the hyper-Dirichlet law with pseudo-counts ``alpha`` (prior
        alpha plus complete-data counts for the conditional law given the records): p_root and each
        p(x_{C \\ S} | x_S) Dirichlet, independently (Dawid & Lauritzen 1993, Sec. 7)."""
        conds: list[np.ndarray] = []
        for k, c in enumerate(self.cliques):
            a = np.asarray(alpha[k], float)
            sep = self.separators[k] if self.parents[k] >= 0 else ()
            conds.append(_dirichlet(a, tuple(i for i in range(len(c)) if c[i] not in sep), rng))
        return self.tables_of_conditionals(conds)

    def prior_draw(self, concentration: float, rng: np.random.Generator) -> list[np.ndarray]:
        return self.draw_tables(self.prior_alpha(concentration), rng)

    def log_conditionals(self, tables: list[np.ndarray]) -> list[np.ndarray]:
        """log p_root(x_root) and log p(x_{C \\ S} | x_S) of each other clique, as tables over the clique:
        log p(x) is their sum at x's cells (what a record-level Gibbs step looks up)."""
        out = []
        with np.errstate(divide="ignore", invalid="ignore"):
            for k, c in enumerate(self.cliques):
                log_t = np.log(tables[k])
                lead = tables[k].ndim - len(c)  # leading draw axes, kept
                if self.parents[k] >= 0 and self.separators[k]:
                    sep = self.separators[k]
                    sep_axes = tuple(c.index(a) for a in sep)
                    rest = tuple(lead + i for i in range(len(c)) if i not in sep_axes)
                    log_s = np.log(tables[k].sum(axis=rest, keepdims=True))
                    log_t = np.where(np.isfinite(log_s), log_t - log_s, -np.inf)
                out.append(log_t)
        return out

    # ------------------------------------------------------------------ a log-linear law on the tree
    def potential_log_conditionals(self, log_potentials, xp, logsumexp) -> list:
        """For p(x) proportional to exp(sum_k phi_k(x_{C_k})), ``log_potentials[k]`` = phi_k over clique k's
        axes (clique order): log p_root(x_root) and log p(x_{C \\ S} | x_S) of each other clique, over the
        clique's axes, as :meth:`log_conditionals` gives them for tables.  Sum-product towards the roots
        (Lauritzen & Spiegelhalter 1988): the message of clique k to its parent is
        m_k(x_S) = log sum_{x_{C \\ S}} exp(phi_k + the messages of k's children), and
        p(x_{C \\ S} | x_S) = exp(phi_k + children's messages - m_k(x_S)).  ``xp``: numpy or jax.numpy, with
        its ``logsumexp`` (scipy's or jax's), so the log-linear model's tables are differentiable."""
        K = len(self.cliques)
        children: list[list[int]] = [[] for _ in range(K)]
        for k in range(K):
            if self.parents[k] >= 0:
                children[self.parents[k]].append(k)
        up: list = [None] * K  # m_k over clique k's axes (kept as size-1 axes where summed out)
        out: list = [None] * K
        for k in reversed(range(K)):
            c = self.cliques[k]
            belief = log_potentials[k]
            for j in children[k]:
                belief = belief + self._onto(up[j], self.cliques[j], self.separators[j], c, xp)
            if self.parents[k] < 0:
                out[k] = belief - logsumexp(belief)
                continue
            drop = tuple(i for i, a in enumerate(c) if a not in self.separators[k])
            up[k] = logsumexp(belief, axis=drop, keepdims=True) if drop else belief
            out[k] = belief - up[k]
        return out

    def _onto(self, table, clique, attrs, target, xp):
        """``table`` over ``clique``'s axes, size 1 off ``attrs`` (a subset of ``target``), as an array over
        ``target``'s axes (size 1 off ``attrs``)."""
        inner = table.reshape(self.shape(attrs)) if attrs else table.reshape(())
        order = sorted(range(len(attrs)), key=lambda i: target.index(attrs[i]))
        if len(order) > 1 and order != sorted(order):
            inner = xp.transpose(inner, order)
        return inner.reshape(tuple(self.sizes[a] if a in attrs else 1 for a in target))

    def log_potentials_on_cliques(self, potentials, log_tables, xp) -> list:
        """phi_k of :meth:`potential_log_conditionals`: each log-table ``log_tables[m]`` over the attributes
        ``potentials[m]`` added onto the first clique holding them (``xp``: numpy or jax.numpy)."""
        phi = [xp.zeros(self.shape(c)) for c in self.cliques]
        for attrs, table in zip(potentials, log_tables):
            k = self.containing(attrs)
            phi[k] = phi[k] + self._onto(table.reshape(self.shape(attrs)), attrs, attrs, self.cliques[k], xp)
        return phi

    def tables_of_conditionals(self, conds: list[np.ndarray]) -> list[np.ndarray]:
        """The clique tables p_C from p_root and each clique's p(x_{C \\ S} | x_S) (over the clique's axes), root
        first: p_C = p(x_{C \\ S} | x_S) p_S(x_S), p_S the parent's table's marginal."""
        tables: list[np.ndarray] = []
        for k, c in enumerate(self.cliques):
            if self.parents[k] < 0:
                tables.append(conds[k])
                continue
            sep = self.separators[k]
            p_sep = self.marginal_of_table(tables[self.parents[k]], self.cliques[self.parents[k]], sep)
            tables.append(conds[k] * self._onto(p_sep, sep, sep, c, np))
        return tables

    @staticmethod
    def marginal_of_table(table: np.ndarray, clique, attrs) -> np.ndarray:
        """The marginal of one clique's table over ``attrs`` (a subset), in ``attrs`` order; any leading axes of
        ``table`` beyond the clique's are kept (draws)."""
        lead = table.ndim - len(clique)
        keep = [clique.index(a) for a in attrs]
        drop = tuple(lead + i for i in range(len(clique)) if i not in keep)
        out = table.sum(axis=drop) if drop else table
        remaining = [i for i in range(len(clique)) if i in keep]
        perm = [remaining.index(i) for i in keep]
        return np.transpose(out, (*range(lead), *(lead + p for p in perm)))

    # ------------------------------------------------------------------ marginals of the joint
    def marginal(self, tables: list[np.ndarray], attrs) -> np.ndarray:
        """p(x_attrs) from the clique tables (each with any leading draw axes, the same on all), in ``attrs``
        order: directly from a clique that holds them all, else by variable elimination over the factors
        p_root and p(x_{C \\ S} | x_S) (``numpy.einsum``), leaves that hold none of ``attrs`` pruned (their
        conditional sums to one)."""
        attrs = tuple(attrs)
        unknown = [a for a in attrs if a not in self.sizes]
        if unknown:
            raise InputError("attributes", f"{unknown[0]!r} is not an attribute of the table (attributes: "
                             f"{', '.join(self.attributes)})")
        if len(set(attrs)) != len(attrs):
            raise InputError("attributes", "lists an attribute twice")
        lead = tables[0].ndim - len(self.cliques[0])
        k = self.containing(attrs)
        if k is not None:
            return self.marginal_of_table(tables[k], self.cliques[k], attrs)
        keep = set(range(len(self.cliques)))
        want = set(attrs)
        changed = True
        while changed:  # prune leaves whose own attributes (C \ S) are not wanted
            changed = False
            for k in sorted(keep, reverse=True):
                is_leaf = not any(self.parents[j] == k for j in keep)
                own = set(self.cliques[k]) - set(self.separators[k])
                if is_leaf and not (own & want) and (self.parents[k] >= 0 or len(keep) > 1):
                    if self.parents[k] < 0:  # a root of another component holding nothing wanted
                        if any(self.parents[j] == k for j in keep):
                            continue
                    keep.discard(k)
                    changed = True
        letters = iter(string.ascii_letters)
        batch = "".join(next(letters) for _ in range(lead))
        sym = {a: next(letters) for a in self.attributes if any(a in self.cliques[k] for k in keep)}
        operands, subs = [], []
        conds = self.log_conditionals(tables)
        for k in sorted(keep):
            factor = tables[k] if self.parents[k] < 0 else np.exp(conds[k])
            operands.append(factor)
            subs.append(batch + "".join(sym[a] for a in self.cliques[k]))
        expr = ",".join(subs) + "->" + batch + "".join(sym[a] for a in attrs)
        return np.einsum(expr, *operands, optimize="greedy")

    # ------------------------------------------------------------------ forward sampling
    def sample_records(self, tables: list[np.ndarray], rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records (rows, k) of codes in ``attributes`` order drawn from the joint the clique tables
        (one draw: no leading axes) define, root first, each clique's new attributes given its separator."""
        col = {a: i for i, a in enumerate(self.attributes)}
        out = np.zeros((rows, len(self.attributes)), dtype=np.int64)
        for k, c in enumerate(self.cliques):
            shape = self.shape(c)
            sep = self.separators[k] if self.parents[k] >= 0 else ()
            sep_axes = [c.index(a) for a in sep]
            rest_axes = [i for i in range(len(c)) if i not in sep_axes]
            t = np.transpose(tables[k], (*sep_axes, *rest_axes))
            n_sep = int(math.prod(shape[i] for i in sep_axes))
            n_rest = int(math.prod(shape[i] for i in rest_axes))
            cond = t.reshape(n_sep, n_rest)
            tot = cond.sum(axis=1, keepdims=True)
            cond = np.where(tot > 0, cond / np.where(tot > 0, tot, 1.0), 1.0 / n_rest)
            cdf = np.cumsum(cond, axis=1)
            cdf[:, -1] = 1.0
            if sep:
                s_idx = np.ravel_multi_index(tuple(out[:, col[a]] for a in sep), tuple(shape[i] for i in sep_axes))
            else:
                s_idx = np.zeros(rows, dtype=np.int64)
            u = rng.random(rows)
            pick = np.minimum((cdf[s_idx] < u[:, None]).sum(axis=1), n_rest - 1)
            values = np.unravel_index(pick, tuple(shape[i] for i in rest_axes))
            for i, v in zip(rest_axes, values):
                out[:, col[c[i]]] = v
        return out


def _log_gamma(alpha: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """log of Gamma(alpha, 1) draws, finite for any alpha > 0: Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha)
    (Marsaglia & Tsang 2000, Sec. 6), so a tiny pseudo-count gives a very negative log, never log 0."""
    alpha = np.asarray(alpha, float)
    return np.log(rng.standard_gamma(alpha + 1.0)) + np.log(rng.random(alpha.shape)) / alpha


def _dirichlet(alpha: np.ndarray, axes: tuple, rng: np.random.Generator) -> np.ndarray:
    """Independent Dirichlet(alpha) draws over ``axes`` (the other axes index the laws), normalised in log space."""
    lg = _log_gamma(alpha, rng)
    if not axes:
        return np.ones_like(lg)
    top = lg.max(axis=axes, keepdims=True)
    w = np.exp(lg - top)
    return w / w.sum(axis=axes, keepdims=True)
