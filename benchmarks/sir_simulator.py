"""Milliseconds per exact Gillespie SIR trajectory at K = 10^6 (Xiong, Ju & Zhang Sec. 4.1).

    python benchmarks/sir_simulator.py [--n 50]

Times the numba-compiled simulator (one core, after compilation) at the true
parameter (beta, gamma) = (e^-0.5, e^-3) and at the prior means (0.4, 0.125);
target <= 50 ms per trajectory.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpposterior.sbi.sir_simulator import simulate_sir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    simulate_sir([0.5], [0.1], rng)  # compile
    for label, beta, gamma in (("truth  (e^-0.5, e^-3)", np.exp(-0.5), np.exp(-3.0)),
                               ("prior mean (0.4, 0.125)", 0.4, 0.125)):
        t, c = time.perf_counter(), time.process_time()
        i = simulate_sir(np.full(args.n, beta), np.full(args.n, gamma), rng)
        dt = (time.perf_counter() - t) / args.n * 1000
        dc = (time.process_time() - c) / args.n * 1000
        took_off = np.mean(i.max(axis=1) > 1000)
        # CPU time is what one idle core would take; wall time also counts waiting on a shared machine
        print(f"{label:26s} {dc:6.1f} ms CPU / {dt:6.1f} ms wall per trajectory "
              f"({args.n} trajectories, {took_off:.0%} major outbreaks)")


if __name__ == "__main__":
    main()
