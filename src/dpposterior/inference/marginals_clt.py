"""Engine ``clt`` of the ``marginals`` family: the hyper-Dirichlet posterior of the clique tables under the
central-limit likelihood of the noisy marginals -- NAPSU-MQ's likelihood (Räisä, Jälkö, Kaski & Honkela, "Noise-aware
differentially private synthetic data", AISTATS 2023, Sec. 3.2, eq. 4-5) with every mechanism's exact noise
variance -- sampled by NUTS (Hoffman & Gelman 2014, through NumPyro) in coordinates whitened by the Laplace
approximation at the posterior mode.

**The likelihood.** The released vector y (every measurement's noisy table, flattened in C order and joined) is
y = t + e: t the true marginal counts of the n records, drawn i.i.d. from the table's law p, and e independent noise
with each mechanism's exact variance v_j per cell (:attr:`Mechanism.noise_variance`: the discrete Gaussian's by
summation of its mass, not sigma^2).  t is the sum of n i.i.d. indicator vectors, so by the multivariate central
limit theorem

    t ~ N(n mu(p), n C(p)),   mu_a(p)_i = P(x_a = i),   C = Pi - mu mu^T,
    Pi_ab(i, j) = P(x_a = i, x_b = j)   (the joint law of two measured cliques; 0 where i and j disagree on an
                                          attribute both hold),

and y ~ N(n mu(p), S(p)), S = n C(p) + diag(v).  NAPSU-MQ evaluates S, its inverse and log-determinant at every p
(a Cholesky factorisation per step, of side the measured cells).  By default (``covariance = "plug-in"``) S is
fixed at the posterior mode (a mode found with S at the uniform table, then S at that mode and the mode again).
S moves over the posterior by only O(n^-1/2) of itself, but each cell's mean moves by O(1) records with it, and
these add up in a margin that collects many sparse cells: on Adult's capital-gain (99 rare levels) the plug-in S
puts 0.20-0.23 sd too much in the common level, where the exact posterior is known (docs/marginals.md, "Engines").
With ``covariance = "scaled"`` (:func:`scaled_log_likelihood`; the second round of the mode search uses it) S =
A(p) - n mu mu^T, A = n Pi + diag(v), has its rank-one term exact at every p and A moved with p as E A-bar E:
A-bar at the mode, E scaling each cell to its exact variance at p.  That is S(p) exactly for one measured table
(capital-gain: 0.02-0.04 sd from the exact posterior) at the cost of a fixed S; where many measured tables overlap
it is not positive definite over the posterior, and is refused (:func:`_check_scaled`).  ``covariance = "exact"``
(:class:`ExactCovariance`) is NAPSU-MQ's: S(p) built from every pair's joint law and factorised at every step, for
releases of at most :data:`EXACT_MAX_CELLS` measured cells.  ``covariance = "reweighted"`` gets the same
posterior at the plug-in's cost plus one gradient of the exact likelihood and one factorisation per kept draw:
the plug-in chains' draws, their likelihood
tilted by exp(h . n mu(p)) with h matching the log weight's gradient at the mode (:func:`proposal_tilt`), are an
importance sample's proposal, w = N(y; n mu(p), S(p)) / (N(y; n mu(p), S-bar) exp(h . n mu(p))) (the prior cancels),
Pareto-smoothed (PSIS:
Vehtari, Simpson, Gelman, Yao & Gabry, "Pareto smoothed importance sampling", JMLR 25, 2024, whose k-hat says
whether the weights can be trusted) and turned back into draws by systematic resampling within each chain
(:func:`reweight`); the log weights vary by about 0.3 on one sparse table, 0.4 on Adult's ten attributes and 1.7
on all fourteen (docs/marginals.md), where the plug-in's error is a sum over many cells and S(p) at every step
would not fit the time.  The Gaussian law of t is the approximation that remains: it holds where every measured
cell's expected count n mu_i is large against one.

**Parameters and prior.** The junction tree's conditional tables: the root clique's joint table and, for every
other clique C with separator S, p(x_{C \\ S} | x_S), each row in additive log-ratio coordinates (the last cell's
logit fixed at 0).  The hyper-Dirichlet prior (Dawid & Lauritzen 1993, "Hyper Markov laws in the statistical
analysis of decomposable graphical models", Ann. Statist. 21, Sec. 7) makes these conditionals independent
Dirichlet(alpha_C(x_S, .)) laws, and a Dirichlet(alpha) in additive log-ratio coordinates has log density
sum_k alpha_k log p_k + const ((alpha_k - 1) from the density, one more from the Jacobian prod_k p_k).  With
alpha_C = A / |dom C| on every cell, the log prior is sum_C (A / |dom C|) sum_cells log p(x_{C \\ S} | x_S).

Under the log-linear prior (``prior.kind = "log-linear"``, :class:`LogLinearLayout`) theta is instead every cell
of each potential's log-table lambda_m, p(x) proportional to exp(sum_m lambda_m(x_m)) over the measured cliques --
NAPSU-MQ's maximum-entropy model (Sec. 3) and its N(0, s^2) prior on each cell -- and the same junction-tree
conditionals follow from the potentials by sum-product, so the likelihood above is unchanged.

**Sampling.** The mode theta* by L-BFGS (scipy) on the jitted log density and its gradient (JAX); H the Hessian
of the negative log density there (JAX), W = V diag(lambda^-1/2) from its eigen-decomposition (eigenvalues
clipped at 1e-10 of the largest); NUTS on z, theta = theta* + W z, whose posterior is near N(0, I) where the
Laplace approximation is good, with a diagonal mass matrix adapted in warm-up.  Chains start at z ~ N(0, I) and
run together (vectorised) where S^-1 and W are large, sharing each product with them; the quadratic form's
derivative S^-1 r is taken from its value's own product.
The draws are exact draws of the plug-in-covariance CLT posterior up to MCMC error (R-hat and ESS checked after
the run as for every engine); the Laplace approximation only preconditions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cliques import JunctionTree
from ..errors import InputError
from ..options import MCMCOptions, option
from ..progress import status as report_status

#: eigenvalues of the Hessian below this fraction of the largest are clipped (a flat direction of the posterior)
EIGEN_FLOOR = 1e-10


#: the most measured cells ``covariance = "exact"`` takes: it factorises S (of that side) at every leapfrog step
EXACT_MAX_CELLS = 1000

#: the most measured cells ``covariance = "reweighted"`` takes: it factorises S (of that side) once per kept draw,
#: about 0.13 s a draw at 1,980 cells on a 2-core machine (cubic in the cells)
REWEIGHT_MAX_CELLS = 3000

#: kept draws whose importance weights are computed in one call (a progress line after each)
REWEIGHT_BLOCK = 64


@dataclass(frozen=True)
class MarginalsCLTOptions(MCMCOptions):
    engine = "clt"

    draws: int = option(1000, "int", "posterior draws per chain", low=1)
    chains: int = option(4, "int", "chains (run together where the model is large, else one after another)",
                         low=1)
    # Stan's and PyMC's default: on Adult's weak-prior posteriors 500 left R-hat at 1.3 (docs/benchmarks.md)
    warmup: int = option(1000, "int", "NUTS warm-up iterations per chain (step size and diagonal mass adapted)",
                         low=1)
    thin: int = option(1, "int", "NUTS iterations per kept draw", low=1)
    target_accept: float = option(0.8, "float", "NUTS target acceptance probability", low=0.5, high=0.99)
    covariance: str = option("plug-in", "choice", "how S moves with the table: plug-in (S fixed at the posterior "
                             "mode), scaled (every cell's variance and the multinomial's rank-one term exact at each "
                             "table, the other covariances scaled with the variances from the mode: exact for one "
                             "measured table; refused where it is not positive definite over the posterior) or "
                             "exact (S evaluated and factorised at every step, NAPSU-MQ's likelihood; at most "
                             f"{EXACT_MAX_CELLS:,} measured cells) or reweighted (exact's posterior from the "
                             "plug-in's draws: S factorised once per draw, Pareto-smoothed importance weights, "
                             f"resampled within each chain; at most {REWEIGHT_MAX_CELLS:,} measured cells)",
                             choices=("plug-in", "scaled", "exact", "reweighted"))


class Layout:
    """Where each junction-tree conditional table's free logits sit in theta, and how the tables and the
    measurements' expected tables follow from them."""

    def __init__(self, tree: JunctionTree, measured_cliques):
        self.tree = tree
        self.blocks = []
        off = 0
        for k, c in enumerate(tree.cliques):
            shape = tree.shape(c)
            sep = tree.separators[k] if tree.parents[k] >= 0 else ()
            sep_axes = tuple(c.index(a) for a in sep)
            rest_axes = tuple(i for i in range(len(c)) if i not in sep_axes)
            n_sep = int(math.prod(shape[i] for i in sep_axes))
            n_rest = int(math.prod(shape[i] for i in rest_axes))
            order = sep_axes + rest_axes  # the (sep..., rest...) layout's axes in the clique's order
            self.blocks.append({
                "clique": tuple(c), "shape": shape, "parent": tree.parents[k], "sep": tuple(sep),
                "n_sep": n_sep, "n_rest": n_rest, "offset": off, "size": n_sep * (n_rest - 1),
                "grouped": tuple(shape[i] for i in order), "order": order,
                "to_clique": tuple(int(np.argsort(order)[i]) for i in range(len(c)))})
            off += n_sep * (n_rest - 1)
        self.dim = off
        self.measured = [tuple(m) for m in measured_cliques]
        self.containing = []
        for m in self.measured:
            k = tree.containing(m)
            if k is None:  # the junction tree is built to hold every measured clique
                raise InputError("measurements", f"no clique of the model holds ({', '.join(m)})")
            self.containing.append(k)

    # ---------------------------------------------------------------- tables from theta (xp: numpy or jax.numpy)
    @staticmethod
    def _marginal(xp, table, clique, attrs):
        keep = [clique.index(a) for a in attrs]
        drop = tuple(i for i in range(len(clique)) if i not in keep)
        out = xp.sum(table, axis=drop) if drop else table
        remaining = [i for i in range(len(clique)) if i in keep]
        return xp.transpose(out, [remaining.index(i) for i in keep])

    def log_conditionals(self, xp, theta, log_softmax, logsumexp=None):
        """Each block's log p(rest | sep) as (n_sep, n_rest)."""
        out = []
        for b in self.blocks:
            eta = theta[b["offset"]:b["offset"] + b["size"]].reshape(b["n_sep"], b["n_rest"] - 1)
            full = xp.concatenate([eta, xp.zeros((b["n_sep"], 1), dtype=eta.dtype)], axis=1)
            out.append(log_softmax(full, axis=1))
        return out

    def tables(self, xp, logc):
        tables = []
        for b, lc in zip(self.blocks, logc):
            cond = xp.exp(lc)
            if b["parent"] >= 0:
                parent = self.blocks[b["parent"]]
                p_sep = self._marginal(xp, tables[b["parent"]], parent["clique"], b["sep"]).reshape(b["n_sep"], 1)
                cond = cond * p_sep
            tables.append(xp.transpose(cond.reshape(b["grouped"]), b["to_clique"]))
        return tables

    def means(self, xp, tables):
        """mu: every measurement's expected table (probabilities), flattened and joined."""
        return xp.concatenate([self._marginal(xp, tables[k], self.blocks[k]["clique"], m).reshape(-1)
                               for m, k in zip(self.measured, self.containing)])

    def start(self) -> np.ndarray:
        return np.zeros(self.dim)

    def log_prior(self, xp, theta, logc, data):
        """The hyper-Dirichlet in additive log-ratio coordinates: sum_C alpha_C sum log p(rest | sep)."""
        return sum(data["alpha"][k] * xp.sum(lc) for k, lc in enumerate(logc))

    def key(self) -> tuple:
        return ("hyper-dirichlet",)


