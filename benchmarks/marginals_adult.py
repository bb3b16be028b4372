"""NAPSU-MQ's Adult experiment with the ``marginals`` family: coverage of a downstream logistic regression.

Protocol of Räisä, Jälkö, Kaski & Honkela, "Noise-aware statistical inference with differentially private
synthetic data" (AISTATS 2023), as their code runs it (GitHub ``DPBayes/NAPSU-MQ-experiments``, commit db0eb9e;
paths below are in that repository):

* data (``workflow/scripts/adult-reduced-discretise-data.py``): UCI Adult, train + test (48,842 rows); drop
  fnlwgt, educational-num, native-country, occupation, relationship; drop rows with a missing value in what is
  left (only workclass has "?": 2,799 rows) -> n = 46,043 rows of 10 attributes; age and hours-per-week cut
  into 5 equal-width bins (``pd.cut(x, 5)``), capital-gain and capital-loss made binary (``> 0``); education
  (16 levels), workclass (8), marital-status (7), race (5), gender (2), income (>50K: True/False) as they are.
* queries (``workflow/scripts/adult-reduced-select-queries.py``, committed result
  ``datasets/adult-reduced/queries.p``): MST selection run once on the real data at epsilon 0.5 (outside the
  experiment's budget) with five forced pairs (age,income), (race,income), (gender,income), (race,gender),
  (hours-per-week,income); the ten two-way marginals it gave are fixed for every epsilon and repeat:
  CLIQUES below.  No one-way marginals are released.
* release (``workflow/scripts/adult-reduced-synth-data.py``): the ten tables plus Gaussian noise, sigma from
  the analytic Gaussian mechanism (``lib/privacy_accounting.py``: Balle & Wang 2018) at (epsilon, delta = n^-2)
  with L2 sensitivity sqrt(2 x 10) (replace-one); epsilon in {0.1, 0.3, 0.5, 1.0}, 20 repeats (``workflow/
  Snakefile``).  NAPSU-MQ: NUTS, 4 chains x 2,000 draws after 800 warm-up; m in {10, 25, 50, 100} synthetic
  data sets of n rows each (``workflow/scripts/adult_reduced_problem.py``: ``max_ent_n_syn_datasets``).
* analysis (``adult_reduced_problem.py``, ``adult-reduced-orig-results.py``, ``adult-reduced-analysis.py``,
  ``lib/rubin.py``, ``lib/lr.py``): GLM Binomial (logit) of income on a constant, ``age_continuous`` (the
  midpoint of the age bin, parsed from its label ``(16.927, 31.6]``), race one-hot with reference White,
  gender one-hot with reference Female: 7 coefficients.  Per m: fits with variance >= 1000 dropped per
  coefficient, the rest combined by Raghunathan-Reiter-Rubin with the non-negative variance fix
  (``non_negative_conf_int``, n_syn = n_orig); "truth" = the same GLM on the real discretised data; coverage =
  truth inside the interval, at levels 0.05 .. 0.95 (main 0.8, 0.9, 0.95).  Peer "PGM": Private-PGM
  ``FactoredInference(engine="MD")`` on the same noisy tables, one synthetic set of n rows, the GLM's own
  Wald intervals ("non-split").

Here (what differs; see also REDUCTION_NOTES):

* data: Private-PGM's coded ``adult.csv`` (../shared/data/adult), mapped back to the raw values the codes
  allow: age = code + 16, hours-per-week = code + 1, category codes to their UCI labels (identified by their
  counts).  capital-gain: Private-PGM binned it (width ~1,000), so "> 0" is read as "code > 0": the 81 rows
  (of 48,842) with 0 < gain < ~1,000 count as no gain.  capital-loss code 0 is exactly loss 0 (46,560 rows).
* release: ``dpposterior.curator_api.release_from_csv(..., family="marginals", cliques=CLIQUES,
  mechanism="discrete-gaussian", target_epsilon=eps, delta=n^-2, seed=...)``: the same ten tables, discrete
  Gaussian noise, rho split equally, the whole release's zCDP converted to (eps, delta) by Canonne, Kamath &
  Steinke's bound (a little more noise than NAPSU-MQ's analytic Gaussian at the same (eps, delta): both sigmas
  are recorded).  The noise is seeded numpy (``seed``): reproducible, not for publication.
* posterior: ``dpposterior.infer(release, method="da")`` (exact data augmentation over the records, hyper-
  Dirichlet prior of concentration 1 on the decomposable model of the cliques) instead of NAPSU-MQ's maximum-
  entropy model with a N(0, 10^2 I) prior on the canonical parameters (the same model class: the cliques form
  a decomposable graph here, the graph's log-linear model).  Synthetic sets: ``dpposterior.synthetic.
  synthesize(post, m=max(--m), rows=n)`` (posterior draws without replacement; NAPSU-MQ: with replacement,
  independently per m); smaller m take the first m of them after a seeded shuffle.  Regression:
  ``benchmarks/_logistic.fit_logistic`` (the same maximum-likelihood estimate and inverse-Fisher variance as
  statsmodels' GLM); combination: ``dpposterior.combine.combine(rule="synthetic", n_synthetic=n,
  n_original=n)``, which is ``lib/rubin.py``'s ``non_negative_conf_int``.
* peer: ``mbi.estimation.mirror_descent`` (mbi 1.1.0, 1,000 iterations, known total n) on
  ``mbi.LinearMeasurement``\\ s built from the same release (noisy table, clique, stddev = sigma), then
  ``synthetic_data(rows=n, method=...)`` and the regression's own Wald intervals on that one set, for both of
  mbi's methods: "round" (the default, Private-PGM's randomized rounding, what NAPSU-MQ's PGM runs used) and
  "sample" (i.i.d. draws from the fitted model).  On the exact marginals (stddev 1) they differ here: the age
  slope is 0.018 from "round" and 0.036 from "sample" (real data 0.037), though "round" matches every measured
  pair closely -- it does not reproduce the model's higher-order structure; both are recorded.

``--resample`` leaves the protocol in one respect: each repeat releases n records drawn with replacement from the
real ones instead of the real records themselves.  The protocol holds the data fixed and varies only the noise, so
its "truth" (the real-data fit) is the regression of that one data set; but the noise-aware posterior, and the
synthetic-data combining rule, describe the regression of the population the records were drawn from, and their
intervals hold the sampling variance of n records as well.  With resampling the data vary between repeats as a
sample does, the real records' empirical law is the population and the real-data fit its regression, so the
intervals are scored against the quantity they describe; each sample's own fit (``sample_coef``) is scored too.

Timing: each (epsilon, repeat) runs in a fresh process (``--worker``); ``infer_seconds`` is the wall time of the
first ``infer`` call in that process (numba's cache load included).  The driver first runs one untimed worker on
a tiny release to fill numba's on-disk cache (as after install) and records its first and second tiny calls
(``numba_fill``: their difference is the one-time compile-or-load cost).  ``/proc/loadavg`` before and after every
worker, the CPU set, and the versions are recorded.

``--attributes 14``: all 14 Private-PGM attributes as coded (n = 48,842), ``cliques="mst"`` (one-ways, a
privately chosen spanning tree of pairs, those pairs; a third of rho each), timing only (release, infer, mbi).
``--max-cells K`` lets the selection choose only pairs whose table has at most K cells (the curator's
``--max-cells``): with K = 1,000 no pair of two 85-100-level attributes (age, fnlwgt, capital-gain, capital-loss,
hours-per-week), whose 8,500-10,000 cells hold a handful of records each.

    python benchmarks/marginals_adult.py                                   # 4 eps x 20 repeats (long)
    python benchmarks/marginals_adult.py --repeats 1 --epsilons 1 --draws 50 --warmup 50 --chains 1 --m 3
    python benchmarks/marginals_adult.py --attributes 14 --epsilons 1
    python benchmarks/marginals_adult.py --attributes 14 --epsilons 1 --max-cells 1000 --no-peer
    python benchmarks/marginals_adult.py --method clt --resample            # each repeat a bootstrap sample of the data
    python benchmarks/marginals_adult.py --table RESULTS.json               # the markdown table of a saved run
    python benchmarks/marginals_adult.py --method clt --resume PART.json    # finish an interrupted run
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "adult" / "adult.csv"

#: NAPSU-MQ's ten two-way marginals (datasets/adult-reduced/queries.p of DPBayes/NAPSU-MQ-experiments)
CLIQUES = [("age", "income"), ("age", "marital-status"), ("age", "workclass"), ("education", "income"),
           ("race", "income"), ("race", "gender"), ("gender", "income"), ("capital-gain", "income"),
           ("capital-loss", "income"), ("hours-per-week", "income")]
#: the pairs their MST selection was forced to include
FORCED = [("age", "income"), ("race", "income"), ("gender", "income"), ("race", "gender"), ("hours-per-week", "income")]
#: the reduced table's columns, in their CSV's order
REDUCED_COLUMNS = ["age", "workclass", "education", "marital-status", "race", "gender", "capital-gain",
                   "capital-loss", "hours-per-week", "income"]
#: the regression's coefficients (statsmodels' order after pd.get_dummies and the two drops)
COEFS = ["const", "age_continuous", "race_Amer-Indian-Eskimo", "race_Asian-Pac-Islander", "race_Black",
         "race_Other", "gender_Male"]
RACE_DUMMIES = ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other"]
LEVELS = (0.8, 0.9, 0.95)
#: mbi's two ways to a synthetic set: "round" (its default; Private-PGM's, as NAPSU-MQ ran it) and "sample" (i.i.d.)
MBI_METHODS = ("round", "sample")
EPSILONS = (0.1, 0.3, 0.5, 1.0)
M_VALUES = (10, 25, 50, 100)

# Private-PGM's codes -> UCI labels (identified by their counts in the 48,842 rows; adult.csv's README)
WORKCLASS = {0: "Private", 1: "Self-emp-not-inc", 2: "Self-emp-inc", 3: "Federal-gov", 4: "Local-gov",
             5: "State-gov", 6: "Without-pay", 7: "Never-worked", 8: None}  # 8 = "?" (2,799 rows)
EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad",
             "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters", "Prof-school", "Doctorate"]
MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent",
           "Married-AF-spouse"]
RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
SEX = ["Female", "Male"]
#: count checks of the mapping (code -> rows in the 48,842), from the UCI documentation of the raw data
EXPECTED = {"workclass": {8: 2799, 0: 33906}, "race": {0: 41762, 4: 4685, 1: 1519, 2: 470, 3: 406},
            "sex": {0: 16192, 1: 32650}, "marital-status": {0: 22379, 2: 16117, 6: 37},
            "education-num": {8: 15784, 9: 10878, 12: 8025}, "age": {1: 595, 74: 55}, "hours-per-week": {39: 22803},
            "capital-loss": {0: 46560}}

REDUCTION_NOTES = [
    "source: Private-PGM's coded adult.csv, not the raw UCI file NAPSU-MQ reads (both 48,842 rows, train + test)",
    "age = code + 16 and hours-per-week = code + 1 (exact: every value is its own code), then pd.cut(x, 5)",
    "capital-gain > 0 read as code > 0: 81 of the 48,842 rows (0 < gain < ~1,000, Private-PGM's first bin) count "
    "as no gain; capital-loss code 0 is exactly loss 0",
    "education from education-num (one to one); workclass '?' (code 8, 2,799 rows) dropped as NAPSU-MQ's dropna does",
]


def require_data(path: Path) -> None:
    if not Path(path).is_file():
        sys.exit(f"marginals_adult: no data at {path}. It is Private-PGM's data/adult.csv (ryan112358/private-pgm, "
                 "Apache-2.0; ../shared/data/adult/README.md in this project's workspace): give --data PATH")


# ----------------------------------------------------------------------------- data
def load_coded(path: Path):
    import pandas as pd

    df = pd.read_csv(path)
    for col, counts in EXPECTED.items():
        got = df[col].value_counts()
        for code, n in counts.items():
            if int(got.get(code, 0)) != n:
                raise SystemExit(f"marginals_adult: {path} is not Private-PGM's adult.csv as expected: {col} code "
                                 f"{code} has {int(got.get(code, 0))} rows, expected {n}")
    return df


def interval_middle(label: str) -> float:
    """The midpoint of a pd.cut label ``(16.927, 31.6]`` as NAPSU-MQ's ``interval_middle`` parses it."""
    m = re.match(r"\((-?\d*\.?\d*), (-?\d*\.?\d*)]", label)
    return (float(m[1]) + float(m[2])) / 2


