"""Baselines of Bernstein & Sheldon (NeurIPS 2018), Sec. 4 "Methods", and the calibration batch hook.

* ``naive``: conjugate update with the noisy statistics as if they were exact
  (Foulds et al. 2016; Zhang et al. 2016), clipped to the valid range.  For the
  truncated families the paper lets the naive method "cheat" with the noisy
  *untruncated* sum (same noise magnitude, not private): inside simulations we do the
  same when the confidential ``noisy_full_sum`` is passed; on a real release the naive
  method treats the noisy truncated sum as the full sum (ignoring noise and truncation).
  The posterior's attrs say which.
* ``non-private``: conjugate update with the confidential statistics (simulations only).
* ``ops``: one-posterior sampling (Wang et al. 2015; Foulds et al. 2016) for the
  binomial: 100 samples, each from the exponential mechanism with utility
  log p(x | theta) on theta in [a0, 1 - a0] (a0 = 0.1) at eps/100, i.e. from the prior
  times the likelihood tempered by tau = (eps/100) / (2 Delta_u), Delta_u =
  log((1 - a0)/a0) the sensitivity of the Bernoulli log-likelihood on that interval.
  It needs the confidential data (it *is* a release mechanism): simulations only.

``run_batch`` runs any of these (and Gibbs-SS) for a list of simulated
releases at once, with each engine's own options and defaults; ``dpposterior calibrate`` uses it
through the family's ``EngineSpec(batch=...)``.

What differs between the families (the conjugate update, the statistic's range, the confidential
statistic) is asked of the release's model, ``release.expfam`` (``families._expfam.ExpFamModel``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import InputError, RefusedError
from ..options import EngineOptions, confidential_option
from ..families._expfam import RecordLaw, require_confidential
from .gibbs_ss import pack_draws, release_arrays, sample_batch

OPS_SAMPLES = 100
OPS_A0 = 0.1


# --------------------------------------------------------------------------- vectorised draws
def ops_draws(s, n, prior, epsilon, rng, samples: int = OPS_SAMPLES, a0: float = OPS_A0) -> np.ndarray:
    """OPS for the binomial: (T, samples) draws, each at epsilon/samples."""
    from scipy import stats  # only OPS needs it (docs/architecture.md, "Imports stay light")

    s = np.asarray(s, float)
    n = np.broadcast_to(np.asarray(n, float), s.shape)
    eps = np.broadcast_to(np.asarray(epsilon, float), s.shape)
    delta_u = math.log((1.0 - a0) / a0)
    tau = (eps / samples) / (2.0 * delta_u)
    a = (prior.alpha + tau * s)[:, None]
    b = (prior.beta + tau * (n - s))[:, None]
    lo, hi = stats.beta.cdf(a0, a, b), stats.beta.cdf(1.0 - a0, a, b)
    u = lo + (hi - lo) * rng.random((s.shape[0], samples))
    return np.clip(stats.beta.ppf(u, a, b), a0, 1.0 - a0)


# --------------------------------------------------------------------------- engines
def _attrs(prior, **extra):
    return {"prior": str(prior.to_dict()), **extra}


@dataclass(frozen=True)
class NonPrivateOptions(EngineOptions):
    """Options of engine ``non-private`` (simulations only): draws, chains, seed (independent draws) and
    ``confidential``, the simulated release's confidential statistics."""

    engine: ClassVar[str] = "non-private"

    confidential: object = confidential_option()


@dataclass(frozen=True)
class NaiveOptions(NonPrivateOptions):
    """Options of engine ``naive``: draws, chains, seed (independent draws); in simulations, ``confidential``
    (poisson: the noisy untruncated sum, Bernstein & Sheldon's comparison)."""

    engine: ClassVar[str] = "naive"


@dataclass(frozen=True)
class OpsOptions(NonPrivateOptions):
    """Options of engine ``ops`` (binomial, simulations only): seed; ``confidential``.  OPS returns its fixed
    ``OPS_SAMPLES`` samples (one chain), so draws and chains are not options."""

    engine: ClassVar[str] = "ops"
    takes_draws: ClassVar[bool] = False


#: bytes per drawn value of the conjugate baselines: the gamma draws behind each value and the normalised draw
#: (measured 15-17)
VALUE_BYTES = 16.0


def _size(options, release=None, method: str = ""):
    """(chains, draws); with ``release``, first refuses draws of the release's parameter (its values: 1, or the
    categories) that would not fit in memory."""
    if release is not None:
        from ..memory import check_draws_fit

        values = int(np.size(release.released))
        check_draws_fit("draws", f"{method}: {options.draws} draws x {options.chains} chains of {values:,} values "
                        "each", draws=options.draws, chains=options.chains, per_draw=VALUE_BYTES * values)
    return (options.chains, options.draws)


