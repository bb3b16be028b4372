"""Simulation-based calibration of inference methods: ``dpposterior calibrate``.

Cook, Gelman & Rubin (2006), as used by Bernstein & Sheldon (NeurIPS 2018, Sec. 4,
App. D): draw theta ~ prior, data ~ model, release y through the mechanism, run
each method, and record U = the quantile of the true theta among the method's
posterior draws.  For the exact posterior U ~ Uniform(0, 1).  Reported per method:
the Kolmogorov-Smirnov statistic of U against Uniform(0, 1) and its p-value
(Massey 1951), coverage of the central 50/90/95% posterior intervals, and the
MMD (Gretton et al. 2012) between the method's posterior and the non-private
posterior (utility, Fig. 1c).

Generic over families: it needs only ``Family.simulate`` and ``dpposterior.infer``;
an engine may offer a batched path (``families.EngineSpec.batch``: ``batch(sims, prior, method,
options)``, with the method's typed options built as ``infer`` builds them) returning draws of shape (trials,
draws, coordinates) for all trials at once (vectorised), or None to fall back to ``infer`` per trial.

Every trial draws its randomness from its own ``SeedSequence`` child
(``execution.trial_seed``); trials are grouped into units (sized from the work and the
number of workers, ``execution.unit_size``, or ``--unit-size``) and run through
``checkpoint.run_units``: the result JSON is identical for every unit size, every scheduler
and for a killed-then-resumed run.  A trial whose method fails is recorded in the JSON
(``failures``, ``failed_trials``) instead of ending the study.

Ranks are randomised between ties, U = (#{draws < theta} + V (1 + #{draws == theta})) / (S + 1)
with V ~ Uniform(0, 1), which is exactly Uniform(0, 1) when theta and the S draws are
exchangeable (also for methods with few draws, e.g. OPS's 100 samples).
"""

from __future__ import annotations

import json
import math
import sys
import tomllib
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..options import InferenceOptions
from .ranks import one_line, randomized_ranks, summarise_ranks

#: the largest unit of trials (units are sized from the work and the workers: execution.unit_size)
DEFAULT_CHUNK = 250
#: draws per posterior kept for the MMD (evenly thinned; the MMD is O(S^2))
MMD_DRAWS = 200
#: default posterior draws per trial when a family has a vectorised hook (the paper's 5,000)
DEFAULT_DRAWS = 5000


# --------------------------------------------------------------------------- prior option
def parse_prior_option(prior) -> dict | None:
    """``--prior``: None, a dict, a TOML file with a [prior] table, or inline 'kind=beta,alpha=2,beta=2'."""
    if prior is None or isinstance(prior, dict):
        return prior
    if not isinstance(prior, (str, Path)):
        return prior  # a family prior object
    text = str(prior).strip()
    path = Path(text)
    if text.endswith(".toml") or (path.exists() and path.is_file()):
        if not path.exists():
            raise InputError("prior", f"file not found: {path}")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise InputError("prior", f"invalid TOML in {path} ({exc})") from None
        table = data.get("prior", data if "kind" in data else None)
        if not isinstance(table, dict):
            raise InputError("prior", f"{path} has no [prior] table")
        return table
    out: dict = {}
    for item in _split_top_level(text):
        if "=" not in item:
            raise InputError("prior", f"expected key=value pairs like 'kind=beta,alpha=2,beta=2' (got {item!r})")
        key, value = (part.strip() for part in item.split("=", 1))
        if not key:
            raise InputError("prior", f"empty key in {item!r}")
        out[key] = _inline_value(value)
    if not out:
        raise InputError("prior", "is empty")
    return out


def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _inline_value(value: str):
    try:
        return tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return value  # bare word, e.g. kind=beta


