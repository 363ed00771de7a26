# SPDX-License-Identifier: GPL-3.0-or-later
"""Projected Armijo back-tracking (paper 003, eq. 39-40; the projection of paper 004, eq. 10)."""


def projected_armijo(problem, q, f, grad, direction, tau=1.0, alpha=1e-4, beta=0.5, min_tau=1e-14):
    """Largest tau in {tau, beta tau, ...} with f(P(q + tau d)) < f + alpha grad^T (P(q + tau d) - q)  (eq. 39).

    P is the tree's projection (eq. 40 generalised to swing ellipses). Returns (q, state, f, tau), or None
    when no step length down to ``min_tau`` decreases f.
    """
    project = problem.tree.project
    while tau >= min_tau:
        q_new = project(q + tau * direction)
        state = problem.state(q_new)
        f_new = problem.cost(state)
        if f_new < f + alpha * float(grad @ (q_new - q)):
            return q_new, state, f_new, tau
        tau *= beta
    return None
