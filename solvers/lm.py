# SPDX-License-Identifier: GPL-3.0-or-later
"""Levenberg-Marquardt with residual damping (paper 001), kept feasible by projection."""

import numpy as np


def run(problem, q, budget, damping_bias=1e-3, step_tol=1e-12, residual_tol=1e-12, backtracks=8, stall=None, **_):
    """Iterate q <- P(q + D dq), (J^T J + W_N) dq = -J^T r, W_N = E_k 1 + w_N 1 (eq. 11-15).

    D = diag(1 - stiffness) scales each variable's step (Blender's IK weight). A step that the
    projection makes worse is halved (at most ``backtracks`` times); paper 001 needs no line search
    without limits, and then this never triggers. Stops as in §IV: all |dq| < 1e-12, or | |e_k| - |e_k-1| |
    < 1e-12, or every objective within tolerance, or the budget. With ``stall = k`` (set by ``solve`` when it
    may restart), also when the error of the objectives not yet met fell by less than 1 % over the last k iterations: a local minimum, better left
    for a new start.
    """
    tree = problem.tree
    D = tree.weights
    state = problem.state(q)
    r = problem.residual(state)
    E = 0.5 * float(r @ r)
    eye = np.eye(tree.n)
    lo, hi = tree._clip_lower, tree._clip_upper  # box-bounded variables (coupled swings excluded)
    history = [problem.unmet(state)]
    while True:
        stop = problem.stop(state, budget)
        if stop:
            return q, stop
        J = problem.jacobian(state) * D
        H = J.T @ J + (E + damping_bias) * eye  # eq. 12 with eq. 15
        dq = -D * np.linalg.solve(H, J.T @ r)  # eq. 11
        # Variables resting on a bound that the step pushes outward are held (their columns removed):
        # otherwise the projection throws that part of the step away and convergence crawls along the limit.
        held = ((q <= lo + 1e-12) & (dq < 0.0)) | ((q >= hi - 1e-12) & (dq > 0.0))
        if held.any():
            J[:, held] = 0.0
            H = J.T @ J + (E + damping_bias) * eye
            dq = -D * np.linalg.solve(H, J.T @ r)
            dq[held] = 0.0
        step = 1.0
        for _ in range(backtracks + 1):
            q_new = tree.project(q + step * dq)
            state_new = problem.state(q_new)
            r_new = problem.residual(state_new)
            E_new = 0.5 * float(r_new @ r_new)
            if E_new <= E:
                break
            step *= 0.5
        else:
            return q, "converged (no step decreases the error: local minimum or limits)"
        moved = np.max(np.abs(q_new - q), initial=0.0)
        change = abs(np.sqrt(2 * E_new) - np.sqrt(2 * E))
        q, state, r, E = q_new, state_new, r_new, E_new
        history.append(problem.unmet(state))
        if stall and len(history) > stall and history[-1] > 0.99 * history[-1 - stall] > 0.0:
            return q, "stalled (local minimum or limits)"
        if moved < step_tol or change < residual_tol:
            if problem.satisfied(state):
                return q, "every objective within tolerance"
            return q, "converged (step or residual change below tolerance)"
