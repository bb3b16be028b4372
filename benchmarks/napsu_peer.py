"""dpposterior's ``marginals`` engine ``da`` side by side with NAPSU-MQ (twinify 2.0.0) on the same noisy marginals.

NAPSU-MQ: Räisä, Jälkö, Kaski & Honkela, "Noise-aware statistical inference with differentially private synthetic
data", AISTATS 2023; implemented in ``twinify.napsu_mq`` (``NapsuMQModel(column_feature_set, use_laplace_
approximation=True).fit(data, rng, epsilon, delta, query_sets=...)``).

The side environment
--------------------
twinify 2.0.0 needs an old JAX stack; it lives in its own interpreter, which this script calls through
``subprocess`` (``--napsu-python PATH``, default ``/tmp/napsu/bin/python``).  What worked (Python 3.11)::

    python3.11 -m venv /tmp/napsu && /tmp/napsu/bin/pip install twinify==2.0.0 numpyro==0.10.1 jax==0.4.13 \\
        jaxlib==0.4.13 "matplotlib<3.9" "arviz<0.17"
    /tmp/napsu/bin/python -c "import twinify.napsu_mq"          # check

The driver and dpposterior's workers run in the interpreter that runs this script (dpposterior importable: the
project's venv, or ``PYTHONPATH=src``).  Every worker is a fresh process (first-call costs included: imports are
timed apart, numba's cache load and JAX's compilation are inside the timed call).  NAPSU-MQ's workers run with
``JAX_ENABLE_X64=1`` (as NAPSU-MQ-experiments' scripts set ``jax_enable_x64``) and ``JAX_PLATFORMS=cpu``.

Part 1, small domain, accuracy (``--small``)
--------------------------------------------
Four columns of ``examples/marginals/adult-2000.csv`` (n = 2,000): age (5 levels), education (4), sex (2),
income (2); the two-way cliques (age, income), (education, income), (sex, income); epsilon in {0.5, 1},
delta = n^-2.  For each (epsilon, seed) the driver draws one standard normal z per cell of each clique's full
table.  The noise scale is NAPSU-MQ's own: sigma = ``twinify.napsu_mq.privacy_accounting.sigma(epsilon, delta,
sqrt(2 k))`` (analytic Gaussian, Balle & Wang 2018, k cliques, L2 sensitivity sqrt(2) per table under
replace-one), asked of the side interpreter once per epsilon.  Then, interleaved, in fresh processes:

* ``ours``: the release {the k full tables + sigma z, mechanism ``gaussian`` with that sigma, each record's
  epsilon stated at delta (analytic Gaussian, sensitivity sqrt(2)), ``report_delta`` = delta, ``n`` public};
  ``dpposterior.infer(release, method="da")`` with its defaults (4 chains x 1,000 draws after 500 warm-up sweeps,
  hyper-Dirichlet prior of concentration 1).  The release's composed epsilon at delta is recorded.
* ``napsu``: ``NapsuMQModel(cliques).fit(frame, d3p.random.PRNGKey(seed), epsilon, delta, query_sets=cliques)``
  unmodified, its default inference (Laplace approximation, then NUTS preconditioned by it: 4 chains x 2,000
  draws after 800 warm-up, sequential).  Its Gaussian-mechanism draw ``d3p.random.normal`` is replaced, for the
  duration of the call, by the z of the cells its canonical queries measure: it releases exactly those cells of
  the same noisy tables (its canonical query set omits, per clique, the cells that the others and n determine in
  the noise-free table -- e.g. cell (0, 0) of the first clique: see ``cells_dropped``).  The noisy statistic
  that reaches its inference is checked against counts + sigma z (``max_abs_noise_mismatch``).
* ``napsu-nuts``: the same with ``use_laplace_approximation=False``: fit's other inference, plain NUTS on the
  canonical parameters from numpyro's initialisation (same chains and lengths), no Laplace stage.
* ``napsu-laplace``: the same call, stopped after its Laplace approximation (its ``run_numpyro_mcmc_normalised``
  replaced by a stop), and the Laplace approximation's normal law taken as the posterior (8,000 draws): the
  fast mode the paper discusses; NAPSU-MQ's ``fit`` has no switch for it (``use_laplace_approximation=False``
  is plain NUTS, not a Laplace posterior).

Both posteriors are summarised by the draws of the probability table of (age, sex) -- never measured together --
and of the measured (age, income): per cell the mean, the central 90% interval, and the confidential table's
proportion.  NAPSU-MQ's tables come from its parameter draws lambda by enumerating the 80-cell domain
(p(x) ∝ exp(lambda . q(x)), q its canonical queries): exact, no synthetic-data noise.

Part 2, Adult, timing (``--adult``)
-----------------------------------
NAPSU-MQ alone (dpposterior's ``da`` on the same reduction is timed by ``benchmarks/marginals_adult.py``) on the
10-attribute Adult reduction of ``benchmarks/marginals_adult.py`` (``reduce_adult``, ``load_coded``, ``CLIQUES``;
Private-PGM's coded adult.csv, ``--adult-data``), epsilon 1, delta = n^-2, its own noise, its default inference,
under a hard wall-clock limit (``--adult-timeout``, default 600 s).  The worker prints when the Laplace stage and
the MCMC stage end; numpyro's progress bar (on by default in NAPSU-MQ) shows how far the sampler got when the
limit kills it.

Output: one JSON document (``--out``, else ``<scratch>/napsu_peer.json``), ``/proc/loadavg`` before and after every
worker; ``--table RESULTS.json`` prints the markdown tables of a saved run.

    python benchmarks/napsu_peer.py                                       # both parts, 3 seeds (about 25 min)
    python benchmarks/napsu_peer.py --no-adult --seeds 1 --epsilons 1     # a quick look
    python benchmarks/napsu_peer.py --table /tmp/dpposterior-benchmarks/napsu_peer.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _out import loadavg  # this folder is on sys.path: the script is run by path, its workers by __file__

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SMALL_DATA = ROOT / "examples" / "marginals" / "adult-2000.csv"
SMALL_COLUMNS = ["age", "education", "sex", "income"]
#: in the columns' order (NAPSU-MQ's canonical queries key a clique by its attributes in column order)
SMALL_CLIQUES = [("age", "income"), ("education", "income"), ("sex", "income")]
UNMEASURED = ("age", "sex")
MEASURED = ("age", "income")
EPSILONS = (0.5, 1.0)
LEVEL = 0.90
NAPSU_MODES = ("napsu", "napsu-nuts", "napsu-laplace")


def _summ(draws: np.ndarray, truth: np.ndarray) -> dict:
    """draws (S, *shape) of a probability table -> per cell (C order) mean, 5% and 95% quantiles, truth."""
    flat = draws.reshape(draws.shape[0], -1)
    lo, hi = np.quantile(flat, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return {"shape": list(draws.shape[1:]), "mean": flat.mean(0).tolist(), "lo": lo.tolist(), "hi": hi.tolist(),
            "sd": flat.std(0).tolist(), "truth": np.asarray(truth, float).ravel().tolist()}


def _small_frame(path: Path):
    import pandas as pd

    df = pd.read_csv(path)[SMALL_COLUMNS]
    sizes = {"age": 5, "education": 4, "sex": 2, "income": 2}  # examples/marginals/README.md
    for a, k in sizes.items():
        if df[a].min() < 0 or df[a].max() >= k:
            raise SystemExit(f"napsu_peer: {path}: column {a} outside 0..{k - 1}")
    return df, sizes


def _table(codes: np.ndarray, shape) -> np.ndarray:
    flat = np.ravel_multi_index(tuple(codes.T), shape)
    return np.bincount(flat, minlength=math.prod(shape)).reshape(shape).astype(float)


def _truth(df, sizes, attrs) -> np.ndarray:
    return _table(df[list(attrs)].to_numpy(), [sizes[a] for a in attrs]) / len(df)


# ============================================================================ dpposterior worker (this interpreter)
def ours_worker(spec: dict) -> dict:
    t0 = time.perf_counter()
    import dpposterior
    from dpposterior.mechanisms.gaussian import _delta_of_sigma, epsilon_of_sigma
    from dpposterior.release import load_release

    import_seconds = time.perf_counter() - t0
    df, sizes = _small_frame(Path(spec["data"]))
    n, sigma, delta = len(df), float(spec["sigma"]), float(spec["delta"])
    l2 = math.sqrt(2.0)
    eps_each = epsilon_of_sigma(sigma, delta, l2)
    while _delta_of_sigma(sigma, eps_each, l2) > delta:  # brentq may land a hair low
        eps_each = float(np.nextafter(eps_each, np.inf))
    meas = []
    for c in spec["cliques"]:
        shape = [sizes[a] for a in c]
        noisy = _table(df[c].to_numpy(), shape) + sigma * np.asarray(spec["z"][",".join(c)], float).reshape(shape)
        meas.append({"clique": list(c), "value": noisy.tolist(), "mechanism": "gaussian", "sigma": sigma,
                     "epsilon": eps_each, "delta": delta, "sensitivity": l2})
    record = {"format": "dpposterior-release/1", "family": "marginals", "n": n,
              "domain": {a: sizes[a] for a in SMALL_COLUMNS}, "measurements": meas, "report_delta": delta,
              "description": f"napsu_peer: adult-2000 {SMALL_COLUMNS}, NAPSU-MQ's sigma at epsilon "
                             f"{spec['epsilon']}, seed {spec['seed']}"}
    rel = load_release(record)
    cost = rel.privacy()
    t0 = time.perf_counter()
    post = dpposterior.infer(rel, method=spec.get("ours_method", "da"), prior=spec.get("ours_prior"),
                             seed=int(spec["seed"]))
    infer_seconds = time.perf_counter() - t0
    out = {"method": "ours", "import_seconds": import_seconds, "infer_seconds": infer_seconds,
           "epsilon_per_measurement": eps_each, "release_epsilon": float(cost.epsilon),
           "release_delta": float(cost.delta), "draws": int(post.nchains * post.ndraws)}
    for key, attrs in (("unmeasured", tuple(spec.get("unmeasured", UNMEASURED))), ("measured", MEASURED)):
        d = np.asarray(post.marginal(list(attrs)).values)
        out[key] = _summ(d.reshape(-1, *d.shape[2:]), _truth(df, sizes, attrs))
    try:
        from dpposterior.convergence import diagnose

        rh, es = [], []
        for t in post.clique_tables():
            dg = diagnose(t, which=("rhat", "ess_bulk"))
            rh.append(float(np.nanmax(dg["rhat"])))
            es.append(float(np.nanmin(dg["ess_bulk"])))
        out["max_rhat"], out["min_ess_bulk"] = max(rh), min(es)
    except Exception as exc:  # noqa: BLE001
        out["diagnostics_error"] = repr(exc)[:300]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


# ============================================================================ NAPSU-MQ worker (side interpreter)
class _StopAfterLaplace(Exception):
    pass


def _napsu_imports():
    t0 = time.perf_counter()
    import d3p.random  # noqa: F401
    import twinify.napsu_mq.maximum_entropy_inference as mei  # noqa: F401
    from twinify.napsu_mq import NapsuMQModel  # noqa: F401

    return time.perf_counter() - t0


def _stage_wrappers(mei, log: dict, stop_after_laplace: bool = False):
    """Wrap NAPSU-MQ's two inference stages (timing, their inputs; optionally stop after the Laplace stage)."""
    import jax

    lap0, mc0 = mei.run_numpyro_laplace_approximation, mei.run_numpyro_mcmc_normalised
    mcp = mei.run_numpyro_mcmc

    def lap(rng, suff_stat, n, sigma_DP, med, *a, **k):
        t = time.perf_counter()
        res = lap0(rng, suff_stat, n, sigma_DP, med, *a, **k)
        jax.block_until_ready(res[0].loc)
        log["laplace_seconds"] = time.perf_counter() - t
        log["dp_suff_stat"], log["sigma_DP"], log["med"], log["laplace"] = np.asarray(suff_stat), sigma_DP, med, res[0]
        print(f"STAGE laplace done {log['laplace_seconds']:.1f} s", file=sys.stderr, flush=True)
        return res

    def mc(rng, suff_stat, n, sigma_DP, med, laplace_approx, *a, **k):
        if stop_after_laplace:
            raise _StopAfterLaplace
        t = time.perf_counter()
        mcmc, back = mc0(rng, suff_stat, n, sigma_DP, med, laplace_approx, *a, **k)
        log["mcmc_seconds"] = time.perf_counter() - t
        log["mcmc"] = mcmc
        print(f"STAGE mcmc done {log['mcmc_seconds']:.1f} s", file=sys.stderr, flush=True)
        return mcmc, back

    def plain(rng, suff_stat, n, sigma_DP, med, *a, **k):
        t = time.perf_counter()
        mcmc = mcp(rng, suff_stat, n, sigma_DP, med, *a, **k)
        log["mcmc_seconds"], log["mcmc"] = time.perf_counter() - t, mcmc
        log["dp_suff_stat"], log["sigma_DP"], log["med"] = np.asarray(suff_stat), sigma_DP, med
        return mcmc

    mei.run_numpyro_laplace_approximation, mei.run_numpyro_mcmc_normalised = lap, mc
    mei.run_numpyro_mcmc = plain


