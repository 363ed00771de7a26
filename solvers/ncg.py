# SPDX-License-Identifier: GPL-3.0-or-later
"""Projected non-linear conjugate gradient, Polak-Ribiere+ (paper 004)."""

import numpy as np

from .linesearch import projected_armijo


def run(problem, q, budget, alpha=1e-4, beta=0.5, grad_tol=1e-14, restart_every=None, **_):
    """p_{i+1} = -g_{i+1} + beta+ p_i with beta+ = max(0, g_{i+1}^T (g_{i+1} - g_i) / |g_i|^2) (eq. 8-9),
    in variables scaled by D = 1 - stiffness; the line search projects each trial point (eq. 10, 39).
    Paper eq. 8 prints |g_i| where Polak-Ribiere has |g_i|^2; we use the latter. A non-descent direction,
    or every n iterations, restarts with steepest descent.
    """
    D = problem.tree.weights
    n = problem.tree.n
    restart_every = restart_every or max(n, 1)
    state = problem.state(q)
    f = problem.cost(state)
    g = D * (problem.jacobian(state).T @ problem.residual(state))  # gradient in scaled variables
    p = -g
    tau, k = 1.0, 0
    while True:
        stop = problem.stop(state, budget)
        if stop:
            return q, stop
        if np.linalg.norm(g) < grad_tol:
            return q, "converged (gradient vanishes)"
        if float(p @ g) >= 0.0 or k % restart_every == 0:
            p = -g
        found = projected_armijo(problem, q, f, g / D, D * p, tau=min(tau * 4.0, 1e6),  # D >= 0.01
                                 alpha=alpha, beta=beta)
        if found is None:
            if np.allclose(p, -g):
                return q, "converged (no descent step: local minimum or limits)"
            p, k = -g, 0  # restart with steepest descent
            continue
        q, state, f, tau = found
        g_new = D * (problem.jacobian(state).T @ problem.residual(state))
        beta_pr = max(0.0, float(g_new @ (g_new - g)) / max(float(g @ g), 1e-300))  # eq. 8-9
        p = -g_new + beta_pr * p
        g = g_new
        k += 1
