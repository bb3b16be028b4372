"""Up-front memory estimates: an engine that would need more memory than the machine has is refused in one
line (:class:`~dpposterior.errors.MemoryRefusedError`, a ``RefusedError``) before it allocates, stating its estimate
and what would fit.

The estimates count the engine's large arrays (stored draws, per-area variables, enumeration windows, noise
tables) times the copies that exist at its peak; they are meant to be within a factor 2 of the measured
peak (tests/test_fuzz_inputs.py).  Available memory is ``MemAvailable`` of ``/proc/meminfo``; where that
cannot be read (not Linux) nothing is refused.
"""

from __future__ import annotations

from .errors import MemoryRefusedError

GIB = 2.0 ** 30


def available_bytes() -> float | None:
    """MemAvailable of /proc/meminfo in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None


def size(nbytes: float) -> str:
    """Bytes as a person reads them: ``29.8 GiB``, ``512 MiB``."""
    if nbytes >= GIB:
        return f"{nbytes / GIB:.1f} GiB"
    return f"{nbytes / 2.0 ** 20:.0f} MiB"


def check_fits(estimate: float, field: str, what: str, advice: str) -> None:
    """Refuse ``what`` (e.g. "5000 draws x 4 chains of 200000 areas") if ``estimate`` bytes exceed the memory
    available now; ``advice`` says what would fit."""
    avail = available_bytes()
    if avail is None or estimate <= avail:
        return
    raise MemoryRefusedError(field, f"{what} needs about {size(estimate)} of memory, more than the {size(avail)} "
                              f"available; {advice}")


def check_draws_fit(field: str, what: str, *, draws: int, chains: int, per_draw: float, fixed: float = 0.0,
                    other: str = "fewer --chains") -> None:
    """Refuse ``what`` when ``fixed`` + ``draws`` x ``chains`` x ``per_draw`` bytes exceed the memory available;
    the advice says how many draws per chain would fit (``--draws N``), else ``other``."""
    estimate = float(fixed) + float(draws) * float(chains) * float(per_draw)
    avail = available_bytes()
    room = (avail if avail is not None else estimate) - float(fixed)
    fit = int(room // (float(chains) * float(per_draw))) if room > 0 and per_draw > 0 else 0
    advice = f"at most {fit} draws per chain fit (--draws {fit}), or {other}" if 1 <= fit < draws else other
    check_fits(estimate, field, what, advice)


def check_batch_fits(method: str, trials: int, chains: int, draws: int, per_draw: float, fixed: float = 0.0) -> None:
    """Refuse a batched calibration path (``families.EngineSpec.batch``) whose ``trials`` releases x ``chains`` chains
    x ``draws`` draws, at ``per_draw`` bytes each plus ``fixed``, would not fit: it runs every chain of its work unit
    at once, so it needs what one run with trials x chains chains would."""
    check_draws_fit("draws", f"calibrate's batch of {method}: {trials:,} releases x {chains} chains x {draws} draws",
                    draws=draws, chains=trials * chains, per_draw=per_draw, fixed=fixed,
                    other="fewer releases per batch")