def reduce_adult(coded):
    """NAPSU-MQ's 10-attribute reduction from the coded table: a DataFrame of string labels, their columns."""
    import pandas as pd

    keep = coded["workclass"] != 8
    c = coded[keep]
    age = c["age"].to_numpy() + 16
    hours = c["hours-per-week"].to_numpy() + 1
    out = pd.DataFrame({
        "age": pd.cut(age, 5).astype(str),
        "workclass": c["workclass"].map(WORKCLASS).to_numpy(),
        "education": np.asarray(EDUCATION, dtype=object)[c["education-num"].to_numpy()],
        "marital-status": np.asarray(MARITAL, dtype=object)[c["marital-status"].to_numpy()],
        "race": np.asarray(RACE, dtype=object)[c["race"].to_numpy()],
        "gender": np.asarray(SEX, dtype=object)[c["sex"].to_numpy()],
        "capital-gain": np.where(c["capital-gain"].to_numpy() > 0, "True", "False"),
        "capital-loss": np.where(c["capital-loss"].to_numpy() > 0, "True", "False"),
        "hours-per-week": pd.cut(hours, 5).astype(str),
        "income": np.where(c["income>50K"].to_numpy() == 1, "True", "False"),
    })
    return out[REDUCED_COLUMNS].reset_index(drop=True)


