"""Every command in README.md and docs/ runs: reduced sizes in the fast suite, as written under
``-m slow``, so that a reader of the docs alone can run each one from a clone.

Each Markdown file's fenced shell blocks are read in order as one script: ``cat > FILE <<'TAG'`` writes
FILE, ``python - <<'TAG'`` runs its code, and each ``dpposterior ...`` line runs in-process
(``cli.main``) in a scratch folder that links the repository's ``examples/``.  Synopsis lines
(``[--option]``, placeholders such as ``RELEASE.json``) are documentation of the grammar, not commands.
A command that cannot run here at all (a Dask cluster at ``tcp://127.0.0.1:8786``, 20,000-trial studies, every
gallery entry) is listed in :data:`NOT_RUN` with the reason; a new command in the docs that is neither
run nor listed fails :func:`test_every_documented_command_is_run_or_listed`.

A fenced block whose info string is ``text output`` right after a command (or a ``python - <<'PY'``
block) is what that command prints: it is compared with the printed output (:func:`output_mismatch`:
``…`` elides, numbers match within a tolerance) wherever the command runs as written, so in the fast
suite for commands the reduction leaves alone (``demo``, python blocks) and under ``-m slow`` for all.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMANDS = ("release", "infer", "audit", "demo", "calibrate", "report", "reproduce", "tabulate")

#: commands that run nowhere but on their own infrastructure or for hours: (file, start of the command)
NOT_RUN = {
    ("docs/scaling.md", "dpposterior calibrate --family binomial --n 100 --epsilon 0.1 --trials 100000"):
        "needs a Dask scheduler and workers at tcp://127.0.0.1:8786 (dask scheduler, dask worker)",
    ("docs/scaling.md", "dpposterior reproduce kazan-coverage --full --scheduler tcp://"):
        "needs a Dask scheduler and workers at tcp://127.0.0.1:8786 (dask scheduler, dask worker)",
    ("docs/scaling.md", "dpposterior calibrate ... --scheduler tcp://"): "an elided example of a cluster run",
    ("docs/small-area.md", "dpposterior infer table.json --scheduler tcp://"): "needs a Dask scheduler and workers at tcp://127.0.0.1:8786 (dask scheduler, dask worker)",
    ("docs/gallery.md", "for e in kazan-example1"): "every gallery entry (hours); each runs in tests/test_gallery.py",
}
#: commands whose reduced form still takes over 15 s on the 2-core machine (SPLE's slice sampler; SIR's
#: simulator): run only by the -m slow test, at the doc's size, to keep the fast suite cheap
SLOW_EVEN_REDUCED = {
    "dpposterior infer examples/releases/loglinear-eps10.json --method sple --rounds 5 --out nb.nc": "40 s at 1 round",
    "dpposterior infer examples/releases/sir-eps10.json --method smc-abc --simulations 20000 --out sir.nc":
        "21 s at 300 simulations",
}
#: commands whose full-size run the docs show flagged, with where the doc explains it
FLAG_EXPLAINED = {
    "dpposterior infer examples/releases/linreg-ju-eps10.json --method da-mcmc --out P.nc":
        "docs/models.md after the command: ESS ~400 at eps = 10",
    "dpposterior infer reg.json --out reg.nc --method mcmc-normalx --draws 2000 --warmup 1000 --seed 1":
        "docs/linear-regression.md after the command: sigma2 is its prior, sigma_x mixes slowly",
    "dpposterior infer kalawao.json --draws 5000 --warmup 1000 --seed 1 --out kalawao.nc":
        "docs/census.md after the command: two tracts, so the tract mixes' shape and rates mix slowly",
    "dpposterior infer kalawao.json --analysis resumable.toml --draws 5000 --warmup 1000 --seed 1 --out kalawao.nc":
        "docs/census.md after the first Kalawao command: the same posterior",
    "dpposterior infer kalawao-bounded.json --draws 5000 --warmup 1000 --seed 1 --out bounded.nc":
        "docs/census.md after the first Kalawao command: the same county, bounded",
    "dpposterior infer measured.json --draws 500 --warmup 300 --out measured.nc":
        "docs/small-area.md after the command: two areas, tau mixes slowly; --draws 1500 runs unflagged",
    "dpposterior infer examples/releases/sir-ebola-liberia-eps10.json --method sppe --simulations 200 --rounds 2 "
    "--out lib.nc": "docs/sbi.md after the command: a quick look, the correction's weights too uneven",
}

#: placeholder data the docs elide (``...``) or leave to the reader: what the scratch folder holds instead
def _placeholder_files(folder: Path) -> None:
    rng = np.random.default_rng(0)
    (folder / "data.csv").write_text("lead\n" + "\n".join(f"{v:.1f}" for v in np.clip(rng.normal(32, 17, 43), 0, 100))
                                     + "\n")
    (folder / "waits.csv").write_text("wait\n" + "\n".join(f"{v:.3f}" for v in rng.exponential(2.0, 200)) + "\n")


def _is_synopsis(code: str) -> bool:
    """A grammar line of docs/cli.md-style synopses, not a command to run."""
    return bool(re.search(r"\[--|\[,|\|all|\bF\b|RELEASE\.json|DATA\.csv|COUNTS\.csv|FILE\.py|POST(ERIOR)?\.nc|"
                          r"RESULT\.json|\bNAME\b|V1,V2", code)) and "for e in" not in code


def steps(path: Path) -> list[tuple[str, str]]:
    """The doc's shell blocks as ordered steps: ("file", "NAME\\nCONTENT"), ("python", CODE), ("dpposterior",
    COMMAND) or ("shell", LINE) for anything else worth knowing about (a loop, an install)."""
    out: list[tuple[str, str]] = []
    lines = path.read_text().splitlines()
    i, fence = 0, None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^\s*```(\w*)(.*)$", line)
        if m and fence is None and m.group(1) == "text" and m.group(2).split()[:1] == ["output"]:
            # a printed output shown right after a command: ("output", "OPTIONS\nTEXT"), compared by _run_doc
            body, i = [], i + 1
            while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
                body.append(lines[i])
                i += 1
            out.append(("output", " ".join(m.group(2).split()[1:]) + "\n" + "\n".join(body) + "\n"))
            i += 1
            continue
        if m:
            fence = None if fence is not None else m.group(1)
            i += 1
            continue
        if fence not in ("bash", "sh", "console", ""):
            i += 1
            continue
        code = line.strip()
        while code.endswith("\\") and i + 1 < len(lines):
            i += 1
            code = code[:-1].rstrip() + " " + lines[i].strip()
        heredoc = re.match(r"^(cat > (\S+)|python3? -) <<-?'?(\w+)'?", code)
        if heredoc:
            tag, body = heredoc.group(3), []
            i += 1
            while i < len(lines) and lines[i].strip() != tag:
                body.append(lines[i])
                i += 1
            content = "\n".join(body) + "\n"
            out.append(("file", f"{heredoc.group(2)}\n{content}") if heredoc.group(2) else ("python", content))
            i += 1
            continue
        code = re.sub(r"\s+#.*$", "", code).strip()
        if re.search(rf"(^|&& |\s)dpposterior ({'|'.join(COMMANDS)})\b", code):
            if code.startswith("dpposterior ") or code.startswith("/usr/bin/time") or "&& dpposterior " in code:
                # (README's Quickstart ends its install line with the command itself)
                command = code[code.rindex("dpposterior "):] if "&& " in code else code[code.index("dpposterior "):]
                out.append(("dpposterior", command) if not _is_synopsis(command) else ("synopsis", command))
            else:
                out.append(("shell", code))
        i += 1
    return out


def documented_commands() -> list[tuple[str, str]]:
    return [(str(p.relative_to(ROOT)), text) for p in DOCS for kind, text in steps(p) if kind in ("dpposterior", "shell")]


def _listed(doc: str, command: str) -> str | None:
    for (file, start), why in NOT_RUN.items():
        if file == doc and command.startswith(start) or (file == doc and start in command):
            return why
    return None


# ----------------------------------------------------------------------------------- reductions

SBI_METHODS = ("sppe", "sple", "smc-abc", "naive")


def _set(argv: list[str], option: str, value) -> None:
    if option in argv:
        argv[argv.index(option) + 1] = str(value)
    else:
        argv += [option, str(value)]


def reduced(argv: list[str]) -> list[str]:
    """The CI size of a documented command: the same options, far fewer draws, simulations and trials."""
    argv = list(argv)
    command = argv[0]
    if command == "infer":
        method = argv[argv.index("--method") + 1] if "--method" in argv else "auto"
        if method in SBI_METHODS:
            # (the flows' epochs and SMC-ABC's population size are analysis-file keys, not options)
            _set(argv, "--simulations", 300 if method == "smc-abc" else 200)
            if method in ("sppe", "sple"):
                _set(argv, "--rounds", 1)
                _set(argv, "--rqmc-points", 2)
            _set(argv, "--draws", 100)
            _set(argv, "--chains", 1)
            if "--analysis" not in argv:
                Path("reduced.toml").write_text("particles = 100\n" if method == "smc-abc" else "max_epochs = 5\n")
                argv += ["--analysis", "reduced.toml"]
        else:
            for option, value in (("--draws", 100), ("--warmup", 50), ("--chains", 2)):
                if option == "--warmup" and not _takes_warmup(argv, method):
                    continue  # an independent-draw engine refuses a warm-up
                _set(argv, option, value)
        if "--quiet" not in argv:
            argv.append("--quiet")
    elif command == "calibrate":
        _set(argv, "--trials", 3)
        _set(argv, "--draws", 50)
        if "--model" not in argv:
            _set(argv, "--scheduler", "serial")
    return argv


def _takes_warmup(argv: list[str], method: str) -> bool:
    """Whether the engine this ``infer`` command runs takes a warm-up (its options class declares it)."""
    from dpposterior.errors import InputError
    from dpposterior.release import load_release

    try:
        release = load_release(argv[1])
    except (InputError, OSError, IndexError):
        return True  # not a release file here (a model, an analysis file): leave the reduction as it was
    family = release.family_entry
    return "warmup" in family.engine_options(family.resolve_method(method, release)).names()


# ----------------------------------------------------------------------------------- printed outputs

_NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def output_mismatch(expected: str, actual: str, options: str = "") -> str | None:
    """None when ``actual`` (what a command printed) shows ``expected`` (a doc's ```` ```text output ````
    block), else why not.

    The block's lines must appear in order; ``…`` stands for any text (within a line or across lines);
    runs of spaces match any whitespace; each number matches a printed number within ``rel`` (default 2%,
    ``rel=0.05`` in the info string) or one unit of its last shown digit, whichever is larger."""
    rel = float(dict(o.split("=", 1) for o in options.split() if "=" in o).get("rel", 0.02))
    pattern, numbers = [], []
    for token in re.findall(rf"…|\s+|{_NUMBER}|[^\s…\d+-]+|.", expected.strip()):
        if token == "…":
            pattern.append(r"[\s\S]*?")
        elif token.isspace():
            pattern.append(r"\s+")
        elif re.fullmatch(_NUMBER, token) and any(c.isdigit() for c in token):
            pattern.append(f"({_NUMBER})")
            numbers.append(token)
        else:
            pattern.append(re.escape(token))
    match = re.search("".join(pattern), actual)
    if match is None:
        return f"the printed output does not show:\n{expected}\nit printed:\n{actual}"
    for want, got in zip(numbers, match.groups()):
        w, g = float(want.replace(",", "")), float(got.replace(",", ""))
        mantissa = re.split(r"[eE]", want)[0]
        unit = 10.0 ** -(len(mantissa.split(".")[1]) if "." in mantissa else 0)
        if "e" in want.lower():
            unit *= 10.0 ** int(re.split(r"[eE]", want)[1])
        # one unit inclusive: 0.027 - 0.026 is 0.0010000000000000009 in binary floating point
        if abs(w - g) > max(rel * abs(w), unit) * (1 + 1e-9):
            return f"printed {got} where the doc shows {want} (rel {rel}):\n{actual}"
    return None


def test_output_matching():
    assert output_mismatch("epsilon 2.828 at delta 3.31e-09", "x epsilon 2.82802 at delta 3.31e-09\n") is None
    assert output_mismatch("p  0.029  …\nwrote …", "p  0.0288  0.001 18883\nwrote a.nc (2 s)") is None
    assert output_mismatch("epsilon 1.7 at delta 1e-06", "epsilon 2.82802 at delta 3.31e-09") is not None
    assert output_mismatch("mean 22.62", "mean 23.9") is not None
    assert output_mismatch("mean 22.62", "mean 23.9", "rel=0.1") is None
    assert output_mismatch("p  0.029  0.001  0.026", "p  0.029  0.001  0.027") is None  # one unit of the last digit
    assert output_mismatch("p  0.029  0.001  0.026", "p  0.029  0.001  0.028") is not None


# ----------------------------------------------------------------------------------- running

def _run_doc(doc: Path, folder: Path, full: bool) -> list[tuple[str, int, str, str]]:
    """Run every step of ``doc`` in ``folder``; returns (command, exit code, stdout, stderr) per command."""
    from dpposterior.cli import main

    _placeholder_files(folder)
    if not (folder / "examples").exists():
        (folder / "examples").symlink_to(ROOT / "examples")
    results = []
    last = None  # (command, what it printed, whether it ran as written) for a following output block
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        for kind, text in steps(doc):
            if kind != "output":
                last = None
            if kind == "file":
                name, content = text.split("\n", 1)
                if not re.search(r"^\s*\.\.\.\s*$", content, flags=re.M):  # "..." elides data: keep the fixture
                    Path(name).write_text(content)
            elif kind == "python":
                run = subprocess.run([sys.executable, "-"], input=text, text=True, capture_output=True, cwd=folder)
                assert run.returncode == 0, f"{doc.name}: python block failed:\n{run.stderr}"
                last = ("python block", run.stdout, True)
            elif kind == "output":
                options, expected = text.split("\n", 1)
                if last is not None and last[2]:  # compared where the command ran as the doc writes it
                    why = output_mismatch(expected, last[1], options)
                    assert why is None, f"{doc.name}: {last[0]}: {why}"
                last = None
            elif kind == "dpposterior" and _listed(str(doc.relative_to(ROOT)), text) is None:
                argv = shlex.split(text)[1:]
                if not full and (text in SLOW_EVEN_REDUCED or argv[0] == "reproduce" and "--list" not in argv):
                    continue  # minutes even at the reduced scale: -m slow (and tests/test_gallery.py)
                as_written = argv if full else reduced(argv)
                same = as_written[:len(argv)] == argv and as_written[len(argv):] in ([], ["--quiet"])
                argv = as_written
                if argv[0] == "demo" and "--out" not in argv:
                    argv += ["--out", "demo-out"]
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = main(argv)
                results.append((text, code, out.getvalue(), err.getvalue()))
                last = (text, out.getvalue(), same)
    finally:
        os.chdir(cwd)
    return results


def test_every_documented_command_is_run_or_listed():
    """A command added to the docs is run by the tests below or listed in NOT_RUN with its reason."""
    unrunnable = []
    for doc, command in documented_commands():
        if command.startswith("dpposterior ") or _listed(doc, command) is not None:
            continue
        unrunnable.append(f"{doc}: {command}")
    assert unrunnable == []


def test_synopses_name_only_existing_options():
    """The grammar lines name options the CLI has (a renamed option must be renamed in the docs)."""
    import typer

    from dpposterior.cli import app

    click_app = typer.main.get_command(app)
    for path in DOCS:
        for kind, text in steps(path):
            if kind != "synopsis":
                continue
            words = text.split()
            sub = click_app.commands[words[1]]
            known = {o for p in sub.params for o in (*p.opts, *p.secondary_opts)}
            for option in re.findall(r"(--[a-z][a-z-]*)", text):
                assert option in known, f"{path.name}: {text}: {option}"


@pytest.mark.parametrize("doc", [p for p in DOCS if any(k in ("dpposterior", "python") for k, _ in steps(p))],
                         ids=lambda p: p.name)
def test_documented_commands_run_reduced(doc, tmp_path):
    for command, code, out, err in _run_doc(doc, tmp_path, full=False):
        assert code == 0, f"{doc.name}: {command}\n{err}"
        assert "Traceback" not in err, f"{doc.name}: {command}\n{err}"


@pytest.mark.slow
@pytest.mark.parametrize("doc", [p for p in DOCS if any(k in ("dpposterior", "python") for k, _ in steps(p))],
                         ids=lambda p: p.name)
def test_documented_commands_run_as_written(doc, tmp_path):
    """The full set: every command at the size the doc gives, ending unflagged unless the doc explains it."""
    for command, code, out, err in _run_doc(doc, tmp_path, full=True):
        assert code == 0, f"{doc.name}: {command}\n{err}"
        if "(flagged" in out:
            assert command in FLAG_EXPLAINED, f"{doc.name}: {command} ends flagged:\n{err}"
