"""Release files (dpposterior-release/1): validation of the gaussian contract."""

import json
import math

import pytest

from dpposterior.errors import InputError
from dpposterior.release import load_release

GOOD = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
        "statistics": {"mean": {"value": 34.30, "mechanism": "laplace", "epsilon": 0.25,
                                "sensitivity": 2.3255813953488373},
                       "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25,
                                    "sensitivity": 232.55813953488374}}}


def variant(path, value=None, delete=False):
    data = json.loads(json.dumps(GOOD))
    *head, last = path.split(".")
    node = data
    for key in head:
        node = node[key]
    if delete:
        del node[last]
    else:
        node[last] = value
    return data


def test_issue_example_loads_and_costs():
    rel = load_release(GOOD)
    assert rel.n == 43 and rel.bounds == (0.0, 100.0)
    assert rel.total_privacy_cost() == (0.5, 0.0)
    assert len(rel.sha256) == 64


def test_sensitivities_are_derived_when_omitted():
    data = variant("statistics.mean.sensitivity", delete=True)
    data["statistics"]["variance"].pop("sensitivity")
    rel = load_release(data)
    assert rel.statistics.mean.sensitivity == pytest.approx(100 / 43)
    assert rel.statistics.variance.sensitivity == pytest.approx(100**2 / 43)


def test_save_and_reload_round_trip(tmp_path):
    rel = load_release(GOOD)
    path = tmp_path / "r.json"
    rel.save(path)
    again = load_release(path)
    assert again.to_dict() == rel.to_dict()
    import hashlib
    assert again.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("path, value, delete, field", [
    ("bounds", [100.0, 0.0], False, "release.bounds"),
    ("bounds", [1.0, 1.0], False, "release.bounds"),
    ("bounds", [0.0], False, "release.bounds"),
    ("n", 1, False, "release.n"),
    ("n", 4.5, False, "release.n"),
    ("statistics.variance", None, True, "release.statistics.variance"),
    ("statistics.mean.value", math.nan, False, "release.statistics.mean.value"),
    ("statistics.mean.value", [1.0, 2.0], False, "release.statistics.mean.value"),
    ("statistics.mean.value", "34", False, "release.statistics.mean.value"),
    ("statistics.mean.epsilon", 0.0, False, "release.statistics.mean.epsilon"),
    ("statistics.mean.epsilon", -1.0, False, "release.statistics.mean.epsilon"),
    ("statistics.mean.sensitivity", 2.33, False, "release.statistics.mean.sensitivity"),
    ("statistics.variance.sensitivity", 100.0, False, "release.statistics.variance.sensitivity"),
    ("statistics.mean.mechanism", "gaussian", False, "release.statistics.mean.mechanism"),
    ("statistics.mean.mechanism", "exponential", False, "release.statistics.mean.mechanism"),
    ("statistics.extra", {"value": 1.0, "mechanism": "laplace", "epsilon": 1.0}, False, "release.statistics.extra"),
    ("rows", [[1, 2]], False, "release.rows"),
    ("format", "dpposterior-release/2", False, "release.format"),
    ("family", "nope", False, "release.family"),
])
def test_malformed_fields_are_named(path, value, delete, field):
    with pytest.raises(InputError) as info:
        load_release(variant(path, value, delete))
    assert info.value.field.startswith(field), str(info.value)
    assert "\n" not in str(info.value)


def test_sensitivity_tolerance_is_relative_1e9():
    load_release(variant("statistics.mean.sensitivity", 100 / 43 * (1 + 1e-11)))
    with pytest.raises(InputError, match="does not match"):
        load_release(variant("statistics.mean.sensitivity", 100 / 43 * (1 + 1e-7)))


def test_not_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError) as info:
        load_release(bad)
    assert info.value.field == "release"
    with pytest.raises(InputError, match="file not found"):
        load_release(tmp_path / "absent.json")


def test_gaussian_bounds_too_narrow_for_their_square_are_refused_in_one_line():
    """bounds [0, 5e-324] (a fuzz case): (b - a)^2 underflows to 0 and the engine divided by it; refused on loading."""
    from dpposterior.errors import InputError
    from dpposterior.release import load_release

    rel = {"format": "dpposterior-release/1", "family": "gaussian", "n": 4, "bounds": [0.0, 5e-324],
           "statistics": {"mean": {"value": 0.0, "mechanism": "laplace", "epsilon": 1.0},
                          "variance": {"value": 0.0, "mechanism": "laplace", "epsilon": 1.0}}}
    with pytest.raises(InputError, match=r"^release\.bounds: width b - a = 4\.94066e-324 is too small"):
        load_release(rel)
    rel["bounds"] = [0.0, 1e-150]
    assert load_release(rel).width == 1e-150


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
def test_a_release_in_any_json_encoding_loads_and_keeps_its_text_where_utf8(encoding, tmp_path):
    """The file is decoded once for the parser and the stored source: UTF-8 text (a byte-order mark included) is
    kept as read; UTF-16/32, which the parser reads from the bytes, is stored as the canonical dump."""
    release = {"format": "dpposterior-release/1", "family": "binomial", "n": 100,
               "statistics": {"successes": {"value": 31.7, "mechanism": "laplace", "epsilon": 0.5,
                                            "sensitivity": 1.0}}}
    text = json.dumps(release, indent=1)
    path = tmp_path / "release.json"
    path.write_bytes(text.encode(encoding))
    loaded = load_release(path)
    assert loaded.n == 100 and loaded.statistics.successes.value == 31.7
    if encoding.startswith("utf-8"):
        assert loaded.source_json() == path.read_bytes().decode("utf-8")
    else:
        assert loaded.source_json() == json.dumps(loaded.to_dict(), sort_keys=True)