def prepared(args):
    """(frame of string labels, public domain, cliques) of the mode: the reduced table with NAPSU-MQ's cliques, or
    all 14 coded attributes (domain sizes from adult-domain.json beside the data) with ``mst``."""
    coded = load_coded(args.data)
    if args.attributes == 14:
        dom_file = args.data.parent / "adult-domain.json"
        sizes = json.loads(dom_file.read_text()) if dom_file.is_file() else {a: int(coded[a].max()) + 1 for a in coded}
        return coded.astype(str), {a: [str(i) for i in range(sizes[a])] for a in coded.columns}, "mst"
    frame = reduce_adult(coded)
    return frame, public_domain(frame), ";".join(",".join(c) for c in CLIQUES)


def solve_rho(args, eps: float) -> dict:
    """rho that ``--target-epsilon eps --delta n^-2`` gives (the package's own solver, once per epsilon)."""
    sys.path.insert(0, str(ROOT / "src"))
    frame, domain, cliques = prepared(args)
    delta = float(len(frame)) ** -2
    t0 = time.perf_counter()
    rel, info = _release(frame, cliques, eps, delta, 0, domain, max_cells=args.max_cells)
    return {"rho": float(rel.privacy().rho), "solve_seconds": time.perf_counter() - t0, "epsilon": info["epsilon_spent"],
            "delta": delta}


