"""Inference engines, one module per algorithm, and the single entry point :func:`infer`.

``infer(release, prior, method="auto")`` validates the release, asks its family
(``dpposterior.families``) which engine ``method`` names, builds the prior and
calls ``engine(release, prior, options)``.  Engines receive an
:class:`InferenceOptions` and return a :class:`~dpposterior.posterior.Posterior`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError, check_seed


#: the most draws (all chains together) one inference may ask for: 2e7 draws of a 10-dimensional
#: posterior are 1.6 GB of float64, beyond that requests (e.g. --draws 100000000000) exhaust memory
MAX_TOTAL_DRAWS = 20_000_000


@dataclass
class InferenceOptions:
    method: str = "auto"
    draws: int = 5000
    warmup: int = 1000
    chains: int = 4
    seed: int | None = None
    constrained: bool = False
    #: engine-specific options (analysis-file keys, CLI options such as simulations)
    extra: dict[str, Any] = field(default_factory=dict)
    quiet: bool = True
    scheduler: str = "serial"

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    def validate(self) -> "InferenceOptions":
        for name in ("draws", "chains"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(name, f"must be an integer >= 1 (got {value!r})")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, (int, np.integer)) or self.warmup < 0:
            raise InputError("warmup", f"must be an integer >= 0 (got {self.warmup!r})")
        check_seed(self.seed, "seed")
        if not isinstance(self.constrained, bool):
            raise InputError("constrained", "must be true or false")
        if self.draws * self.chains > MAX_TOTAL_DRAWS:
            raise InputError("draws", f"{self.draws} draws x {self.chains} chains is more than {MAX_TOTAL_DRAWS:g} "
                             "draws in all: the posterior would not fit in memory")
        if self.warmup > MAX_TOTAL_DRAWS:
            raise InputError("warmup", f"must be at most {MAX_TOTAL_DRAWS:g} (got {self.warmup})")
        return self


def infer(release, prior=None, method: str = "auto", *, observed=None, constrained: bool | None = None,
          draws: int | None = None, warmup: int | None = None, chains: int | None = None,
          seed: int | None = None, quiet: bool = True, scheduler: str = "serial", **extra):
    """Posterior of the family parameters given a DP release, accounting for the mechanism.

    ``release``: path, dict or loaded release -- or a user :class:`~dpposterior.Model`, with the
    released values in ``observed`` (methods ``auto``, ``da-mcmc``, ``smc-abc``, ``sppe``,
    ``sple``; :mod:`~dpposterior.inference.user_model`).  ``prior``: dict in the analysis
    file's ``[prior]`` form, a family prior object, or None for the family default.
    Remaining keyword arguments are engine options (e.g. ``simulations=1000``).
    Returns a :class:`~dpposterior.posterior.Posterior` (use ``.to_arviz()``).
    """
    from ..model import Model
    from ..release import load_release

    if isinstance(release, Model):
        return _infer_model(release, observed, prior, method, draws=draws, warmup=warmup, chains=chains,
                            seed=seed, quiet=quiet, scheduler=scheduler, extra=extra)
    if observed is not None:
        raise InputError("observed", "is for a dpposterior.Model; a release file carries its own values")
    release = load_release(release)
    family = _family_of(release)
    if not isinstance(method, str):
        raise InputError("method", "must be a string")
    engine = family.engine(method)
    resolved = family.resolve_method(method)
    unknown = set(extra) - set(family.analysis_keys)
    if unknown:
        key = sorted(unknown)[0]
        raise InputError(key, f"unknown option for family {family.name!r}")
    options = _options(resolved, seed, extra, quiet, scheduler, draws, warmup, chains, constrained)
    prior_obj = family.parse_prior(prior, release)
    post = _run(lambda: engine(release, prior_obj, options), options, family, prior_obj)
    post.attrs.setdefault("prior", describe_prior(prior, prior_obj))
    post.attrs.setdefault("release_sha256", release.sha256)
    post.attrs.setdefault("constrained", options.constrained)
    eps, delta = release.total_privacy_cost()
    post.attrs.setdefault("release_epsilon", eps)
    post.attrs.setdefault("release_delta", delta)
    # the release itself (public by construction) and the prior, when it is plain data, so that
    # `dpposterior report` can draw the feasible region and recompute the naive posterior
    post.attrs.setdefault("release_json", json.dumps(release.to_dict(), sort_keys=True))
    if prior is None or isinstance(prior, dict):
        try:
            post.attrs.setdefault("prior_json", json.dumps(prior, sort_keys=True))
        except TypeError:  # not plain data: the report then takes the naive posterior from --compare
            pass
    return post


def _options(method, seed, extra, quiet, scheduler, draws, warmup, chains, constrained=None) -> InferenceOptions:
    """Validated engine options (a fresh entropy seed when none is given), for releases and Models."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    options = InferenceOptions(method=method, seed=seed, extra=dict(extra), quiet=quiet, scheduler=scheduler)
    if constrained is not None:
        options.constrained = constrained
    for name, value in (("draws", draws), ("warmup", warmup), ("chains", chains)):
        if value is not None:
            setattr(options, name, value)
    return options.validate()


def _run(compute, options, family=None, prior_obj=None):
    """Run ``compute()`` on the scheduler's executor, then check its posterior and record the options."""
    from ..checks import check_posterior
    from ..execution import check_scheduler, use_executor

    check_scheduler(options.scheduler)
    # engines that map work (SBI simulation batches) find this executor with
    # execution.current_executor(); it starts only if they use it
    with use_executor(options.scheduler):
        post = compute()
    # refuse non-finite draws, flag unreliable ones -- before anyone writes or reads the result
    check_posterior(post, family, prior_obj)
    post.attrs.setdefault("seed", options.seed)
    for name in ("draws", "warmup", "chains"):
        post.attrs.setdefault(f"options_{name}", getattr(options, name))
    return post


def _infer_model(model, observed, prior, method, *, draws, warmup, chains, seed, quiet, scheduler, extra):
    """``infer`` on a user model: the priors live in ``model.params``, so ``prior`` must be None."""
    from .user_model import infer_model, resolve_method

    if prior is not None:
        raise InputError("prior", "a dpposterior.Model carries its priors in params; leave prior unset")
    options = _options(resolve_method(model, method), seed, extra, quiet, scheduler, draws, warmup, chains)
    return _run(lambda: infer_model(model, observed, options), options)


def describe_prior(prior, prior_obj) -> str:
    """A one-line description of the prior for the summary header and the file's ``prior`` attribute."""
    if prior is None:
        text = f"family default: {prior_obj!r}"
    elif isinstance(prior, dict):
        text = ", ".join(f"{k}={v}" for k, v in prior.items())
    else:
        text = repr(prior_obj)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _family_of(release):
    from ..families import get_family

    return get_family(release.family, field="release.family")
