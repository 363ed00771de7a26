# SPDX-License-Identifier: GPL-3.0-or-later
"""Which speed ideas of the reference implementations pay off in numpy? Measured, not assumed.

0. Incremental FK (BioIK keeps the transforms of the last query and recomputes only below a changed joint):
   where it pays, gradients by forward differences, against our analytic gradient.

1. Where a generation's time goes (exploitation by L-BFGS-B or LM, offspring evaluation, the rest).
2. Evaluating children on a linearization of the tree around the best individual (p ~ p* + J dq,
   R ~ exp(J_w dq) R*) instead of batched FK: its cost, and how well it ranks children (Spearman rho
   against the exact fitness) for children near and far from the best.
3. The exploitation's cost per evaluated point: scipy's minimize run per elite (as paper 000 runs one
   L-BFGS-B per elite), against the elites' runs advancing in lockstep with their points evaluated together
   (solvers.lbfgsb, scipy's own setulb routine).

    python -m fullbody_ik.benchmarks.memetic_study
"""

import os
import time

import numpy as np
from scipy.optimize import minimize
from scipy.stats import spearmanr

from fullbody_ik.solvers import Pose, Tree, lbfgsb, solve
from fullbody_ik.solvers.blas import single_thread_blas
from fullbody_ik.solvers.memetic import Fitness
from fullbody_ik.solvers.problem import Problem
from fullbody_ik.solvers.rotations import exp_so3
from fullbody_ik.solvers.tree import BatchState

from .common import URDF, table, write

CASES = [("kuka_iiwa", "lbr_iiwa_link_0", ["lbr_iiwa_link_7"]),
         ("human", None, ["left_hand", "right_hand", "left_foot", "right_foot"])]


def linearized_world(tree, x0, links, Q):
    """World matrices of ``links`` for every row of Q from the first-order expansion around x0."""
    st = tree.state(x0)
    W = np.broadcast_to(st.world, (len(Q),) + st.world.shape).copy()
    dQ = Q - x0
    for i in links:
        J = st.point_jacobian(i, st.world[i, :3, 3])
        W[:, i, :3, 3] = st.world[i, :3, 3] + dQ @ J[:3].T
        W[:, i, :3, :3] = exp_so3(dQ @ J[3:].T) @ st.world[i, :3, :3]
    return W


def incremental_fd_gradient(fit, tree, q, goal_links, h=1e-7):
    """Omega^2's gradient by forward differences (paper 000 eq. 21) with BioIK's incremental FK: the pose of q
    is kept, and perturbing variable i only re-evaluates its joint; each goal link's pose is then
    W[parent] local_i(q + h e_i) W[link_i]^-1 W[goal] (cached relative transforms), all variables at once."""
    n, L = tree.n, len(tree.link_names)
    W0 = tree.fk_batch(q[None])[0]
    Qp = q + h * np.eye(n)
    local = np.empty((n, L, 4, 4))
    local[:] = tree.origin
    for m in tree.models:
        m.local(Qp, tree.origin, local)
    li = tree.var_link
    moved = W0[np.maximum(tree.parent[li], 0)] @ local[np.arange(n), li]  # the perturbed joint's frame
    R, t = W0[li, :3, :3], W0[li, :3, 3]
    inv = np.zeros((n, 4, 4))
    inv[:, :3, :3] = np.swapaxes(R, -1, -2)
    inv[:, :3, 3] = -(np.swapaxes(R, -1, -2) @ t[..., None])[..., 0]
    inv[:, 3, 3] = 1.0
    world = np.broadcast_to(W0, (n, L, 4, 4)).copy()
    for g in goal_links:
        below = tree.ancestors[g]  # variables that move this goal link
        world[below, g] = moved[below] @ (inv[below] @ W0[g])
    state = BatchState(tree, np.vstack([q, Qp]), world=np.concatenate([W0[None], world]))  # q's pose is known
    L_ = np.concatenate([o.losses(state) for o in fit.problem.objectives], axis=-1)
    f = np.sum(fit.weights * L_ * L_, axis=-1) / fit.k
    return f[0], (f[1:] - f[0]) / h


def exploit_one_by_one(fit, tree, X):
    """What the memetic solver did before: scipy.optimize.minimize per elite (returns points evaluated, start)."""
    evals, t0 = 0, time.perf_counter()
    for x in X:
        evals += minimize(fit.squared_with_gradient, x, jac=True, method="L-BFGS-B",
                          bounds=list(zip(tree._clip_lower, tree._clip_upper)),
                          options={"maxiter": 10, "ftol": 1e-15, "gtol": 1e-14}).nfev
    return evals, t0