def _mcmc_diagnostics(mcmc) -> dict:
    from numpyro.diagnostics import summary

    out = {}
    try:
        extra = mcmc.get_extra_fields(group_by_chain=True)
        if "diverging" in extra:
            out["divergences"] = int(np.asarray(extra["diverging"]).sum())
        s = summary(mcmc.get_samples(group_by_chain=True))
        out["max_rhat"] = max(float(np.nanmax(v["r_hat"])) for v in s.values())
        out["min_ess"] = min(float(np.nanmin(v["n_eff"])) for v in s.values())
    except Exception as exc:  # noqa: BLE001
        out["diagnostics_error"] = repr(exc)[:300]
    return out


def _categorical(df, sizes_or_levels):
    import pandas as pd

    out = pd.DataFrame()
    for a, lev in sizes_or_levels.items():
        cats = list(range(lev)) if isinstance(lev, int) else list(lev)
        out[a] = pd.Categorical(df[a], categories=cats)
        if out[a].isna().any():
            raise SystemExit(f"napsu_peer: column {a} has values outside its levels")
    return out


def napsu_sigma_worker(spec: dict) -> dict:
    import importlib.metadata as md

    import twinify.napsu_mq.privacy_accounting as pa

    k = len(spec["cliques"])
    out = {"sigma": {str(e): float(pa.sigma(float(e), float(spec["delta"]), math.sqrt(2 * k)))
                     for e in spec["epsilons"]}}
    out["versions"] = {p: md.version(p) for p in ("twinify", "numpyro", "jax", "jaxlib", "d3p", "arviz", "numpy")}
    out["python"] = sys.version.split()[0]
    return out


