# SPDX-License-Identifier: GPL-3.0-or-later
"""The six arms of data/urdf (paper 000, Table I protocol): full pose goals at 1e-4 m and 1e-3 rad,
targets from FK of random valid configurations, random seed configurations, a 10 ms budget per solve.

    python -m fullbody_ik.benchmarks.arms [--targets N] [--budget SECONDS] [--methods lm,ncg,...]
"""

import argparse
import os
import time

import numpy as np

from fullbody_ik.solvers import Pose, Tree, solve

from .common import URDF, table, write

ARMS = [
    ("kuka_iiwa", "lbr_iiwa_link_0", "lbr_iiwa_link_7"),
    ("franka_panda", "panda_link0", "panda_link8"),
    ("ur5", "base_link", "ee_link"),
    ("pr2", "torso_lift_link", "r_wrist_roll_link"),
    ("baxter", "right_arm_mount", "right_wrist"),
    ("kuka_kr120r2500pro", "base_link", "tool0"),
]
METHODS = ["lm", "nullspace", "projected_gradient", "ncg"]


def load(name, base, tip):
    return Tree.from_urdf(os.path.join(URDF, f"{name}.urdf"), base_link=base, tip_links=tip)


def problems(tree, tip, count, seed):
    """(targets, seeds): poses of random valid configurations, and random valid seeds."""
    rng = np.random.default_rng(seed)
    W = tree.fk_batch(tree.random_configurations(rng, count))
    return W[:, tree.link(tip)], tree.random_configurations(rng, count)


def solve_batch(tree, tip, targets, seeds, method, budget):
    """Solve every target; returns (success flags, seconds per solve)."""
    ok, secs = np.zeros(len(targets), bool), np.zeros(len(targets))
    for i, (T, q0) in enumerate(zip(targets, seeds)):
        t0 = time.perf_counter()
        res = solve(tree, [Pose(tip, T)], q0, method=method, time_limit=budget, rng=i)
        secs[i] = time.perf_counter() - t0
        ok[i] = res.success and secs[i] <= budget * 1.05  # overshoot of the last iteration counts as a miss
    return ok, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--targets", type=int, default=500)
    ap.add_argument("--budget", type=float, default=0.010)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    methods = args.methods.split(",")
    rows, out = [], {}
    for name, base, tip in ARMS:
        tree = load(name, base, tip)
        targets, seeds = problems(tree, tip, args.targets, args.seed)
        out[name] = {}
        for m in methods:
            ok, secs = solve_batch(tree, tip, targets, seeds, m, args.budget)
            out[name][m] = {"success_rate": float(ok.mean()), "mean_ms": float(secs.mean() * 1e3),
                            "median_ms": float(np.median(secs) * 1e3), "targets": len(targets)}
            rows.append([name, tree.n, m, f"{100 * ok.mean():.1f} %", f"{secs.mean() * 1e3:.2f}",
                         f"{np.median(secs) * 1e3:.2f}"])
            print(rows[-1], flush=True)
    print(f"\nFull pose, {args.targets} targets per arm, {args.budget * 1e3:.0f} ms budget, random seeds")
    print(table(rows, ["arm", "DOF", "method", "success", "mean ms", "median ms"]))
    write("arms", {"budget_s": args.budget, "results": out},
          f"python -m fullbody_ik.benchmarks.arms --targets {args.targets} --budget {args.budget}")


if __name__ == "__main__":
    main()