def naive(model, options):
    """Engine ``naive``: conjugate update with the (clipped) noisy statistics, ignoring the noise.  Reads the model's
    release (its noisy statistic) and parsed prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    expfam = release.expfam
    arrays = release_arrays(release)
    rng = options.rng()
    conf = options.confidential
    note = "noisy statistics treated as exact (clipped to the valid range)"
    if expfam.truncated:
        if isinstance(conf, dict) and "noisy_full_sum" in conf:
            s = np.array([max(float(conf["noisy_full_sum"]), 0.0)])
            note = ("CHEATING as in Bernstein & Sheldon Sec. 4: uses the noisy untruncated sum from the "
                    "simulation (same noise magnitude; not private)")
        else:
            s = expfam.clip_statistic(arrays["y"], arrays["n"], arrays["bounds"])
            note = "noisy truncated sum treated as the exact full sum (ignores noise and truncation)"
    else:
        y = arrays["y"][None, ...] if expfam.vector else arrays["y"]
        s = expfam.clip_statistic(y, arrays["n"])
    theta = expfam.conjugate_draws(s, arrays["n"], prior, _size(options, release, "naive"), rng)[0]
    return pack_draws(model, "naive", theta, _attrs(prior, naive_statistic=note), iid=True)


def _confidential_statistic(release, conf) -> np.ndarray:
    key = release.expfam.statistic
    if key not in conf:
        raise InputError("confidential", f"missing the confidential statistic {key!r}")
    value = np.asarray(conf[key], float)
    return value[None, ...] if value.ndim == 1 else value.reshape(1)


def non_private(model, options):
    """Engine ``non-private``: conjugate posterior given the confidential (full) statistics (reads the model's
    release for n and the statistic's name, and its parsed prior)."""
    release, prior = model.release, model.prior.spec
    conf = require_confidential(options, "non-private")
    s = _confidential_statistic(release, conf)
    theta = release.expfam.conjugate_draws(s, float(release.n), prior, _size(options, release, "non-private"),
                                           options.rng())[0]
    return pack_draws(model, "non-private", theta, _attrs(prior, note="uses confidential statistics"),
                      iid=True)


def ops(model, options):
    """Engine ``ops`` (binomial): 100 one-posterior samples at epsilon/100 each (reads the model's release for its
    epsilon and n, and its parsed prior)."""
    release, prior = model.release, model.prior.spec
    if release.expfam.record_law is not RecordLaw.BERNOULLI:  # its utility is the Bernoulli log-likelihood
        raise RefusedError("method", "ops is implemented for Bernoulli records (the binomial family) only")
    eps = release.noisy_record.epsilon
    if eps is None:  # (a zCDP release states rho, not epsilon: OPS would draw at epsilon NaN)
        raise RefusedError("method", "ops spends the release's epsilon on its own samples, and this release states "
                           f"none (mechanism {release.noisy_record.mechanism!r}); give ops an epsilon-DP release")
    conf = require_confidential(options, "ops")
    s = _confidential_statistic(release, conf)
    theta = ops_draws(s, float(release.n), prior, eps, options.rng())[0]
    return pack_draws(model, "ops", theta[None, :],
                      _attrs(prior, note=f"{OPS_SAMPLES} OPS samples at epsilon/{OPS_SAMPLES}, theta in "
                                         f"[{OPS_A0}, {1 - OPS_A0}]"), iid=True)


# --------------------------------------------------------------------------- calibration hook
def run_batch(sims, prior, method: str, opts):
    """Batched calibration path (``EngineSpec.batch``) of Gibbs-SS and the baselines: draws of ``method`` for
    every simulated release, array (T, chains x draws, D), or None if not handled here.

    ``sims``: list of :class:`~dpposterior.families.SimulatedRelease` of one family; ``opts``: the method's typed
    options, built by the study as ``infer`` builds them (so the study checks the sampler ``infer`` runs).
    """
    release = sims[0].release
    model = release.expfam
    rng = np.random.default_rng(opts.seed)
    T = len(sims)
    from ..memory import check_batch_fits

    # theta and (gibbs-ss) the imputed statistic, or the conjugate draws, per drawn value, and the returned array
    check_batch_fits(method, T, getattr(opts, "chains", 1) or 1, getattr(opts, "draws", 1) or 1,
                     (VALUE_BYTES + 8.0) * int(np.size(release.released)))
    n = np.array([float(sim.release.n) for sim in sims])
    if model.vector:
        y = np.stack([sim.release.released for sim in sims])
    else:
        y = np.array([sim.release.released[0] for sim in sims])
    if method == "gibbs-ss":
        scale = np.array([sim.release.laplace_scale for sim in sims])
        bounds = np.array([sim.release.bounds for sim in sims]) if model.truncated else None
        out = sample_batch(model, y, n, scale, prior, bounds=bounds, chains=opts.chains, warmup=opts.warmup,
                           draws=opts.draws, seed=opts.seed)
        theta = out["theta"]  # (T, chains, draws[, K])
        theta = theta.reshape((T, -1) + theta.shape[3:])
    elif method == "naive":
        if model.truncated:
            s = np.array([max(float(sim.confidential["noisy_full_sum"]), 0.0) for sim in sims])
        else:
            s = model.clip_statistic(y, n)
        theta = model.conjugate_draws(s, n, prior, (opts.chains * opts.draws,), rng)
    elif method == "non-private":
        s = np.array([np.asarray(sim.confidential[model.statistic], float) for sim in sims])
        theta = model.conjugate_draws(s, n, prior, (opts.chains * opts.draws,), rng)
    elif method == "ops" and model.record_law is RecordLaw.BERNOULLI:
        s = np.array([float(sim.confidential[model.statistic]) for sim in sims])
        eps = np.array([sim.release.noisy_record.epsilon for sim in sims])
        theta = ops_draws(s, n, prior, eps, rng)
    else:
        return None
    return theta.reshape(T, theta.shape[1], -1)
