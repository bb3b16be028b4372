"""The exact likelihood of a small noisy-marginals release as a NumPyro model, and its enumeration reference.

A ``marginals`` release (docs/marginals.md) of n records over a small domain, written independently of dpposterior's
junction tree and noise code so that it can check them:

* prior: the hyper-Dirichlet law of Dawid & Lauritzen (1993, Sec. 7) on the measured cliques, taken in the order
  given (each clique after the first meets the earlier ones in a separator S contained in one of them):
  p_root ~ Dirichlet(alpha_root) and, for every other clique C, p(x_{C \\ S} | x_S) ~ Dirichlet(alpha_C(x_S, .))
  independently, alpha_C(x_C) = A / |dom C|;
* likelihood: p(y | p) = sum_x Mult(x; n, p) prod_m eta_m(y_m - Q_m x) over every table x of n records on the full
  domain (C(n + K - 1, K - 1) tables for K cells), eta_m the measurement's integer noise law (discrete Gaussian
  exp(-e^2 / 2 sigma^2) or discrete Laplace exp(-|e| / t), t = sensitivity / epsilon, each normalised by its own
  sum).  As a function of p this is log-sum-exp over the tables of a fixed constant plus x . log p, which NUTS
  differentiates.

``reference`` gives the exact posterior means by the same enumeration with p integrated out in closed form: given
a table x the posterior is hyper-Dirichlet with alpha + t(x) and the marginal likelihood of x is the product of
the Dirichlet-multinomial terms of the clique conditionals.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import gammaln

#: the replace-one L1 sensitivity of one count table (docs/marginals.md), where a measurement states none
L1_SENSITIVITY = 2.0
MAX_TABLES = 3_000_000


def n_tables(n: int, cells: int) -> int:
    """How many tables of n records there are on ``cells`` cells."""
    return math.comb(n + cells - 1, cells - 1)


def all_tables(n: int, cells: int) -> np.ndarray:
    """Every table (T, cells) of n records, by stars and bars."""
    if n_tables(n, cells) > MAX_TABLES:
        raise ValueError(f"{n_tables(n, cells):,} tables of n = {n} on {cells} cells: above {MAX_TABLES:,}")
    bars = np.array(list(itertools.combinations(range(n + cells - 1), cells - 1)), np.int64).reshape(-1, cells - 1)
    edges = np.hstack([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), n + cells - 1)])
    return np.diff(edges, axis=1) - 1


def noise_log_mass(meas: dict, errors: np.ndarray) -> np.ndarray:
    """log eta(e) of one measurement's integer noise at the integer errors ``errors``."""
    kind = meas["mechanism"]
    if kind == "discrete-gaussian":
        s2 = float(meas["sigma"]) ** 2
        k = np.arange(-int(40 * math.sqrt(s2)) - 50, int(40 * math.sqrt(s2)) + 51)
        return -errors**2 / (2 * s2) - np.log(np.exp(-k**2 / (2 * s2)).sum())
    if kind == "discrete-laplace":
        t = float(meas.get("sensitivity", L1_SENSITIVITY)) / float(meas["epsilon"])
        return -np.abs(errors) / t + math.log(math.tanh(1 / (2 * t)))  # (1 - e^{-1/t}) / (1 + e^{-1/t})
    raise ValueError(f"noise law {kind!r}: only discrete-gaussian and discrete-laplace are written here")