class LogLinearLayout(Layout):
    """The log-linear (maximum-entropy) model: theta holds every cell of each potential's log-table
    lambda_m (the measured cliques and the prior's), p(x) proportional to exp(sum_m lambda_m(x_m)), each cell
    N(0, scale^2) a priori (NAPSU-MQ's prior; the tables are over-parameterised -- a constant moved between
    overlapping potentials leaves p unchanged -- and the prior makes the posterior proper in those directions).
    The junction tree's conditionals follow by sum-product (:meth:`JunctionTree.potential_log_conditionals`),
    in the grouped layout of :class:`Layout`, so the tables, means and covariance are the hyper-Dirichlet
    engine's own."""

    def __init__(self, tree: JunctionTree, measured_cliques, potentials):
        super().__init__(tree, measured_cliques)
        self.potentials = [tuple(p) for p in potentials]
        self.pieces = []
        off = 0
        for p in self.potentials:
            if tree.containing(p) is None:
                raise InputError("prior.cliques", f"no clique of the model holds ({', '.join(p)})")
            size = int(math.prod(tree.shape(p)))
            self.pieces.append((off, size))
            off += size
        self.dim = off

    def log_conditionals(self, xp, theta, log_softmax, logsumexp=None):
        tree = self.tree
        phi = tree.log_potentials_on_cliques(self.potentials, [theta[off:off + size] for off, size in self.pieces], xp)
        logc = tree.potential_log_conditionals(phi, xp, logsumexp)
        return [xp.transpose(lc, b["order"]).reshape(b["n_sep"], b["n_rest"]) if len(b["order"]) > 1
                else lc.reshape(b["n_sep"], b["n_rest"]) for b, lc in zip(self.blocks, logc)]

    def log_prior(self, xp, theta, logc, data):
        return -0.5 * xp.sum(theta * theta) / (data["scale"] * data["scale"])

    def key(self) -> tuple:
        return ("log-linear", tuple(self.potentials))

