"""The orchestrator: a release (or a user Model) in, a checked Posterior out.

``infer`` validates the release, looks its family up once, asks the family which engine
``method`` names, parses the prior, builds the release's observation model and runs ``engine(model, options)`` on
the scheduler's executor and checks the result (``dpposterior.checks``).  :func:`naive_companion` is the
noise-ignoring posterior shown beside it, by ``dpposterior infer`` and by ``dpposterior report``.
Engines never import this module; it sits above them (docs/architecture.md).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from .checks import check_posterior
from .errors import InputError, PosteriorWarning
from .execution import check_scheduler, use_executor
from .long_lived import freeze_long_lived, pause_during_first_kernel
from .model import Model
from .options import InferenceOptions
from .release import load_release


def check_stored_draws(family, release, engine_options) -> None:
    """Refuse, before any work, stored draws that would not fit in memory: draws x chains x the values of one draw,
    twice (the engine's arrays and the packed posterior), for a family whose draw grows with its release (its
    ``draw_values`` hook; the others draw a few numbers, under the draws x chains cap of ``InferenceOptions``).  An
    engine that stores fewer values than the family's largest draw states its own (``EngineOptions.draw_values``)."""
    size = getattr(type(engine_options), "draw_values", None) or family.hooks.get("draw_values")
    draws = getattr(engine_options, "draws", None)
    if size is None or not draws:
        return
    from .memory import check_fits

    chains = int(getattr(engine_options, "chains", None) or 1)
    values = int(size(release))
    check_fits(16.0 * draws * chains * values, "draws", f"{draws} draws x {chains} chains of {values:,} values each",
               "fewer --draws or --chains")


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
    if isinstance(release, Model):
        return _warned(_infer_model(release, observed, prior, method, draws=draws, warmup=warmup, chains=chains,
                                    seed=seed, quiet=quiet, scheduler=scheduler, extra=extra))
    if observed is not None:
        raise InputError("observed", "is for a dpposterior.Model; a release file carries its own values")
    release = load_release(release)
    family = release.family_entry  # found once, by load_release
    if not isinstance(method, str):
        raise InputError("method", "must be a string")
    # auto passes over an engine that would refuse an option given here (exact takes no warm-up)
    given = set(extra) | {k for k, v in (("warmup", warmup), ("constrained", constrained)) if v is not None}
    resolved = family.resolve_method(method, release, given=given)
    engine = family.engine(resolved, release=release)
    options = _options(resolved, seed, extra, quiet, scheduler, draws, warmup, chains, constrained)
    # the engine's own options, before any work: an option it does not take is refused here, in one line
    engine_options = family.engine_options(resolved).from_inference(options, f"{family.name}/{resolved}")
    prior_obj = family.parse_prior(prior, release)
    check_stored_draws(family, release, engine_options)
    choices = engine_options.model_choices()

    def compute():
        # the one description of what was released, built once (on the scheduler's executor, as the engine's own
        # work): the engine reads it, and names its draws through it
        return engine(release.observation_model(prior_obj, **choices), engine_options)

    post = _run(compute, options, engine_options, family, prior_obj, release)
    post.attrs.setdefault("prior", describe_prior(prior, prior_obj))
    post.attrs.setdefault("release_sha256", release.sha256)
    if hasattr(engine_options, "constrained"):  # recorded only where the engine applies it
        post.attrs.setdefault("constrained", engine_options.constrained)
    cost = release.privacy()
    eps, delta = cost.as_tuple()
    post.attrs.setdefault("release_epsilon", eps)
    post.attrs.setdefault("release_delta", delta)
    if cost.accounting == "zcdp":
        # a zCDP release: its rho, and how (epsilon, delta) was obtained from it (docs/privacy.md)
        post.attrs.setdefault("release_rho", cost.rho)
        post.attrs.setdefault("release_privacy", f"{cost.describe()}; {cost.note}")
    # the release itself (public by construction) and the prior, when it is plain data, so that
    # `dpposterior report` can draw the feasible region and recompute the naive posterior
    post.attrs.setdefault("release_json", release.source_json())
    # release_sha256 is of the file's bytes; this one lets `report` notice an edited release_json
    post.attrs.setdefault("release_json_sha256", hashlib.sha256(post.attrs["release_json"].encode()).hexdigest())
    if prior is None or isinstance(prior, dict):
        try:
            post.attrs.setdefault("prior_json", json.dumps(prior, sort_keys=True))
        except TypeError:  # not plain data: the report then takes the naive posterior from --compare
            pass
    return _warned(post)


def _warned(post):
    """Show each flag of ``post.warnings`` to Python users as a :class:`~dpposterior.errors.PosteriorWarning`
    (attributed to the line that called ``infer``); the flags stay on the posterior too."""
    import warnings

    for message in post.warnings:
        warnings.warn(message, PosteriorWarning, stacklevel=3)
    return post