def solve_rho_child(eps: float, args) -> dict:
    """:func:`solve_rho` in a fresh process (so several epsilons are solved at once)."""
    cmd = [sys.executable, __file__, "--data", str(args.data), "--attributes", str(args.attributes), "--solve-eps",
           repr(eps), *([] if args.max_cells is None else ["--max-cells", str(args.max_cells)])]
    cp = subprocess.run(cmd, env=child_env(1), capture_output=True, text=True)
    line = [ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")]
    if cp.returncode != 0 or not line:
        sys.exit(f"marginals_adult: solving rho at epsilon {eps} failed: {cp.stderr.strip()[-1500:]}")
    return json.loads(line[-1][7:])


def public_domain(frame) -> dict:
    """The public levels of each reduced attribute, sorted as pandas' categories of NAPSU-MQ's CSV are."""
    dom = {a: sorted(set(frame[a])) for a in frame.columns}
    dom["workclass"] = sorted(v for v in WORKCLASS.values() if v is not None)
    dom["education"] = sorted(EDUCATION)
    dom["marital-status"] = sorted(MARITAL)
    dom["race"] = sorted(RACE)
    dom["gender"] = sorted(SEX)
    dom["capital-gain"] = dom["capital-loss"] = dom["income"] = ["False", "True"]
    return dom


def design(frame):
    """(X without the constant, y) of NAPSU-MQ's regression; X's columns COEFS[1:]."""
    y = (frame["income"].astype(str).to_numpy() == "True").astype(float)
    mids = {lab: interval_middle(lab) for lab in set(frame["age"].astype(str))}
    age = frame["age"].astype(str).map(mids).to_numpy(float)
    race = frame["race"].astype(str).to_numpy()
    cols = [age] + [(race == r).astype(float) for r in RACE_DUMMIES]
    cols.append((frame["gender"].astype(str).to_numpy() == "Male").astype(float))
    return np.column_stack(cols), y


def fit(frame):
    """(coef, variance) of the regression on ``frame``, or None where no finite MLE exists."""
    from _logistic import fit_logistic

    X, y = design(frame)
    try:
        coef, cov = fit_logistic(X, y)
    except (ValueError, np.linalg.LinAlgError):
        return None
    return coef, np.diag(cov)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """NAPSU-MQ's sigma: the smallest Gaussian noise that is (epsilon, delta)-DP (Balle & Wang 2018, Thm. 8)."""
    from scipy import optimize, stats

    def excess(a):  # a = sensitivity / sigma
        return (stats.norm.cdf(a / 2 - epsilon / a) - math.exp(epsilon) * stats.norm.cdf(-a / 2 - epsilon / a)
                - delta)

    return sensitivity / optimize.brentq(excess, 1e-6, 100.0)


RESUME_KEYS = ("attributes", "epsilons", "draws", "warmup", "chains", "method", "m", "levels", "seed", "peer",
               "mbi_iters", "max_cells", "covariance")


def resumed_rows(args, meta: dict) -> list:
    """The rows of ``--resume``'s file, refused unless it was run with the settings of this run."""
    old = json.loads(args.resume.read_text())
    differ = [k for k in RESUME_KEYS if old["meta"].get(k) != meta.get(k)]
    if old["meta"].get("concentration", args.concentration) != args.concentration:
        differ.append("concentration")
    if old["meta"].get("prior_kind", "hyper-dirichlet") != args.prior_kind:
        differ.append("prior_kind")
    if old["meta"].get("resample", False) != args.resample:
        differ.append("resample")
    if differ:
        sys.exit(f"marginals_adult: --resume {args.resume} was run with other settings: {', '.join(differ)}")
    meta["resumed_from"] = {"file": str(args.resume), "started": old["meta"].get("started"),
                            "rows": len(old["rows"])}
    return [r for r in old["rows"] if r.get("repeat", args.repeats) < args.repeats]


def seed_for(base: int, epsilon: float, repeat: int) -> int:
    return int(np.random.SeedSequence([base, int(round(epsilon * 1e6)), repeat]).generate_state(1)[0])


# ----------------------------------------------------------------------------- worker
def _numba_stats() -> dict:
    try:
        from dpposterior.inference import marginals_da as mda

        s = mda.record_sweep.stats
        return {"cache_hits": int(sum(s.cache_hits.values())), "cache_misses": int(sum(s.cache_misses.values()))}
    except Exception as exc:  # noqa: BLE001
        return {"error": repr(exc)}


def _release(frame, cliques, epsilon, delta, seed, domain, rho=None, max_cells=None):
    """The release at ``--target-epsilon epsilon --delta delta``; given ``rho`` (the budget the target solves to,
    found once per epsilon by the driver: it depends on the release's shape, not on the data or the seed), the
    release at that rho, checked to spend at most epsilon.  ``max_cells``: the cap on the pairs ``mst`` chooses."""
    from dpposterior.curator_api import release_from_csv

    budget = {"target_epsilon": epsilon} if rho is None else {"rho": rho}
    extra = {"domain": domain} if max_cells is None else {"domain": domain, "max_cells": max_cells}
    t0 = time.perf_counter()
    if rho is None:
        rel = release_from_csv(frame, "marginals", cliques=cliques, mechanism="discrete-gaussian", delta=delta,
                               seed=seed, extra=extra, **budget)
    else:  # what the target gives, with the delta the target was stated at
        from dpposterior.release import accounting_record, load_release

        rel = release_from_csv(frame, "marginals", cliques=cliques, mechanism="discrete-gaussian", seed=seed,
                               extra=extra, **budget)
        record = rel.model_dump(mode="json", exclude_none=True)
        record["report_delta"] = delta
        record.pop("accounting", None)
        rel = load_release(record)
        rel.accounting = accounting_record(rel, {"epsilon": float(epsilon), "delta": float(delta)})
    seconds = time.perf_counter() - t0
    cost = rel.privacy()
    if cost.epsilon > epsilon * (1 + 1e-9):
        raise SystemExit(f"marginals_adult: the release at rho {rho} spends epsilon {cost.epsilon} > {epsilon}")
    info = {"release_seconds": seconds, "epsilon_spent": float(cost.epsilon), "delta": float(cost.delta),
            "rho": None if cost.rho is None else float(cost.rho),
            "cliques": [list(m.clique) for m in rel.measurements],
            "sigma": [float(getattr(m, "sigma", float("nan")) or float("nan")) for m in rel.measurements]}
    return rel, info


def _diagnostics(post) -> dict:
    from dpposterior.convergence import diagnose

    rhat, ess = [], []
    for t in post.clique_tables():
        d = diagnose(t, which=("rhat", "ess_bulk"))
        rhat.append(np.nanmax(d["rhat"]) if np.isfinite(d["rhat"]).any() else np.nan)
        ess.append(np.nanmin(d["ess_bulk"]) if np.isfinite(d["ess_bulk"]).any() else np.nan)
    return {"max_rhat": float(np.nanmax(rhat)) if np.isfinite(rhat).any() else None,
            "min_ess_bulk": float(np.nanmin(ess)) if np.isfinite(ess).any() else None}


def _mbi_peer(rel, rows: int, seed: int, iters: int, analyse: bool) -> dict:
    import jax
    from mbi import Domain, LinearMeasurement
    from mbi.estimation import mirror_descent

    attrs = list(rel.domain)
    domain = Domain(attrs, [rel.domain[a] for a in attrs])
    meas = [LinearMeasurement(np.asarray(m.value, float).ravel(), tuple(m.clique), stddev=float(m.sigma))
            for m in rel.measurements]
    t0 = time.perf_counter()
    model = mirror_descent(domain, meas, known_total=float(rel.n), iters=iters)
    jax.block_until_ready(model.potentials.arrays if hasattr(model.potentials, "arrays") else model.marginals)
    est = time.perf_counter() - t0
    out = {"estimate_seconds": est, "iters": iters}
    for method in MBI_METHODS:
        np.random.seed(seed)  # mbi's synthetic_data draws from numpy's global generator
        t1 = time.perf_counter()
        synth = model.synthetic_data(rows=rows, method=method).df
        out[f"synthesize_seconds_{method}"] = time.perf_counter() - t1
        if analyse:
            import pandas as pd

            frame = pd.DataFrame({a: np.asarray(rel.label_list(a), dtype=object)[synth[a].to_numpy()] for a in attrs})
            res = fit(frame)
            out[f"fit_{method}"] = None if res is None else {"coef": res[0].tolist(), "variance": res[1].tolist()}
    return out


def worker(args) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(Path(__file__).parent))
    t0 = time.perf_counter()
    import dpposterior
    from dpposterior.combine import combine
    from dpposterior.synthetic import synthesize

    import_seconds = time.perf_counter() - t0
    frame, domain, cliques = prepared(args)
    n = len(frame)
    delta = float(n) ** -2
    eps, r = args.worker_eps, args.worker_repeat
    seed = seed_for(args.seed, eps, r)
    res = {"epsilon": eps, "repeat": r, "seed": seed, "n": n, "import_seconds": import_seconds,
           "napsu_sigma_analytic_gaussian": analytic_gaussian_sigma(eps, delta, math.sqrt(2 * len(CLIQUES)))
           if args.attributes == 10 else None}
    if args.resample:
        # the repeat's own data set: n records drawn with replacement from the real ones, so the data vary between
        # repeats as a sample from the population does (the real records' empirical law is the population, and the
        # real-data fit its regression); its own fit is kept to score intervals against the sample's regression too
        frame = frame.iloc[np.random.default_rng(seed + 4).integers(0, n, n)].reset_index(drop=True)
        if args.attributes == 10:
            res["sample_coef"] = fit(frame)[0].tolist()
    rel, info = _release(frame, cliques, eps, delta, seed, domain, rho=args.worker_rho, max_cells=args.max_cells)
    res["release"] = info
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        post = dpposterior.infer(rel, method=args.method, draws=args.draws, warmup=args.warmup, chains=args.chains,
                                 prior=_prior(args),
                                 seed=seed, **({} if args.group_moves is None else {"group_moves": args.group_moves}),
                                 **({} if args.covariance is None else {"covariance": args.covariance}))
        res["infer_seconds"] = time.perf_counter() - t0
    res["infer_warnings"] = [f"{w.category.__name__}: {w.message}"[:300] for w in caught[:5]]
    res["infer_warnings_count"] = len(caught)
    from marginals_clt_oneway import reweighting_diagnostics

    res["reweighting"] = reweighting_diagnostics(post)
    res["numba_record_sweep"] = _numba_stats()
    t0 = time.perf_counter()
    res["diagnostics"] = _diagnostics(post)
    res["diagnostics_seconds"] = time.perf_counter() - t0
    if args.save_posterior is not None:  # after the timing: what marginals_clt_vs_da.py compares
        args.save_posterior.mkdir(parents=True, exist_ok=True)
        path = args.save_posterior / f"{args.method}_eps{eps:g}_repeat{r}.nc"
        post.to_netcdf(path)
        res["posterior_file"] = str(path)
    if args.attributes == 10:
        M = max(args.m)
        t0 = time.perf_counter()
        sets = synthesize(post, m=M, rows=n, seed=seed + 1)
        res["synthesize_seconds"] = time.perf_counter() - t0
        order = np.random.default_rng(seed + 2).permutation(M)  # synthesize returns its draws in index order
        t0 = time.perf_counter()
        fits = [fit(sets[i]) for i in order]
        res["fit_seconds"] = time.perf_counter() - t0
        res["failed_fits"] = sum(f is None for f in fits)
        per_m = {}
        for m in args.m:
            q = np.array([f[0] if f is not None else np.full(len(COEFS), np.nan) for f in fits[:m]])
            u = np.array([f[1] if f is not None else np.full(len(COEFS), np.nan) for f in fits[:m]])
            coefs = []
            for i in range(len(COEFS)):
                ok = np.isfinite(q[:, i]) & np.isfinite(u[:, i]) & (u[:, i] < 1000)  # NAPSU-MQ: u < 1000 kept
                row = {"m_used": int(ok.sum())}
                for level in args.levels:
                    if ok.sum() < 2:
                        row[str(level)] = None
                        continue
                    c = combine(q[ok, i], u[ok, i], rule="synthetic", n_synthetic=n, n_original=n, level=level)
                    row[str(level)] = [float(c.interval[0]), float(c.interval[1])]
                    row["estimate"], row["variance"], row["df"] = float(c.estimate), float(c.variance), float(c.df)
                    row["adjusted"] = bool(c.adjusted)
                coefs.append(row)
            per_m[str(m)] = coefs
        res["combined"] = per_m
    if args.peer:
        try:
            res["mbi"] = _mbi_peer(rel, n, seed + 3, args.mbi_iters, analyse=args.attributes == 10)
        except Exception as exc:  # noqa: BLE001
            res["mbi"] = {"error": repr(exc)[:500]}
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("RESULT " + json.dumps(res))


