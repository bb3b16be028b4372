"""Checks after computing: a posterior is either trustworthy, flagged, or refused.

``dpposterior.infer`` calls :func:`check_posterior` on every engine's result before it is
returned (and so before the CLI writes anything):

* **non-finite draws are refused** -- a NaN or infinite draw means the engine's arithmetic
  failed on this release; the command fails with the variable and the count, and writes
  nothing (exit 2);
* **MCMC diagnostics become warnings** -- split R-hat above :data:`RHAT_MAX` (1.01) or bulk ESS
  below :data:`ESS_MIN` (400, or 100 per chain with fewer chains) for any scalar component (every
  component of every variable, computed for all at once by :func:`dpposterior.convergence.diagnose`),
  following Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021, Bayesian Analysis 16(2),
  Sec. 4: "R-hat < 1.01 and ESS > 400");
* **a flow that did not train** (SPPE, SPLE) -- a round with no finite validation loss, or one
  that stopped in its first epoch;
* **SMC-ABC that never left the prior** -- a final tolerance of infinity means only the first
  generation ran (every prior draw accepted): the "posterior" is the prior;
* **a parameter the release does not inform** -- every family states its prior moments
  (``Family.hooks["prior_moments"]``, :mod:`dpposterior.families.prior_moments`) and a user
  Model's are estimated from its prior; a posterior component whose mean is within 0.1 prior sd
  of the prior mean and whose sd is within 10% of the prior sd is flagged (e.g. the regression
  noise variance sigma2 of a release without y'y, or a model whose likelihood ignores theta).

Warnings go to ``Posterior.warnings``; the CLI prints each as ``warning: ...`` and the
netCDF file carries them in the ``warnings`` attribute (``"none"`` when there are none).
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import numpy as np

from .convergence import diagnose
from .errors import RefusedError

#: split R-hat threshold (Vehtari et al. 2021)
RHAT_MAX = 1.01
#: bulk ESS threshold for the whole posterior (Vehtari et al. 2021: 400, i.e. 100 per chain for 4 chains)
ESS_MIN = 400
#: a flow round that stopped before this many epochs did not train (early stopping waits 20 epochs)
MIN_EPOCHS = 2
#: prior-dominance thresholds: |posterior mean - prior mean| < 0.1 prior sd and sd ratio within 10%
PRIOR_MEAN_TOL = 0.1
PRIOR_SD_TOL = 0.1


class NonFiniteDraws(RefusedError):
    """An engine returned NaN or infinite draws (a study records the trial as failed; a command refuses)."""


def is_padding(arr) -> bool:
    """Whether the non-finite values of a (chain, draw, *event) array are padding of a ragged variable:
    NaN only, in the same cells of every draw, covering part of the event shape."""
    arr = np.asarray(arr)
    bad = ~np.isfinite(arr)
    if arr.ndim <= 2 or np.isinf(arr).any():
        return False
    pattern = bad.reshape(-1, *arr.shape[2:])
    return bool(np.all(pattern == pattern[0]) and not pattern[0].all())


def check_finite(post) -> None:
    """Refuse a posterior with any NaN or infinite draw, naming the variable.

    Structural padding is not a failure: a ragged variable (naive Bayes ``feature_prob`` with features
    of different level counts) is padded with NaN in the same cells of every draw.  Only NaN whose
    pattern is identical across all chains and draws, covering part of the event shape, counts as
    padding; an infinite value, NaN in some draws only, or an all-NaN variable is refused.
    """
    for name, arr in post.posterior.items():
        arr = np.asarray(arr)
        if arr.dtype.kind not in "fc":
            continue
        bad = ~np.isfinite(arr)
        if bad.any() and is_padding(arr):
            continue  # the same cells in every draw: padding of a ragged variable
        if bad.any():
            raise NonFiniteDraws(f"posterior.{name}",
                               f"{int(bad.sum())} of {arr.size} draws are not finite (NaN or infinite): the "
                               f"{post.method} engine failed on this release; nothing was written")


#: False while a comparison posterior is computed (api.naive_companion): its convergence warnings are never
#: shown, so they are not computed (at 50,000 areas, seconds); non-finite draws are still refused
_MCMC_CHECKS = contextvars.ContextVar("dpposterior_mcmc_checks", default=True)


@contextlib.contextmanager
def without_mcmc_checks():
    token = _MCMC_CHECKS.set(False)
    try:
        yield
    finally:
        _MCMC_CHECKS.reset(token)


def _labeller(post, name: str, event: tuple):
    """``flat index -> label`` of a variable's components as the tables print them: ``name`` for a scalar,
    ``name[coord, ...]`` with the Posterior's coordinate labels (``alpha[18+]``, ``v[X]``), positions where
    a dim has no coords."""
    from .convergence import _component_labels

    if not event or int(np.prod(event)) == 1 and not post.dims.get(name):
        return lambda k: name
    def label(k: int) -> str:
        try:
            return _component_labels(name, post, event, np.asarray([k]))[0]
        except (IndexError, TypeError):  # coords that do not fit the shape: positions
            return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(k, event))}]"

    return label


def mcmc_warnings(post) -> list[str]:
    """R-hat / bulk-ESS warnings for an MCMC posterior (none for iid engines or one-draw chains).

    Every scalar component is diagnosed (vectorised: :func:`dpposterior.convergence.diagnose`, ArviZ's
    numbers to rounding, without ArviZ's import); the warning names the worst one.  A component that is
    constant, or not finite (padding of a ragged variable), has no R-hat or ESS and is skipped."""
    if post.iid or not _MCMC_CHECKS.get():  # independent draws (set by the engine): nothing to converge
        return []
    chains, draws = post.nchains, post.ndraws
    if draws < 4:
        return [f"only {draws} draws per chain: convergence cannot be checked"]
    need = min(ESS_MIN, 100 * chains)
    worst_rhat, worst_ess = (None, 0.0), (None, math.inf)
    which = ("ess_bulk", "rhat") if chains > 1 else ("ess_bulk",)
    for name, arr in post.posterior.items():
        arr = np.asarray(arr)
        if arr.dtype.kind not in "fiub":
            continue
        flat = arr.reshape(chains, draws, -1)
        with np.errstate(invalid="ignore"):
            skip = ~np.isfinite(flat).all(axis=(0, 1)) | (flat.max(axis=(0, 1)) == flat.min(axis=(0, 1)))
        if skip.all():
            continue
        diag = diagnose(flat if not skip.any() else flat[:, :, ~skip], which)
        index = np.flatnonzero(~skip)
        label = _labeller(post, name, arr.shape[2:])
        ess = diag["ess_bulk"]
        if not np.isnan(ess).all():
            j = int(np.nanargmin(ess))
            if ess[j] < worst_ess[1]:
                worst_ess = (label(int(index[j])), float(ess[j]))
        rhat = diag.get("rhat")
        if rhat is not None and not np.isnan(rhat).all():
            j = int(np.nanargmax(rhat))
            if rhat[j] > worst_rhat[1]:
                worst_rhat = (label(int(index[j])), float(rhat[j]))
    out = []
    if worst_rhat[0] is not None and worst_rhat[1] > RHAT_MAX:
        out.append(f"R-hat {worst_rhat[1]:.3f} > {RHAT_MAX} for {worst_rhat[0]}: the chains disagree; run more "
                   "warm-up and draws (--warmup, --draws) before trusting this posterior")
    if worst_ess[0] is not None and worst_ess[1] < need:
        out.append(f"bulk ESS {worst_ess[1]:.0f} < {need} for {worst_ess[0]}: too few effective draws for "
                   "reliable intervals; raise --draws")
    return out


def smc_abc_warnings(post) -> list[str]:
    if post.method != "smc-abc":
        return []
    tol = post.attrs.get("final_tolerance")
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        return []
    if not math.isfinite(tol):
        return ["SMC-ABC ran only its first generation (tolerance infinite, every prior draw accepted): this "
                "posterior IS the prior; raise --simulations well above the number of particles"]
    return []


def flow_warnings(post) -> list[str]:
    """SPPE / SPLE: a round whose flow did not train (no finite validation loss, or stopped in its
    first epochs) leaves a posterior that is the untrained flow's, not the data's.  SPPE's importance
    correction: a PSIS k-hat above its threshold (the weighted estimate has a large Monte Carlo error),
    or ``auto`` falling back to the flow (an effective sample size below ``importance_min_ess``)."""
    rounds = post.extras.get("rounds") if isinstance(post.extras, dict) else None
    if post.method not in ("sppe", "sple", "naive") or not isinstance(rounds, list):
        return []
    out = []
    khat, limit = post.attrs.get("importance_khat"), float(post.attrs.get("importance_khat_threshold", 0.7))
    ess = float(post.attrs.get("importance_ess", float("nan")))
    if post.attrs.get("importance_applied") and khat is not None and float(khat) > limit:
        out.append(f"importance correction: PSIS k-hat {float(khat):.2f} > {limit:.2f} (effective sample size "
                   f"{ess:.0f}): the weighted posterior has a large Monte Carlo error -- raise --rounds or --simulations")
    elif khat is not None and not post.attrs.get("importance_applied"):
        floor = post.attrs.get("importance_min_ess")
        reason = (f"effective sample size {ess:.1f} < {float(floor):.0f}" if floor is not None
                  else f"PSIS k-hat {float(khat):.2f} > {limit:.2f} (effective sample size {ess:.0f})")
        out.append(f"importance correction not applied: {reason}, so these are the last round's flow's draws "
                   "(the paper's SPPE) -- more --rounds or --simulations let the weighted simulations determine "
                   "the posterior")
    for info in rounds:
        if not isinstance(info, dict) or info.get("trained") is False:   # by design: the last round of
            continue                                                   # the importance correction
        val, epochs = info.get("val_loss"), info.get("epochs")
        if val is not None and not math.isfinite(float(val)):
            out.append(f"round {info.get('round', '?')}: the flow did not train (validation loss {val}); "
                       "this posterior is not the data's -- raise --simulations or change the seed")
        elif epochs is not None and int(epochs) < MIN_EPOCHS:
            out.append(f"round {info.get('round', '?')}: the flow trained for only {int(epochs)} epoch(s); "
                       "too few simulations to fit it -- raise --simulations")
    return out


def _prior_moments(post, family, prior_obj, release) -> dict:
    """``{variable: (mean, sd)}`` of the prior in the posterior's variables: a user model's by Monte
    Carlo (:meth:`~dpposterior.Model.prior_moments`), a family's from its ``prior_moments`` hook."""
    model = post.extras.get("user_model") if isinstance(post.extras, dict) else None
    if model is not None and hasattr(model, "prior_moments"):
        return model.prior_moments()
    hook = family.hooks.get("prior_moments") if family is not None else None
    if hook is None or prior_obj is None:
        return {}
    return hook(prior_obj, release) or {}


def prior_warnings(post, family=None, prior_obj=None, release=None) -> list[str]:
    """Flag posterior components indistinguishable from their prior: mean within PRIOR_MEAN_TOL prior sd
    of the prior mean and sd within PRIOR_SD_TOL of the prior sd (one warning, naming the components)."""
    try:
        moments = _prior_moments(post, family, prior_obj, release)
    except Exception:  # noqa: BLE001 - a check that cannot state the prior flags nothing, never fails a run
        return []
    flagged = []
    for name, (m0, s0) in moments.items():
        if name not in post.posterior:
            continue
        x = np.asarray(post.posterior[name], float)
        event = x.shape[2:]
        m0 = np.broadcast_to(np.asarray(m0, float), event)
        s0 = np.broadcast_to(np.asarray(s0, float), event)
        with np.errstate(all="ignore"):
            m, s = x.mean(axis=(0, 1)), x.std(axis=(0, 1))
        for index in np.ndindex(*event):
            pm, ps, mm, ss = m0[index], s0[index], m[index], s[index]
            if not all(math.isfinite(v) for v in (pm, ps, mm, ss)) or ps <= 0:
                continue  # no prior moment, or padding of a ragged variable
            if abs(mm - pm) < PRIOR_MEAN_TOL * ps and abs(ss / ps - 1.0) < PRIOR_SD_TOL:
                flat_index = int(np.ravel_multi_index(index, event)) if event else 0
                label = _labeller(post, name, event)(flat_index)
                flagged.append(f"{label}: the posterior is its prior (mean {mm:.4g} vs prior {pm:.4g}, sd {ss:.4g} "
                               f"vs prior {ps:.4g}): the release does not inform it, so it reflects only the prior")
    if len(flagged) > 4:  # many components (a naive-bayes table): three named, the rest counted
        flagged = flagged[:3] + [f"{len(flagged) - 3} more components: the posterior is their prior likewise"]
    return flagged


def reweighting_warnings(post) -> list[str]:
    """Draws resampled by importance weights (``clt``'s ``covariance = "reweighted"``): a PSIS k-hat above its
    threshold says the weights' estimate, and so the resampled draws, have a large Monte Carlo error."""
    khat = post.attrs.get("reweighting_pareto_k")
    if khat is None:
        return []
    limit = float(post.attrs.get("reweighting_pareto_k_threshold", 0.7))
    if not float(khat) > limit:
        return []
    ess, total = float(post.attrs.get("reweighting_ess", float("nan"))), post.attrs.get("reweighting_draws", "?")
    return [f"covariance reweighted: PSIS k-hat {float(khat):.2f} > {limit:.2f} (effective sample size {ess:.0f} "
            f"of {total} draws): the importance weights that turn the plug-in's draws into the exact covariance's "
            "are not to be trusted -- raise draws, or use covariance exact where the release fits it"]


def check_posterior(post, family=None, prior_obj=None, release=None) -> None:
    """Refuse non-finite draws; append reliability warnings to ``post.warnings``."""
    check_finite(post)
    for w in (mcmc_warnings(post) + smc_abc_warnings(post) + flow_warnings(post) + reweighting_warnings(post)
              + prior_warnings(post, family, prior_obj, release)):
        if w not in post.warnings:
            post.warnings.append(w)
