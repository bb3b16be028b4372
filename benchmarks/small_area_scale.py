"""Small-area exact-da at scale (issue 28): wall time and peak memory of one infer call on a simulated table.

    python benchmarks/small_area_scale.py G C CHAINS DRAWS WARMUP      # e.g. 100000 10 2 1000 500 (10^6 cells)
"""
import time, sys, resource, numpy as np, dpposterior as dp
from dpposterior.families.small_area import simulate, SmallAreaPrior
G, C, chains, draws, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(1)
t=time.time(); truth, rel = simulate(SmallAreaPrior(alpha_mean=1.0, alpha_sd=1.0), G, C, 2.0, rng, exposure=rng.uniform(5, 50, size=G), tau=0.5); print("simulate", time.time()-t, flush=True)
t=time.time(); release = dp.load_release(rel); print("load", time.time()-t, flush=True)
t=time.time()
post = dp.infer(release, prior={"alpha_mean": 1.0, "alpha_sd": 1.0}, seed=1, draws=draws, warmup=warmup, chains=chains)
wall=time.time()-t
print(f"G={G} C={C} cells={G*C} chains={chains} draws={draws} warmup={warmup} infer {wall:.1f}s  per-iter-per-chain {(wall)/(draws+warmup):.3f}s  maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1e6:.2f} GB load {open('/proc/loadavg').read().split()[0]}")
print(post.warnings[:3]); print("tau", post.draws("tau").mean(), truth["tau"], "alpha", post.draws("alpha").mean(0)[:3], truth["alpha"][:3])
