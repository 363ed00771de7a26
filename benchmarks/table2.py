# SPDX-License-Identifier: GPL-3.0-or-later
"""Paper 000 Table II protocol on human.urdf (36 revolute joints): multi-goal setups in the spirit of the
paper's Valkyrie rows, targets from FK of random valid configurations, seeds at zero (the rest pose);
success within 10 ms, mean time, and success-versus-budget curves.

    python -m fullbody_ik.benchmarks.table2 [--targets N] [--methods memetic,lm,...]
"""

import argparse
import os

import numpy as np

from fullbody_ik.solvers import LookAt, Pose, Tree

from .budgets import plot_curves, run_method, summarize
from .common import RESULTS, URDF, prepare_compiled, table, write

METHODS = ["memetic", "memetic+lm", "lm", "lm-numpy", "nullspace", "projected_gradient", "ncg"]
HANDS, FEET = ["left_hand", "right_hand"], ["left_foot", "right_foot"]
HEAD, HEAD_AXIS = "middle_head", np.array([1.0, 0.0, 0.0])


def setups():
    """name -> function(world matrices of the target configuration) -> objectives."""
    def look(W):
        return LookAt(HEAD, W[HEAD][:3, 3] + W[HEAD][:3, :3] @ HEAD_AXIS, axis=HEAD_AXIS)

    return {
        "one wrist (pose)": lambda W: [Pose("right_hand", W["right_hand"])],
        "both wrists (poses)": lambda W: [Pose(l, W[l]) for l in HANDS],
        "wrists + feet (poses)": lambda W: [Pose(l, W[l]) for l in HANDS + FEET],
        "wrists + feet + head look-at": lambda W: [Pose(l, W[l]) for l in HANDS + FEET] + [look(W)],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--targets", type=int, default=300)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--max-budget-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    prepare_compiled()
    tree = Tree.from_urdf(os.path.join(URDF, "human.urdf"))
    rng = np.random.default_rng(args.seed)
    worlds = tree.fk_batch(tree.random_configurations(rng, args.targets))
    frames = [{name: W[i] for i, name in enumerate(tree.link_names)} for W in worlds]
    rows, out, panels = [], {}, {}
    for setup, make in setups().items():
        problems = [(make(W), np.zeros(tree.n)) for W in frames]
        k = sum(len(o.losses(tree.state(np.zeros(tree.n)))) for o in problems[0][0])
        out[setup], panels[setup] = {}, {}
        for m in args.methods.split(","):
            ok, secs = run_method(tree, problems, m, args.max_budget_ms / 1e3)
            s = out[setup][m] = summarize(ok, secs)
            panels[setup][m] = s["curve"]
            rows.append([setup, k, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                         f"{100 * s['curve']['50']:.1f} %"])
            print(rows[-1], flush=True)
    print(f"\nhuman.urdf ({tree.n} DOF), {args.targets} targets per setup, seeds at rest")
    print(table(rows, ["setup", "losses", "method", "success (10 ms)", "mean ms", "success (50 ms)"]))
    plot_curves(os.path.join(RESULTS, "table2_curves.png"), panels, "Table II, human.urdf: solved within budget")
    write("table2", {"targets": args.targets, "results": out},
          f"python -m fullbody_ik.benchmarks.table2 --targets {args.targets}")


if __name__ == "__main__":
    main()
