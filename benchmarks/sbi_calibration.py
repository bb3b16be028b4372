"""Simulation-based calibration (Talts et al. 2018) of the SBI engines vs the naive method.

Amortised SBC (``dpposterior.diagnostics.sbi_calibration.amortized_sbc``): SPPE's round-1 flow
q(theta | s_dp) (Xiong, Ju & Zhang Algorithm 1, proposal = prior, nested RQMC loss eq. 6/11)
is trained once and conditioned on L prior-predictive releases; the noise-ignoring NPE
(``naive``) is trained on the confidential s and conditioned on the same releases.
SMC-ABC (App. C) is rerun on each dataset of a conjugate Gaussian problem, beside the same
SMC-ABC with a noise-free simulator.  Printed per method and parameter: KS statistic and
p-value of the ranks against Uniform(0, 1), coverage of the central 50/90/95% intervals, the
pass/fail of ``sbc_checks`` (family-wise false-alarm rate 1e-3, tolerances from the binomial
Monte Carlo error of L ranks), mean posterior sd and training seconds.

    python benchmarks/sbi_calibration.py                       # all three problems
    python benchmarks/sbi_calibration.py --problems toy --datasets 1000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dpposterior.diagnostics.sbi_calibration import (amortized_sbc, conjugate_gaussian_model, format_table,
                                         gaussian_laplace_model, gaussian_laplace_posterior_sd, release_model,
                                         sbc_checks, smc_abc_sbc)
from dpposterior.sbi.flows import FlowConfig

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ("toy", "linreg-ju-eps1", "abc-toy")


def describe(results, lower_only=()):
    lines = []
    for method, r in results.items():
        checks = sbc_checks(r, 1e-3, lower_only=method in lower_only)
        failed = [k for k, ok in checks.items() if not ok]
        sd = np.mean(r.info["posterior_sd"], axis=0)
        verdict = "PASS" if not failed else f"FAIL ({len(failed)}/{len(checks)} checks: {', '.join(failed)})"
        extra = f", {r.info['epochs']} epochs" if "epochs" in r.info else ""
        lines.append(f"- {method}: {verdict}{' [one-sided coverage checks]' if method in lower_only else ''}; "
                     f"mean posterior sd {np.round(sd, 3).tolist()}; {r.seconds:.1f} s{extra}")
    return "\n".join(lines)


def to_json(results):
    out = {}
    for method, r in results.items():
        out[method] = {"summary": r.summary, "seconds": r.seconds,
                       "mean_posterior_sd": np.mean(r.info["posterior_sd"], axis=0).tolist(),
                       "info": {k: v for k, v in r.info.items() if np.ndim(v) == 0}}
    return out


def main(argv=None):
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS), help=f"comma-separated from {PROBLEMS}")
    ap.add_argument("--datasets", type=int, default=None, help="L (default: 4000 toy, 1000 linreg-ju, 1000 ABC)")
    ap.add_argument("--draws", type=int, default=300, help="posterior draws per dataset")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    args.out = out_path(args.out, "sbi_calibration.json", args.update_results)
    problems = [p.strip() for p in args.problems.split(",") if p.strip()]
    record = {}
    for problem in problems:
        t0 = time.perf_counter()
        lower_only = ()
        if problem == "toy":
            # theta ~ N(0,1), s ~ N(theta, 0.5^2), Laplace(1) noise; the paper's flow (8 transforms)
            L = args.datasets or 4000
            settings = dict(datasets=L, draws=args.draws, simulations=4000, rqmc_points=8, seed=args.seed,
                            config=FlowConfig(max_epochs=100))
            res = amortized_sbc(gaussian_laplace_model(), **settings)
            title = (f"toy: Gaussian mean + Laplace(1) noise, L = {L}, 4,000 training simulations, M = 8, "
                     f"NSF 8 transforms")
        elif problem == "linreg-ju-eps1":
            L = args.datasets or 1000
            model = release_model(ROOT / "examples" / "releases" / "linreg-ju-eps1.json")
            settings = dict(datasets=L, draws=args.draws, simulations=5000, rqmc_points=8, seed=args.seed,
                            config=FlowConfig(transforms=5, max_epochs=100))
            res = amortized_sbc(model, **settings)
            title = f"linreg-ju eps = 1, L = {L}, 5,000 training simulations, M = 8, NSF 5 transforms"
        elif problem == "abc-toy":
            L = args.datasets or 1000
            res = smc_abc_sbc(conjugate_gaussian_model(), datasets=L, draws=400, simulations=10_000, particles=300,
                              seed=args.seed)
            lower_only = ("smc-abc",)
            tol = res["smc-abc"].info["final_tolerance"]
            title = (f"SMC-ABC, conjugate Gaussian (s ~ N(theta, 0.2^2), Gaussian noise sd 0.5), L = {L}, "
                     f"10,000 simulations and 300 particles per dataset (median final tolerance "
                     f"{np.median(tol):.3f}; exact posterior sd 0.474)")
        else:
            raise SystemExit(f"unknown problem {problem!r} (one of {PROBLEMS})")
        text = format_table(res, title) + "\n\n" + describe(res, lower_only)
        if problem == "toy":
            # SBC does not see sharpness: compare the posterior sd with the exact one (quadrature)
            exact = gaussian_laplace_posterior_sd(res["sppe-round1"].info["releases"][:, 0])
            ratios = {m: float(np.mean(r.info["posterior_sd"][:, 0] / exact)) for m, r in res.items()}
            text += (f"\n- exact posterior sd (quadrature, same releases): mean {exact.mean():.3f}; "
                     + ", ".join(f"{m} sd / exact sd = {v:.3f}" for m, v in ratios.items()))
            record_extra = {"exact_mean_posterior_sd": float(exact.mean()), "sd_ratio_to_exact": ratios}
        else:
            record_extra = {}
        print(text + f"\n\n(wall {time.perf_counter() - t0:.0f} s)\n", flush=True)
        record[problem] = {"title": title, "results": to_json(res), **record_extra}
    if args.out:
        previous = json.loads(args.out.read_text()) if args.out.exists() else {}
        previous.update(record)
        args.out.write_text(json.dumps(previous, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
