# SPDX-License-Identifier: GPL-3.0-or-later
"""`make demo`: load a real robot (KUKA LBR iiwa, URDF), solve random reachable full-pose targets with each
solver, print a table. Headless; no Blender window needed."""

import time

import numpy as np

from fullbody_ik.benchmarks.table1 import METHODS, load, problems, solve_batch  # noqa: F401
from fullbody_ik.benchmarks.common import table


def main(count=40, budget=0.02):
    tree = load("kuka_iiwa", "lbr_iiwa_link_0", "lbr_iiwa_link_7")
    print(f"Full-Body IK demo: {tree} from data/urdf/kuka_iiwa.urdf")
    print(f"{count} random reachable poses of lbr_iiwa_link_7 (1e-4 m, 1e-3 rad), random seeds, "
          f"{budget * 1e3:.0f} ms budget each\n")
    targets, seeds = problems(tree, "lbr_iiwa_link_7", count, seed=int(time.time()) % 1000)
    rows = []
    for m in METHODS:
        ok, secs = solve_batch(tree, "lbr_iiwa_link_7", targets, seeds, m, budget)
        rows.append([m, f"{ok.sum()}/{count}", f"{np.median(secs) * 1e3:.2f}", f"{secs.max() * 1e3:.2f}"])
    print(table(rows, ["method", "solved", "median ms", "max ms"]))


if __name__ == "__main__":
    main()
