"""numba's process-lifetime objects are frozen out of the collector's way once, after the first kernel
(dpposterior/long_lived.py); the forkserver's preload freezes what it imported and leaves the
collector on."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import dpposterior
from dpposterior import long_lived

SRC = str(Path(dpposterior.__file__).resolve().parents[1])
RELEASE = str(Path(dpposterior.__file__).parent / "data" / "blood_lead_release.json")


def run_fresh(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_infer_freezes_once_after_the_first_kernel():
    code = ("import gc, sys\nfrom dpposterior import infer, load_release\n"
            "rel = load_release(sys.argv[1])\n"
            "before = gc.get_freeze_count()\n"
            "infer(rel, seed=1, draws=200, warmup=100)\n"
            "first = gc.get_freeze_count()\n"
            "infer(rel, seed=2, draws=200, warmup=100)\n"
            "print(before, first > 0, gc.get_freeze_count() == first, gc.isenabled())")
    assert run_fresh(code, RELEASE) == "0 True True True"


def test_no_freeze_before_numba_registries_are_loaded():
    code = ("import gc\nfrom dpposterior.long_lived import freeze_long_lived\n"
            "print(freeze_long_lived(), gc.get_freeze_count())")
    assert run_fresh(code) == "False 0"


def test_worker_preload_freezes_and_leaves_the_collector_on():
    code = "import gc\nimport dpposterior.worker_preload\nprint(gc.get_freeze_count() > 0, gc.isenabled())"
    assert run_fresh(code) == "True True"


def test_collector_paused_restores_a_disabled_collector(monkeypatch):
    monkeypatch.setattr(long_lived, "_FROZEN", True)  # this test process keeps its collector as it is
    gc.disable()
    try:
        with long_lived.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with long_lived.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_first_kernel_runs_without_collections_then_freezes():
    """The collector is off while numba holds its compiler lock before its registries exist (here: the first
    compile), back on afterwards, the objects are frozen, and the listener is registered once."""
    code = ("import gc, sys\nimport numba\nfrom dpposterior import long_lived\n"
            "long_lived.pause_during_first_kernel(); long_lived.pause_during_first_kernel()\n"
            "import numba.core.event as ev\n"
            "listeners = [l for l in ev._registered.get('numba:compiler_lock', []) if type(l).__name__ == 'FirstHold']\n"
            "seen = []\n"
            "@numba.njit\ndef f(x):\n    return x + 1\n"
            "class Probe(ev.Listener):\n"
            "    def on_start(self, event): seen.append(gc.isenabled())\n"
            "    def on_end(self, event): pass\n"
            "ev.register('numba:compiler_lock', Probe())\n"
            "f(1)\n"
            "print(len(listeners), seen[0], gc.isenabled(), gc.get_freeze_count() > 0)")
    assert run_fresh(code) == "1 False True True"


def test_garbage_is_collected_not_frozen():
    """A dropped reference cycle that had already reached the oldest generation is collected (its finalizer
    runs) before the freeze: what is frozen is only what is alive."""
    code = ("import gc\nfrom dpposterior.long_lived import freeze_long_lived\n"
            "closed = []\n"
            "class Handle:\n    def __del__(self):\n        closed.append(True)\n"
            "h = Handle(); h.self = h\n"
            "gc.collect()  # h is alive: now in the oldest generation\n"
            "del h\n"
            "print(freeze_long_lived(force=True), closed == [True])")
    assert run_fresh(code) == "True True"


def test_the_freeze_can_be_turned_off(monkeypatch):
    """DPPOSTERIOR_GC_FREEZE=0: a long-running library user keeps the collector's usual behaviour."""
    from dpposterior import long_lived

    monkeypatch.setattr(long_lived, "_FROZEN", False)
    monkeypatch.setenv("DPPOSTERIOR_GC_FREEZE", "0")
    assert long_lived.freeze_long_lived(force=True) is False and long_lived._FROZEN is False


def test_forkserver_preload_collects_before_its_imports_not_after():
    """collector_paused(imports_only=True), the forkserver preload's: a caller's garbage that exists before the
    block (the forkserver imports the caller's main module first) is collected, not frozen; what the block's
    imports leave behind is frozen without a second, full collection (0.06 s of every pool's start-up)."""
    code = ("import gc\nfrom dpposterior import long_lived\n"
            "closed = []\n"
            "class Handle:\n    def __del__(self):\n        closed.append(True)\n"
            "h = Handle(); h.self = h\n"
            "gc.collect()\n"
            "del h\n"
            "calls = []\n"
            "gc.callbacks.append(lambda phase, info: calls.append(phase) if phase == 'start' else None)\n"
            "with long_lived.collector_paused(imports_only=True):\n"
            "    before = (closed == [True], len(calls))\n"
            "    import json  # noqa\n"
            "print(before, len(calls), long_lived._FROZEN, gc.get_freeze_count() > 0, gc.isenabled())")
    assert run_fresh(code) == "(True, 1) 1 True True True"