def napsu_small_worker(spec: dict) -> dict:
    import_seconds = _napsu_imports()
    import d3p.random
    import jax
    import twinify.napsu_mq.maximum_entropy_inference as mei
    from twinify.napsu_mq import NapsuMQModel
    from twinify.napsu_mq.marginal_query import FullMarginalQuerySet

    mode = spec["mode"]
    df, sizes = _small_frame(Path(spec["data"]))
    frame = _categorical(df, sizes)
    cliques = [tuple(c) for c in spec["cliques"]]
    eps, delta, seed = float(spec["epsilon"]), float(spec["delta"]), int(spec["seed"])
    values_by_col = {a: list(range(sizes[a])) for a in SMALL_COLUMNS}

    # the cells NAPSU-MQ's canonical queries measure, in its order (fit computes the same set: deterministic)
    canon = FullMarginalQuerySet(cliques, values_by_col).get_canonical_queries().flatten().queries
    z_sub, keys = [], []
    for q in canon:
        feats = tuple(q.features)
        match = [c for c in cliques if set(c) == set(feats)]
        if not match:
            raise SystemExit(f"napsu_peer: canonical query over {feats} is not one of the cliques")
        c = match[0]
        cell = tuple(int(q.value[list(feats).index(a)]) for a in c)
        z = np.asarray(spec["z"][",".join(c)], float).reshape([sizes[a] for a in c])
        z_sub.append(z[cell])
        keys.append((",".join(c), cell))
    z_sub = np.asarray(z_sub)
    n_cells = sum(math.prod(sizes[a] for a in c) for c in cliques)

    import d3p.random as d3r

    orig_normal = d3r.normal

    def injected(key, shape=(), dtype=None):  # fit's Gaussian mechanism: sigma_DP * this
        if tuple(shape) != z_sub.shape:
            raise SystemExit(f"napsu_peer: NAPSU-MQ drew noise of shape {tuple(shape)}, expected {z_sub.shape}")
        return jax.numpy.asarray(z_sub)

    log: dict = {}
    _stage_wrappers(mei, log, stop_after_laplace=(mode == "napsu-laplace"))
    model = NapsuMQModel(column_feature_set=cliques, use_laplace_approximation=(mode != "napsu-nuts"))
    d3r.normal = injected
    t0 = time.perf_counter()
    try:
        try:
            result = model.fit(frame, d3p.random.PRNGKey(seed), eps, delta, query_sets=cliques)
            lambdas = np.asarray(result.posterior_values)
            queries = result.queries.flatten().queries
        except _StopAfterLaplace:
            lap = log["laplace"]
            draws = lap.sample(jax.random.PRNGKey(seed + 1), (8000,))
            lambdas = np.asarray(draws)
            queries = log["med"].flat_queries.queries
        fit_seconds = time.perf_counter() - t0
    finally:
        d3r.normal = orig_normal
    if [q.as_tuple() for q in queries] != [q.as_tuple() for q in canon]:
        raise SystemExit("napsu_peer: fit's canonical queries differ from the ones the noise was mapped to")

    # the noisy statistic fit passed to inference vs counts + sigma z on those cells
    X = frame.apply(lambda s: s.cat.codes).to_numpy()
    from twinify.napsu_mq.marginal_query import QueryList

    ql = QueryList(queries)
    counts = ql(X).sum(0).astype(float)
    mismatch = float(np.max(np.abs(log["dp_suff_stat"] - (counts + float(spec["sigma"]) * z_sub))))

    # exact tables of the model at each lambda draw, by enumeration of the domain
    import itertools

    grid = np.array(list(itertools.product(*[range(sizes[a]) for a in SMALL_COLUMNS])))
    Q = ql(grid).astype(float)  # (cells, d)
    logits = lambdas @ Q.T
    logits -= logits.max(1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(1, keepdims=True)
    p = p.reshape(-1, *[sizes[a] for a in SMALL_COLUMNS])
    out = {"method": mode, "import_seconds": import_seconds, "infer_seconds": fit_seconds,
           "laplace_seconds": log.get("laplace_seconds"), "mcmc_seconds": log.get("mcmc_seconds"),
           "sigma_DP": float(log["sigma_DP"]), "n_queries": len(queries), "n_cells": n_cells,
           "cells_dropped": n_cells - len(queries), "max_abs_noise_mismatch": mismatch, "draws": int(len(lambdas))}
    all_cells = {(",".join(c), cell) for c in cliques
                 for cell in itertools.product(*[range(sizes[a]) for a in c])}
    out["dropped"] = sorted(f"{k}{list(v)}" for k, v in all_cells - set(keys))
    for key, attrs in (("unmeasured", tuple(spec.get("unmeasured", UNMEASURED))), ("measured", MEASURED)):
        axes = tuple(i + 1 for i, a in enumerate(SMALL_COLUMNS) if a not in attrs)
        t = p.sum(axis=axes)
        order = [a for a in SMALL_COLUMNS if a in attrs]
        t = np.moveaxis(t, [order.index(a) + 1 for a in attrs], range(1, len(attrs) + 1))
        out[key] = _summ(t, _truth(df, sizes, attrs))
    if "mcmc" in log:
        out.update(_mcmc_diagnostics(log["mcmc"]))
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def napsu_adult_worker(spec: dict) -> dict:
    sys.path.insert(0, str(HERE))
    import marginals_adult as ma

    import_seconds = _napsu_imports()
    import d3p.random
    import twinify.napsu_mq.maximum_entropy_inference as mei
    from twinify.napsu_mq import NapsuMQModel

    frame = ma.reduce_adult(ma.load_coded(Path(spec["data"])))
    n = len(frame)
    data = _categorical(frame, ma.public_domain(frame))
    eps, delta, seed = float(spec["epsilon"]), float(n) ** -2, int(spec["seed"])
    print(f"STAGE data n={n} start", file=sys.stderr, flush=True)
    log: dict = {}
    _stage_wrappers(mei, log)
    cliques = [tuple(c) for c in ma.CLIQUES]
    t0 = time.perf_counter()
    result = NapsuMQModel(column_feature_set=cliques).fit(data, d3p.random.PRNGKey(seed), eps, delta,
                                                           query_sets=cliques)
    out = {"import_seconds": import_seconds, "infer_seconds": time.perf_counter() - t0, "n": n,
           "laplace_seconds": log.get("laplace_seconds"), "mcmc_seconds": log.get("mcmc_seconds"),
           "sigma_DP": float(log["sigma_DP"]), "n_queries": int(np.asarray(result.posterior_values).shape[1])}
    out.update(_mcmc_diagnostics(log["mcmc"]))
    return out


# ============================================================================ driver
def napsu_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update({"JAX_ENABLE_X64": "1", "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"})
    return env


def ours_env() -> dict:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


_PROGRESS = re.compile(r"(warmup|sample)\s*:\s*(\d+)%\|[^|]*\|\s*(\d+)/(\d+)\s*\[([^\]]*)\]")


def progress_of(stderr: str) -> dict | None:
    """The last numpyro progress-bar state in ``stderr`` and how many chains' bars were seen finished."""
    parts = re.split(r"[\r\n]", stderr)
    last = None
    for line in parts:
        m = _PROGRESS.search(line)
        if m:
            last = {"phase": m[1], "percent": int(m[2]), "iteration": int(m[3]), "of": int(m[4]), "timing": m[5]}
    if last is None:
        return None
    last["bars_completed"] = sum(1 for line in parts if (m := _PROGRESS.search(line)) and int(m[3]) == int(m[4]))
    return last


def run_worker(python: str, kind: str, spec: dict, env: dict, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    err_path = path + ".stderr"
    rec = {"loadavg_before": loadavg()}
    t0 = time.perf_counter()
    with open(err_path, "w") as err:
        proc = subprocess.Popen([python, __file__, "--worker", kind, "--spec", path], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        try:
            stdout, _ = proc.communicate(timeout=timeout)
            rec["status"] = "ok" if proc.returncode == 0 else f"failed rc={proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own process group (start_new_session)
            stdout, _ = proc.communicate()
            rec["status"] = f"timeout after {timeout:g} s"
    rec["process_seconds"] = time.perf_counter() - t0
    rec["loadavg_after"] = loadavg()
    stderr = Path(err_path).read_text(errors="replace")
    os.unlink(path)
    os.unlink(err_path)
    line = [ln for ln in (stdout or "").splitlines() if ln.startswith("RESULT ")]
    if line:
        rec.update(json.loads(line[-1][7:]))
    elif rec["status"] == "ok":
        rec["status"] = "failed: no RESULT line"
    if rec["status"] != "ok":
        rec["stderr_tail"] = re.sub(r"\r", "\n", stderr)[-2000:]
        rec["stages"] = re.findall(r"STAGE [^\r\n]*", stderr)
        rec["progress"] = progress_of(stderr)
    return rec


def draw_z(cliques, sizes, seed_seq) -> dict:
    rng = np.random.default_rng(seed_seq)
    return {",".join(c): rng.standard_normal(math.prod(sizes[a] for a in c)).tolist() for c in cliques}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--napsu-python", default="/tmp/napsu/bin/python")
    ap.add_argument("--small-data", type=Path, default=SMALL_DATA)
    ap.add_argument("--adult-data", type=Path, default=None,
                    help="Private-PGM's coded adult.csv (default: benchmarks/marginals_adult.py's, else "
                         ".devdata/adult.csv)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--base-seed", type=int, default=20230)
    ap.add_argument("--modes", nargs="+", default=list(NAPSU_MODES), choices=NAPSU_MODES)
    ap.add_argument("--small-timeout", type=float, default=600)
    ap.add_argument("--no-small", action="store_true")
    ap.add_argument("--no-adult", action="store_true")
    ap.add_argument("--adult-epsilon", type=float, default=1.0)
    ap.add_argument("--adult-timeout", type=float, default=600)
    ap.add_argument("--cliques", default=None,
                    help="the small part's cliques, e.g. 'age,income;sex,income;age,sex' (each in the columns' "
                         "order: age, education, sex, income); default: " + ";".join(",".join(c)
                                                                                 for c in SMALL_CLIQUES))
    ap.add_argument("--unmeasured", default=",".join(UNMEASURED),
                    help="the attributes of the table the small part compares (default: age,sex)")
    ap.add_argument("--ours-method", default="da", help="dpposterior's method in the small part (default: da)")
    ap.add_argument("--ours-prior", default=None,
                    help="dpposterior's prior in the small part, as JSON (e.g. '{\"kind\": \"log-linear\"}')")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--table", type=Path, default=None, help="print the markdown tables of a saved run and exit")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        spec = json.loads(Path(args.spec).read_text())
        fn = {"ours": ours_worker, "napsu-small": napsu_small_worker, "napsu-sigma": napsu_sigma_worker,
              "napsu-adult": napsu_adult_worker}[args.worker]
        print("RESULT " + json.dumps(fn(spec)), flush=True)
        return
    if args.table:
        print(tables(json.loads(args.table.read_text())))
        return

    sys.path.insert(0, str(HERE))
    from _out import scratch

    cliques = ([tuple(c.split(",")) for c in args.cliques.split(";")] if args.cliques else list(SMALL_CLIQUES))
    unmeasured = tuple(args.unmeasured.split(","))
    for c in cliques + [unmeasured]:
        if [a for a in c if a not in SMALL_COLUMNS] or list(c) != sorted(c, key=SMALL_COLUMNS.index):
            sys.exit(f"napsu_peer: {','.join(c)}: attributes of {', '.join(SMALL_COLUMNS)}, in that order")
    ours_prior = json.loads(args.ours_prior) if args.ours_prior else None

    out_path = args.out or scratch() / "napsu_peer.json"
    doc = {"meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg_start": loadavg(),
                    "affinity": sorted(os.sched_getaffinity(0)), "nproc": os.cpu_count(),
                    "ours_python": sys.executable, "napsu_python": args.napsu_python,
                    "small": {"data": str(args.small_data), "columns": SMALL_COLUMNS,
                              "cliques": [list(c) for c in cliques], "unmeasured": list(unmeasured),
                              "measured": list(MEASURED), "epsilons": args.epsilons, "seeds": args.seeds,
                              "level": LEVEL, "ours_method": args.ours_method, "ours_prior": ours_prior}},
           "small": [], "adult": None}
    try:
        import importlib.metadata as md

        doc["meta"]["ours_versions"] = {p: md.version(p) for p in ("numba", "numpy", "scipy")}
    except Exception:  # noqa: BLE001
        pass

    def save():
        doc["meta"]["loadavg_end"] = loadavg()
        out_path.write_text(json.dumps(doc, indent=1))

    if not args.no_small:
        df, sizes = _small_frame(args.small_data)
        n = len(df)
        delta = float(n) ** -2
        sig = run_worker(args.napsu_python, "napsu-sigma", {"cliques": cliques, "epsilons": args.epsilons,
                                                             "delta": delta}, napsu_env(), 300)
        if sig["status"] != "ok":
            sys.exit(f"napsu_peer: the side interpreter failed: {sig.get('stderr_tail')}")
        doc["meta"]["napsu_versions"], doc["meta"]["napsu_python_version"] = sig["versions"], sig["python"]
        doc["meta"]["small"].update({"n": n, "delta": delta, "sigma": sig["sigma"]})
        for eps in args.epsilons:
            for s in range(args.seeds):
                seed = int(np.random.SeedSequence([args.base_seed, int(round(eps * 1e6)), s]).generate_state(1)[0])
                seed %= 2 ** 31
                spec = {"data": str(args.small_data), "cliques": [list(c) for c in cliques], "epsilon": eps,
                        "delta": delta, "seed": seed, "sigma": sig["sigma"][str(eps)],
                        "unmeasured": list(unmeasured), "ours_method": args.ours_method, "ours_prior": ours_prior,
                        "z": draw_z(cliques, sizes, np.random.SeedSequence([args.base_seed, seed]))}
                row = {"epsilon": eps, "repeat": s, "seed": seed, "sigma": spec["sigma"], "runs": []}
                doc["small"].append(row)
                runs = [("ours", sys.executable, "ours", ours_env())]
                runs += [(m, args.napsu_python, "napsu-small", napsu_env()) for m in args.modes]
                for label, py, kind, env in runs:
                    rec = run_worker(py, kind, dict(spec, mode=label), env, args.small_timeout)
                    rec.setdefault("method", label)
                    row["runs"].append(rec)
                    print(f"[small eps={eps} seed#{s}] {label}: {rec['status']}, "
                          f"{rec.get('infer_seconds', float('nan')):.1f} s infer, "
                          f"{rec['process_seconds']:.1f} s process (load {rec['loadavg_before']})", flush=True)
                    save()
    if not args.no_adult:
        data = args.adult_data
        if data is None:
            import marginals_adult as ma

            cands = [ma.DEFAULT_DATA, ROOT / ".devdata" / "adult.csv"]
            data = next((c for c in cands if c.is_file()), cands[0])
        spec = {"data": str(data), "epsilon": args.adult_epsilon, "seed": args.base_seed}
        rec = run_worker(args.napsu_python, "napsu-adult", spec, napsu_env(), args.adult_timeout)
        rec.update({"epsilon": args.adult_epsilon, "timeout_s": args.adult_timeout, "data": str(data)})
        doc["adult"] = rec
        print(f"[adult eps={args.adult_epsilon}] napsu: {rec['status']} {rec.get('stages', '')} "
              f"{rec.get('progress', '')}", flush=True)
    save()
    print(f"wrote {out_path}")
    print(tables(doc))


# ============================================================================ tables
def _fmt_cell(s: dict, i: int) -> str:
    return f"{s['mean'][i]:.3f} [{s['lo'][i]:.3f}, {s['hi'][i]:.3f}]"


def tables(doc: dict) -> str:
    meta = doc["meta"]
    small = meta.get("small", {})
    lines = []
    if doc.get("small"):
        lines += [f"Small domain: {small.get('data')} columns {', '.join(small['columns'])}, n = {small.get('n')}, "
                  f"cliques {'; '.join(','.join(c) for c in small['cliques'])}, delta = n^-2; "
                  f"cores {len(meta.get('affinity', []))}; load {meta.get('loadavg_start')} -> "
                  f"{meta.get('loadavg_end')}", "",
                  "| epsilon | seed | method | status | infer s (process s) | unmeasured (" + ",".join(small["unmeasured"])
                  + "): mean abs err | 90% width (mean) | truth covered | max R-hat | load before |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for row in doc["small"]:
            for r in row["runs"]:
                if r.get("status") != "ok":
                    lines.append(f"| {row['epsilon']:g} | {row['repeat']} | {r['method']} | {r['status']} | "
                                 f"({r['process_seconds']:.1f}) | | | | | {r['loadavg_before'].split()[0]} |")
                    continue
                u = r["unmeasured"]
                m, t = np.array(u["mean"]), np.array(u["truth"])
                lo, hi = np.array(u["lo"]), np.array(u["hi"])
                cov = int(((lo <= t) & (t <= hi)).sum())
                lines.append(f"| {row['epsilon']:g} | {row['repeat']} | {r['method']} | ok | "
                             f"{r['infer_seconds']:.1f} ({r['process_seconds']:.1f}) | {np.abs(m - t).mean():.4f} | "
                             f"{(hi - lo).mean():.4f} | {cov}/{len(t)} | {r.get('max_rhat', float('nan')):.3f} | "
                             f"{r['loadavg_before'].split()[0]} |")
        lines += ["", "Per cell of the unmeasured table, posterior mean [90% interval], one (epsilon, seed) each:", ""]
        seen = set()
        for row in doc["small"]:
            if row["epsilon"] in seen:
                continue
            seen.add(row["epsilon"])
            ok = [r for r in row["runs"] if r.get("status") == "ok"]
            if not ok:
                continue
            names = [r["method"] for r in ok]
            lines += [f"epsilon {row['epsilon']:g}, seed #{row['repeat']} (sigma {row['sigma']:.2f}):", "",
                      "| cell | truth | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
            shape = ok[0]["unmeasured"]["shape"]
            for i in range(len(ok[0]["unmeasured"]["mean"])):
                idx = np.unravel_index(i, shape)
                lines.append(f"| {tuple(int(j) for j in idx)} | {ok[0]['unmeasured']['truth'][i]:.3f} | "
                             + " | ".join(_fmt_cell(r["unmeasured"], i) for r in ok) + " |")
            lines.append("")
        # agreement between ours and NAPSU-MQ's default, per (eps, seed)
        lines += ["Agreement with NAPSU-MQ (its default where it finished, else its plain NUTS) on the same release, "
                  "unmeasured table:", "",
                  "| epsilon | seed | method | vs | max abs diff of means | mean abs diff of means | "
                  "width ratio (mean over cells) |", "|---|---|---|---|---|---|---|"]
        for row in doc["small"]:
            by = {r["method"]: r for r in row["runs"] if r.get("status") == "ok"}
            refname = next((m for m in ("napsu", "napsu-nuts") if m in by), None)
            if refname is None:
                continue
            ref = by[refname]["unmeasured"]
            for name, r in by.items():
                if name == refname:
                    continue
                d = np.abs(np.array(r["unmeasured"]["mean"]) - np.array(ref["mean"]))
                w = (np.array(r["unmeasured"]["hi"]) - np.array(r["unmeasured"]["lo"])) / \
                    (np.array(ref["hi"]) - np.array(ref["lo"]))
                lines.append(f"| {row['epsilon']:g} | {row['repeat']} | {name} | {refname} | {d.max():.4f} | {d.mean():.4f} | "
                             f"{w.mean():.2f} |")
    a = doc.get("adult")
    if a:
        lines += ["", f"Adult (10 attributes, NAPSU-MQ's reduction), NAPSU-MQ default inference, epsilon "
                      f"{a.get('epsilon')}: status {a.get('status')}; process {a.get('process_seconds', 0):.0f} s; "
                      f"Laplace stage {a.get('laplace_seconds')}; MCMC stage {a.get('mcmc_seconds')}; "
                      f"stages seen {a.get('stages')}; progress {a.get('progress')}; load {a.get('loadavg_before')} "
                      f"-> {a.get('loadavg_after')}"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
