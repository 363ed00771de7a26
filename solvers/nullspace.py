# SPDX-License-Identifier: GPL-3.0-or-later
"""Prioritized optimization in nullspaces (paper 002, Alg. 1-4).

Two faces of one scheme: equality constraints first, each in the nullspace of those before; then
inequality constraints, activated only when violated; then the cost in the nullspace of every active
constraint (eq. 5: proj_N(J) = I - J^T (J J^T)^-1 J).

- :func:`minimize` is the paper's black-box optimizer for scalar functions, with numerical gradients,
  step doubling from ``initial_step_length`` and the parameters of Table 1.
- :func:`run` is the IK method ``nullspace``: objectives grouped by priority (higher first) act as the
  equality levels, ``Distance`` objectives as inequalities and the lowest priority as the cost. With
  analytic Jacobians and vector residuals, each level takes a damped least-squares step inside the
  nullspace of the levels above (damping as paper 001, eq. 15) instead of a gradient step.
"""

from dataclasses import dataclass

import numpy as np

ZERO = 1e-12


def nullspace_projector(J, n):
    """I - J^+ J (eq. 5), robust to dependent rows."""
    if J is None or len(J) == 0:
        return np.eye(n)
    return np.eye(n) - np.linalg.pinv(np.atleast_2d(J), rcond=1e-10) @ np.atleast_2d(J)


# ---------------------------------------------------------------------------------------------
# The general optimizer


@dataclass
class MinimizeResult:
    x: np.ndarray
    fun: float
    iterations: int
    success: bool
    message: str
    nfev: int = 0


class _Counted:
    def __init__(self, f):
        self.f, self.count = f, 0

    def __call__(self, x):
        self.count += 1
        return float(self.f(x))


def _numerical_gradient(f, x, h):
    g = np.empty_like(x)
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = h * max(1.0, abs(x[k]))
        g[k] = (f(x + e) - f(x - e)) / (2.0 * e[k])
    return g


def _equalities(x, eq, clip, grad, search):
    """Alg. 1: (x, J_eq) with each equality constraint g in ``eq`` driven to zero in the nullspace of the previous
    ones' gradients (J_eq: those gradients, signed toward zero): a line search (``search``: initial step, its
    multiplier, most steps) doubling its step until |g| grows (the minimal point), reversing at a zero
    crossing."""
    n = len(x)
    initial_step_length, step_multiplier, max_inner = search
    J_eq = []
    for g in eq:
        c = g(x)
        dg = np.sign(c) * grad(g, x)
        if np.linalg.norm(dg) < ZERO:
            continue  # zero gradient
        previous = list(J_eq)
        J_eq.append(dg)
        if abs(c) < ZERO:
            continue  # already solved
        d = nullspace_projector(np.array(previous), n) @ dg if previous else dg
        if np.linalg.norm(d) < ZERO:
            continue  # empty nullspace
        step = initial_step_length
        for _ in range(max_inner):
            x_new = clip(x - step * d)
            c_new = g(x_new)
            if abs(c_new) > abs(c):
                break  # minimal point reached
            if np.sign(c_new) != np.sign(c):
                d = -d  # zero crossing: reverse
            x, c = x_new, c_new
            step *= step_multiplier
    return x, J_eq


def _inequalities(x, ineq, J_eq, clip, grad, search, step_tol):
    """Alg. 2: (x, J_ineq) with each violated inequality constraint h in ``ineq`` driven to its zero crossing in
    the nullspace of the equalities' gradients and of the active inequalities' that oppose it (J_ineq: the active
    ones' gradients; within ``step_tol`` of the boundary counts as active: no ping-pong)."""
    n = len(x)
    initial_step_length, step_multiplier, max_inner = search
    J_ineq = []
    for h in ineq:
        c = h(x)
        if c < -step_tol:
            continue  # inactive
        dh = grad(h, x)
        if np.linalg.norm(dh) < ZERO:
            continue
        active = list(J_eq) + [row for row in J_ineq if row @ dh < 0.0]
        J_ineq.append(dh)
        if c < 0.0:
            continue  # active but satisfied: constrains the cost stage only
        d = nullspace_projector(np.array(active), n) @ dh if active else dh
        if np.linalg.norm(d) < ZERO:
            continue
        step = initial_step_length
        for _ in range(max_inner):
            x_new = clip(x - step * d)
            c_new = h(x_new)
            if c_new < 0.0:
                x = x_new  # zero crossing reached: take it, so the cost stage starts feasible
                break
            x = x_new
            step *= step_multiplier
    return x, J_ineq


