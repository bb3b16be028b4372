"""benchmarks/marginals_adult.py's summary: coverage against the real-data fit and, with --resample, against each
resampled data set's own fit, and the combined estimates' errors in their own standard errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import marginals_adult as ma  # noqa: E402


def _rows(estimates, sds, sample_coefs):
    """One row per repeat: every coefficient combined to ``estimate ± 1.645 sd`` (the 0.9 interval)."""
    rows = []
    for k, (est, sd) in enumerate(zip(estimates, sds)):
        coefs = []
        for e, s in zip(est, sd):
            coefs.append({"0.9": [e - 1.645 * s, e + 1.645 * s], "estimate": e, "variance": s * s, "m_used": 10})
        row = {"status": "ok", "epsilon": 0.3, "repeat": k, "infer_seconds": 1.0, "synthesize_seconds": 1.0,
               "release": {"release_seconds": 0.1, "sigma": [80.0]},
               "diagnostics": {"max_rhat": 1.0, "min_ess_bulk": 400.0}, "combined": {"10": coefs}}
        if sample_coefs is not None:
            row["sample_coef"] = list(sample_coefs[k])
        rows.append(row)
    return rows


def test_summary_scores_the_population_and_each_samples_own_fit_and_the_errors_in_standard_errors():
    d = len(ma.COEFS)
    truth = np.zeros(d)
    # three repeats; estimates 0, 1 and 3 sds from the truth (the last misses); each sample's own fit sits 2 sds
    # off the truth, so its interval misses the sample fit where the estimate is at the truth
    est = np.array([np.zeros(d), np.ones(d), 3 * np.ones(d)])
    sd = np.ones((3, d))
    own = np.full((3, d), 2.0)
    summ = ma.summarise(_rows(est, sd, own), {"coef": dict(zip(ma.COEFS, truth))}, [0.9], [10])["0.3"]
    cov = summ["m10_level0.9"]
    assert math.isclose(cov["coverage_mean"], 2 / 3)
    assert math.isclose(cov["sample_fit"]["coverage_mean"], 2 / 3)  # repeat 0 misses 2, repeats 1 and 2 hold it
    assert all(math.isclose(v, 2 / 3) for v in cov["sample_fit"]["coverage"].values())
    err = summ["m10_error_in_se"]
    assert all(math.isclose(v, 4 / 3) for v in err["mean"].values())
    assert all(math.isclose(v, float(np.std([0, 1, 3], ddof=1))) for v in err["sd"].values())


def test_summary_without_resampling_has_no_sample_fit_score():
    d = len(ma.COEFS)
    summ = ma.summarise(_rows(np.zeros((2, d)), np.ones((2, d)), None), {"coef": dict.fromkeys(ma.COEFS, 0.0)},
                        [0.9], [10])["0.3"]
    assert "sample_fit" not in summ["m10_level0.9"]
    assert summ["m10_level0.9"]["coverage_mean"] == 1.0
