"""Cost of one SPPE training step (APT atomic loss, eq. 8), before and after the flow speed-ups.

One SGD step of SPPE's atomic rounds evaluates batch x atoms = 100 x 10 densities of an
8-transform neural spline flow (App. E) forward and backward.  Side by side, same weights:

* ``zuko NSF + Adam``   zuko.flows.NSF and torch's default (for-each) Adam: the anchor;
* ``ours``              dpposterior.sbi.flows: spline knots by exp/sum instead of torch.softmax
                        (slow on 10-wide rows on CPU) and fused Adam.

    python benchmarks/flow_step.py [--threads 1,2] [--steps 60]

Prints milliseconds per step (wall) for the round-1 loss (eq. 6, 100 densities) and the
atomic loss, and the ratio anchor/ours.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import zuko

from dpposterior.sbi.losses import atomic_loss, npe_loss
from dpposterior.sbi.flows import FlowConfig, StandardizedFlow


def make(kind: str, config: FlowConfig):
    torch.manual_seed(0)
    flow = StandardizedFlow(3, 9, np.zeros(3), np.ones(3), np.zeros(9), np.ones(9), config)
    if kind == "anchor":
        reference = zuko.flows.NSF(3, 9, bins=config.bins, transforms=config.transforms,
                                   hidden_features=tuple(config.hidden), residual=True)
        reference.load_state_dict(flow.flow.state_dict())
        flow.flow = reference
    opt = torch.optim.Adam(flow.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay,
                           fused=(kind == "ours") or None)
    return flow, opt


def ms_per_step(flow, opt, loss_kind: str, steps: int) -> float:
    gen = torch.Generator().manual_seed(1)
    theta, log_prior, sdp = torch.randn(100, 3), torch.randn(100), torch.randn(100, 1, 9)

    def step():
        if loss_kind == "atomic":
            loss = atomic_loss(flow.log_prob, theta, log_prior, sdp, 10, gen)
        else:
            loss = npe_loss(flow.log_prob, theta, sdp)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(flow.parameters(), 5.0)
        opt.step()

    for _ in range(5):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
    config = FlowConfig()
    print("threads | loss | zuko NSF + Adam ms/step | ours ms/step | ratio")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for loss_kind in ("round-1", "atomic"):
            anchor = ms_per_step(*make("anchor", config), loss_kind, args.steps)
            ours = ms_per_step(*make("ours", config), loss_kind, args.steps)
            print(f"{threads} | {loss_kind} | {anchor:.1f} | {ours:.1f} | {anchor / ours:.2f}", flush=True)


if __name__ == "__main__":
    main()
