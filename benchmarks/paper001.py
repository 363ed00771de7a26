# SPDX-License-Identifier: GPL-3.0-or-later
"""Paper 001 §IV: the 12-DOF manipulator (four spherical joints, three 0.15 m links, 0.05 m effector),
the 50-case sweep of x_d from 0.1 to 1.0 m (eq. 20) and random targets in the 1.2 m cube, from q = 0.

Success as in the paper: the residual norm at termination is within 1e-6 of the best any method reached
on that case. Methods run to their own convergence (tolerances 0), first-order ones under a time cap.

    python -m fullbody_ik.benchmarks.paper001 [--random N] [--cap SECONDS]
"""

import argparse
import time

import numpy as np

from fullbody_ik.solvers import Joint, Pose, Tree, solve
from fullbody_ik.solvers.rotations import random_rotation

from .common import table, write

METHODS = ["lm", "nullspace", "projected_gradient", "ncg"]


def manipulator():
    """Four spherical joints as X, Y, Z revolute triples; links along z (q = 0 is fully stretched: singular)."""
    joints, parent = [], "base"
    lengths = [0.0, 0.15, 0.15, 0.15]
    for k, length in enumerate(lengths):
        for a, axis in enumerate(np.eye(3)):
            origin = np.eye(4)
            if a == 0:
                origin[2, 3] = length
            child = f"s{k}{'xyz'[a]}"
            joints.append(Joint(f"j{k}{'xyz'[a]}", "continuous", parent, child, origin, tuple(axis)))
            parent = child
    tip = np.eye(4)
    tip[2, 3] = 0.05
    joints.append(Joint("effector", "fixed", parent, "effector", tip))
    return Tree(joints)


def run_case(tree, T, method, cap):
    goal = Pose("effector", T, tolerance=0.0, angular_tolerance=0.0)  # run to convergence, as the paper
    t0 = time.perf_counter()
    res = solve(tree, [goal], np.zeros(tree.n), method=method, max_iterations=10000,
                time_limit=None if method in ("lm", "nullspace") else cap, restarts=False)
    return float(np.linalg.norm(goal.residual(tree.state(res.q)))), time.perf_counter() - t0


def evaluate(tree, targets, cap):
    residual = {m: np.zeros(len(targets)) for m in METHODS}
    seconds = {m: np.zeros(len(targets)) for m in METHODS}
    for i, T in enumerate(targets):
        for m in METHODS:
            residual[m][i], seconds[m][i] = run_case(tree, T, m, cap)
    best = np.min(np.stack([residual[m] for m in METHODS]), axis=0)
    summary = {}
    for m in METHODS:
        ok = residual[m] <= best + 1e-6
        summary[m] = {"success": int(ok.sum()), "cases": len(targets),
                      "mean_ms_at_success": float(seconds[m][ok].mean() * 1e3) if ok.any() else None,
                      "mean_ms": float(seconds[m].mean() * 1e3)}
    return summary, residual, best


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--random", type=int, default=1000, help="random targets (paper: 1000)")
    ap.add_argument("--cap", type=float, default=0.25, help="time cap (s) for the first-order methods")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    tree = manipulator()
    Rd = np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]], dtype=float)  # eq. 20
    sweep = []
    for x in np.linspace(0.1, 1.0, 50):
        T = np.eye(4)
        T[:3, :3], T[0, 3] = Rd, x
        sweep.append(T)
    rng = np.random.default_rng(args.seed)
    rand = []
    for _ in range(args.random):
        T = np.eye(4)
        T[:3, :3] = random_rotation(rng)
        T[:3, 3] = rng.uniform(-0.6, 0.6, 3)  # the 1.2 m cube centred on the first joint
        rand.append(T)
    out = {}
    for name, targets in (("sweep", sweep), ("random", rand)):
        summary, residual, best = evaluate(tree, targets, args.cap)
        out[name] = {"summary": summary, "best_residual": best, "residual": residual}
        print(f"\n{name}: {len(targets)} cases (success = residual within 1e-6 of the best method's)")
        print(table([[m, f"{s['success']}/{s['cases']}",
                      f"{s['mean_ms_at_success']:.2f}" if s["mean_ms_at_success"] is not None else "-",
                      f"{s['mean_ms']:.2f}"] for m, s in summary.items()],
                    ["method", "success", "mean ms (successes)", "mean ms (all)"]))
    write("paper001", out, f"python -m fullbody_ik.benchmarks.paper001 --random {args.random} --cap {args.cap}")


if __name__ == "__main__":
    main()