# --------------------------------------------------------------------------- validation
def _check_int(value, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(field, f"must be an integer >= {minimum} (got {value!r})")
    return int(value)


def resolve_mechanism(family, mechanism, epsilon, rho) -> dict | None:
    """``--mechanism`` and its budget for ``family``'s simulator, checked in one line each: None for the
    family's own mechanism (no ``--mechanism``, or laplace where the simulator's own is laplace), else
    {"name": NAME, "epsilon": E} or {"name": "discrete-gaussian", "rho": R} (``epsilon`` is then None).
    The simulator's own mechanism is the first of ``Family.simulate_mechanisms`` (laplace, at ``epsilon``).

    A mechanism the simulator does not take, ``--rho`` without discrete-gaussian, ``--epsilon`` with it, and a
    missing budget are refused."""
    from ..mechanisms.registry import accounts_rho, is_integer_noise, rho_mechanisms
    from ..release import check_epsilon_range

    if mechanism is not None:
        if not isinstance(mechanism, str):
            raise InputError("mechanism", f"must be a mechanism name (got {mechanism!r})")
        mechanism = mechanism.strip().lower()
        offered = tuple(family.simulate_mechanisms)
        # a count simulator takes any registered integer noise law (exact integer noise from its own sampler)
        if mechanism not in offered and not (family.simulates_integer_noise and is_integer_noise(mechanism)):
            if not offered:
                from ..families import available_families, get_family

                takers = ", ".join(n for n in available_families() if get_family(n).simulate_mechanisms)
                raise InputError("mechanism", f"the {family.name} simulator releases through its own mechanism "
                                 f"only; --mechanism is for {takers}")
            raise InputError("mechanism", f"{mechanism!r} is not a mechanism of the {family.name} simulator "
                             f"(one of: {', '.join(offered)})")
    if accounts_rho(mechanism):  # zCDP: the budget is rho
        if epsilon is not None:
            raise InputError("epsilon", f"not a budget of --mechanism {mechanism} (give its zCDP budget --rho)")
        if rho is None:
            raise InputError("rho", f"is required with --mechanism {mechanism} (its zCDP budget)")
        if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 1e-12 <= rho <= 1e6:
            raise InputError("rho", f"must be a number in [1e-12, 1e6] (got {rho!r})")
        return {"name": mechanism, "rho": float(rho)}
    if rho is not None:
        raise InputError("rho", f"is the budget of --mechanism {' or '.join(rho_mechanisms())} only (give --epsilon)")
    if epsilon is None:
        raise InputError("epsilon", "is required (the privacy budget of each simulated release)")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (
            math.isfinite(epsilon) and epsilon > 0):
        raise InputError("epsilon", f"must be a finite number > 0 (got {epsilon!r})")
    check_epsilon_range(float(epsilon), "epsilon")  # as a release file's: the simulated releases stay finite
    if mechanism is None or mechanism == family.simulate_mechanisms[0]:
        return None  # the simulator's own release (unchanged studies, unchanged run ids)
    return {"name": mechanism, "epsilon": float(epsilon)}


def _simulate_kwargs(mechanism: dict | None) -> dict:
    """The keywords of ``Family.simulate`` that select ``mechanism`` (none for the family's own)."""
    if mechanism is None:
        return {}
    return {"mechanism": mechanism["name"], "rho": mechanism.get("rho")}


def mechanism_record(family, epsilon, mechanism: dict | None) -> dict | None:
    """What the result JSON says of the simulated releases' mechanism: the one asked for, else (for a family
    whose simulator takes ``--mechanism``) its own (the first it lists) at ``epsilon``; None for the other
    families."""
    if mechanism is not None:
        return dict(mechanism)
    own = family.hooks.get("simulated_mechanism")
    if own is not None:  # a simulator that reads --epsilon its own way says how
        return own(epsilon)
    if family.simulate_mechanisms:
        return {"name": family.simulate_mechanisms[0], "epsilon": float(epsilon)}
    return None


def _resolve(family_name, n, epsilon, trials, methods, prior, seed, draws, chunk, mechanism=None, rho=None):
    from ..families import get_family

    family = get_family(family_name, field="family")
    if family.simulate is None:
        raise InputError("family", f"family {family.name!r} has no simulator for calibration")
    n = _check_int(n, "n")
    trials = _check_int(trials, "trials")
    seed = _check_int(seed, "seed", 0)
    chunk = _check_int(chunk, "chunk")
    if draws is not None:
        draws = _check_int(draws, "draws", 2)
    mech = resolve_mechanism(family, mechanism, epsilon, rho)
    epsilon = None if epsilon is None else float(epsilon)
    if methods is None:  # the family's naive method beside, where it has one to calibrate
        methods = ["auto"] + ([family.naive_method] if family.naive_method else [])
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    if not methods:
        raise InputError("methods", "name at least one method")
    prior_spec = parse_prior_option(prior)
    prior_obj = family.parse_prior(prior_spec, None)
    probe = None
    if mech is not None:
        # one release simulated through the mechanism (thrown away): what ``auto`` picks for such releases, as
        # ``infer`` would (Family.auto_rule), and a method that cannot run on them is refused before any trial
        probe = family.simulate(prior_obj, n, epsilon, np.random.default_rng(0), **_simulate_kwargs(mech))
    resolved = []
    for m in methods:
        if not isinstance(m, str):
            raise InputError("methods", f"method names are strings (got {m!r})")
        name = family.resolve_method(m, None if probe is None else probe.release)
        if name not in family.methods:
            known = ", ".join(sorted([*family.methods, "auto"]))
            raise InputError("methods", f"method {m!r} is not available for family {family.name!r} (one of: {known})")
        if name not in resolved:
            resolved.append(name)
    fixed = _draws_fixed_by_engine(family, resolved)
    if draws is not None and len(fixed) == len(resolved):
        # engines with a fixed output shape (adassp's point estimate, ops's samples) take no draws: a --draws
        # that no method of the study would use is refused, not ignored (with others, it is theirs; the JSON
        # lists the methods it did not apply to)
        opts = ", ".join(family.engine_options(resolved[0]).names())
        raise InputError("draws", f"not an option of {family.name}/{resolved[0]} (options: {opts}); drop --draws")
    if probe is not None:
        for name in resolved:
            _refuse_method_for(family, name, probe, prior_obj, mech)
    prior_dict = prior_obj.to_dict() if hasattr(prior_obj, "to_dict") else prior_spec
    return family, n, epsilon, trials, resolved, prior_obj, prior_dict, seed, draws, chunk, mech


def _refuse_method_for(family, method, sim, prior, mechanism: dict) -> None:
    """Refuse, in one line, a method whose batched path fails on a release simulated through ``mechanism``
    (Gibbs-SS assumes continuous Laplace noise); the probe runs a handful of draws.  Methods with no
    batched path are not probed (a trial that fails is recorded in the result's ``failures``)."""
    from ..errors import RefusedError, posterior_warnings_ignored

    batch = family.batch_path(method)
    if batch is None:
        return
    # a warm-up only for an engine that has one (its options refuse it otherwise)
    warmup = 1 if "warmup" in family.engine_options(method).names() else None
    options = family.engine_options(method).from_inference(
        InferenceOptions(method=method, draws=2, warmup=warmup, chains=1, seed=0), f"{family.name}/{method}")
    try:
        with posterior_warnings_ignored():
            batch([sim], prior, method, options)
    except Exception as exc:  # noqa: BLE001 - every failure is this method's, said in one line
        reason = exc.reason if isinstance(exc, RefusedError) else one_line(exc)
        raise InputError("methods", f"{method!r} cannot analyse releases of --mechanism {mechanism['name']} "
                         f"({reason})") from None


# --------------------------------------------------------------------------- the unit of work
def _flatten_theta(theta: dict) -> np.ndarray:
    return np.concatenate([np.atleast_1d(np.asarray(v, float)).ravel() for v in theta.values()])


def _coordinate_names(theta: dict) -> list[str]:
    names = []
    for key, value in theta.items():
        arr = np.atleast_1d(np.asarray(value))
        if arr.size == 1 and np.ndim(value) == 0:
            names.append(key)
        else:
            names.extend(f"{key}[{i}]" for i in range(arr.size))
    return names


def _method_draws(family, method, sims, prior, draws, seed_seq) -> np.ndarray:
    """(T, S, D) draws of ``method`` for every simulated release."""
    batch = family.batch_path(method)  # the engine's own vectorised path (families.EngineSpec), if any
    if batch is not None:
        # what infer below is given: one chain, the study's draws, everything else the engine's own defaults
        # (the engine's typed options, built as infer builds them: warm-up and tuning are infer's)
        run = InferenceOptions(method=method, chains=1, seed=seed_seq, **({"draws": draws} if draws is not None else {}))
        options = family.engine_options(method).from_inference(run, f"{family.name}/{method}")
        out = batch(sims, prior, method, options)
        if out is not None:
            return np.asarray(out, float)
    from ..api import infer
    from ..errors import posterior_warnings_ignored

    seeds = seed_seq.generate_state(len(sims), dtype=np.uint32)
    out = []
    for sim, s in zip(sims, seeds):
        kwargs = {}
        if sim.confidential and "confidential" in family.engine_options(method).names():
            kwargs["confidential"] = sim.confidential
        if draws is not None:
            kwargs["draws"] = draws
        with posterior_warnings_ignored():  # a study of many posteriors: ranks, not flags, are its result
            post = infer(sim.release, prior=prior, method=method, chains=1, seed=int(s), quiet=True, **kwargs)
        names = list(sim.theta)
        out.append(np.concatenate([post.draws(v).reshape(post.draws(v).shape[0], -1) for v in names], axis=1))
    return np.stack(out)


def _thin(x: np.ndarray, k: int) -> np.ndarray:
    idx = np.linspace(0, x.shape[0] - 1, min(k, x.shape[0])).round().astype(int)
    return x[idx]


def _method_key(method: str) -> int:
    """A stable integer per method name (its seed path): a method's draws in a trial do not
    depend on which other methods run beside it or in what order."""
    return zlib.crc32(method.encode())


def calibration_unit(unit: dict) -> dict:
    """One unit of trials (module level and picklable for process / Dask backends).

    ``unit``: family, n, epsilon, prior, methods, draws, ``seed`` (the study's root seed,
    an int), ``start`` (index of the unit's first trial), ``trials`` and optionally ``mechanism``
    (:func:`resolve_mechanism`; absent or None: the family's own).  Trial ``t`` draws
    everything from ``execution.trial_seed(seed, t, ...)``: its data and release from path
    (t, 0), method m's rank tie-breaks from (t, 1, crc32(m)) and its posterior from (t, 2, crc32(m)).  So
    a trial's numbers do not depend on the unit it is in: any unit size, any backend, same
    JSON.  A trial in which a method raises or returns non-finite draws is recorded in
    ``failures`` (its rank is null) instead of ending the study -- except a memory refusal
    (:class:`~dpposterior.errors.MemoryRefusedError`), which ends it: the trials are alike in size.
    """
    from ..diagnostics.metrics import mmd
    from ..errors import MemoryRefusedError
    from ..execution import trial_seed
    from ..families import get_family

    family = get_family(unit["family"])
    prior = family.parse_prior(unit["prior"], None)
    methods = list(unit["methods"])
    seed = int(unit["seed"])
    ref_name = "non-private" if "non-private" in family.methods else None
    results: dict = {"ranks": {m: [] for m in methods},
                     "mmd": {m: ([] if ref_name is not None and m != ref_name else None) for m in methods},
                     "coordinates": None, "failures": []}
    simulate_kwargs = _simulate_kwargs(unit.get("mechanism"))
    for t in range(unit["start"], unit["start"] + unit["trials"]):
        try:
            sim = family.simulate(prior, unit["n"], unit["epsilon"], np.random.default_rng(trial_seed(seed, t, 0)),
                                  **simulate_kwargs)
            truth = _flatten_theta(sim.theta)[None, :]
        except Exception as exc:  # noqa: BLE001 - a rare dataset must not end the study
            results["failures"].append({"trial": t, "method": "simulate", "error": one_line(exc)})
            for m in methods:
                results["ranks"][m].append(None)
                if results["mmd"][m] is not None:
                    results["mmd"][m].append(None)
            continue
        if results["coordinates"] is None:
            results["coordinates"] = _coordinate_names(sim.theta)
        draws = {}
        for m in [*methods, *([ref_name] if ref_name is not None and ref_name not in methods else [])]:
            try:
                d = _method_draws(family, m, [sim], prior, unit["draws"], trial_seed(seed, t, 2, _method_key(m)))
                if d.ndim != 3 or d.shape[0] != 1 or d.shape[2] != truth.shape[1]:
                    raise ValueError(f"draws of shape {d.shape}, expected (1, S, {truth.shape[1]})")
                if not np.all(np.isfinite(d)):
                    raise FloatingPointError("non-finite posterior draws")
                draws[m] = d
            except MemoryRefusedError:
                raise  # every trial of this size would refuse alike: the study stops in one line, not T failures
            except Exception as exc:  # noqa: BLE001
                if m in methods:
                    results["failures"].append({"trial": t, "method": m, "error": one_line(exc)})
                draws[m] = None
        reference = draws.get(ref_name) if ref_name is not None else None
        for m in methods:
            d = draws[m]
            rank_rng = np.random.default_rng(trial_seed(seed, t, 1, _method_key(m)))
            results["ranks"][m].append(None if d is None else randomized_ranks(truth, d, rank_rng)[0].tolist())
            if results["mmd"][m] is not None:
                results["mmd"][m].append(None if d is None or reference is None else
                                         float(mmd(_thin(d[0], MMD_DRAWS), _thin(reference[0], MMD_DRAWS))))
    return results


def check_unit_result(unit: dict, result) -> None:
    """Raise ``ValueError(reason)`` unless ``result`` is what :func:`calibration_unit` returns for
    ``unit``: one rank row (D quantiles in [0, 1]) or null per trial and method, one finite MMD or
    null per trial where MMDs are kept, failures naming the unit's trials.  Run on every resumed unit,
    so a hand-edited checkpoint cannot feed the summary a NaN, an out-of-range rank or a lost trial."""
    if not isinstance(result, dict) or not {"ranks", "mmd", "coordinates", "failures"} <= set(result):
        raise ValueError("is not a calibration unit (expected ranks, mmd, coordinates and failures)")
    trials, methods = unit["trials"], list(unit["methods"])
    coords = result["coordinates"]
    if coords is not None and (not isinstance(coords, list) or not all(isinstance(c, str) for c in coords)):
        raise ValueError("has malformed coordinates")
    if not isinstance(result["ranks"], dict) or set(result["ranks"]) != set(methods):
        raise ValueError(f"has ranks for {sorted(result['ranks']) if isinstance(result['ranks'], dict) else '?'}, "
                         f"not for the run's methods {sorted(methods)}")
    for m in methods:
        rows = result["ranks"][m]
        if not isinstance(rows, list) or len(rows) != trials:
            raise ValueError(f"holds {len(rows) if isinstance(rows, list) else 'no'} rank rows of method {m}, "
                             f"not one per trial ({trials})")
        for t, row in enumerate(rows):
            if row is None:
                continue
            if not isinstance(row, list) or (coords is not None and len(row) != len(coords)) or not all(
                    isinstance(u, (int, float)) and not isinstance(u, bool) and 0.0 <= u <= 1.0 for u in row):
                raise ValueError(f"has an invalid rank for method {m} in trial {unit['start'] + t} (posterior "
                                 "quantiles are numbers in [0, 1])")
        mmds = result["mmd"].get(m, "missing") if isinstance(result["mmd"], dict) else "missing"
        if mmds is None:
            continue
        if not isinstance(mmds, list) or len(mmds) != trials or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))
                for v in mmds):
            raise ValueError(f"has invalid MMDs for method {m} (one finite number or null per trial)")
    first, last = unit["start"], unit["start"] + trials
    if not isinstance(result["failures"], list) or not all(
            isinstance(f, dict) and isinstance(f.get("trial"), int) and first <= f["trial"] < last
            for f in result["failures"]):
        raise ValueError(f"lists failures outside its trials {first}-{last - 1}")