def fill_worker(args) -> None:
    """Two tiny infer calls in a fresh process: the first compiles (or loads numba's cache), the second does not."""
    sys.path.insert(0, str(ROOT / "src"))
    import dpposterior
    from dpposterior.families.marginals import simulate

    rel = simulate({"domain": {"a": 3, "b": 2, "c": 4}, "measure": [["a", "b"], ["b", "c"]]}, 50, None,
                   np.random.default_rng(0), mechanism="discrete-gaussian", rho=1.0).release
    out = {}
    warnings.simplefilter("ignore")
    for call in ("first", "second"):
        t0 = time.perf_counter()
        dpposterior.infer(rel, method="da", draws=5, warmup=5, chains=1, seed=0)
        out[call] = time.perf_counter() - t0
    out["numba_record_sweep"] = _numba_stats()
    print("RESULT " + json.dumps(out))


# ----------------------------------------------------------------------------- driver
def child_env(cores: int) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]),
                "NUMBA_NUM_THREADS": str(cores), "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
                "JAX_ENABLE_X64": "1"})
    return env


def _prior(args) -> dict | None:
    """The analysis's prior: the package's default, a hyper-Dirichlet of the given concentration, or the
    log-linear prior (NAPSU-MQ's model and N(0, 10^2) prior)."""
    if args.prior_kind == "log-linear":
        return {"kind": "log-linear"}
    return None if args.concentration is None else {"concentration": args.concentration}


def run_child(extra: list[str], args, cores: int) -> dict:
    cmd = [sys.executable, __file__, "--data", str(args.data), "--draws", str(args.draws), "--warmup",
           str(args.warmup), "--chains", str(args.chains), "--seed", str(args.seed), "--attributes",
           str(args.attributes), "--mbi-iters", str(args.mbi_iters),
           *([] if args.concentration is None else ["--concentration", repr(args.concentration)]),
           "--prior-kind", args.prior_kind,
           *([] if args.covariance is None else ["--covariance", args.covariance]),
           *([] if args.group_moves is None else ["--group-moves", str(args.group_moves)]), "--method", args.method,
           *([] if args.max_cells is None else ["--max-cells", str(args.max_cells)]),
           *([] if args.save_posterior is None else ["--save-posterior", str(args.save_posterior)]),
           "--m", *map(str, args.m),
           "--levels", *map(str, args.levels)] + ([] if args.peer else ["--no-peer"]) + (
               ["--resample"] if args.resample else []) + extra
    from _out import run_worker

    return run_worker(cmd, child_env(cores), args.timeout, {}, stderr_tail=1500)


def truth(args) -> dict:
    """The regression on the real reduced data: NAPSU-MQ's ``orig_result`` (coefficients, Wald SEs)."""
    sys.path.insert(0, str(Path(__file__).parent))
    frame = reduce_adult(load_coded(args.data))
    coef, var = fit(frame)
    sizes = {a: len(v) for a, v in public_domain(frame).items()}
    return {"n": len(frame), "coef": dict(zip(COEFS, coef.tolist())), "se": dict(zip(COEFS, np.sqrt(var).tolist())),
            "domain_sizes": sizes, "domain_cells": int(np.prod(list(sizes.values()), dtype=np.int64)),
            "age_bins": sorted(set(frame["age"])), "hours_bins": sorted(set(frame["hours-per-week"]))}