def _options(method, seed, extra, quiet, scheduler, draws, warmup, chains, constrained=None) -> InferenceOptions:
    """Validated engine options (a fresh entropy seed when none is given), for releases and Models."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**63))
    options = InferenceOptions(method=method, seed=seed, extra=dict(extra), quiet=quiet, scheduler=scheduler,
                               given=tuple(n for n, v in (("draws", draws), ("chains", chains)) if v is not None))
    if constrained is not None:
        options.constrained = constrained
    for name, value in (("draws", draws), ("warmup", warmup), ("chains", chains)):
        if value is not None:
            setattr(options, name, value)
    return options.validate()


def _run(compute, options, engine_options, family=None, prior_obj=None, release=None):
    """Run ``compute()`` on the scheduler's executor, then check its posterior and record the options the
    engine used (``engine_options``: its typed options; warm-up only where it has one)."""
    check_scheduler(options.scheduler)
    # engines that map work (SBI simulation batches) find this executor with
    # execution.current_executor(); it starts only if they use it
    pause_during_first_kernel()  # numba's one-time set-up runs without collections (long_lived.py)
    with use_executor(options.scheduler):
        post = compute()
    # refuse non-finite draws, flag unreliable ones -- before anyone writes or reads the result
    check_posterior(post, family, prior_obj, release)
    # numba's registries, built by the first kernel, live as long as the process: out of the collector's
    # way from now on (a quarter of a one-posterior process's time went to walking them; long_lived.py)
    freeze_long_lived()
    post.attrs.setdefault("seed", options.seed)
    for name in ("draws", "warmup", "chains"):
        if name in engine_options.names():  # what the engine took (not a fixed-shape engine's unused fields)
            post.attrs.setdefault(f"options_{name}", getattr(engine_options, name))
    return post


def _infer_model(model, observed, prior, method, *, draws, warmup, chains, seed, quiet, scheduler, extra):
    """``infer`` on a user model: the priors live in ``model.params``, so ``prior`` must be None."""
    from .families import resolve
    from .inference.user_model import check_model, infer_model, resolve_method

    if prior is not None:
        raise InputError("prior", "a dpposterior.Model carries its priors in params; leave prior unset")
    resolved = resolve_method(model, method)
    options = _options(resolved, seed, extra, quiet, scheduler, draws, warmup, chains)
    engine_options = resolve(model.methods[resolved].options).from_inference(options, f"{model.name}/{resolved}")
    obs = check_model(model, observed, resolved)  # before any work: the model against all the run will ask of it
    return _run(lambda: infer_model(model, obs, resolved, engine_options), options, engine_options)


def describe_prior(prior, prior_obj) -> str:
    """A one-line description of the prior for the summary header and the file's ``prior`` attribute."""
    if prior is None:
        text = f"family default: {prior_words(prior_obj)}"
    elif isinstance(prior, dict):
        text = ", ".join(f"{k}={_value_words(v)}" for k, v in prior.items())
    else:
        text = prior_words(prior_obj)
    return " ".join(text.split())


def prior_words(prior_obj) -> str:
    """A prior object in words, ``Name(field=value, ...)``: numbers as %g, short vectors in full, larger
    arrays by their shape -- never a Python repr cut in the middle (a flat prior shows no hyperparameters)."""
    import dataclasses

    if hasattr(prior_obj, "to_dict"):
        fields = prior_obj.to_dict()
    elif dataclasses.is_dataclass(prior_obj):
        fields = {f.name: getattr(prior_obj, f.name) for f in dataclasses.fields(prior_obj)}
    elif hasattr(prior_obj, "__dict__"):
        fields = {k: v for k, v in vars(prior_obj).items() if not k.startswith("_")}
    else:
        return repr(prior_obj)
    if fields.get("kind") == "flat":
        return "flat"
    words = {k: _value_words(v, internal=None) for k, v in fields.items() if v is not None}
    return f"{type(prior_obj).__name__}(" + ", ".join(f"{k}={w}" for k, w in words.items() if w is not None) + ")"


def _value_words(value, internal: str | None = "") -> str | None:
    """A hyperparameter in words; a value that is not numbers (an object's internal bookkeeping) gives
    ``internal`` (None: left out)."""
    if isinstance(value, (bool, str)):
        return str(value)
    try:
        arr = np.asarray(value, float)
    except (TypeError, ValueError):
        return str(value) if internal == "" else internal
    if arr.ndim == 0:
        return f"{float(arr):g}"
    if arr.size > 6:
        return f"{'x'.join(map(str, arr.shape))} array"
    return np.array2string(arr, separator=", ", formatter={"float_kind": lambda x: f"{x:g}"}).replace("\n", "")


def naive_companion(release, prior=None, *, main_method: str | None = None, seed=None, draws=None, chains=None,
                    constrained=None, quiet: bool = True):
    """The noise-ignoring posterior shown beside a noise-aware one; ``(posterior, "")`` or ``(None, why)``.

    One definition for ``dpposterior infer`` (beside the posterior it just computed) and
    ``dpposterior report`` (recomputed from the release and prior a posterior file carries): the
    family's ``naive_method`` with the same prior, seed, draws, chains and parametrisation.
    """
    release = load_release(release)
    family = release.family_entry
    naive = family.naive_method
    if not naive or naive == main_method or naive not in family.methods:
        return None, "this family has no separate naive method"
    kwargs = {name: value for name, value in (("draws", draws), ("chains", chains), ("constrained", constrained))
              if value is not None}
    if "constrained" not in family.engine_options(naive).names():  # e.g. linear regression's naive
        kwargs.pop("constrained", None)
    from .checks import without_mcmc_checks
    from .errors import posterior_warnings_ignored

    # a comparison beside the posterior, not a result of its own: its warnings are not shown, so its
    # convergence diagnostics are not computed (non-finite draws are still refused)
    with posterior_warnings_ignored(), without_mcmc_checks():
        try:
            return infer(release, prior=prior, method=naive, seed=seed, quiet=quiet, **kwargs), ""
        except InputError as exc:  # the naive method cannot analyse this release (e.g. an unmeasured clique)
            if exc.field != "method":
                raise
            return None, exc.reason