def scaled_log_likelihood(xp, mu, data):
    """The CLT log likelihood with S(p) = n Pi(p) + diag(v) - n mu mu^T moved with the table p about p-bar:
    A(p) = n Pi(p) + diag(v) as E A-bar E, E = diag(d / d-bar)^1/2, d = n mu + v its exact diagonal (A-bar at
    p-bar, so every cell's variance and A's correlations at p-bar), and the multinomial's rank-one term exact, by
    the Sherman-Morrison formula and the matrix determinant lemma (Golub & Van Loan, Matrix Computations, 4th ed.,
    Sec. 2.1.4):

        r^T S^-1 r = r^T A^-1 r + n (mu^T A^-1 r)^2 / c,   log det S = sum_i log d_i + log c + const,
        c = 1 - n mu^T A^-1 mu,   A^-1 = E^-1 A-bar^-1 E^-1.

    One product of A-bar^-1 with the two columns (r / e, mu / e) per value, as the plug-in's one with r.  For one
    measured table A is diagonal, so this is S(p) exactly (NAPSU-MQ's likelihood, at no Cholesky factorisation
    per step).  ``data["precision"]`` holds A-bar^-1, ``data["scaled_d"]`` d-bar; a table where c <= 0 (S not
    positive definite: far from p-bar) has likelihood 0."""
    n, v = data["n"], data["noise_var"]
    d = n * mu + v
    inv_e = xp.sqrt(data["scaled_d"] / d)
    r_s = (data["y"] - n * mu) * inv_e
    mu_s = mu * inv_e
    prod = data["precision"] @ xp.stack([r_s, mu_s], axis=1)
    c = 1.0 - n * (mu_s @ prod[:, 1])
    safe_c = xp.where(c > 0, c, 1.0)
    mu_r = mu_s @ prod[:, 0]
    value = -0.5 * (xp.sum(xp.log(d)) + xp.log(safe_c) + r_s @ prod[:, 0] + n * mu_r * mu_r / safe_c)
    return xp.where(c > 0, value, -xp.inf)


class ExactCovariance:
    """S(p) = n (Pi(p) - mu mu^T) + diag(v) at every p (``covariance = "exact"``, NAPSU-MQ's likelihood), in JAX:
    Pi_ab for every pair of measured cliques from their union's joint law -- a marginal of one junction-tree
    clique's table where a clique holds the union, else the einsum of the root table and the other cliques'
    conditionals (the variable elimination of :meth:`JunctionTree.marginal`) -- gathered into the pair's block by
    :func:`measured_pairs`, as :func:`second_moments` does in numpy."""

    def __init__(self, layout: Layout):
        tree = layout.tree
        self.layout = layout
        measured = layout.measured
        self.sizes = [int(math.prod(tree.shape(m))) for m in measured]
        letters = {a: chr(ord("a") + i) if i < 26 else chr(ord("A") + i - 26) for i, a in enumerate(tree.attributes)}
        self.pairs = []
        for a, b, union, idx, agree in measured_pairs(tree, measured):
            k = tree.containing(union)
            expr = None if k is not None else (
                ",".join("".join(letters[x] for x in c) for c in tree.cliques) + "->"
                + "".join(letters[x] for x in union))
            self.pairs.append((a, b, union, k, expr, idx, agree))

    def covariance(self, xp, logc, tables, mu, n, noise_var):
        layout = self.layout
        factors = None
        blocks = {}
        for a, b, union, k, expr, idx, agree in self.pairs:
            if k is not None:
                joint = layout._marginal(xp, tables[k], layout.blocks[k]["clique"], union)
            else:
                if factors is None:
                    factors = [tables[j] if blk["parent"] < 0 else
                               xp.transpose(xp.exp(lc).reshape(blk["grouped"]), blk["to_clique"])
                               for j, (blk, lc) in enumerate(zip(layout.blocks, logc))]
                joint = xp.einsum(expr, *factors, optimize="greedy")
            blocks[a, b] = xp.where(agree, joint[idx], 0.0)
        m = len(self.sizes)
        pi = xp.block([[blocks[a, b] if a <= b else blocks[b, a].T for b in range(m)] for a in range(m)])
        return n * (pi - xp.outer(mu, mu)) + xp.diag(noise_var)


