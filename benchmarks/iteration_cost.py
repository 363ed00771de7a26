# SPDX-License-Identifier: GPL-3.0-or-later
"""Cost of the building blocks every solver iterates on (microseconds, median of repeats; the numpy path's), and
of an LM iteration in a whole solve on either path (the compiled core loaded before the clock: a run's first
solve used to count the cache's loading, 0.5-1 s, as kuka's iterations). Then where a compiled Table I solve's
time goes on the six arms: each target solved five times (the fastest kept: this machine's speed drifts up to 2x
within minutes, and the least of five is stable to a few percent), and the times fitted as fixed + a per iteration
+ b per restart (least squares): the fixed part is the Python around the kernel and its setup.

    python -m fullbody_ik.benchmarks.iteration_cost [--targets 300]
"""

import argparse
import os
import time

import numpy as np

from fullbody_ik.solvers import Pose, Tree, compiled, solve
from fullbody_ik.solvers.problem import Problem

from .common import URDF, prepare_compiled, table, write

CASES = [("kuka_iiwa", "lbr_iiwa_link_0", "lbr_iiwa_link_7"), ("human", None, None)]


def timed(f, repeat=7, number=200):
    best = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            f()
        best.append((time.perf_counter() - t0) / number)
    return float(np.median(best) * 1e6)


def solve_costs(count):
    """{arm: fit of a compiled Table I solve's time} over ``count`` targets (table1's problems, seeds and rngs)."""
    from .table1 import ARMS, load, problems

    out = {}
    for name, base, tip in ARMS:
        tree = load(name, base, tip)
        targets, seeds = problems(tree, tip, count, 0)
        goals = [[Pose(tip, T)] for T in targets]
        secs, its, restarts = np.full(count, np.inf), np.zeros(count), np.zeros(count)
        for _ in range(5):
            for i, (objectives, q0) in enumerate(zip(goals, seeds)):
                t0 = time.perf_counter()
                res = solve(tree, objectives, q0, method="lm", time_limit=0.01, rng=1_000_003 + i)
                secs[i] = min(secs[i], time.perf_counter() - t0)
                its[i], restarts[i] = res.iterations, res.restarts
        fixed, per_iteration, per_restart = np.linalg.lstsq(np.c_[np.ones(count), its, restarts], secs * 1e6,
                                                            rcond=None)[0]
        median = float(np.median(secs) * 1e6)
        out[name] = {"median solve (us)": median, "fixed (us)": float(fixed),
                     "per iteration (us)": float(per_iteration), "per restart (us)": float(per_restart),
                     "median iterations": float(np.median(its)), "restarts (mean)": float(restarts.mean()),
                     "fixed share of the median": float(fixed / median)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--targets", type=int, default=300, help="Table I targets per arm for the fit")
    args = ap.parse_args()
    prepare_compiled()
    rows, out = [], {}
    for name, base, tip in CASES:
        tree = Tree.from_urdf(os.path.join(URDF, f"{name}.urdf"), base, tip)
        tip = tip or tree.link_names[-1]
        rng = np.random.default_rng(0)
        q = tree.random_configurations(rng, 1)[0]
        Q = tree.random_configurations(rng, 100)
        problem = Problem(tree, [Pose(tip, tree.fk(tree.random_configurations(rng, 1)[0])[tip])])
        r = {
            "fk (1 configuration)": timed(lambda: tree.fk_batch(q[None])),
            "fk_batch (100 configurations)": timed(lambda: tree.fk_batch(Q), number=20),
            "state + residual": timed(lambda: problem.residual(problem.state(q))),
            "jacobian (Pose)": timed(lambda: problem.jacobian(problem.state(q))),
            "project": timed(lambda: tree.project(q)),
        }
        cases = [(tree.fk(tree.random_configurations(rng, 1)[0])[tip], tree.random_configurations(rng, 1)[0])
                 for _ in range(30)]
        for core in ("numpy", "compiled"):  # (compiled: loaded before the clock, prepare_compiled)
            compiled.set_enabled(core == "compiled")
            try:
                its, t0 = 0, time.perf_counter()
                for T, q0 in cases:
                    res = solve(tree, [Pose(tip, T)], q0, method="lm", max_iterations=50, restarts=False)
                    its += res.iterations
            finally:
                compiled.set_enabled(True)
            r[f"lm iteration, {core} (whole solve / iterations)"] = (time.perf_counter() - t0) / its * 1e6
        out[name] = r
        rows += [[f"{name} ({tree.n} DOF)", k, f"{v:.1f}"] for k, v in r.items()]
    print(table(rows, ["tree", "operation", "µs"]))
    costs = solve_costs(args.targets)
    headers = ["arm", *next(iter(costs.values()))]
    print(table([[arm, *(f"{v:.2f}" if "share" in k else f"{v:.1f}" for k, v in c.items())]
                 for arm, c in costs.items()], headers))
    write("iteration_cost", {"microseconds": out, "solve_costs": costs, "targets": args.targets},
          f"python -m fullbody_ik.benchmarks.iteration_cost --targets {args.targets}")


if __name__ == "__main__":
    main()
