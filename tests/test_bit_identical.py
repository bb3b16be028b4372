"""Fixed seeds give bit-identical draws across refactors (issue 15): every engine case and batched
calibration study of ``tests/golden_draws.py`` is recomputed and compared with the stored arrays."""

import numpy as np
import pytest

import golden_draws as golden

STORED = np.load(golden.GOLDEN)


@pytest.mark.parametrize("case", golden.CASES, ids=[c[0] for c in golden.CASES])
def test_engine_draws_are_bit_identical(case):
    name, family, method, n, epsilon, options = case
    draws = golden.case_draws(family, method, n, epsilon, options)
    np.testing.assert_array_equal(draws, STORED[name])


@pytest.mark.parametrize("study", golden.STUDIES, ids=[s[0] for s in golden.STUDIES])
def test_calibration_ranks_are_bit_identical(study):
    name, family, methods, n, epsilon, trials = study
    np.testing.assert_array_equal(golden.study_ranks(family, methods, n, epsilon, trials), STORED[name])