def exploit_lockstep(fit, tree, X):
    """What it does now: the elites' runs in lockstep, their evaluations batched (solvers.lbfgsb)."""
    count = [0]

    def evaluate(Y):
        count[0] += len(Y)
        f, g, _ = fit.evaluate(Y)
        return f, g, np.zeros(len(Y), dtype=bool)  # never "done": the same work as one by one

    t0 = time.perf_counter()
    lbfgsb.minimize_batch(evaluate, X, tree._clip_lower, tree._clip_upper, 10)
    return count[0], t0


def timed(f, number=20):
    t0 = time.perf_counter()
    for _ in range(number):
        f()
    return (time.perf_counter() - t0) / number * 1e6


def main():
    rows, out = [], {}
    with single_thread_blas():
        for name, base, tips in CASES:
            tree = Tree.from_urdf(os.path.join(URDF, f"{name}.urdf"), base, tips if base else None)
            rng = np.random.default_rng(0)
            W = tree.fk(tree.random_configurations(rng, 1)[0])
            problem = Problem(tree, [Pose(t, W[t]) for t in tips])
            fit = Fitness(problem)
            P = 50 if tree.n < 20 else 150
            x0 = tree.random_configurations(rng, 1)[0]
            links = [tree.link(t) for t in tips]
            r = {}
            for label, scale in (("near (0.05 rad)", 0.05), ("far (0.5 rad)", 0.5)):
                Q = tree.project(x0 + rng.normal(size=(P, tree.n)) * scale)
                exact = fit.batch(Q)

                def approx():
                    st = BatchState(tree, Q, world=linearized_world(tree, x0, links, Q))
                    L = np.concatenate([o.losses(st) for o in problem.objectives], axis=-1)
                    return np.sqrt(np.sum(fit.weights * L * L, axis=-1) / fit.k)

                rho = spearmanr(exact, approx()).correlation
                r[f"children {label}: exact FK fitness (us)"] = timed(lambda: fit.batch(Q))
                r[f"children {label}: linearized fitness (us)"] = timed(approx)
                r[f"children {label}: rank agreement (Spearman rho)"] = float(rho)
            q = tree.random_configurations(rng, 1)[0]
            # Incremental FK (BioIK's cached transforms) pays off for finite-difference gradients (eq. 21), which
            # perturb one gene at a time; offspring change every gene (eq. 17 draws a weight per gene), and we
            # use analytic gradients. Measured: its cost and error against the analytic gradient.
            f_a, g_a, _ = fit.evaluate(q)
            _, g_fd = incremental_fd_gradient(fit, tree, q, links)
            r["gradient, analytic (fused terms) (us)"] = timed(lambda: fit.evaluate(q), 200)
            r["gradient, forward differences on incremental FK (us)"] = timed(
                lambda: incremental_fd_gradient(fit, tree, q, links), 200)
            r["gradient, forward differences on full batched FK (us)"] = timed(
                lambda: fit.batch(np.vstack([q, q + 1e-7 * np.eye(tree.n)])), 200)
            r["  incremental FD: largest error relative to the analytic gradient"] = float(
                np.max(np.abs(g_fd - g_a)) / max(np.max(np.abs(g_a)), 1e-300))
            for E in (2, 5):  # exploitation of E elites, 10 L-BFGS-B iterations each: one by one, or in lockstep
                X = tree.random_configurations(rng, E)
                for label, run in (("scipy minimize per elite", exploit_one_by_one), ("lockstep, batched", exploit_lockstep)):
                    evals, t0 = run(fit, tree, X)
                    r[f"L-BFGS-B on {E} elites, {label}: per evaluated point (us)"] = \
                        (time.perf_counter() - t0) / evals * 1e6
            for exploit in ("lbfgsb", "lm"):  # where five generations' time goes
                clock = {}
                res = solve(tree, problem.objectives, q, method="memetic", max_iterations=5, rng=12345, exploit=exploit,
                            timings=clock)
                total = res.elapsed * 1e3 / max(res.iterations, 1)
                r[f"generation with {exploit} exploitation (ms)"] = total
                r[f"  {exploit}: exploitation (%)"] = 100 * clock["exploitation"] * 1e3 / max(res.iterations, 1) / total
                r[f"  {exploit}: offspring, 2 waves (%)"] = 100 * clock["offspring"] * 1e3 / max(res.iterations, 1) / total
            out[name] = r
            rows += [[f"{name} ({tree.n} DOF)", k, f"{v:.3g}"] for k, v in r.items()]
    print(table(rows, ["tree", "measure", "value"]))
    write("memetic_study", {"measures": out}, "python -m fullbody_ik.benchmarks.memetic_study")


if __name__ == "__main__":
    main()
