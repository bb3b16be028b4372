"""Prior means and sds in the posterior's variables, for the prior-equals-posterior check.

``dpposterior.checks.prior_warnings`` flags a posterior component whose mean is within 0.1 prior
sd of the prior mean and whose sd is within 10% of the prior sd: the release did not inform it.
Each family states its prior moments with ``Family.hooks["prior_moments"](prior, release)`` ->
``{variable: (mean, sd)}`` (numbers, or arrays of the variable's event shape; NaN where a moment
does not exist).  Closed forms are the standard conjugate ones (e.g. Gelman et al., *Bayesian
Data Analysis*, 3rd ed., App. A): Beta, Gamma, Dirichlet marginals and the normal-inverse-gamma's
Student-t / inverse-gamma marginals.  The simulator families (no closed form in their output
variables) use :func:`monte_carlo` on the prior of their ``sbi_model``.
"""

from __future__ import annotations

import math

import numpy as np

#: prior draws behind a Monte Carlo moment (the sd's relative error is about 1/sqrt(2 x 4000) = 1.1%,
#: well inside the check's 10%)
MONTE_CARLO_DRAWS = 4000


def beta_p(prior, release=None) -> dict:
    a, b = float(prior.alpha), float(prior.beta)
    return {"p": (a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0))))}


def gamma_rate(prior, release=None) -> dict:
    return {"rate": (prior.shape / prior.rate, math.sqrt(prior.shape) / prior.rate)}


def _dirichlet(alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Marginal means and sds of a Dirichlet along the last axis (NaN entries: padding, kept NaN)."""
    a0 = np.nansum(alpha, axis=-1, keepdims=True)
    mean = alpha / a0
    return mean, np.sqrt(alpha * (a0 - alpha) / (a0 ** 2 * (a0 + 1.0)))


def dirichlet_p(prior, release) -> dict:
    return {"p": _dirichlet(prior.vector(len(release.statistics.counts.value)))}


def naive_bayes(prior, release) -> dict:
    if not prior.resolved:
        prior = prior.resolve(release.classes, list(release.levels))
    return {"class_prob": _dirichlet(np.asarray(prior.class_alpha, float)),
            "feature_prob": _dirichlet(np.asarray(prior.feature_alpha, float))}


def gaussian(prior, release=None) -> dict:
    """NIG(mu0, sigma0_sq, kappa0, nu0): sigma^2 ~ Inv-Gamma(nu0/2, nu0 sigma0_sq/2) and
    mu ~ t_nu0(mu0, sigma0_sq/kappa0); a flat prior has no moments."""
    if prior.kind != "normal-inverse-gamma":
        return {}
    nu, s0 = float(prior.nu0), float(prior.sigma0_sq)
    a, b = nu / 2.0, nu * s0 / 2.0
    s2_mean = b / (a - 1.0) if a > 1 else math.nan
    s2_sd = s2_mean / math.sqrt(a - 2.0) if a > 2 else math.nan
    mu_sd = math.sqrt(s0 / prior.kappa0 * nu / (nu - 2.0)) if nu > 2 else math.nan
    return {"mu": (float(prior.mu0), mu_sd), "sigma2": (s2_mean, s2_sd)}


def small_area(prior, release) -> dict:
    """alpha_c ~ N(alpha_mean, alpha_sd^2) per cell; tau ~ half-N(0, tau_scale^2): mean s sqrt(2/pi), sd
    s sqrt(1 - 2/pi)."""
    C = len(release.cells)
    tau = (prior.tau_scale * math.sqrt(2.0 / math.pi), prior.tau_scale * math.sqrt(1.0 - 2.0 / math.pi))
    return {"alpha": (np.full(C, prior.alpha_mean), np.full(C, prior.alpha_sd)), "tau": tau}


def monte_carlo(sbi_model):
    """The hook of a simulator family: moments of ``MONTE_CARLO_DRAWS`` prior draws (fixed seed)
    mapped to the posterior's variables by the simulator model's ``outputs``."""

    def moments(prior, release) -> dict:
        model = sbi_model(release, prior)
        theta = np.asarray(model.prior.sample(MONTE_CARLO_DRAWS, np.random.default_rng(20240601)), float)
        if model.outputs is not None:
            variables = model.outputs(theta)[0]
        else:
            variables = {name: theta[:, i] for i, name in enumerate(model.parameter_names)}
        return draw_moments(variables)

    return moments


def draw_moments(variables: dict) -> dict:
    """``{variable: draws (N, *event)}`` -> ``{variable: (mean, sd)}`` over the draws."""
    out = {}
    with np.errstate(all="ignore"):
        for name, draws in variables.items():
            x = np.asarray(draws, float)
            out[name] = (x.mean(axis=0), x.std(axis=0))
    return out
