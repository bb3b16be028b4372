"""Simulation-based calibration of the engines on a user :class:`~dpposterior.Model`.

Cook, Gelman & Rubin (2006), as in :mod:`dpposterior.diagnostics.calibration`: per trial draw
theta ~ pi (the model's ``params``), n records ~ f(. | theta), s = sum_i t(x_i) and a release
s_dp from the model's mechanism; run each method with ``dpposterior.infer(model, observed=s_dp)``
and record the randomised rank U of the true theta among the draws (Uniform(0, 1) for the exact
posterior).  The result has the same shape as the family study's JSON (per method: KS, p-value,
coverage, ``by_coordinate``) plus the ranks themselves, so ``dpposterior report`` draws the
rank ECDFs.  Trials run serially (a user model is Python callables, not picklable in general);
trial t takes its randomness from ``SeedSequence(seed).spawn``.
"""

from __future__ import annotations

import numpy as np

from ..checks import NonFiniteDraws
from ..errors import InputError, posterior_warnings_ignored
from .ranks import one_line as _one_line, randomized_ranks, summarise_ranks


def _flat(model, values: dict, i=None) -> np.ndarray:
    return np.concatenate([np.atleast_1d(np.asarray(values[k] if i is None else values[k][i], float)).ravel()
                           for k in model.names])


def coordinate_names(model) -> list[str]:
    names = []
    for p in model._params:
        names += [p.name] if p.shape == () else [f"{p.name}[{j}]" for j in range(p.size)]
    return names


def simulate_release(model, rng) -> tuple[np.ndarray, np.ndarray]:
    """(theta flattened, s_dp) of one simulated dataset."""
    values = model.sample_prior(1, rng)
    theta = model.theta_dict(values, 0)
    if model.records is not None and model.statistic is not None:
        s = model.contributions(model.draw_records(theta, model.n, rng)).sum(axis=0)
    else:
        s = np.asarray(model.simulate(theta, rng), float).ravel()
    return _flat(model, values, 0), np.asarray(model.mechanism.sample(s, rng), float).ravel()


class _Progress:
    """What ``calibrate --model`` says on stderr while its serial trials run: after the first trial, the
    estimated time of the whole study; then, on a terminal only, a line every tenth of the trials."""

    def __init__(self, trials: int, methods):
        import time

        self.trials, self.methods, self.start, self.clock = trials, methods, time.perf_counter(), time.perf_counter
        self.every = max(1, trials // 10)

    def done(self, finished: int) -> None:
        import sys

        elapsed = self.clock() - self.start
        left = elapsed / finished * (self.trials - finished)
        if finished == 1:
            print(f"calibrate --model: {self.trials} trials x {', '.join(self.methods)}, serially; the first took "
                  f"{elapsed:.1f} s, so about {_duration(elapsed * self.trials)} in all", file=sys.stderr)
        elif sys.stderr.isatty() and (finished % self.every == 0 or finished == self.trials):
            print(f"calibrate --model: {finished}/{self.trials} trials, {_duration(elapsed)} elapsed, about "
                  f"{_duration(left)} left", file=sys.stderr)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def calibrate_model(model, trials: int, methods=None, seed: int = 0, draws: int | None = None,
                    warmup: int | None = None, return_ranks: bool = False, progress: bool = False,
                    **engine_options) -> dict:
    from ..api import infer
    from ..inference.user_model import resolve_method

    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise InputError("trials", f"must be an integer >= 1 (got {trials!r})")
    if methods is None:
        methods = ["auto"]
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    resolved = []
    for m in methods:
        name = resolve_method(model, m)
        if name not in resolved:
            resolved.append(name)
    draws = 200 if draws is None else draws
    coords = coordinate_names(model)
    ranks = {m: [] for m in resolved}
    failures = []
    children = np.random.SeedSequence(seed).spawn(trials)
    report = _Progress(trials, resolved) if progress else None
    for t, child in enumerate(children):
        data_seq, rank_seq, *method_seqs = child.spawn(2 + len(resolved))
        truth, sdp = simulate_release(model, np.random.default_rng(data_seq))
        rank_rng = np.random.default_rng(rank_seq)
        for m, mseq in zip(resolved, method_seqs):
            try:
                kw = dict(engine_options)
                if warmup is not None and m == "da-mcmc":
                    kw["warmup"] = warmup
                with posterior_warnings_ignored():  # a study: ranks, not flags, are its result
                    post = infer(model, observed=sdp, method=m, draws=draws, chains=1,
                                 seed=int(mseq.generate_state(1)[0]), **kw)
                d = np.concatenate([post.draws(k).reshape(post.draws(k).shape[0], -1) for k in model.names], axis=1)
                ranks[m].append(randomized_ranks(truth[None], d[None], rank_rng)[0])
            except NonFiniteDraws as exc:  # infer refused this trial's draws: a failed trial, as below
                failures.append({"trial": t, "method": m, "error": _one_line(exc)})
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing trial is recorded, not fatal
                failures.append({"trial": t, "method": m, "error": _one_line(exc)})
        if report is not None:
            report.done(t + 1)
    eps, _delta = model.mechanism.privacy_cost()
    out = {"family": model.name, "model": model.name, "n": model.n, "epsilon": eps, "trials": trials,
           "methods": {}, "prior": None, "seed": seed, "draws": draws, "coordinates": coords,
           "failed_trials": len({f["trial"] for f in failures}), "failures": failures[:100]}
    arrays = {}
    for m in resolved:
        u = np.asarray(ranks[m], float).reshape(-1, len(coords))
        arrays[m] = u
        entry = summarise_ranks(u[:, 0]) if len(u) else {"ks": None, "ks_pvalue": None, "coverage": None}
        entry["mmd"] = None
        entry["by_coordinate"] = {c: summarise_ranks(u[:, j]) for j, c in enumerate(coords)} if len(u) else {}
        entry["failed_trials"] = trials - len(u)
        entry["ranks"] = {c: u[:, j].tolist() for j, c in enumerate(coords)}
        out["methods"][m] = entry
    if return_ranks:
        out["_ranks"] = arrays
    return out