def interval_hits(rows, m: int, level: float, targets) -> tuple[np.ndarray, np.ndarray]:
    """(hits, widths), each (repeats, coefficients): whether each repeat's combined interval at ``level`` (m data
    sets) holds ``targets[repeat][coefficient]``, and its width; NaN where the interval is missing or not finite."""
    hit = np.full((len(rows), len(COEFS)), np.nan)
    wid = np.full((len(rows), len(COEFS)), np.nan)
    for k, r in enumerate(rows):
        for i, row in enumerate(r["combined"][str(m)]):
            iv = row.get(str(level))
            if iv is not None and all(math.isfinite(x) for x in iv):
                hit[k, i] = iv[0] <= targets[k][i] <= iv[1]
                wid[k, i] = iv[1] - iv[0]
    return hit, wid


def coverage_summary(hit: np.ndarray) -> dict:
    """Coverage per coefficient and averaged, with its Monte Carlo error: the coefficients of one repeat share its
    release, so that error is the repeats' own means' (between-repeat sd / sqrt(repeats)), not that of
    coefficients x repeats independent coins."""
    per_repeat = np.nanmean(hit, axis=1)
    per_repeat = per_repeat[np.isfinite(per_repeat)]
    return {"coverage": dict(zip(COEFS, np.nanmean(hit, axis=0).tolist())), "coverage_mean": float(np.nanmean(hit)),
            "coverage_mean_se": float(np.std(per_repeat, ddof=1) / np.sqrt(per_repeat.size))
            if per_repeat.size > 1 else float("nan")}


def summarise(rows, real, levels, m_values) -> dict:
    """Per epsilon: coverage per coefficient and averaged, mean interval width, wall times."""
    from scipy import stats

    out = {}
    true = np.array([real["coef"][c] for c in COEFS])
    for eps in sorted({r["epsilon"] for r in rows if r.get("status") == "ok"}):
        rr = [r for r in rows if r.get("status") == "ok" and r["epsilon"] == eps]
        s = {"repeats": len(rr), "infer_seconds_mean": float(np.mean([r["infer_seconds"] for r in rr])),
             "infer_seconds_max": float(np.max([r["infer_seconds"] for r in rr])),
             "release_seconds_mean": float(np.mean([r["release"]["release_seconds"] for r in rr])),
             "sigma_ours": float(np.mean([np.mean(r["release"]["sigma"]) for r in rr])),
             "sigma_napsu_analytic": rr[0].get("napsu_sigma_analytic_gaussian"),
             "max_rhat": max((r["diagnostics"]["max_rhat"] or float("nan")) for r in rr),
             "min_ess_bulk": min((r["diagnostics"]["min_ess_bulk"] or float("nan")) for r in rr)}
        if "combined" in rr[0]:
            s["synthesize_seconds_mean"] = float(np.mean([r["synthesize_seconds"] for r in rr]))
            for m in m_values:
                for level in levels:
                    cov, wid = interval_hits(rr, m, level, [true] * len(rr))
                    s[f"m{m}_level{level}"] = {
                        **coverage_summary(cov),
                        "width": dict(zip(COEFS, np.nanmean(wid, axis=0).tolist())),
                        "width_mean": float(np.nanmean(wid)), "width_median": float(np.nanmedian(wid)),
                        "intervals_missing": int(np.isnan(cov).sum())}
                    if all("sample_coef" in r for r in rr):  # --resample: the same intervals against each sample's fit
                        own, _ = interval_hits(rr, m, level, [r["sample_coef"] for r in rr])
                        s[f"m{m}_level{level}"]["sample_fit"] = coverage_summary(own)
                # the combined estimate's error in its own standard errors, per coefficient: a calibrated
                # interval has mean ~0 and sd ~1 over the repeats (sd < 1: wider than the estimate varies)
                z = np.full((len(rr), len(COEFS)), np.nan)
                for k, r in enumerate(rr):
                    for i, row in enumerate(r["combined"][str(m)]):
                        v = row.get("variance")
                        if v is not None and math.isfinite(v) and v > 0:
                            z[k, i] = (row["estimate"] - true[i]) / math.sqrt(v)
                s[f"m{m}_error_in_se"] = {"mean": dict(zip(COEFS, np.nanmean(z, axis=0).tolist())),
                                         "sd": dict(zip(COEFS, np.nanstd(z, axis=0, ddof=1).tolist()))}
        peer = [r["mbi"] for r in rr if isinstance(r.get("mbi"), dict) and "estimate_seconds" in r["mbi"]]
        if peer:
            p = {"estimate_seconds_mean": float(np.mean([x["estimate_seconds"] for x in peer])),
                 "estimate_seconds_max": float(np.max([x["estimate_seconds"] for x in peer]))}
            for method in MBI_METHODS:
                fits = [x[f"fit_{method}"] for x in peer if x.get(f"fit_{method}")]
                if fits:
                    q = np.array([f["coef"] for f in fits])
                    se = np.sqrt(np.array([f["variance"] for f in fits]))
                    for level in levels:
                        z = stats.norm.ppf((1 + level) / 2)
                        cov = (np.abs(q - true) <= z * se).astype(float)
                        p[f"{method}_level{level}"] = {
                            "coverage": dict(zip(COEFS, cov.mean(axis=0).tolist())), "coverage_mean": float(cov.mean()),
                            "width_mean": float((2 * z * se).mean()), "estimate_mean": dict(zip(COEFS, q.mean(0).tolist()))}
                p[f"failed_{method}"] = len(peer) - len(fits)
            s["mbi"] = p
        out[str(eps)] = s
    return out