def measured_pairs(tree: JunctionTree, measured):
    """Every pair (a, b), a <= b, of measured cliques with what gathers Pi_ab from their union's joint law: the union
    (clique a's attributes, then b's others), the index arrays into the union's table of each (cell of a, cell of b)
    and the mask of the pairs that agree on the attributes both hold (Pi_ab is 0 elsewhere)."""
    sizes = [int(math.prod(tree.shape(m))) for m in measured]
    for a, ca in enumerate(measured):
        va = np.unravel_index(np.arange(sizes[a]), tree.shape(ca))
        for b in range(a, len(measured)):
            cb = measured[b]
            extra = tuple(x for x in cb if x not in ca)
            vb = np.unravel_index(np.arange(sizes[b]), tree.shape(cb))
            agree = np.ones((sizes[a], sizes[b]), dtype=bool)
            for x in cb:
                if x in ca:
                    agree &= va[ca.index(x)][:, None] == vb[cb.index(x)][None, :]
            idx = tuple(np.broadcast_to(va[i][:, None], agree.shape) for i in range(len(ca)))
            idx += tuple(np.broadcast_to(vb[cb.index(x)][None, :], agree.shape) for x in extra)
            yield a, b, tuple(ca) + extra, idx, agree


def second_moments(tree: JunctionTree, tables, measured) -> np.ndarray:
    """Pi: Pi_ab(i, j) = P(x_a = i, x_b = j) for every pair of measured cliques, from the clique tables (one draw,
    numpy), by the joint law of the two cliques' union (variable elimination, :meth:`JunctionTree.marginal`)."""
    sizes = [int(math.prod(tree.shape(m))) for m in measured]
    offs = np.cumsum([0] + sizes)
    out = np.zeros((offs[-1], offs[-1]))
    for a, b, union, idx, agree in measured_pairs(tree, measured):
        block = np.where(agree, tree.marginal(tables, union)[idx], 0.0)
        out[offs[a]:offs[a + 1], offs[b]:offs[b + 1]] = block
        out[offs[b]:offs[b + 1], offs[a]:offs[a + 1]] = block.T
    return out


def clt_covariance(tree, tables, measured, n: int, noise_var: np.ndarray) -> np.ndarray:
    """S = n (Pi - mu mu^T) + diag(v): the covariance of the released vector under the CLT."""
    pi = second_moments(tree, tables, measured)
    mu = np.concatenate([tree.marginal(tables, m).ravel() for m in measured])
    return n * (pi - np.outer(mu, mu)) + np.diag(noise_var)


def precision_matrix(cov: np.ndarray) -> np.ndarray:
    """S^-1 through the Cholesky factor (S = L L^T, S^-1 = L^-T L^-1), symmetric to rounding."""
    import scipy.linalg

    low = np.linalg.cholesky(cov)
    inv = scipy.linalg.solve_triangular(low, np.eye(low.shape[0]), lower=True)
    return inv.T @ inv


def _half_quadratic(jax):
    """q(P, r) = r^T P r / 2 with the derivative P r in r, reusing the product of the value: one matrix-vector
    product per value and gradient, where reverse-mode differentiation of the plain expression makes two (the
    likelihood's cost is this product, of side the measured cells).  P is data: its derivative is not defined."""

    @jax.custom_jvp
    def half_quadratic(prec, r):
        return 0.5 * r @ (prec @ r)

    @half_quadratic.defjvp
    def _jvp(primals, tangents):
        prec, r = primals
        pr = prec @ r
        return 0.5 * r @ pr, pr @ tangents[1]

    return half_quadratic


def _jax():
    from ..ppl import numpyro as _bound  # noqa: F401  (binds jax/numpyro submodules whatever imported them first)
    import jax

    return jax


#: cells^2 arrays the reverse-mode derivative of the exact log likelihood keeps (rounded up from 42, the peak
#: memory it added on Adult's 14-attribute release of 1,980 measured cells)
PAIRWISE_GRADIENT_ARRAYS = 48


def _memory_check(dim: int, cells: int, chains: int, draws: int, table_cells: int, iterations: int,
                  pairwise: bool = False) -> None:
    """Refuse before allocating: the Hessian, its eigenvectors and the whitening (dim^2 each), the covariance, its
    factor and the precision (cells^2 each), every iteration's z (warm-up included), the kept thetas and their
    tables; with ``pairwise`` (covariance exact or reweighted) the pairwise joint laws' index arrays
    (:class:`ExactCovariance`: up to four 8-byte indices and a flag per pair of cells) and S(p), its factor and
    the gathered pair blocks (cells^2 each) in the compiled log density, and the reverse-mode derivative of the
    exact log likelihood (the leapfrog gradient of ``exact``, the tilt's gradient of ``reweighted``), which keeps
    about 40 arrays of cells^2 for its backward pass (measured: 1.3 GB more peak memory at 1,980 cells)."""
    from ..memory import check_fits

    est = 8.0 * (3 * dim * dim + 3 * cells * cells + chains * iterations * dim
                 + chains * draws * (dim + table_cells))
    if pairwise:
        est += cells * cells * (4 * 8 + 1) + 8.0 * (3 + PAIRWISE_GRADIENT_ARRAYS) * cells * cells
    check_fits(est, "draws", f"the CLT engine's {dim:,} parameters, {cells:,} measured cells and {draws} draws x "
               f"{chains} chains", "measure fewer or smaller cliques, or use method da")


