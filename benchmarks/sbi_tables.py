"""Markdown tables from benchmarks/results/sbi_*.json (written by sbi_convergence.py).

    python benchmarks/sbi_tables.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def max_dev(rows, other):
    return max(abs(a - b) for r1, r2 in zip(rows, other) for a, b in zip(r1, r2))


def main():
    from sbi_convergence import PAPER, exact_rows  # noqa: PLC0415 (same folder)

    for path in sorted((ROOT / "benchmarks" / "results").glob("sbi_*.json")):
        out = json.loads(path.read_text())
        if "problem" not in out:  # another benchmark's sbi_*.json
            continue
        prob = out["problem"]
        exact = exact_rows(prob) if out.get("reference", "").startswith("importance") else None
        if exact:  # the weighted IS rows, not those of its 2,000 resampled draws
            out["reference_rows"] = exact
        print(f"\n### {prob} ({path.name})\n")
        print("| method | round | sims | epochs | MMD | C2ST | NLOG | LMD | sim s | train s | wall s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, res in out["methods"].items():
            for r in res["rounds"]:
                print(f"| {name} | {r['round']} | {r['simulations']} | {r['epochs']} | {r['mmd']:.4f} | "
                      f"{r['c2st']:.3f} | {r['nlog']:.2f} | {r['lmd']:.3f} | {r['sim_s']:.1f} | "
                      f"{r['train_s']:.0f} | {r['wall_s']:.0f} |")
        print(f"\nreference: {out.get('reference', 'smc-abc')}; final C2ST vs reference: "
              + ", ".join(f"{k} {v['final_c2st']:.3f}"
                                                     for k, v in out["methods"].items()))
        ref_name = out.get("reference", "smc-abc")
        print(f"\n| method | beta_0 / theta_0 | beta_1 / theta_1 | beta_2 | max abs dev. from paper "
              f"| from reference |")
        print("|---|---|---|---|---|---|")
        rows = {ref_name: out["reference_rows"], **{k: v["final_rows"] for k, v in out["methods"].items()}}
        for name, rr in rows.items():
            cells = [f"{m:.2f} ({lo:.2f}, {hi:.2f})" for m, lo, hi in rr]
            while len(cells) < 3:
                cells.append("")
            key = "smc-abc" if name.startswith("smc-abc") else name
            dev = f"{max_dev(rr, PAPER[prob][key]):.2f}" if prob in PAPER and key in PAPER[prob] else ""
            ref_dev = f"{max_dev(rr, out['reference_rows']):.2f}" if name != ref_name else ""
            print(f"| {name} | " + " | ".join(cells) + f" | {dev} | {ref_dev} |")
            if prob in PAPER and key in PAPER[prob]:
                pc = [f"{m:.2f} ({lo:.2f}, {hi:.2f})" for m, lo, hi in PAPER[prob][key]]
                print(f"| paper {key} | " + " | ".join(pc) + f" | | {max_dev(PAPER[prob][key], out['reference_rows']):.2f} |")


if __name__ == "__main__":
    main()
