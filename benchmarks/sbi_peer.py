"""SPPE / SPLE / SMC-ABC against sbi's sequential NPE-C (APT) at equal simulations.

A user of the ``sbi`` package would put the Laplace noise inside the simulator and run
sequential NPE-C.  This runs that side by side with dpposterior's engines on linreg-ju,
scored against the exact (pseudo-marginal importance-sampling) references of
benchmarks/linreg_ju_reference.py (``benchmarks/results/isref_<problem>.npz``):

* ``sbi``         sbi 0.27 ``NPE_C`` with its defaults (MAF, 5 transforms, 50 hidden, batch 200);
* ``sbi-nsf``     the same with our flow size (NSF, 8 transforms, 50 hidden, 10 bins);
* ``sppe``        dpposterior SPPE with truncated (TSNPE) proposals, M = 8 RQMC replicates;
* ``sppe-atomic`` SPPE with the paper's atomic (APT) rounds;
* ``sple``        dpposterior SPLE;   ``smc-abc``  SMC-ABC with the same total simulations.

Method specs take ``:key=value`` overrides of FlowConfig / run_sppe, e.g.
``sppe:batch_size=200:replicates_per_step=8``; ``training=fast`` (or ``paper``) starts from SPPE's
engine preset (``dpposterior.sbi.sppe.TRAINING``), e.g. ``sppe-atomic:training=fast``;
``correction=importance`` (or ``auto``) scores SPPE's importance-corrected posterior, which exists only at
the end of a run (one ``--report-rounds`` value; the row adds its ESS and PSIS k-hat).  Runs are
interleaved (seed-major, methods in turn) so machine contention is shared; torch threads are set
equal for every system (``--threads``).  After each round in ``--report-rounds``: C2ST (2,000 draws each),
max |mean - exact mean| / exact sd, max |sd / exact sd - 1|, the wall and CPU time of the
method up to that round (metric computation excluded, 2,000 posterior draws included).

    python benchmarks/sbi_peer.py --problem linreg-ju-eps1 --rounds 2 --seeds 0,1,2 \\
        --methods sppe,sbi,sbi-nsf,sple,smc-abc --out benchmarks/results/sbi_peer_eps1.json
    python benchmarks/sbi_peer.py --problem linreg-ju-eps1 --score p0.nc,p1.nc   # posteriors written by the CLI
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DRAWS = 2000


def load_model(problem):
    from dpposterior.families import get_family
    from dpposterior.release import load_release

    rel = load_release(ROOT / "examples" / "releases" / f"{problem}.json")
    fam = get_family(rel.family)
    return fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))


def exact_reference(problem, seed=0):
    z = np.load(RESULTS / f"isref_{problem}.npz")
    w = np.exp(z["log_weight"] - z["log_weight"].max())
    w /= w.sum()
    mean = w @ z["theta"]
    sd = np.sqrt(w @ (z["theta"] - mean) ** 2)
    idx = np.random.default_rng(seed).choice(len(w), size=DRAWS, p=w)
    return {"draws": z["theta"][idx], "mean": mean, "sd": sd}


def score(theta, ref):
    from dpposterior.diagnostics.metrics import c2st

    theta = np.asarray(theta, float)
    mean, sd = theta.mean(0), theta.std(0)
    return {"c2st": float(c2st(theta, ref["draws"], max_samples=DRAWS)),
            "mean_err": float(np.max(np.abs(mean - ref["mean"]) / ref["sd"])),
            "sd_err": float(np.max(np.abs(sd / ref["sd"] - 1))),
            "mean": mean.tolist(), "sd": sd.tolist()}


class Clock:
    """Wall and CPU seconds of the method, with the scoring excluded (pause/resume)."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.resume()

    def resume(self):
        self._w, self._c = time.perf_counter(), time.process_time()

    def pause(self):
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c


def parse_spec(spec):
    name, *kv = spec.split(":")
    opts = {}
    for item in kv:
        k, v = item.split("=")
        opts[k] = json.loads(v) if v not in ("cpu", "cuda", "auto", "truncated", "atomic", "fast", "paper",
                                                         "importance", "none") else v
    return name, opts