class Compiled:
    """The jitted functions of one layout (junction tree and measured cliques): the log density as a function of
    (theta, data), its value and gradient, its Hessian, the tables of a batch of thetas, and a NUTS sampler whose
    model takes the data as arguments (``jit_model_args``) -- so releases of the same shape (a calibration study)
    compile once."""

    def __init__(self, layout: Layout):
        jax = _jax()
        import jax.numpy as jnp
        from jax.nn import log_softmax
        from jax.scipy.special import logsumexp

        from jax.scipy.linalg import solve_triangular

        self.layout = layout
        self._exact = None
        half_quadratic = _half_quadratic(jax)

        def exact_log_likelihood(logc, tables, mu, data):
            """log N(y; n mu, S(p)) up to its constant, S(p) built and factorised at this table."""
            cov = self.exact().covariance(jnp, logc, tables, mu, data["n"], data["exact_noise_var"])
            low = jnp.linalg.cholesky(cov)
            w = solve_triangular(low, data["y"] - data["n"] * mu, lower=True)
            return -jnp.sum(jnp.log(jnp.diagonal(low))) - 0.5 * w @ w

        def log_density(theta, data):
            """log prior + log CLT likelihood: with ``data["scaled_d"]`` S moved with the table
            (:func:`scaled_log_likelihood`), else S fixed (``data["precision"]`` = S^-1)."""
            logc = layout.log_conditionals(jnp, theta, log_softmax, logsumexp)
            tables = layout.tables(jnp, logc)
            mu = layout.means(jnp, tables)
            log_prior = layout.log_prior(jnp, theta, logc, data)
            if "exact_noise_var" in data:  # (static branches: the data's structure is fixed per compilation)
                return log_prior + exact_log_likelihood(logc, tables, mu, data)
            if "scaled_d" not in data:
                return log_prior - half_quadratic(data["precision"], data["y"] - data["n"] * mu)
            return log_prior + scaled_log_likelihood(jnp, mu, data)

        def log_weight(theta, data):
            """log N(y; n mu, S(p)) - log N(y; n mu, S-bar): the importance weight of a plug-in draw for the
            exact-covariance posterior (the prior and the plug-in's log determinant cancel or are constant)."""
            logc = layout.log_conditionals(jnp, theta, log_softmax, logsumexp)
            tables = layout.tables(jnp, logc)
            mu = layout.means(jnp, tables)
            r = data["y"] - data["n"] * mu
            lw = exact_log_likelihood(logc, tables, mu, data) + 0.5 * r @ (data["precision"] @ r)
            if "tilt" in data:  # the proposal's linear tilt h . n mu (:func:`proposal_tilt`) divided out
                lw = lw - data["tilt"] @ (data["n"] * mu)
            return lw

        def cell_counts(theta, n):
            """n mu(theta): the measured cells' expected counts."""
            logc = layout.log_conditionals(jnp, theta, log_softmax, logsumexp)
            return n * layout.means(jnp, layout.tables(jnp, logc))

        # one draw at a time within a block: a batch would hold a covariance (cells^2) per draw
        self.log_weights = jax.jit(lambda ts, d: jax.lax.map(lambda t: log_weight(t, d), ts))
        self.log_weight_gradient = jax.jit(jax.grad(log_weight))
        self.counts_vjp = jax.jit(lambda t, h, n: jax.vjp(lambda s: cell_counts(s, n), t)[1](h)[0])
        self.counts_jvp = jax.jit(lambda t, v, n: jax.jvp(lambda s: cell_counts(s, n), (t,), (v,))[1])
        self.log_density = jax.jit(log_density)
        self.neg_value_and_grad = jax.jit(jax.value_and_grad(lambda t, d: -log_density(t, d)))
        self.neg_hessian = jax.jit(jax.hessian(lambda t, d: -log_density(t, d)))
        self.tables = jax.jit(jax.vmap(lambda t: layout.tables(jnp, layout.log_conditionals(jnp, t, log_softmax,
                                                                                            logsumexp))))
        self._log_density = log_density
        self._samplers: dict = {}

    def exact(self) -> ExactCovariance:
        """The pairwise joint laws' gathering for ``covariance = "exact"``, built on first use (its index arrays
        hold the square of the measured cells)."""
        if self._exact is None:
            self._exact = ExactCovariance(self.layout)
        return self._exact

    def sampler(self, options: MarginalsCLTOptions):
        """(init, run, block) of NUTS chains for these options, vectorised over a batch of chains (all of them
        where :func:`chains_together`: they then share each product with the precision and whitening matrices,
        the likelihood's cost; else batches of one), jitted once: ``init(z0, data, keys)`` -> the batch's initial
        states (no heuristic step-size search at the start:
        NumPyro's would keep the first release's potential in the compiled warm-up); ``run(states, data)`` ->
        (states, (z, diverging, steps)) of the next ``block`` iterations of every chain, warm-up included
        (NumPyro's functional ``hmc`` API: the data are arguments of the potential, so a new release of the same
        shape reuses the compiled chains).  The run is cut into blocks only to report progress: the sampler's
        state carries its iteration count and adaptation, so the draws are those of one uninterrupted run."""
        total = options.warmup + options.draws * options.thin
        block = progress_block(total)
        key = (options.warmup, options.draws, options.thin, options.target_accept)
        if key not in self._samplers:
            jax = _jax()
            from numpyro.infer.hmc import hmc

            log_density = self._log_density

            def potential_gen(data):
                return lambda z: -log_density(data["theta_hat"] + data["whiten"] @ z, data)

            init_kernel, sample_kernel = hmc(potential_fn_gen=potential_gen, algo="NUTS")

            def init(z0, data, rng_key):
                return init_kernel(z0, options.warmup, target_accept_prob=options.target_accept,
                                   model_args=(data,), rng_key=rng_key)

            def run(state, data):
                def step(st, _):
                    st = sample_kernel(st, model_args=(data,))
                    return st, (st.z, st.diverging, st.num_steps)
                return jax.lax.scan(step, state, None, length=block)

            self._samplers[key] = (jax.jit(jax.vmap(init, in_axes=(0, None, 0))),
                                   jax.jit(jax.vmap(run, in_axes=(0, None))), block)
        return self._samplers[key]


