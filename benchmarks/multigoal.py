# SPDX-License-Identifier: GPL-3.0-or-later
"""Multi-goal setups on robots Table I solves one arm of: the whole robot, both wrists' poses at once (pr2, baxter),
and pr2's wrists with its head looking along its own axis at a point (a look-at). Targets from FK of random valid
configurations (every setup reachable), random valid seeds; success within 10 ms, mean and median time.

    python -m fullbody_ik.benchmarks.multigoal [--targets N] [--methods lm,lm-numpy]
"""

import argparse
import os

import numpy as np

from fullbody_ik.solvers import LookAt, Pose, Tree

from .budgets import run_method, summarize
from .common import URDF, prepare_compiled, table, write

LOOK_AXIS = np.array([1.0, 0.0, 0.0])  # pr2's head_tilt_link looks along its x axis


def setups():
    """name -> (urdf, base link, tips, function(world matrices by link name) -> objectives)."""
    def wrists(*links):
        return lambda W: [Pose(link, W[link]) for link in links]

    def look(W):
        head = W["head_tilt_link"]
        return LookAt("head_tilt_link", head[:3, 3] + head[:3, :3] @ LOOK_AXIS, axis=LOOK_AXIS)

    pr2 = ["r_wrist_roll_link", "l_wrist_roll_link"]
    return {
        "pr2 both wrists (poses)": ("pr2", "base_link", pr2, wrists(*pr2)),
        "pr2 both wrists + head look-at": ("pr2", "base_link", pr2 + ["head_tilt_link"],
                                           lambda W: wrists(*pr2)(W) + [look(W)]),
        "baxter both wrists (poses)": ("baxter", "base", ["right_wrist", "left_wrist"],
                                       wrists("right_wrist", "left_wrist")),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--targets", type=int, default=300)
    ap.add_argument("--methods", default="lm,lm-numpy")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    prepare_compiled()
    methods = args.methods.split(",")
    rows, out = [], {}
    for name, (robot, base, tips, make) in setups().items():
        tree = Tree.from_urdf(os.path.join(URDF, f"{robot}.urdf"), base_link=base, tip_links=tips)
        rng = np.random.default_rng(args.seed)
        W = tree.fk_batch(tree.random_configurations(rng, args.targets))
        seeds = tree.random_configurations(rng, args.targets)
        problems = [(make({link: w[tree.link(link)] for link in tips}), q0) for w, q0 in zip(W, seeds)]
        out[name] = {"dof": tree.n}
        for m in methods:
            s = out[name][m] = summarize(*run_method(tree, problems, m, 0.05))
            rows.append([name, tree.n, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                         f"{s['median_ms']:.2f}"])
            print(rows[-1], flush=True)
    print(f"\nWhole robots, {args.targets} targets per setup, random seeds, success within 10 ms")
    print(table(rows, ["setup", "DOF", "method", "success", "mean ms", "median ms"]))
    write("multigoal", {"targets": args.targets, "results": out},
          f"python -m fullbody_ik.benchmarks.multigoal --targets {args.targets}")


if __name__ == "__main__":
    main()