def run_dpp(name, opts, model, args, seed, ref, report):
    from dpposterior.sbi.sple import run_sple
    from dpposterior.sbi.sppe import TRAINING_ATOMS, run_sppe, training_config
    from dpposterior.sbi.flows import FlowConfig

    cfg_keys = set(FlowConfig.__dataclass_fields__)
    # training=fast|paper: SPPE's engine presets (sppe.TRAINING); other FlowConfig keys override them
    base = training_config(opts["training"]) if "training" in opts else FlowConfig()
    cfg = dataclasses.replace(base, **{k: v for k, v in opts.items() if k in cfg_keys})
    kw = {k: v for k, v in opts.items() if k not in cfg_keys and k != "training"}
    if "training" in opts and name != "sple":
        kw.setdefault("num_atoms", TRAINING_ATOMS[opts["training"]])  # the engine's default for the preset
    rows = []
    corrected = opts.get("correction", "none") != "none"
    if corrected and len(report) > 1:
        raise SystemExit("correction=importance scores the run's final posterior only: one --report-rounds value")
    clock = Clock()

    def add_row(info, theta, **extra):
        clock.pause()
        rows.append({"round": info["round"], "simulations": info["simulations"], "wall_s": clock.wall,
                     "cpu_s": clock.cpu, **{k: v for k, v in info.items() if k != "round"}, **extra,
                     **score(theta, ref)})
        tail = f"  ESS {extra['ess']:.0f}  k-hat {extra['khat']:.2f}" if extra else ""
        print(f"  {name} {opts} seed {seed} round {info['round']}: " + fmt(rows[-1]) + tail, flush=True)
        clock.resume()

    def callback(r, sample, info):
        if r in report and not corrected:
            add_row(info, sample(DRAWS))

    runner = run_sppe if name in ("sppe", "sppe-atomic") else run_sple
    if name == "sppe-atomic":
        kw["proposal"] = "atomic"
    elif name == "sppe":
        kw.setdefault("proposal", "truncated")  # "sppe" in the results files means TSNPE proposals
    res = runner(model, args.simulations, max(report), args.rqmc_points, True, DRAWS, seed, config=cfg,
                 round_callback=callback, **kw)
    if corrected:   # the importance posterior exists only at the end of the run
        add_row(res.rounds[-1], res.theta, ess=res.importance.ess, khat=res.importance.khat)
    return rows


def run_abc(model, args, seed, ref, report):
    from dpposterior.sbi.smc_abc import run_smc_abc

    rows = []
    for r in sorted(report):
        clock = Clock()
        res = run_smc_abc(model, simulations=r * args.simulations, particles=min(1000, args.simulations),
                          seed=seed)
        theta = res.resample(DRAWS, np.random.default_rng(seed))
        clock.pause()
        rows.append({"round": r, "simulations": r * args.simulations, "wall_s": clock.wall, "cpu_s": clock.cpu,
                     **score(theta, ref)})
        print(f"  smc-abc seed {seed} sims {r * args.simulations}: " + fmt(rows[-1]), flush=True)
    return rows


def run_sbi(name, opts, model, args, seed, ref, report):
    import torch
    from sbi.inference import NPE_C
    from sbi.neural_nets import posterior_nn

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    prior = torch.distributions.MultivariateNormal(torch.as_tensor(model.prior.mean, dtype=torch.float32),
                                                   torch.as_tensor(model.prior.cov, dtype=torch.float32))

    def simulator(theta):
        th = theta.double().numpy()
        x = model.privatize(model.statistics(th, rng), rng)  # the Laplace noise inside the simulator
        return torch.as_tensor(x, dtype=torch.float32)

    import tempfile

    from torch.utils.tensorboard import SummaryWriter

    # sbi's default summary writer would create ./sbi-logs in the working tree
    common = {"summary_writer": SummaryWriter(tempfile.mkdtemp(prefix="sbi-logs-")), "show_progress_bars": False}
    if name == "sbi-nsf":
        de = posterior_nn("nsf", hidden_features=50, num_transforms=8, num_bins=10)
        inference = NPE_C(prior=prior, density_estimator=de, **common)
    else:
        inference = NPE_C(prior=prior, **common)
    x_o = torch.as_tensor(model.observed, dtype=torch.float32)
    proposal = prior
    rows = []
    clock = Clock()
    for r in range(1, max(report) + 1):
        theta = proposal.sample((args.simulations,))
        x = simulator(theta)
        estimator = inference.append_simulations(theta, x, proposal=proposal).train(**opts)
        posterior = inference.build_posterior(estimator)
        proposal = posterior.set_default_x(x_o)
        if r in report:
            draws = proposal.sample((DRAWS,), show_progress_bars=False).double().numpy()
            clock.pause()
            rows.append({"round": r, "simulations": r * args.simulations, "wall_s": clock.wall,
                         "cpu_s": clock.cpu, "epochs": int(inference._summary["epochs_trained"][-1]),
                         **score(draws, ref)})
            print(f"  {name} seed {seed} round {r}: " + fmt(rows[-1]), flush=True)
            clock.resume()
    return rows


