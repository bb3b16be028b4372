"""Typed curator options, driven by the registry: every family in ``FAMILY_MODULES`` with a
curator names its options class (``Family.curator_options``, a ``CuratorOptions`` subclass), every option
given to a curator that does not take it is refused in one line naming the option and the family before
the data are read (parametrised over family x option), and the table in docs/cli.md ("Curator options")
is the option classes' own listing (``python tests/test_curator_options.py`` rewrites it).
"""

from __future__ import annotations

import pytest

from dpposterior.curator import CurateOptions, CuratorOptions, build_release
from dpposterior.errors import InputError
from dpposterior.families import FAMILY_MODULES, get_family
from dpposterior.families._curate import flag

from _doc_tables import check_table, rewrite_table

CURATOR_FAMILIES = [name for name in FAMILY_MODULES if get_family(name).curate is not None]
#: every option any curator takes, plus a name none takes
ALL_OPTIONS = sorted({n for f in CURATOR_FAMILIES for n in get_family(f).curator_options.names()}
                     | {"no_such_option"})


@pytest.mark.parametrize("family", CURATOR_FAMILIES)
def test_every_curator_names_its_typed_options(family):
    cls = get_family(family).curator_options
    assert issubclass(cls, CuratorOptions) and cls.family == family
    assert {"epsilon", "seed"} <= set(cls.names())
    assert ("rho" in cls.names()) == ("discrete-gaussian" in get_family(family).mechanisms)  # its zCDP budget
    cls()  # its defaults are valid options
    assert cls.from_curate(CurateOptions(family)) == cls()


@pytest.mark.parametrize("option", ALL_OPTIONS)
@pytest.mark.parametrize("family", CURATOR_FAMILIES)
def test_option_not_taken_is_refused_before_the_data_are_read(family, option, tmp_path):
    cls = get_family(family).curator_options
    if option in cls.names():
        return  # taken: its values are checked by the curator (tests per family)
    with pytest.raises(InputError) as err:  # the data file does not exist: the refusal comes first
        build_release(tmp_path / "absent.csv", CurateOptions(family, epsilon=1.0, **{option: "x"}))
    message = str(err.value)
    assert message.startswith(f"{flag(option)}: not an option of the {family} curator (options: ")
    assert "\n" not in message
    assert message.endswith(f"{', '.join(flag(n) for n in cls.names())})")


def test_a_curator_must_declare_its_options():
    from dpposterior.families import Family

    with pytest.raises(TypeError, match="declare the curator with its typed options class"):
        Family(name="x", release_model=object, methods={}, auto_method="a", parse_prior=lambda p, r: p,
               curate=lambda frame, options: {})


def test_direct_curator_call_refuses_too():
    """A curator called without build_release (the audit, a test) builds the same options."""
    import pandas as pd

    with pytest.raises(InputError, match=r"^categories: not an option of the binomial curator \(options: "):
        get_family("binomial").curate(pd.DataFrame({"x": [0, 1]}),
                                      CurateOptions("binomial", epsilon=1.0, column="x", extra={"categories": ["a"]}))


def test_an_option_given_twice_must_agree():
    with pytest.raises(InputError, match=r"^population: given twice with different values \(10 and 20\)$"):
        CurateOptions("sir", population=10, extra={"population": 20})
    assert CurateOptions("sir", population=10, extra={"population": 10}).given == {"population": 10}


def options_table() -> str:
    """The markdown table of docs/cli.md, "Curator options": family | options."""
    rows = ["| family | curator options |", "|---|---|"]
    for family in CURATOR_FAMILIES:
        names = ", ".join(f"`{flag(n)}`" for n in get_family(family).curator_options.names())
        rows.append(f"| {family} | {names} |")
    return "\n".join(rows)


def test_cli_doc_table_lists_every_curators_options():
    check_table("curator-options", options_table(), "tests/test_curator_options.py")


if __name__ == "__main__":  # rewrite the table in docs/cli.md
    rewrite_table("curator-options", options_table())
