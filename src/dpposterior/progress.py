"""Progress of a command's long phases, on stderr: a rich spinner on a terminal, plain lines in a log.

A command wraps each phase that can take more than a couple of seconds in ``phase("...", quiet)``.  On a
terminal a rich spinner shows the phase, its status and the seconds spent; elsewhere (a log, a pipe, a
batch job's stderr) plain lines: "NAME..." once the phase has run PHASE_GRACE seconds, then
"NAME: STATUS, N s" every PROGRESS_INTERVAL seconds, and "NAME: done in N s" -- so minutes of work never
pass without a line.  Code deep inside a phase (an engine's compile notice, Dask's iterations) reports
through ``status(text)`` and ``note(text)``, which do nothing outside a phase (the Python API is quiet).
"""

from __future__ import annotations


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


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
