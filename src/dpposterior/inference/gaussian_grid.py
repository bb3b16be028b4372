r"""Brute-force grid posterior and the naive posterior for the bounded Gaussian (Kazan & Reiter).

Method ``grid`` -- the oracle the Gibbs sampler is tested against
-----------------------------------------------------------------
On the [0, 1] scale (Theorem 1) the posterior of (mu, s2) is

    p(mu, s2 | ystar, s2star) ∝ p(mu, s2) ∫∫ N(Ybar; mu, s2/n) Gam(S^2; (n-1)/2, (n-1)/(2 s2))
                                          Lap(ystar; Ybar, b1) Lap(s2star; S^2, b2) [1_feasible] dYbar dS^2

(App. C, eq. 32 with omega^2 integrated out), restricted to s2 < (n-1)/(2 n eps2) as the
sampler is (eq. 49), and, constrained, to s2 <= mu(1-mu) (Theorem 2) and
S^2 <= n/(n-1) Ybar(1-Ybar) (Theorem 3).

* Unconstrained the double integral factorises into two closed forms: the normal-Laplace
  convolution L1(mu, s2) (two ``log_ndtr`` terms) and the gamma-Laplace convolution G(s2)
  (the TGM normaliser, Theorem 7, two incomplete gamma functions).
* Constrained, the S^2 integral up to the cap c(Ybar) is still closed form, G(s2, c(Ybar)),
  and the Ybar integral is done by quadrature over cells of [0, 1] (split at ystar): the
  normal-times-Laplace factor is integrated exactly over each cell (truncated-normal
  masses of the two Laplace pieces) and G is taken at the cell midpoint.

The density is evaluated on a grid of (mu, log s2) (cell midpoints, Jacobian s2), first a
coarse grid over the whole admissible region to find the mass, then a fine grid on the
box that holds it.  Draws pick cells by mass and jitter uniformly inside the cell.  The
method refuses (``RefusedError``) when the mass is not resolved: non-negligible density
on an edge of the box that is not a boundary of the parameter space, or a single cell
holding more than 5% of the mass.

Method ``naive`` -- the noise-ignoring baseline
-----------------------------------------------
The conjugate posterior that plugs the released Ybar*, S2* in as if they were the exact
statistics (NIG: the textbook update; flat: s2 ~ IG((n-3)/2, (n-1)S^2/2), mu | s2 ~
N(Ybar, s2/n)).  A released variance <= 0 is clipped to 1e-6 (b-a)^2 and the posterior
says so in its attrs.  Constrained, draws outside the feasible region are rejected (when
none is feasible the unconstrained baseline is returned and its attrs say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import special

from ..errors import RefusedError
from ..options import EngineOptions, constrained_option, option
from ..posterior import Posterior
from .gaussian_gibbs import (
    Problem,
    log_mean_marginal,
    log_prior,
    log_s2_marginal,
    normal_laplace_pieces,
    predictive,
    problem_from_release,
    s2_cap,
)

DEFAULT_GRID = 240
_DROP = 30.0      # log-density below max - _DROP counts as no mass
_EDGE = 16.0      # an open edge with density above max - _EDGE means the box misses mass


def _cell_masses(edges, mean, sd):
    """Normal masses of consecutive cells: (len(mean), len(edges) - 1), accurate in both tails.

    Left of the mean the lower CDF is differenced, right of it the upper one (no cancellation).
    """
    z = (edges[None, :] - mean[:, None]) / sd[:, None]
    lower = special.ndtr(z)
    upper = special.ndtr(-z)
    right = (z[:, :-1] + z[:, 1:]) > 0
    return np.where(right, upper[:, :-1] - upper[:, 1:], lower[:, 1:] - lower[:, :-1])


def log_density_grid(prob: Problem, mu, eta, ybar_cells: int = 600):
    """log posterior (up to a constant) of (mu, eta = log s2) on the outer grid mu x eta.

    Returns an array (len(eta), len(mu)); -inf outside the admissible region.
    """
    mu = np.asarray(mu, float)
    eta = np.asarray(eta, float)
    s2 = np.exp(eta)[:, None]
    mu2 = mu[None, :]
    ok = s2 < prob.sigma2_max
    if prob.constrained:
        ok = ok & (mu2 > 0) & (mu2 < 1) & (s2 <= mu2 * (1 - mu2))
    ok = np.broadcast_to(ok, (eta.size, mu.size))
    with np.errstate(all="ignore"):
        base = log_prior(mu2, s2, prob) + eta[:, None]
        if not prob.constrained:
            value = base + log_mean_marginal(mu2, s2, prob) + log_s2_marginal(s2, prob, np.inf)
        else:
            value = base + _log_constrained_likelihood(prob, mu, np.exp(eta), ybar_cells)
    return np.where(ok & np.isfinite(value), value, -np.inf)


def _log_constrained_likelihood(prob: Problem, mu, s2_values, ybar_cells):
    """log ∫_0^1 N(Ybar; mu, s2/n) Lap(ystar; Ybar, b1) G(s2, c(Ybar)) dYbar  on mu x s2."""
    ystar = float(prob.ystar)
    edges = np.linspace(0.0, 1.0, ybar_cells + 1)
    if 0.0 < ystar < 1.0:
        edges = np.unique(np.concatenate([edges, [ystar]]))
    lo, hi = edges[:-1], edges[1:]
    mid = 0.5 * (lo + hi)
    left = hi <= ystar  # cell lies left of ystar (Laplace piece exp(-(ystar - Ybar)/b1))
    n_left = int(left.sum())
    edges_left = edges[: n_left + 1]
    edges_right = edges[n_left:]
    cap = s2_cap(mid, float(prob.n))
    out = np.empty((s2_values.size, mu.size))
    for i, s2 in enumerate(s2_values):
        log_g = log_s2_marginal(np.full(mid.shape, s2), prob, cap)  # (cells,)
        g_max = np.max(log_g)
        g = np.exp(log_g - g_max)
        _, _, ml, mr, sd = normal_laplace_pieces(mu, np.full(mu.shape, s2), prob)  # (mu,)
        # N(x; mu, v) exp(-|ystar - x|/b1) = exp(-+(ystar - mu)/b1 + v/(2 b1^2)) N(x; mu +- v/b1, v)
        common = s2 / prob.n / (2.0 * prob.b1**2)
        lwl = -(prob.ystar - mu) / prob.b1 + common
        lwr = (prob.ystar - mu) / prob.b1 + common
        # sum over cells of (normal mass of the cell) * G at its midpoint, for each Laplace piece
        with np.errstate(divide="ignore"):
            sl = (np.log(_cell_masses(edges_left, ml, sd) @ g[:n_left]) if n_left
                  else np.full(mu.shape, -np.inf))
            sr = (np.log(_cell_masses(edges_right, mr, sd) @ g[n_left:]) if n_left < mid.size
                  else np.full(mu.shape, -np.inf))
        out[i] = np.logaddexp(lwl + sl, lwr + sr) - np.log(2.0 * prob.b1) + g_max
    return out


def _box(logp, mu, eta):
    """Index range of the cells holding mass (with one cell of margin)."""
    keep = logp > logp.max() - _DROP
    rows = np.flatnonzero(keep.any(axis=1))
    cols = np.flatnonzero(keep.any(axis=0))
    r0, r1 = max(rows[0] - 1, 0), min(rows[-1] + 1, eta.size - 1)
    c0, c1 = max(cols[0] - 1, 0), min(cols[-1] + 1, mu.size - 1)
    return r0, r1, c0, c1


def grid_posterior(prob: Problem, size: int = DEFAULT_GRID):
    """(mu_mid, eta_mid, log density, mu cell width, eta cell width) of the fine grid."""
    if prob.constrained:
        mu_lo, mu_hi = 0.0, 1.0
        eta_hi = np.log(min(0.25, float(prob.sigma2_max)))
    else:
        eta_hi = np.log(float(prob.sigma2_max))
        spread = 60.0 * float(prob.b1) + 8.0 * np.sqrt(float(prob.sigma2_max) / float(prob.n))
        mu_lo, mu_hi = float(prob.ystar) - spread, float(prob.ystar) + spread
    eta_lo = eta_hi - 40.0
    coarse = 160 if not prob.constrained else 100
    cells = 300 if not prob.constrained else 200
    for _ in range(3):  # zoom in until the box is stable
        mu_e = np.linspace(mu_lo, mu_hi, coarse + 1)
        eta_e = np.linspace(eta_lo, eta_hi, coarse + 1)
        mu_m, eta_m = 0.5 * (mu_e[1:] + mu_e[:-1]), 0.5 * (eta_e[1:] + eta_e[:-1])
        logp = log_density_grid(prob, mu_m, eta_m, cells)
        if not np.isfinite(logp.max()):
            raise RefusedError("method", "grid: the posterior has no mass on the admissible region")
        r0, r1, c0, c1 = _box(logp, mu_m, eta_m)
        mu_lo, mu_hi, eta_lo, eta_hi = mu_e[c0], mu_e[c1 + 1], eta_e[r0], eta_e[r1 + 1]
    mu_e = np.linspace(mu_lo, mu_hi, size + 1)
    eta_e = np.linspace(eta_lo, eta_hi, size + 1)
    mu_m, eta_m = 0.5 * (mu_e[1:] + mu_e[:-1]), 0.5 * (eta_e[1:] + eta_e[:-1])
    logp = log_density_grid(prob, mu_m, eta_m, 2 * cells if prob.constrained else cells)
    top = logp.max()
    # edges that are not boundaries of the parameter space must carry no mass
    sigma_edge = eta_hi >= np.log(float(prob.sigma2_max)) - 1e-12 or (prob.constrained and eta_hi >= np.log(0.25) - 1e-12)
    open_edges = [logp[0, :]]  # smallest s2
    if not sigma_edge:
        open_edges.append(logp[-1, :])
    if not prob.constrained or mu_lo > 0:
        open_edges.append(logp[:, 0])
    if not prob.constrained or mu_hi < 1:
        open_edges.append(logp[:, -1])
    if max(np.max(e) for e in open_edges) > top - _EDGE:
        raise RefusedError("method", "grid: the posterior mass reaches the edge of the grid; use method 'gibbs'")
    weights = np.exp(logp - top)
    weights /= weights.sum()
    if weights.max() > 0.05:
        raise RefusedError("method", "grid: the posterior is too concentrated for the grid; use method 'gibbs'")
    return mu_m, eta_m, weights, mu_e[1] - mu_e[0], eta_e[1] - eta_e[0]


def grid_draws(prob: Problem, ndraws: int, rng, size: int = DEFAULT_GRID):
    """Draws of (mu, s2) on [0, 1] from the grid posterior."""
    mu_m, eta_m, weights, dmu, deta = grid_posterior(prob, size)
    flat_idx = rng.choice(weights.size, size=ndraws, p=weights.ravel())
    r, c = np.unravel_index(flat_idx, weights.shape)
    mu = mu_m[c] + dmu * (rng.random(ndraws) - 0.5)
    s2 = np.exp(eta_m[r] + deta * (rng.random(ndraws) - 0.5))
    if prob.constrained:  # a jitter that leaves a boundary cell's feasible part goes back to its midpoint
        bad = ~((mu > 0) & (mu < 1) & (s2 <= mu * (1 - mu)))
        mu[bad] = mu_m[c[bad]]
        s2[bad] = np.exp(eta_m[r[bad]])
    return mu, s2


@dataclass(frozen=True)
class NaiveOptions(EngineOptions):
    """Options of engine ``naive`` (gaussian): draws, chains, seed (independent draws); ``constrained``."""

    engine: ClassVar[str] = "naive"

    constrained: bool = constrained_option("restrict (mu, sigma2) to what data in the release's bounds allow (Kazan & Reiter Theorem 2)")


@dataclass(frozen=True)
class GridOptions(NaiveOptions):
    """Options of engine ``grid`` (gaussian): draws, chains, seed (independent draws); ``constrained``;
    ``grid_size``, the cells per axis of the (mu, log sigma2) grid."""

    engine: ClassVar[str] = "grid"

    grid_size: int = option(DEFAULT_GRID, "int", "cells per axis of the (mu, log sigma2) grid", low=20, high=2000)


#: bytes per cell of the fine grid at its peak: log density, its pieces and the weights (6 float64) -- measured
#: 48 (2000 x 2000 cells)
GRID_CELL_BYTES = 48.0
#: bytes per draw of ``grid``: the picked cells, their rows and columns, jitters, mu, sigma2, y_new and their
#: data-scale copies -- measured 56 (2e6 draws)
GRID_DRAW_BYTES = 56.0
#: bytes per draw of ``naive``: each round's 2 x draws proposals (gamma, sigma2, mu), the accepted and their
#: concatenation, y_new -- measured 64 (2e6 draws)
NAIVE_DRAW_BYTES = 64.0


def check_grid_memory(size: int, chains: int, draws: int) -> None:
    """Refuse, before the grid is evaluated, a grid or draws that would not fit in memory."""
    from ..memory import check_draws_fit

    check_draws_fit("draws", f"grid: {size} x {size} cells and {draws} draws x {chains} chains", draws=draws,
                    chains=chains, per_draw=GRID_DRAW_BYTES, fixed=GRID_CELL_BYTES * size * size,
                    other="a smaller grid_size, or fewer --chains")


def grid(model, options) -> Posterior:
    """Engine ``grid``: i.i.d. draws from the brute-force grid posterior (chains x draws).  Reads what ``gibbs``
    reads (the model's release, parsed prior and data scale); names its draws through the model."""
    release, prior = model.release, model.prior.spec
    check_grid_memory(options.grid_size, options.chains, options.draws)
    size = options.grid_size
    prob = problem_from_release(release, prior, options.constrained)
    rng_grid, rng_pred = (np.random.default_rng(s) for s in np.random.SeedSequence(options.seed).spawn(2))
    total = options.chains * options.draws
    mu, s2 = grid_draws(prob, total, rng_grid, size)
    mu = mu.reshape(options.chains, options.draws)
    s2 = s2.reshape(options.chains, options.draws)
    y_new = predictive(mu, s2, options.constrained, rng_pred)
    scale = model.latent.state
    return model.pack({"mu": scale.to_data(mu), "sigma2": scale.variance_to_data(s2)}, "grid", iid=True,
                      posterior_predictive={"y_new": scale.to_data(y_new)},
                      attrs={"grid_size": size, "paper": "Kazan & Reiter, App. C (eq. 32)"})


# ---------------------------------------------------------------------------------------
# naive
# ---------------------------------------------------------------------------------------
def naive_draws(n, ybar, s2, prior, ndraws, rng, constrained: bool):
    """Conjugate posterior draws on [0, 1] treating (ybar, s2) as the exact statistics.

    Constrained, infeasible draws are rejected; returns None when (almost) none is feasible.
    """
    out_mu = np.empty(0)
    out_s2 = np.empty(0)
    for attempt in range(200):
        if attempt >= 5 and out_mu.size < 1e-3 * attempt * 2 * ndraws:
            return None  # acceptance below 1e-3: (almost) no feasible mass
        m = 2 * ndraws
        if prior.kind == "flat":
            sigma2 = (n - 1) * s2 / 2.0 / rng.gamma((n - 3) / 2.0, 1.0, m)
            mu = rng.normal(ybar, np.sqrt(sigma2 / n))
        else:
            kn = prior.kappa0 + n
            mun = (prior.kappa0 * prior.mu0 + n * ybar) / kn
            shape = (prior.nu0 + n) / 2.0
            rate = (prior.nu0 * prior.sigma0_sq + (n - 1) * s2 + prior.kappa0 * n / kn * (ybar - prior.mu0) ** 2) / 2.0
            sigma2 = rate / rng.gamma(shape, 1.0, m)
            mu = rng.normal(mun, np.sqrt(sigma2 / kn))
        if constrained:
            ok = (mu > 0) & (mu < 1) & (sigma2 <= mu * (1 - mu))
            mu, sigma2 = mu[ok], sigma2[ok]
        out_mu = np.concatenate([out_mu, mu])
        out_s2 = np.concatenate([out_s2, sigma2])
        if out_mu.size >= ndraws:
            return out_mu[:ndraws], out_s2[:ndraws]
    return None


def naive(model, options) -> Posterior:
    """Engine ``naive``: the posterior that ignores the privacy noise (baseline only).  Reads the model's release
    (its noisy mean and variance taken as exact), parsed prior and data scale; names its draws through the model."""
    from ..memory import check_draws_fit

    release, prior = model.release, model.prior.spec
    check_draws_fit("draws", f"naive: {options.draws} draws x {options.chains} chains", draws=options.draws,
                    chains=options.chains, per_draw=NAIVE_DRAW_BYTES)
    lo, width = release.bounds[0], release.width
    sp = prior.scaled(lo, width)
    ybar = (release.statistics.mean.value - lo) / width
    s2 = release.statistics.variance.value / width**2
    clipped = s2 <= 1e-6
    s2 = max(s2, 1e-6)
    rng_post, rng_pred = (np.random.default_rng(s) for s in np.random.SeedSequence(options.seed).spawn(2))
    total = options.chains * options.draws
    drawn = naive_draws(release.n, ybar, s2, sp, total, rng_post, options.constrained)
    attrs = {"note": "ignores the privacy noise; for comparison only"}
    if drawn is None:  # the noisy statistics sit outside the feasible region: show the unconstrained baseline
        attrs["constraint_dropped"] = "the naive posterior has no mass on the feasible region; shown unconstrained"
        drawn = naive_draws(release.n, ybar, s2, sp, total, rng_post, False)
    mu, sigma2 = drawn
    mu = mu.reshape(options.chains, options.draws)
    sigma2 = sigma2.reshape(options.chains, options.draws)
    y_new = predictive(mu, sigma2, options.constrained, rng_pred)
    if clipped:
        attrs["variance_clipped"] = f"released variance {release.statistics.variance.value:g} <= 0 was clipped to 1e-6 (b-a)^2"
    scale = model.latent.state
    return model.pack({"mu": scale.to_data(mu), "sigma2": scale.variance_to_data(sigma2)}, "naive", iid=True,
                      posterior_predictive={"y_new": scale.to_data(y_new)}, attrs=attrs)
