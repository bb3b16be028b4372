"""benchmarks/marginals_clt_oneway.py, imported once for the tests that use its exact reference: the posterior of
a one-clique table's first cell under the prior alpha = 1 a cell and discrete Gaussian noise (a convolution of the
other cells' truncated likelihoods), and the sum over every table it is checked against."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import marginals_clt_oneway as one_way_reference  # noqa: E402,F401
