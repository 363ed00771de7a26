# SPDX-License-Identifier: GPL-3.0-or-later
"""Steepest descent with projected Armijo back-tracking (paper 003, §5)."""

import numpy as np

from .linesearch import projected_armijo


def run(problem, q, budget, alpha=1e-4, beta=0.5, growth=4.0, grad_tol=1e-14, **_):
    """Direction -D^2 grad f with f = |r|^2 / 2, grad f = J^T r (eq. 26); step by eq. 39.

    Each search starts from ``growth`` times the last accepted step (paper: tau = 1 each time), which
    keeps the number of back-tracks small when the gradient's scale is far from the step's.
    """
    D2 = problem.tree.weights ** 2
    state = problem.state(q)
    f = problem.cost(state)
    tau = 1.0
    while True:
        stop = problem.stop(state, budget)
        if stop:
            return q, stop
        g = problem.jacobian(state).T @ problem.residual(state)
        if np.linalg.norm(g) < grad_tol:
            return q, "converged (gradient vanishes)"
        found = projected_armijo(problem, q, f, g, -D2 * g, tau=min(tau * growth, 1e6), alpha=alpha, beta=beta)
        if found is None:
            return q, "converged (no descent step: local minimum or limits)"
        q, state, f, tau = found
