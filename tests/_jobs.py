"""Small checkpointed jobs for the execution/checkpoint tests (module-level, so picklable).

Run as a script it is the job a test kills with SIGKILL and resumes::

    python _jobs.py CHECKPOINT OUT.json --units 12 --sleep 0.2 [--scheduler serial] [--resume]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

def kill_group(proc) -> None:
    """SIGKILL a test's subprocess and its session (started with ``start_new_session=True``), then reap it."""
    import os
    import signal

    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - already gone
            pass
    proc.wait(timeout=30)


#: units computed by this process (the resume test checks that done units are not rerun)
CALLS = 0


def draw_unit(unit):
    """One unit of a toy Monte Carlo study: statistics of draws from the unit's own seed.

    ``unit`` is ``(seed_sequence, sleep_seconds)``; the result depends only on the seed,
    so any backend, order or interruption gives the same numbers.
    """
    global CALLS
    seed, sleep = unit
    CALLS += 1
    rng = np.random.default_rng(seed)
    x = rng.standard_gamma(2.0, size=1000)
    if sleep:
        time.sleep(sleep)
    # numpy scalars and an array on purpose: the checkpoint must store them exactly
    return {"mean": x.mean(), "quantiles": np.quantile(x, [0.1, 0.5, 0.9]), "max_index": np.argmax(x)}


def logged_unit(unit):
    """:func:`draw_unit`, first appending the unit's index to a log (one line per execution, from
    whichever process runs it): the cluster tests count how often each unit ran."""
    index, seed, sleep, log = unit
    with open(log, "a") as fh:
        fh.write(f"{index}\n")
    return draw_unit((seed, sleep))


def fail_unit(unit):
    if unit == 2:
        raise ValueError("unit 2 is broken")
    return unit


def main(argv=None):
    from dpposterior.checkpoint import run_units
    from dpposterior.execution import spawn_seeds

    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--units", type=int, default=12)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--scheduler", default="serial")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--log", help="log every unit's execution here (logged_unit)")
    args = ap.parse_args(argv)
    fn, units = draw_unit, [(s, args.sleep) for s in spawn_seeds(args.seed, args.units)]
    if args.log:
        fn, units = logged_unit, [(i, s, sleep, args.log) for i, (s, sleep) in enumerate(units)]
    results = run_units(fn, units, scheduler=args.scheduler, checkpoint=args.checkpoint,
                        resume=args.resume, fingerprint={"seed": args.seed, "units": args.units},
                        workers=2)
    with open(args.out, "w") as fh:
        json.dump({"results": results, "computed_here": CALLS}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