def _cost_descent(x, f, cost0, ineq, J_eq, J_ineq, clip, grad, search):
    """Alg. 3: x moved down the cost f (``cost0`` at x) in the nullspace of the active constraints' gradients
    (those opposing the cost's), the step doubling while the cost falls and no inequality becomes violated
    (Alg. 2 activates it next iteration)."""
    n = len(x)
    initial_step_length, step_multiplier, max_inner = search
    df = grad(f, x)
    if np.linalg.norm(df) <= ZERO:
        return x
    active = list(J_eq) + [row for row in J_ineq if row @ df < 0.0]
    d = nullspace_projector(np.array(active), n) @ df if active else df
    if np.linalg.norm(d) <= ZERO:
        return x
    step, c = initial_step_length, cost0
    h_now = [h(x) for h in ineq]
    for _ in range(max_inner):
        x_new = clip(x - step * d)
        c_new = f(x_new)
        if c_new > c:
            break
        x, c = x_new, c_new
        if any(h(x) > max(0.0, hv) for h, hv in zip(ineq, h_now)):
            break
        step *= step_multiplier
    return x


def minimize(
    cost, x0, eq=(), ineq=(), bounds=None, max_iter=1000, initial_step_length=1e-6, step_multiplier=2.0,
    step_tol=1e-4, cost_tol=1e-4, constraint_tol=1e-3, gradient_step=1e-7, max_inner=200,
):
    """Minimize cost(x) subject to g(x) = 0 for g in ``eq`` and h(x) <= 0 for h in ``ineq`` (Alg. 4).

    ``bounds`` = (lower, upper) arrays (or None) are kept by clipping every trial point.
    Defaults are paper 002's Table 1. Returns ``.x, .fun, .iterations, .success, .message``;
    ``success`` means the outer loop met a tolerance and every constraint holds within ``constraint_tol``.
    """
    x = np.array(x0, dtype=float).reshape(-1)
    n = len(x)
    if bounds is None:
        lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    else:
        lower = np.broadcast_to(np.asarray(bounds[0] if bounds[0] is not None else -np.inf, float), (n,))
        upper = np.broadcast_to(np.asarray(bounds[1] if bounds[1] is not None else np.inf, float), (n,))
        if np.any(lower > upper):
            raise ValueError("minimize: a lower bound is above its upper bound")
    clip = lambda v: np.clip(v, lower, upper)  # noqa: E731
    f = _Counted(cost)
    eq = [_Counted(g) for g in eq]
    ineq = [_Counted(h) for h in ineq]
    grad = lambda fn, v: _numerical_gradient(fn, v, gradient_step)  # noqa: E731
    x = clip(x)
    if not np.all(np.isfinite(x)):
        raise ValueError("minimize: x0 must be finite")

    message, converged, it = "maximum iterations reached", False, 0
    search = (initial_step_length, step_multiplier, max_inner)
    for it in range(1, max_iter + 1):
        x_start = x.copy()
        x, J_eq = _equalities(x, eq, clip, grad, search)
        x, J_ineq = _inequalities(x, ineq, J_eq, clip, grad, search, step_tol)
        cost0 = f(x)
        x = _cost_descent(x, f, cost0, ineq, J_eq, J_ineq, clip, grad, search)
        cost1 = f(x)
        if np.linalg.norm(x - x_start) < step_tol:
            message, converged = "step below step_tol", True
            break
        if abs(cost1 - cost0) < cost_tol:
            message, converged = "cost change below cost_tol", True
            break
    feasible = all(abs(g(x)) <= constraint_tol for g in eq) and all(h(x) <= constraint_tol for h in ineq)
    if converged and not feasible:
        message += "; constraints not satisfied"
    nfev = f.count + sum(g.count for g in eq) + sum(h.count for h in ineq)
    return MinimizeResult(x=x, fun=f(x), iterations=it, success=bool(converged and feasible), message=message,
                          nfev=nfev)


# ---------------------------------------------------------------------------------------------
# The IK method


def _levels(problem):
    """(equality levels, highest priority first; inequality objectives; cost objectives)."""
    ineq = [o for o in problem.objectives if o.inequality]
    rest = [o for o in problem.objectives if not o.inequality]
    if not rest:
        return [], ineq, []
    lowest = min(o.priority for o in rest)
    priorities = sorted({o.priority for o in rest if o.priority > lowest}, reverse=True)
    eq_levels = [[o for o in rest if o.priority == p] for p in priorities]
    return eq_levels, ineq, [o for o in rest if o.priority == lowest]


