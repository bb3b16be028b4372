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


#: families whose engines can restrict the parameters to what the release's bounds allow (the analysis
#: file's ``constrained``); for the others the words "constrained"/"unconstrained" do not apply
CONSTRAINABLE_FAMILIES = ("gaussian", "linear-regression")
#: the width of tables written to a file or pipe: wide enough never to wrap a summary row (a terminal
#: uses its own width)
FILE_WIDTH = 1000


#: a variable with more elements than this (e.g. a rate per area and cell) prints its first FIRST_ROWS_SHOWN
MAX_ROWS_PER_VARIABLE = 40
FIRST_ROWS_SHOWN = 8


def summary_table(post, title: str, hdi_prob: float = 0.95) -> Table:
    """The columns of ``post.summary()`` (ArviZ's, rounded as it rounds) that a terminal needs, computed by
    :mod:`dpposterior.convergence` so that printing a posterior does not import ArviZ.  A variable with more
    than :data:`MAX_ROWS_PER_VARIABLE` components (hundreds of areas) shows its first
    :data:`FIRST_ROWS_SHOWN` and a count of the rest; only the rows shown are computed (the file and
    ``report`` hold them all, and :mod:`dpposterior.checks` has diagnosed every component)."""
    import numpy as np

    from .convergence import DECIMALS, summary_rows

    columns, rows = summary_rows(post, hdi_prob=hdi_prob, limit=(MAX_ROWS_PER_VARIABLE, FIRST_ROWS_SHOWN))
    table = Table(title=title, title_justify="left")
    table.add_column("variable")
    shown = [i for i, c in enumerate(columns) if c != "ess_tail"]
    for i in shown:
        table.add_column(columns[i], justify="right")
    mean_col = columns.index("mean") if "mean" in columns else None
    for name, values in rows:
        if values is None:  # "... N more u": the rest of a variable with hundreds of components
            table.add_row(escape(str(name)), *[""] * len(shown))
            continue
        if mean_col is not None and not np.isfinite(values[mean_col]):
            continue  # NaN padding of a ragged variable (naive-bayes levels): no parameter (as post.summary())
        # escape: labels such as "class_prob[a]" would otherwise be eaten as rich markup tags
        table.add_row(escape(str(name)),
                      *[f"{np.round(values[i], DECIMALS.get(columns[i], 3)):.4g}" for i in shown])
    return table


def run_header(post) -> list[str]:
    """What was done, in words: family, method, prior, constrained or not, draws, the release's privacy."""
    a = post.attrs
    lines = [f"family {post.family}, method {post.method}"]
    if "prior" in a:
        lines.append(f"prior: {a['prior']}")
    constrained = a.get("constrained") if post.family in CONSTRAINABLE_FAMILIES else None
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
    console.print(summary_table(post, f"posterior ({post.family}, method {post.method}, 95% HPD)"))
    if naive is not None:
        console.print(summary_table(naive, f"naive posterior ignoring the privacy noise (method {naive.method})"))


def print_result(post, out, naive=None) -> None:
    """The end of ``dpposterior infer`` (a family release or ``--model``): the summary, each warning
    as ``warning: ...`` on stderr, and where the posterior was written (flagged when it has warnings)."""
    import sys

    print_posterior_summary(post, naive=naive)
    for message in post.warnings:
        print(f"warning: {message}", file=sys.stderr)
    print(f"wrote {out}" + (" (flagged: see the warnings above and its 'warnings' attribute)"
                            if post.warnings else ""))


# ------------------------------------------------------------------------------ progress of long phases
#
# A command wraps each phase that can take more than a couple of seconds in ``phase("...", quiet)``.  On a
# terminal a rich spinner shows the phase, its status and the seconds spent; elsewhere (a log, a pipe, a
# batch job's stderr) plain lines: "NAME..." once the phase has run PHASE_GRACE seconds, then
# "NAME: STATUS, N s" every PROGRESS_INTERVAL seconds, and "NAME: done in N s" -- so minutes of work never
# pass without a line.  Code deep inside a phase (an engine's compile notice, Dask's iterations) reports
# through ``status(text)`` and ``note(text)``, which do nothing outside a phase (the Python API is quiet).