def table(doc: dict) -> str:
    """A markdown table of a results file."""
    summ, meta = doc["summary"], doc["meta"]
    level = 0.9 if 0.9 in meta["levels"] else meta["levels"][0]
    lines = [f"{meta['attributes']} attributes, n = {meta.get('n')}, draws {meta['draws']} x {meta['chains']} chains "
             f"after {meta['warmup']} warm-up; cores {meta['cores']}; load {meta['loadavg_start']} -> "
             f"{meta.get('loadavg_end')}", ""]
    head = "| ε | repeats | σ ours (NAPSU) | infer s mean / max | max R̂ | min ESS |"
    sep = "|---|---|---|---|---|---|"
    ms = meta["m"] if meta["attributes"] == 10 else []
    for m in ms:
        head += f" cover {level:g} ± MC se, m={m} | median width m={m} |"
        sep += "---|---|"
    head += " mbi s |" + (" mbi cover, 1 set (round / sample) |" if ms else "")
    sep += "---|" + ("---|" if ms else "")
    lines += [head, sep]
    for eps, s in summ.items():
        napsu = s.get("sigma_napsu_analytic")
        row = (f"| {eps} | {s['repeats']} | {s['sigma_ours']:.1f}" + (f" ({napsu:.1f})" if napsu else "") +
               f" | {s['infer_seconds_mean']:.1f} / {s['infer_seconds_max']:.1f} | {s['max_rhat']:.3f} | "
               f"{s['min_ess_bulk']:.0f} |")
        for m in ms:
            c = s.get(f"m{m}_level{level}", {})
            row += (f" {c.get('coverage_mean', float('nan')):.3f} ± {c.get('coverage_mean_se', float('nan')):.3f} | "
                    f"{c.get('width_median', float('nan')):.3f} |")
        p = s.get("mbi", {})
        pr, ps = p.get(f"round_level{level}", {}), p.get(f"sample_level{level}", {})
        row += f" {p.get('estimate_seconds_mean', float('nan')):.1f} |"
        if ms:
            row += f" {pr.get('coverage_mean', float('nan')):.3f} / {ps.get('coverage_mean', float('nan')):.3f} |"
        lines.append(row)
    if ms:
        lines += ["", f"Coverage per coefficient at {level:g}, m = {ms[-1]}:", "",
                  "| ε | " + " | ".join(COEFS) + " |", "|---|" + "---|" * len(COEFS)]
        for eps, s in summ.items():
            c = s.get(f"m{ms[-1]}_level{level}", {}).get("coverage", {})
            lines.append(f"| {eps} | " + " | ".join(f"{c.get(k, float('nan')):.2f}" for k in COEFS) + " |")
        own = {eps: s[f"m{ms[-1]}_level{level}"]["sample_fit"] for eps, s in summ.items()
               if "sample_fit" in s.get(f"m{ms[-1]}_level{level}", {})}
        if own:
            lines += ["", f"The same intervals against each resampled data set's own fit (m = {ms[-1]}):", "",
                      "| ε | mean ± MC se | " + " | ".join(COEFS) + " |", "|---|---|" + "---|" * len(COEFS)]
            for eps, c in own.items():
                lines.append(f"| {eps} | {c['coverage_mean']:.3f} ± {c['coverage_mean_se']:.3f} | "
                             + " | ".join(f"{c['coverage'].get(k, float('nan')):.2f}" for k in COEFS) + " |")
        errs = {eps: s[f"m{ms[-1]}_error_in_se"] for eps, s in summ.items() if f"m{ms[-1]}_error_in_se" in s}
        if errs:
            lines += ["", f"The combined estimate's error in its own standard errors, mean / sd over the repeats "
                      f"(m = {ms[-1]}; calibrated: 0 / 1):", "", "| ε | " + " | ".join(COEFS) + " |",
                      "|---|" + "---|" * len(COEFS)]
            for eps, e in errs.items():
                lines.append(f"| {eps} | " + " | ".join(f"{e['mean'][k]:+.2f} / {e['sd'][k]:.2f}" for k in COEFS)
                             + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    from _out import add_update_flag, loadavg, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Private-PGM's adult.csv (default %(default)s)")
    ap.add_argument("--attributes", type=int, choices=(10, 14), default=10,
                    help="10: NAPSU-MQ's reduced table and cliques (coverage); 14: all, --cliques mst (timing only)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--repeats", type=int, default=None, help="per epsilon (default 20; 1 with --attributes 14)")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--m", type=int, nargs="+", default=list(M_VALUES), help="numbers of synthetic data sets")
    ap.add_argument("--levels", type=float, nargs="+", default=list(LEVELS))
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--no-peer", dest="peer", action="store_false", help="skip the mbi (Private-PGM) peer")
    ap.add_argument("--mbi-iters", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per (epsilon, repeat) process")
    ap.add_argument("--concentration", type=float, default=None, help="the hyper-Dirichlet prior's total "
                    "concentration A (default: the package's)")
    ap.add_argument("--group-moves", type=int, default=None, help="da's group moves per blanket cell, "
                    "per attribute and sweep (default: the package's, 0: the record sweep alone)")
    ap.add_argument("--method", default="da", choices=("da", "clt"), help="the marginals engine (default da)")
    ap.add_argument("--max-cells", type=int, default=None, help="with --attributes 14: mst chooses only pairs whose "
                    "table has at most this many cells (default: any pair)")
    ap.add_argument("--prior-kind", default="hyper-dirichlet", choices=("hyper-dirichlet", "log-linear"),
                    help="the prior (default: the package's hyper-Dirichlet; log-linear: NAPSU-MQ's maximum-entropy "
                         "model with N(0, 10^2) log-potentials, method clt)")
    ap.add_argument("--covariance", default=None, choices=("plug-in", "scaled", "exact", "reweighted"),
                    help="method clt's covariance option (default: the engine's)")
    ap.add_argument("--jobs", type=int, default=1, help="(epsilon, repeat) processes at once, one core each "
                    "(default 1: one at a time on every core)")
    ap.add_argument("--resample", action="store_true", help="each repeat releases n records drawn with replacement "
                    "from the real ones (the data vary between repeats, as a sample does; the truth stays the "
                    "real-data fit, the population's); the sample's own fit is recorded and scored too")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--save-posterior", type=Path, default=None, help="a folder: each posterior's netCDF is "
                    "written there as METHOD_epsEPS_repeatR.nc, after its timing (read by marginals_clt_vs_da.py)")
    ap.add_argument("--resume", type=Path, default=None, help="a results file of an interrupted run with the same "
                    "settings: keep its rows and run only the (epsilon, repeat) pairs it lacks; the seeds depend on "
                    "the pair alone, so the result is the full run's")
    ap.add_argument("--table", type=Path, nargs="+", default=None, help="only print the markdown table of a results "
                    "file; of several (runs with the same settings but --seed: other releases), of their rows pooled")
    add_update_flag(ap)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--solve-eps", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--fill-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-eps", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--worker-repeat", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker-rho", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.table:
        docs = [json.loads(f.read_text()) for f in args.table]
        doc = docs[0]
        for f, other in zip(args.table[1:], docs[1:]):
            differ = [k for k in RESUME_KEYS if k != "seed" and other["meta"].get(k) != doc["meta"].get(k)]
            if differ or other["meta"]["seed"] == doc["meta"]["seed"]:
                sys.exit(f"marginals_adult: {f} cannot be pooled with {args.table[0]}: "
                         + (f"its {', '.join(differ)} differ" if differ else "the same --seed (the same releases)"))
            doc["rows"] = doc["rows"] + other["rows"]
        meta = doc["meta"]
        if meta.get("truth") and doc["rows"]:  # the summary as this version computes it, from the rows
            doc["summary"] = summarise(doc["rows"], meta["truth"], meta["levels"], meta["m"])
        print(table(doc))
        return
    if args.fill_worker:
        fill_worker(args)
        return
    require_data(args.data)
    if args.solve_eps is not None:
        print("RESULT " + json.dumps(solve_rho(args, args.solve_eps)))
        return
    if args.worker:
        worker(args)
        return
    if args.repeats is None:
        args.repeats = 1 if args.attributes == 14 else 20
    if args.attributes == 10 and max(args.m) > args.draws * args.chains:
        sys.exit(f"marginals_adult: --m {max(args.m)} needs that many posterior draws; draws x chains = "
                 f"{args.draws * args.chains}")
    if args.prior_kind == "log-linear" and (args.method != "clt" or args.concentration is not None):
        sys.exit("marginals_adult: --prior-kind log-linear is sampled by --method clt and has no --concentration")
    if args.max_cells is not None and args.attributes != 14:
        sys.exit("marginals_adult: --max-cells caps the mst selection of --attributes 14 (the 10 use NAPSU-MQ's "
                 "cliques)")
    if args.attributes == 10 and min(args.m) < 2:
        sys.exit("marginals_adult: --m must be >= 2 (the combining rules need two data sets)")
    out = out_path(args.out, f"marginals_adult_{args.attributes}.json", args.update_results)
    cores = len(os.sched_getaffinity(0))
    meta = {"attributes": args.attributes, "epsilons": args.epsilons, "repeats": args.repeats, "draws": args.draws,
            "warmup": args.warmup, "chains": args.chains, "method": args.method, "m": args.m, "levels": args.levels,
            "seed": args.seed, "concentration": args.concentration, "prior_kind": args.prior_kind,
            "peer": args.peer, "mbi_iters": args.mbi_iters, "data": str(args.data), "cores": cores,
            "affinity": sorted(os.sched_getaffinity(0)), "nproc": os.cpu_count(),
            "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "loadavg_start": loadavg(), "cliques": [list(c) for c in CLIQUES] if args.attributes == 10 else "mst",
            "max_cells": args.max_cells, "covariance": args.covariance, "resample": args.resample,
            "forced_pairs_in_napsu_selection": [list(c) for c in FORCED], "reduction_notes": REDUCTION_NOTES,
            "delta": "n^-2", "mechanism": "discrete-gaussian (seeded numpy noise: not for publication)"}
    try:
        import importlib.metadata as md

        meta["versions"] = {p: md.version(p) for p in ("numba", "numpy", "mbi", "jax", "pandas", "scipy")}
    except Exception:  # noqa: BLE001
        pass
    rows = resumed_rows(args, meta) if args.resume else []  # (refused here, before any work, if settings differ)
    t_start = time.perf_counter()
    if args.attributes == 10:
        real = truth(args)
        meta["n"] = real["n"]
        meta["truth"] = real
        print(f"reduced Adult: n = {real['n']}, {len(real['domain_sizes'])} attributes, "
              f"{real['domain_cells']:,} cells; real-data coefficients "
              + ", ".join(f"{k} {v:.3f}" for k, v in real["coef"].items()), flush=True)
    else:
        real = None
        meta["n"] = 48842
    fill = run_child(["--fill-worker"], args, cores)
    meta["numba_fill"] = fill
    print(f"numba cache fill: {fill.get('status')}, tiny infer first {fill.get('first', float('nan')):.2f} s, "
          f"second {fill.get('second', float('nan')):.2f} s", flush=True)
    meta["budgets"] = {}
    meta["jobs"] = args.jobs
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(args.jobs, len(args.epsilons)))) as ex:
        budgets = list(ex.map(lambda e: solve_rho_child(e, args), args.epsilons))
    for eps, b in zip(args.epsilons, budgets):
        meta["budgets"][str(eps)] = b
        print(f"eps {eps}, delta {b['delta']:.3g}: rho {b['rho']:.6g} (solved in {b['solve_seconds']:.0f} s)", flush=True)
    done = {(r["repeat"], r["epsilon"]) for r in rows}
    tasks = [(r, eps) for r in range(args.repeats) for eps in args.epsilons if (r, eps) not in done]
    child_cores = cores if args.jobs <= 1 else 1

    def one(task):
        r, eps = task
        rec = run_child(["--worker", "--worker-eps", repr(eps), "--worker-repeat", str(r), "--worker-rho",
                         repr(meta["budgets"][str(eps)]["rho"])], args, child_cores)
        rec.setdefault("epsilon", eps)
        rec.setdefault("repeat", r)
        return rec

    doc = {"meta": meta, "rows": rows, "summary": {}}
    with ThreadPoolExecutor(max(1, args.jobs)) as ex:
        for rec in ex.map(one, tasks):
            rows.append(rec)
            msg = rec["status"] if rec["status"] != "ok" else (
                f"release {rec['release']['release_seconds']:.1f} s (eps {rec['release']['epsilon_spent']:.4g}), "
                f"infer {rec['infer_seconds']:.1f} s, R-hat {rec['diagnostics']['max_rhat']}, "
                f"mbi {rec.get('mbi', {}).get('estimate_seconds', float('nan')):.1f} s")
            print(f"  eps={rec['epsilon']} repeat={rec['repeat']}: {msg} (process {rec['process_seconds']:.0f} s, "
                  f"load {rec['loadavg_after']})", flush=True)
            doc = {"meta": meta, "rows": rows, "summary": summarise(rows, real, args.levels, args.m) if real else
                   summarise(rows, {"coef": {c: 0.0 for c in COEFS}}, [], [])}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(doc, indent=1))
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["loadavg_end"] = loadavg()
    meta["total_seconds"] = time.perf_counter() - t_start
    out.write_text(json.dumps(doc, indent=1))
    print(table(doc))
    print(f"total {meta['total_seconds']:.0f} s; wrote {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