def _damped_step(J, r, N, E, bias):
    """dx = -N (J N)^T ((J N)(J N)^T + (E + bias) 1)^-1 r: least squares inside range(N)."""
    JN = J @ N
    A = JN @ JN.T + (E + bias) * np.eye(len(r))
    return -N @ (JN.T @ np.linalg.solve(A, r))


def run(problem, q, budget, damping_bias=1e-3, step_tol=1e-12, cost_tol=1e-14, backtracks=8, stall=None, **_):
    tree = problem.tree
    n, D = tree.n, tree.weights
    eq_levels, ineq, cost_objs = _levels(problem)
    state = problem.state(q)

    def level_cost(st, objs):
        return problem.cost(st, objs) if objs else 0.0

    def line_search(q, st, dx, objs, keep):
        """Largest step in {1, 1/2, ...} that lowers ``objs`` without raising the ``keep`` levels."""
        c0 = level_cost(st, objs)
        keep0 = [level_cost(st, k) for k in keep]
        step = 1.0
        for _ in range(backtracks + 1):
            q_new = tree.project(q + step * D * dx)
            st_new = problem.state(q_new)
            if level_cost(st_new, objs) < c0 and all(
                level_cost(st_new, k) <= k0 + 1e-12 * (1 + k0) or all(bool(o.satisfied(st_new)) for o in k)
                for k, k0 in zip(keep, keep0)
            ):
                return q_new, st_new
            step *= 0.5
        return q, st

    history = []
    while True:
        stop = problem.stop(state, budget)
        if stop:
            return q, stop
        q_start, total0 = q.copy(), problem.cost(state)
        history.append(problem.unmet(state))
        if stall and len(history) > stall and history[-1] > 0.99 * history[-1 - stall] > 0.0:
            return q, "stalled (local minimum or limits)"
        done = []
        J_acc = np.zeros((0, n))
        # Alg. 1: equality levels in priority order.
        for objs in eq_levels:
            J = problem.jacobian(state, objs) * D
            r = problem.residual(state, objs)
            if float(r @ r) > 1e-24:  # Alg. 1 skips only a level already at zero, not merely within tolerance
                N = nullspace_projector(J_acc, n)
                dx = _damped_step(J, r, N, 0.5 * float(r @ r), damping_bias)
                if np.linalg.norm(dx) > ZERO:
                    q, state = line_search(q, state, dx, objs, done)
                    J = problem.jacobian(state, objs) * D
            J_acc = np.vstack([J_acc, J])
            done.append(objs)
        # Alg. 2: violated inequalities become active constraints.
        active_ineq = []
        for o in ineq:
            g = float(o.constraint(state))
            grad = o.constraint_gradient(state) * D
            if g >= -10.0 * o.tolerance and np.linalg.norm(grad) > ZERO:  # near the boundary counts as active
                if g >= 0.0:
                    N = nullspace_projector(J_acc, n)
                    d = N @ grad
                    denom = float(grad @ d)
                    if denom > ZERO:
                        q, state = line_search(q, state, -d * (g + 1e-9) / denom, [o], done)
                active_ineq.append(o)
        # Alg. 3: the cost in the nullspace of every active constraint.
        if cost_objs:
            J = problem.jacobian(state, cost_objs) * D
            r = problem.residual(state, cost_objs)
            g_cost = J.T @ r
            rows = [J_acc] + [
                (o.constraint_gradient(state) * D)[None] for o in active_ineq
                if float((o.constraint_gradient(state) * D) @ g_cost) < 0.0
            ]
            N = nullspace_projector(np.vstack(rows), n)
            dx = _damped_step(J, r, N, 0.5 * float(r @ r), damping_bias)
            if np.linalg.norm(dx) > ZERO:
                q, state = line_search(q, state, dx, cost_objs, done + [[o] for o in ineq])
        # Alg. 4: termination on step and cost change.
        total1 = problem.cost(state)
        if np.max(np.abs(q - q_start), initial=0.0) < step_tol or abs(total1 - total0) < cost_tol * (1 + total0):
            if problem.satisfied(state):
                return q, "every objective within tolerance"
            return q, "converged (no progress at any priority level)"
