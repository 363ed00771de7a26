# SPDX-License-Identifier: GPL-3.0-or-later
"""Cost of the building blocks every solver iterates on (microseconds, median of repeats; the numpy path's), and
of an LM iteration in a whole solve on either path (the compiled core loaded before the clock: a run's first
solve used to count the cache's loading, 0.5-1 s, as kuka's iterations).

    python -m fullbody_ik.benchmarks.iteration_cost
"""

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


def main():
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
    write("iteration_cost", {"microseconds": out}, "python -m fullbody_ik.benchmarks.iteration_cost")


if __name__ == "__main__":
    main()
