"""Analysis TOML parsing: every problem is a one-line InputError naming the key."""

import pytest

from dpposterior.analysis import load_analysis, parse_analysis
from dpposterior.errors import InputError


def test_parse_full(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text('method = "auto"\nconstrained = true\n[prior]\nkind = "flat"\n'
                    "[sampling]\ndraws = 10\nwarmup = 5\nchains = 2\nseed = 1\n")
    kw = load_analysis(path)
    assert kw == {"method": "auto", "constrained": True, "prior": {"kind": "flat"},
                  "draws": 10, "warmup": 5, "chains": 2, "seed": 1}


@pytest.mark.parametrize("text, field", [
    ("method = 3", "analysis.method"),
    ('constrained = "yes"', "analysis.constrained"),
    ("prior = 1", "analysis.prior"),
    ("[sampling]\nthin = 2", "analysis.sampling.thin"),
    ("frobnicate = 1", "analysis.frobnicate"),
    ("method = ", "analysis"),
])
def test_bad_analysis(tmp_path, text, field):
    path = tmp_path / "a.toml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_analysis(path)
    assert exc.value.field == field
    assert "\n" not in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        load_analysis(tmp_path / "nope.toml")


def test_engine_options_pass_through_to_the_engine():
    """Top-level keys beyond method/constrained/prior/sampling are engine options: the engine's options class
    checks them when infer runs (tests/test_engine_options.py), so the file passes them through."""
    from dpposterior.families import get_family

    assert parse_analysis({"tol": 1e-6}, get_family("naive-bayes")) == {"tol": 1e-6}