#: the precision and whitening matrices' bytes above which the chains run together: the products then stream
#: the matrices from memory, and one pass serves every chain; below it the matrices stay in cache and running
#: in lockstep (each step waits for the chain with the deepest tree) costs more than it saves (measured on
#: Adult's 10 attributes: docs/benchmarks.md, "The chains' arrangement")
TOGETHER_BYTES = 16 * 2 ** 20


def chains_together(cells: int, dim: int) -> bool:
    """Whether the chains run together (vectorised) or one after another (each a batch of one)."""
    return 8 * (cells * cells + dim * dim) >= TOGETHER_BYTES


def progress_block(total: int) -> int:
    """The iterations run between two progress reports: the largest divisor of ``total`` at most a twentieth of
    it (one compiled block length for the whole run)."""
    cap = max(1, -(-total // 20))
    return max(d for d in range(1, cap + 1) if total % d == 0)


#: compiled functions by layout (the junction tree's record and the measured cliques), kept for the process
_COMPILED: dict = {}


def compiled(tree: JunctionTree, measured, potentials=None) -> Compiled:
    """The compiled functions of the hyper-Dirichlet model (``potentials`` None) or of the log-linear model over
    ``potentials``."""
    import json

    layout = Layout(tree, measured) if potentials is None else LogLinearLayout(tree, measured, potentials)
    key = (json.dumps(tree.to_record(), sort_keys=True), tuple(tuple(m) for m in measured), layout.key())
    if key not in _COMPILED:
        _COMPILED[key] = Compiled(layout)
    return _COMPILED[key]


def marginals_clt(model, options: MarginalsCLTOptions):
    """Engine ``clt`` (marginals): reads the model's junction tree (``model.latent.state``), ``n``, measurements
    (the noisy tables, their cliques and noise variances) and hyper-Dirichlet concentration, and names its draws
    through the model."""
    from ..families.marginals import variable_name

    model.competent({"moments"}, "clt")
    if model.n is None:
        raise InputError("method", "clt needs the number of records n, which this release does not state; use "
                                   "method da (it infers n)")
    try:
        jax = _jax()
    except ImportError:
        raise InputError("method", "clt needs NumPyro and JAX: pip install 'dpposterior[marginals]' (or "
                                   "'dpposterior[numpyro]')") from None
    import jax.numpy as jnp
    import scipy.optimize

    tree: JunctionTree = model.latent.state
    n = int(model.n)
    measured = [tuple(m.query.clique) for m in model.measurements]
    y = np.concatenate([np.asarray(m.values, float).ravel() for m in model.measurements])
    noise_var = np.concatenate([np.full(int(np.asarray(m.values).size), float(m.mechanism.noise_variance))
                                for m in model.measurements])
    table_cells = sum(int(math.prod(tree.shape(c))) for c in tree.cliques)
    spec = model.prior.spec
    log_linear = spec.kind == "log-linear"
    comp = compiled(tree, measured, spec.potentials(measured) if log_linear else None)  # (jitted on first call)
    layout = comp.layout
    if options.covariance == "exact" and len(y) > EXACT_MAX_CELLS:
        raise InputError("covariance", f"exact factorises S, of side the {len(y):,} measured cells, at every "
                                       f"step; it takes at most {EXACT_MAX_CELLS:,}: use reweighted, plug-in or "
                                       "scaled")
    if options.covariance == "reweighted" and len(y) > REWEIGHT_MAX_CELLS:
        raise InputError("covariance", f"reweighted factorises S, of side the {len(y):,} measured cells, once per "
                                       f"kept draw; it takes at most {REWEIGHT_MAX_CELLS:,}: use plug-in")
    _memory_check(layout.dim, len(y), options.chains, options.draws, table_cells,
                  options.warmup + options.draws * options.thin,
                  pairwise=options.covariance in ("exact", "reweighted"))
    if log_linear:
        prior_data = {"scale": float(spec.scale)}
    else:  # the hyper-Dirichlet's pseudo-count, uniform within each clique: one number per clique
        prior_data = {"alpha": np.array([float(a.flat[0]) for a in tree.prior_alpha(
            float(model.prior.parameters["concentration"]))])}
    quiet = options.quiet

    with jax.enable_x64(True):

        scaled = options.covariance == "scaled"
        exact = options.covariance == "exact"

        def data_for(theta, expand: bool):
            """The compiled functions' data at theta, and the plug-in covariance S-bar there (None where S is built
            in the log density)."""
            out = {"y": y, "n": float(n), **prior_data}
            if exact and expand:
                out["exact_noise_var"] = noise_var
                return jax.tree_util.tree_map(jnp.asarray, out), None
            tables = tables_np(layout, theta)
            cov = clt_covariance(tree, tables, measured, n, noise_var)
            if scaled and expand:
                mu_bar = np.concatenate([tree.marginal(tables, m).ravel() for m in measured])
                out.update(precision=precision_matrix(cov + n * np.outer(mu_bar, mu_bar)), noise_var=noise_var,
                           scaled_d=n * mu_bar + noise_var)
            else:
                out["precision"] = precision_matrix(cov)
            return jax.tree_util.tree_map(jnp.asarray, out), cov

        theta = layout.start()
        for rnd in range(2):  # S fixed at the uniform table, then moved with the table about the mode found
            if not quiet:
                report_status(f"posterior mode ({rnd + 1}/2)")
            data, _ = data_for(theta, expand=rnd > 0)

            def fun(t):
                v, g = comp.neg_value_and_grad(jnp.asarray(t), data)
                return float(v), np.asarray(g, dtype=float)
            res = scipy.optimize.minimize(fun, theta, jac=True, method="L-BFGS-B",
                                          options={"maxiter": 20000, "maxfun": 40000, "gtol": 1e-8})
            if not np.all(np.isfinite(res.x)):
                raise InputError("method", "clt: the posterior mode search diverged; use method da")
            theta = res.x
        data, cov_bar = data_for(theta, expand=True)
        if not quiet:
            report_status(f"Hessian at the mode ({layout.dim:,} parameters)")
        hess = np.asarray(comp.neg_hessian(jnp.asarray(theta), data), dtype=float)
        lam, vec = np.linalg.eigh(0.5 * (hess + hess.T))
        lam = np.maximum(lam, EIGEN_FLOOR * max(float(lam.max()), 1e-300))
        whiten = vec / np.sqrt(lam)[None, :]
        data = dict(data, theta_hat=jnp.asarray(theta), whiten=jnp.asarray(whiten))
        if scaled:
            _check_scaled(comp, data, layout.dim)

        sample_data, wdata, tilt_stats = data, None, {}
        if options.covariance == "reweighted":
            wdata = dict(data, exact_noise_var=jnp.asarray(noise_var))
            if not quiet:
                report_status("the proposal's tilt: the log weight's gradient at the mode")
            tilt, tilt_stats = proposal_tilt(comp, theta, wdata)
            sample_data = dict(data, y=jnp.asarray(y + cov_bar @ tilt))
            wdata["tilt"] = jnp.asarray(tilt)

        rng = options.rng()
        keys = jax.random.split(jax.random.PRNGKey(int(rng.integers(0, 2 ** 31 - 1))), options.chains)
        z0 = rng.standard_normal((options.chains, layout.dim))
        init, run, block = comp.sampler(options)
        total = options.warmup + options.draws * options.thin
        together = chains_together(len(y), layout.dim)
        groups = [np.arange(options.chains)] if together else [np.array([c]) for c in range(options.chains)]
        zs, div, steps = [], [], []
        for g, chains in enumerate(groups):
            state = init(jnp.asarray(z0[chains]), sample_data, keys[chains])
            parts = []
            for done in range(0, total, block):
                if not quiet:
                    which = (f"{options.chains} chains together" if together
                             else f"chain {g + 1} of {options.chains}")
                    report_status(f"NUTS, {which}: iteration {done:,} of {total:,} ({options.warmup:,} warm-up)")
                state, out = run(state, sample_data)
                parts.append([np.asarray(x) for x in out])
            zs.append(np.concatenate([q[0] for q in parts], axis=1).astype(float))
            div.append(np.concatenate([q[1] for q in parts], axis=1).astype(bool))
            steps.append(np.concatenate([q[2] for q in parts], axis=1).astype(np.int64))
        keep = slice(options.warmup + options.thin - 1, None, options.thin)
        z = np.concatenate(zs)[:, keep]
        div = np.concatenate(div)[:, keep]
        steps = np.concatenate(steps)[:, keep]
        thetas = theta[None, None, :] + z @ whiten.T
        reweighting = {}
        if options.covariance == "reweighted":
            idx, reweighting = reweight(comp, thetas, wdata, rng, quiet)
            reweighting.update(tilt_stats)
            thetas = np.take_along_axis(thetas, idx[:, :, None], axis=1)
            div = np.take_along_axis(div, idx, axis=1)
            steps = np.take_along_axis(steps, idx, axis=1)
        flat = [np.asarray(x) for x in comp.tables(jnp.asarray(thetas.reshape(-1, layout.dim)))]
    draws = {variable_name(c): t.reshape(options.chains, options.draws, *tree.shape(c))
             for c, t in zip(tree.cliques, flat)}
    stats = {"diverging": div, "n_steps": steps}
    model_name = "log-linear (maximum-entropy) model" if log_linear else "hyper-Dirichlet"
    how_s = {"scaled": "covariance moved with the table from the posterior mode (scaled)",
             "exact": "covariance at every table (exact)",
             "reweighted": "covariance at every table (plug-in draws reweighted)"}.get(
        options.covariance, "covariance at the posterior mode")
    attrs = {"algorithm": f"{model_name} posterior under the central-limit likelihood of the noisy marginals "
                          f"(exact noise variances, {how_s}); NUTS in Laplace-whitened coordinates",
             "options_warmup": options.warmup, "options_covariance": options.covariance,
             "options_thin": options.thin,
             "options_target_accept": options.target_accept, **reweighting}
    return model.pack(draws, "clt", sample_stats=stats, attrs=attrs)


def reweight(comp: Compiled, thetas: np.ndarray, data: dict, rng: np.random.Generator,
             quiet: bool = False) -> tuple[np.ndarray, dict]:
    """``covariance = "reweighted"``: the plug-in chains' draws (chains, draws, dim) as an importance sample for the
    exact-covariance posterior.  Log weights log N(y; n mu, S(p)) - log N(y; n mu, S-bar) at every draw
    (:meth:`Compiled.log_weights`), Pareto-smoothed over all draws (PSIS, ArviZ's ``psislw``), then each chain's
    draws replaced by a systematic resample of its own (its weights renormalised within it: every chain stays a
    sample of the posterior, so R-hat still compares chains, and the resampled indices are increasing, so a chain
    keeps its order).  Returns the indices (chains, draws) and the diagnostics: PSIS k-hat over all draws, its
    threshold min(1 - 1/log10 S, 0.7) (Vehtari et al. 2024, Sec. 3.2.4) and Kish's effective sample size of the
    smoothed weights; k-hat above the threshold is flagged in ``Posterior.warnings`` (dpposterior.checks)."""
    import jax.numpy as jnp
    from scipy.special import logsumexp

    from ..sbi.importance import effective_sample_size, khat_threshold, pareto_smooth

    chains, draws, dim = thetas.shape
    flat = thetas.reshape(-1, dim)
    total = flat.shape[0]
    wdata = {k: data[k] for k in ("y", "n", "precision", "exact_noise_var", "tilt") if k in data}
    lw = np.empty(total)
    for start in range(0, total, REWEIGHT_BLOCK):
        if not quiet:
            report_status(f"reweighting to S at every table: draw {start:,} of {total:,}")
        block = flat[start:start + REWEIGHT_BLOCK]
        pad = REWEIGHT_BLOCK - block.shape[0]  # (one compiled shape: the last block padded with its first draw)
        batch = np.concatenate([block, np.repeat(block[:1], pad, axis=0)]) if pad else block
        lw[start:start + block.shape[0]] = np.asarray(comp.log_weights(jnp.asarray(batch), wdata))[:block.shape[0]]
    if not np.all(np.isfinite(lw)):
        raise InputError("covariance", f"reweighted: S(p) could not be factorised at {int(np.sum(~np.isfinite(lw)))} "
                                       f"of {total:,} draws; use covariance plug-in")
    smoothed, khat = pareto_smooth(lw)
    threshold = khat_threshold(total)
    ess = effective_sample_size(smoothed)
    smoothed = smoothed.reshape(chains, draws)
    idx = np.empty((chains, draws), dtype=np.int64)
    for c in range(chains):
        w = np.exp(smoothed[c] - logsumexp(smoothed[c]))
        u = (rng.random() + np.arange(draws)) / draws
        idx[c] = np.minimum(np.searchsorted(np.cumsum(w), u), draws - 1)
    diagnostics = {"reweighting_pareto_k": float(khat), "reweighting_pareto_k_threshold": float(threshold),
                   "reweighting_ess": float(ess), "reweighting_draws": int(total),
                   "reweighting_log_weight_sd": float(np.std(lw))}
    return idx, diagnostics


#: LSQR's iteration cap and tolerances in :func:`proposal_tilt`
TILT_ITERATIONS, TILT_TOLERANCE = 5000, 1e-10


def proposal_tilt(comp: Compiled, theta_hat: np.ndarray, data: dict) -> tuple[np.ndarray, dict]:
    """The reweighting's proposal: the plug-in posterior tilted by exp(h . n mu(theta)), with h chosen so that the
    tilt's gradient at the mode, J^T h (J = d n mu / d theta there), is the log weight's gradient g there in least
    squares (LSQR, matrix-free through JAX's JVP and VJP of n mu).  The log weight log N(y; n mu, S(p)) -
    log N(y; n mu, S-bar) is 0 at the mode with g there from S's change alone; most of the plug-in's error is this
    first-order shift (a margin that collects many sparse cells moved as a whole), so the tilted proposal leaves
    only the weight's curvature to the importance weights.  The tilt is linear in the bounded cell probabilities,
    not in theta: a tilt linear in theta would outweigh a small pseudo-count's exp(alpha theta) tail and make the
    proposal improper.  It is the plug-in likelihood at y + S-bar h (the quadratic's cross term), so the chains
    run the plug-in's compiled sampler unchanged; the weights divide it out exactly (:meth:`Compiled.log_weights`).
    Returns h, the first-order shift sqrt(g^T W W^T g) (W W^T the Laplace covariance at the mode: the most, in
    posterior sds, that the plug-in's first-order error moves any linear function of theta) and the share of g the
    tilt leaves unmatched."""
    import jax.numpy as jnp
    from scipy.sparse.linalg import LinearOperator, lsqr

    t = jnp.asarray(theta_hat)
    n = data["n"]
    g = np.asarray(comp.log_weight_gradient(t, {k: v for k, v in data.items() if k != "tilt"}), dtype=float)
    cells = int(np.asarray(data["y"]).size)
    op = LinearOperator((g.size, cells), dtype=float,
                        matvec=lambda h: np.asarray(comp.counts_vjp(t, jnp.asarray(np.ravel(h)), n), dtype=float),
                        rmatvec=lambda v: np.asarray(comp.counts_jvp(t, jnp.asarray(np.ravel(v)), n), dtype=float))
    h = lsqr(op, g, atol=TILT_TOLERANCE, btol=TILT_TOLERANCE, iter_lim=TILT_ITERATIONS)[0]
    gnorm = float(np.linalg.norm(g))
    resid = float(np.linalg.norm(op.matvec(h) - g)) / gnorm if gnorm > 0 else 0.0
    if not np.all(np.isfinite(h)):
        raise InputError("covariance", "reweighted: the proposal's tilt is not finite at the posterior mode; use "
                                       "covariance plug-in")
    shift = float(np.linalg.norm(np.asarray(data["whiten"], dtype=float).T @ g))
    return h, {"reweighting_first_order_shift": shift, "reweighting_tilt_unmatched": resid}


#: draws of the Laplace approximation at which the scaled covariance is checked, and the share of them allowed
#: outside its positive-definite region
SCALED_CHECK_DRAWS, SCALED_CHECK_SHARE = 200, 0.01


def _check_scaled(comp: Compiled, data: dict, dim: int) -> None:
    """Refuse the scaled covariance where E A-bar E - n mu mu^T is not positive definite over the posterior (its
    likelihood 0 at more than 1% of the Laplace approximation's draws, from a fixed generator that leaves the
    chains' draws alone).  Each measurement's cells sum to n, and nested or overlapping tables agree on their
    common margins, so S(p) has many directions of noise variance only; scaling each cell's variance apart moves
    them, and with many overlapping tables (Adult's 14 attributes) they cross zero within the posterior."""
    jax = _jax()
    import jax.numpy as jnp

    z = np.random.default_rng(0).standard_normal((SCALED_CHECK_DRAWS, dim))
    thetas = np.asarray(data["theta_hat"])[None, :] + z @ np.asarray(data["whiten"]).T
    values = np.asarray(jax.vmap(lambda t: comp.log_density(t, data))(jnp.asarray(thetas)))
    bad = int(np.sum(~np.isfinite(values)))
    if bad > SCALED_CHECK_SHARE * SCALED_CHECK_DRAWS:
        raise InputError("covariance", f"scaled: the scaled covariance is not positive definite over this posterior "
                                       f"(at {bad} of {SCALED_CHECK_DRAWS} draws of its Laplace approximation), as "
                                       "where many measured tables overlap; use covariance plug-in")


def tables_np(layout: Layout, theta) -> list[np.ndarray]:
    """The clique tables of one theta (numpy)."""
    from scipy.special import log_softmax, logsumexp

    return layout.tables(np, layout.log_conditionals(np, np.asarray(theta, float), log_softmax, logsumexp))
