"""Terminal output of posteriors (what `dpposterior infer` and `demo` print): ArviZ summary with 95% HPD,
the naive posterior beside it, warnings, where the file went.  The HTML report is ``report.py``."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.table import Table

#: engine RuntimeWarnings that the posterior also carries in its ``warnings`` (checks.flow_warnings), which
#: print_result shows as ``warning: ...``; the CLI silences the Python copy so each is printed once
REPEATED_IN_POSTERIOR = (r"SPPE importance correction",)


@contextmanager
def posterior_warnings_only():
    """Around an engine call in a command: drop the RuntimeWarnings that the posterior repeats."""
    with warnings.catch_warnings():
        for message in REPEATED_IN_POSTERIOR:
            warnings.filterwarnings("ignore", message=message, category=RuntimeWarning)
        yield


#: the width of tables written to a file or pipe: wide enough never to wrap a summary row (a terminal
#: uses its own width)
FILE_WIDTH = 1000


#: a variable with more elements than this (e.g. a rate per area and cell) prints its first FIRST_ROWS_SHOWN
MAX_ROWS_PER_VARIABLE = 40
FIRST_ROWS_SHOWN = 8


#: variables shown in a rate unit (per 1,000 / 100,000 when small: dpposterior.units), by family
RATE_VARIABLES = {"small-area": ("rate",)}
#: summary columns in the variable's own unit (scaled with a rate); the diagnostics are not
SCALED_COLUMNS = ("mean", "sd", "hdi_")


def registered_family(name):
    """The registered :class:`~dpposterior.families.Family` called ``name`` (a posterior's or release's
    ``family``), or None (a user model's posterior, an unknown name)."""
    from .families import FAMILY_MODULES, get_family

    return get_family(str(name)) if str(name) in FAMILY_MODULES else None


def constrainable(family_name) -> bool:
    """Whether the family's engines can restrict the parameters to the release's bounds (``Family.constrainable``):
    elsewhere the words "constrained"/"unconstrained" do not apply."""
    family = registered_family(family_name)
    return family is not None and family.constrainable


def rate_units(post) -> dict[str, tuple[float, str]]:
    """``{variable: (factor, words)}`` of the posterior's rate variables (dpposterior.units), chosen from the
    magnitude of their posterior medians."""
    from .units import rate_unit_of_draws

    return {name: rate_unit_of_draws(post.posterior[name]) for name in RATE_VARIABLES.get(post.family, ())
            if name in post.posterior}


def _value(x: float, column: str, decimals) -> str:
    """A summary value as ArviZ rounds it (3 decimals; ESS 0; R-hat 2), or in 3 significant digits where that
    rounding would print 0 for a nonzero value (a small sd)."""
    import numpy as np

    from .units import significant

    rounded = np.round(x, decimals.get(column, 3))
    if rounded == 0 and x != 0 and np.isfinite(x) and column.startswith(SCALED_COLUMNS):
        return significant(x)
    return f"{rounded:.4g}"


def summary_table(post, title: str, hdi_prob: float = 0.95, units: dict | None = None) -> Table:
    """The columns of ``post.summary()`` (ArviZ's, rounded as it rounds) that a terminal needs, computed by
    :mod:`dpposterior.convergence` so that printing a posterior does not import ArviZ.  A variable with more
    than :data:`MAX_ROWS_PER_VARIABLE` components (hundreds of areas) shows its first
    :data:`FIRST_ROWS_SHOWN` and a count of the rest; only the rows shown are computed (the file and
    ``report`` hold them all, and :mod:`dpposterior.checks` has diagnosed every component).

    Rates (:data:`RATE_VARIABLES`) are shown in ``units`` (default :func:`rate_units`: per 1,000 or per
    100,000 when small) with 3 significant digits, the unit named in the table's caption; the file keeps
    the rates themselves."""
    import numpy as np

    from .convergence import DECIMALS, summary_rows
    from .units import significant

    units = rate_units(post) if units is None else units
    columns, rows = summary_rows(post, hdi_prob=hdi_prob, limit=(MAX_ROWS_PER_VARIABLE, FIRST_ROWS_SHOWN))
    table = Table(title=title, title_justify="left")
    table.add_column("variable")
    shown = [i for i, c in enumerate(columns) if c != "ess_tail"]
    for i in shown:
        table.add_column(columns[i], justify="right")
    mean_col = columns.index("mean") if "mean" in columns else None
    scaled = [name for name, (factor, words) in units.items() if words]
    for name, values in rows:
        if values is None:  # "... N more u": the rest of a variable with hundreds of components
            table.add_row(escape(str(name)), *[""] * len(shown))
            continue
        if mean_col is not None and not np.isfinite(values[mean_col]):
            continue  # NaN padding of a ragged variable (naive-bayes levels): no parameter (as post.summary())
        variable = str(name).split("[", 1)[0]
        if variable in units:
            factor = units[variable][0]
            cells = [significant(values[i] * factor) if columns[i].startswith(SCALED_COLUMNS)
                     else f"{np.round(values[i], DECIMALS.get(columns[i], 3)):.4g}" for i in shown]
        else:
            cells = [_value(values[i], columns[i], DECIMALS) for i in shown]
        # escape: labels such as "class_prob[a]" would otherwise be eaten as rich markup tags
        table.add_row(escape(str(name)), *cells)
    if scaled:
        table.caption = "; ".join(f"{name}: mean, sd and HPD {units[name][1]} (the file stores the {name} itself)"
                                  for name in scaled)
        table.caption_justify = "left"
    return table


def run_header(post) -> list[str]:
    """What was done, in words: family, method, prior, constrained or not, draws, the release's privacy."""
    a = post.attrs
    lines = [f"family {post.family}, method {post.method}"]
    if "prior" in a:
        lines.append(f"prior: {a['prior']}")
    constrained = a.get("constrained") if constrainable(post.family) else None
    if constrained is not None:
        lines.append("constrained to what the release's bounds allow" if bool(constrained)
                     else "unconstrained (parameters not restricted to the release's bounds; "
                          "constrained = true in an analysis file restricts them)")
    warm = a.get("options_warmup")
    lines.append(f"{post.ndraws} draws x {post.nchains} chains"
                 + (f" after {warm} warm-up iterations" if warm not in (None, 0) and not post.iid
                    else ""))
    eps, delta = a.get("release_epsilon"), a.get("release_delta")
    if a.get("release_privacy") not in (None, "none"):  # zCDP: rho first, then its (epsilon, delta)
        lines.append(f"release: total {a['release_privacy']}, neighbouring replace-one")
    elif eps is not None:
        # a release file states its neighbouring relation (replace-one); a user Model states none
        lines.append(f"release: total epsilon {float(eps):g}" + (f", delta {float(delta):g}" if delta else "")
                     + ("" if "model" in a else ", neighbouring replace-one"))
    return lines


def print_posterior_summary(post, naive=None, console: Console | None = None) -> None:
    import sys

    console = console or Console(highlight=False, soft_wrap=True,
                                 width=None if sys.stdout.isatty() else FILE_WIDTH)
    for line in run_header(post):
        console.print(escape(line))
    units = rate_units(post)
    console.print(summary_table(post, f"posterior ({post.family}, method {post.method}, 95% HPD)", units=units))
    if naive is not None:  # (in the main posterior's units, side by side)
        console.print(summary_table(naive, f"naive posterior ignoring the privacy noise (method {naive.method})",
                                    units=units))


def print_result(post, out, naive=None) -> None:
    """The end of ``dpposterior infer`` (a family release or ``--model``): the summary, each warning
    as ``warning: ...`` on stderr, and where the posterior was written (flagged when it has warnings)."""
    import sys

    print_posterior_summary(post, naive=naive)
    for message in post.warnings:
        print(f"warning: {message}", file=sys.stderr)
    print(f"wrote {out}" + (" (flagged: see the warnings above and its 'warnings' attribute)"
                            if post.warnings else ""))


# progress of long phases: dpposterior.progress (a lower layer, so that engines and execution can report)
from .progress import (PHASE_GRACE, PROGRESS_INTERVAL, PROGRESS_INTERVAL_ENV, compile_notice,  # noqa: E402,F401
                       note, phase, progress_interval, status)