def fmt(row):
    return (f"C2ST {row['c2st']:.3f}  mean err {row['mean_err']:.3f} sd  sd err {row['sd_err']:.3f}  "
            f"wall {row['wall_s']:.1f} s  CPU {row['cpu_s']:.1f} s")


def main():
    from _out import add_update_flag
    from _out import out_path as resolve_out

    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="linreg-ju-eps1")
    ap.add_argument("--methods", default="sppe,sbi,sbi-nsf,sple,smc-abc")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--report-rounds", default=None, help="comma list (default: the last round)")
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--rqmc-points", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    ap.add_argument("--summarise", default=None, help="comma list of result JSONs: print their pooled table only")
    ap.add_argument("--score", default=None, help="comma list of posterior netCDF files (dpposterior infer --out) "
                    "of --problem: print each one's scores (first 2,000 draws) against the exact reference")
    args = ap.parse_args()
    if args.score:
        score_files(args.problem, args.score.split(","))
        return
    if args.summarise:
        runs = []
        for path in args.summarise.split(","):
            data = json.loads(Path(path).read_text())
            runs += data["runs"]
        summarise({"problem": data["problem"], "runs": runs})
        return
    os.environ["DPPOSTERIOR_TORCH_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    report = sorted({int(v) for v in (args.report_rounds or str(args.rounds)).split(",")})
    model = load_model(args.problem)
    ref = exact_reference(args.problem)
    out_path = resolve_out(args.out, f"sbi_peer_{args.problem}_r{args.rounds}.json", args.update_results)
    out = json.loads(out_path.read_text()) if out_path.exists() else {"problem": args.problem, "runs": []}
    out["args"] = vars(args)
    for seed in [int(s) for s in args.seeds.split(",")]:
        for spec in args.methods.split(","):
            name, opts = parse_spec(spec)
            if any(run["method"] == spec and run["seed"] == seed for run in out["runs"]):
                continue  # resumed: this (method, seed) is already in the results file
            uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            torch.set_num_threads(args.threads)
            if name in ("sbi", "sbi-nsf"):
                rows = run_sbi(name, opts, model, args, seed, ref, report)
            elif name == "smc-abc":
                rows = run_abc(model, args, seed, ref, report)
            else:
                rows = run_dpp(name, opts, model, args, seed, ref, report)
            out["runs"].append({"method": spec, "seed": seed, "threads": args.threads, "uptime_before": uptime,
                                "rows": rows})
            out_path.write_text(json.dumps(out, indent=1))
    summarise(out)


def score_files(problem, paths):
    """C2ST, max |dmean|/sd and sd error of written posteriors (e.g. the issue's CLI command) vs the exact one."""
    import xarray as xr

    ref = exact_reference(problem)
    for path in paths:
        post = xr.open_dataset(path, group="posterior")
        beta = post["beta"].values.reshape(-1, post["beta"].shape[-1])[:DRAWS]
        row = score(beta, ref)
        keys = ("correction", "training", "importance_ess", "importance_khat", "importance_applied")
        print(f"{path}: C2ST {row['c2st']:.3f}  max |dmean|/sd {row['mean_err']:.3f}  sd err {row['sd_err']:.3f}  "
              + "  ".join(f"{k} {post.attrs[k]}" for k in keys if k in post.attrs))


def summarise(out):
    from collections import defaultdict

    groups = defaultdict(list)
    seen = set()
    for run in out["runs"]:
        if (run["method"], run["seed"]) in seen:  # a resumed or repeated run: keep the first
            continue
        seen.add((run["method"], run["seed"]))
        for row in run["rows"]:
            groups[(run["method"], row["round"])].append(row)
    print(f"\n{out['problem']}: mean over seeds (n)")
    print("| method | rounds | seeds | C2ST | max abs dmean/sd | sd err | wall s | CPU s | per seed: C2ST / dmean |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (method, r), rows in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        m = {k: np.mean([row[k] for row in rows]) for k in ("c2st", "mean_err", "sd_err", "wall_s", "cpu_s")}
        per = ", ".join(f"{row['c2st']:.2f} / {row['mean_err']:.2f}" for row in rows)
        print(f"| {method} | {r} | {len(rows)} | {m['c2st']:.3f} | {m['mean_err']:.3f} | {m['sd_err']:.3f} | "
              f"{m['wall_s']:.0f} | {m['cpu_s']:.0f} | {per} |")


if __name__ == "__main__":
    main()