#: seconds between plain progress lines when stderr is not a terminal; the environment variable
#: DPPOSTERIOR_PROGRESS_INTERVAL overrides it (a test sets a fraction of a second)
PROGRESS_INTERVAL = 10.0
PROGRESS_INTERVAL_ENV = "DPPOSTERIOR_PROGRESS_INTERVAL"
#: a phase shorter than this prints nothing (capped by the interval)
PHASE_GRACE = 2.0

_active: list["_Phase"] = []


def progress_interval() -> float:
    import os

    try:
        value = float(os.environ.get(PROGRESS_INTERVAL_ENV, PROGRESS_INTERVAL))
    except ValueError:
        return PROGRESS_INTERVAL
    return value if value > 0 else PROGRESS_INTERVAL


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


class _Phase:
    def __init__(self, name: str, stream):
        import threading

        self.name, self.stream = name, stream
        self.text = ""
        self.announced = False
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = progress_interval()
        self.grace = min(PHASE_GRACE, self.interval)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.live = None

    def _print(self, line: str) -> None:
        with self.lock:
            if self.live is not None:
                self.live.console.print(escape(line), highlight=False)
            else:
                print(line, file=self.stream, flush=True)

    def _announce(self) -> None:
        with self.lock:
            if self.announced:
                return
            self.announced = True
        self._print(f"{self.name}..." + (f" ({self.text})" if self.text else ""))

    def _elapsed(self) -> float:
        import time

        return time.monotonic() - self.start

    def _describe(self) -> str:
        return f"{self.name}" + (f": {self.text}" if self.text else "") + f", {_seconds(self._elapsed())}"

    def _run(self) -> None:
        if self.stop.wait(self.grace):
            return
        if self.tty:
            from rich.console import Console as RichConsole

            with self.lock:
                self.live = RichConsole(file=self.stream, highlight=False).status(escape(self._describe()))
                self.live.start()
            while not self.stop.wait(0.5):
                with self.lock:
                    self.live.update(escape(self._describe()))
            return
        self._announce()
        while not self.stop.wait(self.interval):
            self._print(self._describe())

    def __enter__(self):
        import threading
        import time

        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="dpposterior-progress", daemon=True)
        self.thread.start()
        _active.append(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop.set()
        self.thread.join()
        _active.remove(self)
        if self.live is not None:
            self.live.stop()
            self.live = None
        if self.announced and exc_type is None:
            print(f"{self.name}: done in {_seconds(self._elapsed())}", file=self.stream, flush=True)
        return False

    def update(self, text: str) -> None:
        self.text = text

    def note(self, line: str) -> None:
        if not self.tty:
            self._announce()  # (in a log, the phase's line first)
        self._print(line)


class _Silent:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, text: str) -> None:
        pass

    def note(self, line: str) -> None:
        pass


def phase(name: str, quiet: bool = False, stream=None):
    """A context for one long phase of a command (see above): silent when ``quiet``; inside another phase
    it only changes that phase's status (one line of progress at a time)."""
    import sys

    if quiet:
        return _Silent()
    if _active:
        outer = _active[-1]
        outer.update(name)
        return _Silent()
    return _Phase(name, stream if stream is not None else sys.stderr)


def status(text: str) -> None:
    """The current phase's status (e.g. ``iteration 40 of 1200``): shown with its next progress line."""
    if _active:
        _active[-1].update(text)


def note(line: str) -> None:
    """A line on stderr now, inside a phase (e.g. that a compilation starts); nothing outside one."""
    if _active:
        _active[-1].note(line)


def compile_notice(what: str, seconds: float, *dispatchers) -> None:
    """Inside a phase, say that numba compiles ``what`` now when its on-disk cache is cold (the first run
    after install or after an upgrade): no kernel compiled in this process yet and no cache index file
    beside its module -- a cheap look, no compilation."""
    import os

    if not _active:
        return
    for d in dispatchers:
        if getattr(d, "signatures", None):
            continue  # compiled in this process already
        try:
            index = d._cache._cache_file._index_path
        except AttributeError:  # not a cached numba dispatcher (or numba's internals changed): say nothing
            continue
        if not os.path.exists(index):
            note(f"compiling {what} (first run after install, ~{seconds:.0f} s)...")
            return
