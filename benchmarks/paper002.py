# SPDX-License-Identifier: GPL-3.0-or-later
"""Paper 002 §4.1-4.4: the four numerical examples of the nullspace optimizer, with Table 1's parameters.

    python -m fullbody_ik.benchmarks.paper002
"""

import time

import numpy as np

from fullbody_ik.solvers.nullspace import minimize

from .common import table, write


def torque(x):
    c1, c12, c123 = np.cos(x[0]), np.cos(x[0] + x[1]), np.cos(x[0] + x[1] + x[2])
    return np.array([2.5 * c1 + 1.5 * c12 + 0.5 * c123, 1.5 * c12 + 0.5 * c123, 0.5 * c123])  # g = 1


def arm_x(x):
    return np.cos(x[0]) + np.cos(x[0] + x[1]) + np.cos(x[0] + x[1] + x[2])


def arm_y(x):
    return np.sin(x[0]) + np.sin(x[0] + x[1]) + np.sin(x[0] + x[1] + x[2])


# (name, paper's x*, paper's iterations, paper's time, call)
EXAMPLES = [
    ("4.1 convex", [-5, 5, -3, 3, 5], 6, "8 us", lambda: minimize(
        lambda x: sum((x[k] - (k + 1)) ** 2 for k in range(5)), np.zeros(5),
        eq=[lambda x: x[0] + 5, lambda x: x[1] - 5], ineq=[lambda x: x[2] + 3, lambda x: x[3] - 3])),
    ("4.2 Rosenbrock in the unit disc", [0.7864, 0.6177], 201, "35 us", lambda: minimize(
        lambda x: 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2, [0, 0],
        ineq=[lambda x: x[0] ** 2 + x[1] ** 2 - 1])),
    ("4.3 HS071 (bounds as inequalities)", [1.00, 4.74, 3.82, 1.38], 100, "139 us", lambda: minimize(
        lambda x: x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2], [1, 5, 5, 1], eq=[lambda x: x @ x - 40],
        ineq=[lambda x: 25 - np.prod(x)] + [lambda x, i=i: 1 - x[i] for i in range(4)]
        + [lambda x, i=i: x[i] - 5 for i in range(4)])),
    ("4.4 3-link arm, minimal gravity torque", [1.647, 3.141, -1.647], 8, "42 us", lambda: minimize(
        lambda x: torque(x) @ torque(x), [np.pi / 4] * 3, eq=[lambda x: arm_x(x) + 1.0, arm_y])),
]


def main():
    rows, out = [], {}
    for name, x_paper, it_paper, t_paper, call in EXAMPLES:
        t0 = time.perf_counter()
        r = call()
        ms = (time.perf_counter() - t0) * 1e3
        x = np.array(r.x)
        diff = x - np.array(x_paper)
        if name.startswith("4.4"):  # joint angles: compare modulo 2 pi
            x = (x + np.pi) % (2 * np.pi) - np.pi
            diff = (diff + np.pi) % (2 * np.pi) - np.pi
        err = float(np.max(np.abs(diff)))
        out[name] = {"x": x, "x_paper": x_paper, "fun": r.fun, "iterations": r.iterations,
                     "iterations_paper": it_paper, "ms": ms, "time_paper": t_paper, "max_abs_diff": err,
                     "success": r.success, "message": r.message}
        rows.append([name, np.array2string(x, precision=4), str(x_paper), f"{err:.1e}", r.iterations, it_paper,
                     f"{ms:.1f} ms", t_paper])
    print(table(rows, ["example", "x* (ours)", "x* (paper)", "max |diff|", "iterations", "paper", "time",
                       "paper (C++)"]))
    write("paper002", out, "python -m fullbody_ik.benchmarks.paper002")


if __name__ == "__main__":
    main()