class ExactMarginals:
    """The enumeration model of one release (a dict in the release format) with total concentration A."""

    def __init__(self, release: dict, concentration: float):
        self.domain = {a: int(s) for a, s in release["domain"].items()}
        self.attrs = list(self.domain)
        self.shape = tuple(self.domain[a] for a in self.attrs)
        self.n = int(release["n"])
        self.measurements = release["measurements"]
        self.cliques = [tuple(m["clique"]) for m in self.measurements]
        self.concentration = float(concentration)
        self.separators: list[tuple] = []
        seen: set = set()
        for k, c in enumerate(self.cliques):
            sep = tuple(a for a in c if a in seen)
            if k and not any(set(sep) <= set(d) for d in self.cliques[:k]):
                raise ValueError(f"clique {c}: its separator {sep} is in no earlier clique (give a running "
                                 "intersection order)")
            self.separators.append(sep if k else ())
            seen |= set(c)
        if seen != set(self.attrs):
            raise ValueError("every attribute must be in a measured clique")
        cells = math.prod(self.shape)
        self.tables = all_tables(self.n, cells)                       # (T, K)
        grid = np.indices(self.shape).reshape(len(self.attrs), -1)    # (attrs, K) codes of each cell
        #: each cell's index into clique k's flat table, and the clique counts t_k(x) of every table
        self.cell_index = [np.ravel_multi_index(tuple(grid[self.attrs.index(a)] for a in c), self.clique_shape(c))
                           for c in self.cliques]
        self.clique_counts = []
        for c, idx in zip(self.cliques, self.cell_index):
            onehot = np.zeros((cells, math.prod(self.clique_shape(c))))
            onehot[np.arange(cells), idx] = 1.0
            self.clique_counts.append(self.tables @ onehot)            # (T, |dom C|)
        const = gammaln(self.n + 1) - gammaln(self.tables + 1).sum(axis=1)
        for meas, t in zip(self.measurements, self.clique_counts):
            y = np.asarray(meas["value"], float).ravel()
            const = const + noise_log_mass(meas, y[None, :] - t).sum(axis=1)
        self.log_const = const

    def clique_shape(self, c) -> tuple:
        return tuple(self.domain[a] for a in c)

    def alpha(self, k: int) -> np.ndarray:
        c = self.cliques[k]
        return np.full(self.clique_shape(c), self.concentration / math.prod(self.clique_shape(c)))

    def _split(self, k: int):
        """(separator axes, free axes) of clique k."""
        c, sep = self.cliques[k], self.separators[k]
        return [i for i, a in enumerate(c) if a in sep], [i for i, a in enumerate(c) if a not in sep]

    # ------------------------------------------------------------------ NumPyro
    def model(self):
        """The NumPyro model: the clique conditionals as Dirichlet sites ``cond_k``, the joint table of cell
        probabilities as the deterministic site ``joint`` (any marginal is :meth:`marginal` of it) and the
        enumerated likelihood as one factor."""
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from jax.scipy.special import logsumexp

        log_cell = 0.0
        for k, c in enumerate(self.cliques):
            sep_axes, free_axes = self._split(k)
            a = np.transpose(self.alpha(k), sep_axes + free_axes)
            sep_shape, free_shape = a.shape[:len(sep_axes)], a.shape[len(sep_axes):]
            flat = a.reshape(math.prod(sep_shape), math.prod(free_shape))
            cond = numpyro.sample(f"cond_{k}", dist.Dirichlet(jnp.asarray(flat)))   # (|S|, |C \ S|)
            log_c = jnp.transpose(jnp.log(cond).reshape(sep_shape + free_shape),
                                  np.argsort(sep_axes + free_axes)).reshape(-1)
            log_cell = log_cell + log_c[self.cell_index[k]]
        numpyro.deterministic("joint", jnp.exp(log_cell).reshape(self.shape))
        numpyro.factor("noisy_marginals", logsumexp(jnp.asarray(self.log_const) + jnp.asarray(self.tables) @ log_cell))

    # ------------------------------------------------------------------ the exact reference
    def reference(self) -> dict:
        """Exact posterior means: ``joint`` (the full table of cell probabilities) and each clique's table
        ``p_<attrs>``, with the posterior weight of every table (``weights``)."""
        logw = self.log_const.copy()
        cond_means = []
        for k, t in enumerate(self.clique_counts):
            sep_axes, free_axes = self._split(k)
            order = sep_axes + free_axes
            a = np.transpose(self.alpha(k), order)
            m = math.prod(a.shape[len(sep_axes):])
            a = a.reshape(-1, m)
            tt = np.transpose(t.reshape((-1,) + self.clique_shape(self.cliques[k])),
                              [0] + [1 + i for i in order]).reshape(len(t), -1, m)
            post = a[None] + tt
            logw += (gammaln(a.sum(-1)) - gammaln(post.sum(-1)) + (gammaln(post) - gammaln(a)[None]).sum(-1)).sum(-1)
            mean = post / post.sum(-1, keepdims=True)                # E[p(x_{C \ S} | x_S) | x]
            shape = tuple(np.array(self.clique_shape(self.cliques[k]))[order])
            cond_means.append(np.transpose(mean.reshape((len(t),) + shape), [0] + [1 + i for i in np.argsort(order)])
                              .reshape(len(t), -1))
        w = np.exp(logw - logw.max())
        w /= w.sum()
        # the conditionals are independent given x, so E[p(cell) | x] is the product of their means
        cell = np.ones((len(w), self.tables.shape[1]))
        for k, idx in enumerate(self.cell_index):
            cell = cell * cond_means[k][:, idx]
        joint = w @ cell
        out = {"weights": w, "joint": joint.reshape(self.shape)}
        for c, idx in zip(self.cliques, self.cell_index):
            out["p_" + "_".join(c)] = np.bincount(idx, joint, minlength=math.prod(self.clique_shape(c))).reshape(
                self.clique_shape(c))
        return out

    def marginal(self, joint: np.ndarray, attrs) -> np.ndarray:
        """The marginal table over ``attrs`` (in that order) of a joint table (leading draw axes kept)."""
        lead = joint.ndim - len(self.attrs)
        drop = tuple(lead + i for i, a in enumerate(self.attrs) if a not in attrs)
        kept = [a for a in self.attrs if a in attrs]
        m = joint.sum(axis=drop)
        return np.moveaxis(m, [lead + kept.index(a) for a in attrs], list(range(lead, lead + len(attrs))))