def unit_label(unit: dict) -> str:
    return f"trials {unit['start']}-{unit['start'] + unit['trials'] - 1}"


# --------------------------------------------------------------------------- summary
def _stored_chunk(checkpoint) -> int | None:
    """The unit size recorded in an existing checkpoint (None if absent or unreadable)."""
    try:
        chunk = json.loads(Path(checkpoint).read_text())["fingerprint"]["chunk"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return chunk if isinstance(chunk, int) and not isinstance(chunk, bool) and chunk >= 1 else None


def calibrate(family: str, n: int, epsilon: float | None, trials: int, methods=None, prior=None, seed: int = 0,
              draws: int | None = None, *, scheduler: str = "serial", quiet: bool = True, resume: bool = False,
              checkpoint=None, chunk: int | None = None, workers: int | None = None,
              return_ranks: bool = False, repair: bool = False, worker_timeout: float | None = None,
              mechanism: str | None = None, rho: float | None = None) -> dict:
    """Run the calibration study; returns the result dict (the JSON of ``dpposterior calibrate``).

    Headline ``ks``/``ks_pvalue``/``coverage`` are for the first coordinate of theta
    (the paper reports the first category of the multinomial); ``by_coordinate`` has
    every coordinate.  ``mmd`` is the mean over trials of the unbiased MMD^2 to the
    non-private posterior (null for ``non-private`` itself or when unavailable).

    ``chunk`` (``--unit-size``): trials per checkpointed unit; None sizes units from the
    trials and the workers (``execution.unit_size``: about 8 units per worker, at most 250
    trials each) -- or, when resuming, takes the size recorded in the checkpoint.  The
    result does not depend on it: every trial has its own seed.  ``workers`` caps the local
    worker processes (for ``tcp://``: the cluster's size, used only to size units).

    Trials in which a method failed (raised, or returned non-finite draws) are left out of
    that method's statistics and listed in ``failures``; ``failed_trials`` counts them, and each
    method's ``trials_used`` counts the trials its statistics rest on.

    On ``resume`` every checkpointed unit is verified (``checkpoint.read_checkpoint``: content hash
    and :func:`check_unit_result`); ``repair`` recomputes a unit that fails instead of refusing.
    The result carries the study's ``run_id`` (:func:`study_id` of the checkpoint's fingerprint).

    ``mechanism`` (with ``epsilon``, or ``rho`` for discrete-gaussian): release every simulated dataset
    through this mechanism instead of the family's own (the count families: discrete-laplace,
    discrete-gaussian; exact integer noise from the mechanism's sampler); ``auto`` then picks what ``infer``
    picks for such a release.  The result's ``mechanism`` names it and its budget.
    """
    from ..model import Model

    if isinstance(family, Model):  # a user model: its own n and mechanism; serial trials
        from .model_calibration import calibrate_model

        return calibrate_model(family, trials, methods, seed=seed, draws=draws, return_ranks=return_ranks)
    from ..checkpoint import run_units
    from ..execution import check_scheduler, check_workers, unit_size, worker_count

    check_scheduler(scheduler)
    workers = check_workers(workers)
    if chunk is None and resume and checkpoint is not None:
        chunk = _stored_chunk(checkpoint)
    fam, n, epsilon, trials, methods, prior_obj, prior_dict, seed, draws, chunk, mech = _resolve(
        family, n, epsilon, trials, methods, prior, seed, draws,
        chunk if chunk is not None else unit_size(trials, worker_count(scheduler, workers)), mechanism, rho)
    n_units = math.ceil(trials / chunk)
    # the mechanism enters units and fingerprint only when it is not the family's own: a study without
    # --mechanism keeps its units, checkpoint and run id
    own = {} if mech is None else {"mechanism": mech}
    units = [{"family": fam.name, "n": n, "epsilon": epsilon, "prior": prior_dict, "methods": methods,
              "draws": draws, "seed": seed, "start": i * chunk, "trials": min(chunk, trials - i * chunk), **own}
             for i in range(n_units)]
    fingerprint = {"command": "calibrate", "family": fam.name, "n": n, "epsilon": epsilon, "trials": trials,
                   "methods": methods, "prior": prior_dict, "seed": seed, "draws": draws, "chunk": chunk,
                   "seeding": "per-trial", **own}
    if not quiet:
        print(f"calibrate: {trials} trials in {n_units} units of <= {chunk}", file=sys.stderr)
    results = run_units(calibration_unit, units, scheduler=scheduler, checkpoint=checkpoint, resume=resume,
                        fingerprint=fingerprint, quiet=quiet, description=f"calibrate {fam.name}",
                        workers=workers, repair=repair, worker_timeout=worker_timeout,
                        check=lambda i, result: check_unit_result(units[i], result),
                        label=lambda i: f"unit {i} ({unit_label(units[i])})")
    out = summarise_study(results, fam, n, epsilon, trials, methods, prior_dict, seed, draws,
                          return_ranks=return_ranks)
    record = mechanism_record(fam, epsilon, mech)
    if record is not None:
        out["mechanism"] = record
    out["run_id"] = study_id(fingerprint)
    return out


def study_id(fingerprint: dict) -> str:
    """The id of a study: its checkpoint's fingerprint less the unit size, which does not change the
    result (so the result JSON is the same for every unit size); ``report`` matches it."""
    from ..checkpoint import run_id

    return run_id({k: v for k, v in fingerprint.items() if k != "chunk"})


#: failures listed one by one in the result JSON (all are counted)
MAX_LISTED_FAILURES = 100


def _draws_fixed_by_engine(family, methods) -> list[str]:
    return [m for m in methods if "draws" not in family.engine_options(m).names()]


def summarise_study(results, fam, n, epsilon, trials, methods, prior_dict, seed, draws,
                    return_ranks: bool = False) -> dict:
    """The result JSON from the units' results (in trial order)."""
    coords = next((r["coordinates"] for r in results if r["coordinates"] is not None), None)
    failures = [f for r in results for f in r["failures"]]
    out = {"family": fam.name, "n": n, "epsilon": epsilon, "trials": trials, "methods": {},
           "prior": prior_dict, "seed": seed,
           "draws": draws if draws is not None else (DEFAULT_DRAWS if fam.has_batch_paths else None),
           **({"draws_fixed_by_engine": fixed} if draws is not None and (fixed := _draws_fixed_by_engine(fam, methods))
              else {}),
           "coordinates": coords,
           "failed_trials": len({f["trial"] for f in failures}),
           "failures": failures[:MAX_LISTED_FAILURES]}
    ranks = {}
    for method in methods:
        rows = [r for res in results for r in res["ranks"][method] if r is not None]
        u = np.asarray(rows, float).reshape(len(rows), len(coords or []))  # (successful trials, D)
        ranks[method] = u
        failed = sum(r is None for res in results for r in res["ranks"][method])
        if len(rows):
            entry = summarise_ranks(u[:, 0])
        else:
            entry = {"ks": None, "ks_pvalue": None, "coverage": None}
        mmds = [res["mmd"][method] for res in results]
        if any(m is None for m in mmds):
            entry["mmd"] = None
        else:
            vals = [v for m in mmds for v in m if v is not None]
            entry["mmd"] = float(np.mean(vals)) if vals else None
        entry["by_coordinate"] = {c: summarise_ranks(u[:, j]) for j, c in enumerate(coords or [])} if len(rows) else {}
        entry["failed_trials"] = failed
        entry["trials_used"] = len(rows)
        out["methods"][method] = entry
    if return_ranks:
        out["_ranks"] = ranks
    return out


# --------------------------------------------------------------------------- plot
def dkw_band(m: int, alpha: float = 0.05) -> float:
    """Half-width of the simultaneous (1 - alpha) band of an ECDF of m draws (Dvoretzky-Kiefer-Wolfowitz)."""
    return math.sqrt(math.log(2.0 / alpha) / (2.0 * m))


def plot_rank_ecdf(ranks: dict, path, title: str = "", ax=None) -> None:
    """Rank ECDF of every method against the diagonal (Fig. 1b) with a simultaneous 95% DKW band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(4.5, 4.2))
    grid = np.linspace(0, 1, 201)
    m = len(next(iter(ranks.values())))
    band = dkw_band(m)
    ax.fill_between(grid, np.clip(grid - band, 0, 1), np.clip(grid + band, 0, 1), color="0.85",
                    label=f"95% simultaneous band (m={m})")
    ax.plot(grid, grid, color="0.3", lw=0.8, ls="--")
    for method, u in ranks.items():
        u = np.sort(np.asarray(u, float))
        ax.step(np.concatenate([[0], u, [1]]), np.concatenate([[0], np.arange(1, len(u) + 1) / len(u), [1]]),
                where="post", label=method, lw=1.4)
    ax.set_xlabel("posterior quantile of the true parameter")
    ax.set_ylabel("empirical CDF")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    if own:
        from ..files import atomic_path

        fig.tight_layout()
        try:
            with atomic_path(path, field="plot") as tmp:
                fig.savefig(tmp, dpi=110, format="png")
        finally:
            plt.close(fig)


# --------------------------------------------------------------------------- CLI
def calibrate_command(family, n, epsilon, trials, methods=None, prior=None, seed=0, draws=None, out=None,
                      plot=None, scheduler="processes", quiet=False, resume=False, workers=None,
                      unit_size=None, repair=False, worker_timeout=None, mechanism=None, rho=None) -> dict:
    """``dpposterior calibrate``: run, print a table, write ``--out`` JSON and ``--plot`` PNG.

    The run holds a lock on ``--out`` (``files.exclusive_run``): a second run to the same ``--out``
    -- which would share its checkpoint -- is refused in one line while the first one runs.
    """
    from contextlib import nullcontext

    from ..errors import check_output_path, check_seed
    from ..files import exclusive_run

    checkpoint = None
    check_seed(seed, "seed")
    if out is not None:
        out = Path(out)
        check_output_path(out, "out")
        checkpoint = out.with_name(out.name + ".ckpt.json")
    if plot is not None:
        check_output_path(plot, "plot")
    if resume and out is None:
        raise InputError("resume", "needs --out (the checkpoint is written beside it)")
    if repair and not resume:
        raise InputError("repair", "only with --resume (it recomputes the checkpoint's units that fail verification)")
    if unit_size is not None:
        unit_size = _check_int(unit_size, "unit-size")
    if worker_timeout is not None and (isinstance(worker_timeout, bool) or not isinstance(worker_timeout, (int, float))
                                       or not (math.isfinite(worker_timeout) and worker_timeout > 0)):
        raise InputError("worker-timeout", f"must be a number of seconds > 0 (got {worker_timeout!r})")
    if worker_timeout is not None and not str(scheduler).startswith(("tcp://", "local")):
        raise InputError("worker-timeout", f"only with a Dask scheduler (tcp://HOST:PORT or local), not {scheduler!r}")
    with exclusive_run(out, "out") if out is not None else nullcontext():
        result = calibrate(family, n, epsilon, trials, methods, prior, seed, draws, scheduler=scheduler,
                           quiet=quiet, resume=resume, checkpoint=checkpoint, chunk=unit_size, workers=workers,
                           return_ranks=plot is not None, repair=repair, worker_timeout=worker_timeout,
                           mechanism=mechanism, rho=rho)
        emit_study(result, result.pop("_ranks", None), out, plot, quiet)
    return result


def emit_study(result: dict, ranks, out, plot, quiet: bool) -> None:
    """A calibration study's outputs (family or user Model): ``out`` JSON (atomic), ``plot`` rank
    ECDFs of each method's first coordinate, the table (``quiet`` silences it only when the result
    goes to a file), and where each file went."""
    if out is not None:
        from ..checkpoint import content_hash, to_json_value
        from ..files import write_json

        result.update(to_json_value(result))  # as it reads back, so that the seal verifies
        result["sha256"] = content_hash(result)
        hint = "its checkpoint is kept: free space and rerun with --resume" if result.get("run_id") else ""
        write_json(out, result, field="out", hint=hint)
    if plot is not None:
        plot_rank_ecdf({m: u[:, 0] for m, u in ranks.items()}, plot,
                       title=f"{result['family']}, n={result['n']}, {budget_label(result, short=True)}, "
                             f"{result['coordinates'][0]}")
    if not quiet or (out is None and plot is None):
        # --quiet silences progress; with nowhere else to go, the result is still printed
        _print_table(result)
    for path in (out, plot):
        if path is not None:
            print(f"wrote {path}")


def budget_label(result: dict, short: bool = False) -> str:
    """``epsilon=1`` for the simulator's own mechanism, else the mechanism named with its budget,
    ``discrete-gaussian rho=0.5`` (``short``: eps, rho)."""
    mech = result.get("mechanism") or {}
    eps = "eps" if short else "epsilon"
    own = not mech or mech.get("name") == _own_mechanism(result.get("family"))
    if own and result.get("epsilon") is not None:  # the simulator's own release, at calibrate's --epsilon
        return f"{eps}={result['epsilon']:g}"
    budget = f"rho={mech['rho']:g}" if "rho" in mech else f"{eps}={mech['epsilon']:g}"
    return f"{mech['name']} {budget}"


def _own_mechanism(family) -> str | None:
    """The mechanism ``family``'s simulator releases through unless told otherwise (None: not a family of the
    registry, e.g. a user model's study, or one whose simulator takes no ``--mechanism``)."""
    from ..families import get_family

    try:
        own = get_family(family).simulate_mechanisms
    except InputError:
        return None
    return own[0] if own else None


def _print_table(result: dict) -> None:
    coordinates = result.get("coordinates") or ["no coordinate: every trial failed"]
    print(f"calibration of {result['family']} (n={result['n']}, {budget_label(result)}, "
          f"{result['trials']} trials, {coordinates[0]})")
    print(f"{'method':<14}{'KS':>8}{'p-value':>10}{'cov50':>8}{'cov90':>8}{'cov95':>8}{'MMD':>10}")
    for method, r in result["methods"].items():
        mmd = "-" if r["mmd"] is None else f"{r['mmd']:.4f}"
        cov = r["coverage"]
        if cov is None:
            print(f"{method:<14}{'(every trial failed)':>42}")
            continue
        print(f"{method:<14}{r['ks']:>8.3f}{r['ks_pvalue']:>10.3g}{cov['0.5']:>8.3f}{cov['0.9']:>8.3f}"
              f"{cov['0.95']:>8.3f}{mmd:>10}")
    if result.get("failed_trials"):
        first = result["failures"][0]
        print(f"{result['failed_trials']} trial(s) failed and were left out (first: trial {first['trial']}, "
              f"{first['method']}: {first['error']}); see 'failures' in the JSON")
    sys.stdout.flush()


