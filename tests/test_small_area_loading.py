"""Loading a small-area release: the table is checked in numpy when it is a plain table of numbers, and by
pydantic element by element otherwise -- the same numbers, the same dump and the same one-line refusals."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest
from pydantic import TypeAdapter

import dpposterior as dp
from dpposterior.errors import InputError
from dpposterior.release import NumberTable, plain_number_rows

G, C = 3000, 4


def _release(value, **counts) -> dict:
    return {"format": "dpposterior-release/1", "family": "small-area", "areas": [f"a{g}" for g in range(G)],
            "cells": [f"c{c}" for c in range(C)],
            "statistics": {"counts": {"value": value, "mechanism": "discrete-gaussian", "sigma": 2.0, **counts}}}


def _table() -> list:
    rng = np.random.default_rng(5)
    return rng.integers(0, 50, size=(G, C)).tolist()


@pytest.mark.parametrize("bad,reason", [
    ("x", "Input should be a valid number, unable to parse string as a number"),
    (None, "Input should be a valid number"),
    ([4], "Input should be a valid number"),
    ({}, "Input should be a valid number"),
    (10 ** 400, "Input should be a valid number"),
])
def test_a_bad_element_of_a_large_table_is_refused_naming_its_index(bad, reason, tmp_path):
    """The numpy check finds no plain table, so pydantic's own validation names the element (as it always did)."""
    value = _table()
    value[G - 2][C - 1] = bad
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_release(value)))
    for source in (_release(value), path):
        with pytest.raises(InputError) as err:
            dp.load_release(source)
        assert str(err.value) == f"release.statistics.counts.value.{G - 2}.{C - 1}: {reason}"


@pytest.mark.parametrize("bad,message", [
    (float("nan"), f"row {G - 1} holds nan: values must be finite"),
    (float("inf"), f"row {G - 1} holds inf: values must be finite"),
    ("inf", f"row {G - 1} holds inf: values must be finite"),
])
def test_a_non_finite_cell_is_refused_naming_its_row(bad, message):
    value = _table()
    value[G - 1][0] = bad
    with pytest.raises(InputError) as err:
        dp.load_release(_release(value))
    assert str(err.value) == f"release.statistics.counts.value: {message}"


def test_ragged_and_empty_tables_are_refused_as_before():
    value = _table()
    value[7] = value[7][:2]
    with pytest.raises(InputError, match=r"^release\.statistics\.counts\.value: row 7 has 2 cells, row 0 has 4$"):
        dp.load_release(_release(value))
    for empty in ([], [[]], [[], []]):
        with pytest.raises(InputError, match="must be a non-empty G x C table"):
            dp.load_release(_release(empty))


@pytest.mark.parametrize("kind", ["ints", "floats", "mixed", "bools", "strings", "tuples"])
def test_the_table_holds_the_numbers_pydantic_gave_and_dumps_them_alike(kind, tmp_path):
    """Whichever path checked it, the release's array and its dump are pydantic's list[list[float]] of the input."""
    value = _table()
    if kind == "floats":
        value = [[x + 0.5 for x in row] for row in value]
    elif kind == "mixed":
        value[3][1] = 2.0
        value[5][0] = 2 ** 40 + 1
    elif kind == "bools":
        value[0] = [True, False, True, 0]
    elif kind == "strings":  # lax pydantic reads numeric strings: the slow path
        value[2][2] = "12"
    elif kind == "tuples":
        value = [tuple(row) for row in value]
    assert (plain_number_rows(value) is not None) == (kind in ("ints", "floats", "mixed", "bools"))
    release = _release(value)
    if kind == "floats":  # not integers: continuous noise
        release["statistics"]["counts"].update(mechanism="gaussian", sigma=20.0, epsilon=1.0, delta=0.1)
        release["not_dp"] = "a test"
    rel = dp.load_release(release)
    expected = TypeAdapter(list[list[float]]).validate_python(value)
    assert isinstance(rel.statistics.counts.value, NumberTable)
    assert np.array_equal(rel.released(), np.asarray(expected, float))
    assert json.dumps(rel.to_dict()["statistics"]["counts"]["value"]) == json.dumps(expected)
    assert rel.model_dump()["statistics"]["counts"]["value"] == expected
    if kind != "tuples":  # the same table read from a file
        path = tmp_path / "r.json"
        path.write_text(json.dumps(release))
        again = dp.load_release(path)
        assert np.array_equal(again.released(), rel.released()) and again.to_json() == rel.to_json()


def test_a_callers_table_stays_the_callers():
    """The release keeps rows of its own: changing the dict afterwards changes neither its list nor its array."""
    value = _table()
    rel = dp.load_release(_release(value))
    before = rel.released()
    value[0][0] = 10 ** 6
    value[1].append(3)
    assert rel.statistics.counts.value[0][0] != 10 ** 6 and len(rel.statistics.counts.value[1]) == C
    assert np.array_equal(rel.released(), before)
    out = rel.released()
    out[0, 0] = -1.0  # a copy: the release is not changed through it
    assert rel.released()[0, 0] == before[0, 0]


def test_the_table_survives_copy_and_pickle():
    rel = dp.load_release(_release(_table()))
    for other in (copy.deepcopy(rel), pickle.loads(pickle.dumps(rel))):
        assert isinstance(other.statistics.counts.value, NumberTable)
        assert np.array_equal(other.released(), rel.released()) and other.to_json() == rel.to_json()


@pytest.mark.parametrize("sigma", [2.0, [1.0, 3.0, 1.0, 2.0], "table"])
def test_cell_mechanisms_are_np_unique_of_the_noise_table(sigma):
    value = _table()
    if sigma == "table":
        sigma = np.where(np.arange(G * C).reshape(G, C) % 3 == 0, 1.5, 2.5).tolist()
    rel = dp.load_release(_release(value, sigma=sigma))
    distinct, inverse, mechs = rel.cell_mechanisms()
    want_distinct, want_inverse = np.unique(rel.noise_sigma(), return_inverse=True)
    assert np.array_equal(distinct, want_distinct) and inverse.dtype == want_inverse.dtype
    assert np.array_equal(inverse, want_inverse.reshape(G, C)) and inverse.shape == (G, C)
    assert len(mechs) == len(distinct)
