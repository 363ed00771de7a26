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


def run_multistart(problem, q, budget, rng=None, starts=8, damping_bias=1e-3, backtracks=4, stall=5, **_):
    """Several LM searches at once, vectorized over the batch (FK, Jacobians, linear solves): the seed and
    ``starts - 1`` random feasible configurations. The first search that meets every objective wins; a
    search that stalls (its unmet error fell by less than 1 % over ``stall`` iterations) or cannot descend is
    replaced by a new random start. Each search is the iteration of :func:`run` (eq. 11-15, held bounds).
    """
    from .tree import BatchState

    tree = problem.tree
    rng = np.random.default_rng(rng)
    K, n = int(starts), tree.n
    D = tree.weights
    lo, hi = tree._clip_lower, tree._clip_upper
    eye = np.eye(n)
    objs = problem.objectives
    sqrt_w = [np.sqrt(o.weight) for o in objs]

    def evaluate(Q):
        st = BatchState(tree, Q)
        r = problem.residual(st)
        sat = np.ones(len(Q), dtype=bool)
        unmet = np.zeros(len(Q))
        for o, w in zip(objs, sqrt_w):
            ok = np.asarray(o.satisfied(st))
            sat &= ok
            unmet += np.where(ok, 0.0, 0.5 * w * w * np.sum(o.residual(st) ** 2, axis=-1))
        return st, r, 0.5 * np.sum(r * r, axis=-1), sat, unmet

    Q = tree.project(np.vstack([q[None], tree.random_configurations(rng, K - 1)]))
    st, r, E, sat, unmet = evaluate(Q)
    history = [unmet.copy()]
    age = np.zeros(K, dtype=int)
    best_q, best_key = Q[0].copy(), (True, np.inf)
    while True:
        keys = list(zip(~sat, E))
        i = min(range(K), key=lambda k: keys[k])
        if keys[i] < best_key:
            best_q, best_key = Q[i].copy(), keys[i]
        if sat.any():
            return Q[int(np.flatnonzero(sat)[0])].copy(), "every objective within tolerance"
        if budget.exhausted():
            return best_q, "budget exhausted"
        budget.tick()
        J = problem.jacobian(st) * D
        lam = (E + damping_bias)[:, None, None] * eye
        dq = -D * np.linalg.solve(np.swapaxes(J, 1, 2) @ J + lam, (np.swapaxes(J, 1, 2) @ r[..., None]))[..., 0]
        held = ((Q <= lo + 1e-12) & (dq < 0.0)) | ((Q >= hi - 1e-12) & (dq > 0.0))
        if held.any():
            J = J * ~held[:, None, :]
            dq = -D * np.linalg.solve(np.swapaxes(J, 1, 2) @ J + lam, (np.swapaxes(J, 1, 2) @ r[..., None]))[..., 0]
            dq[held] = 0.0
        Q_new, step, accepted = Q.copy(), np.ones(K), np.zeros(K, dtype=bool)
        first = None
        for _ in range(backtracks + 1):
            trial = np.flatnonzero(~accepted)
            Qt = tree.project(Q[trial] + step[trial, None] * dq[trial])
            ev = evaluate(Qt)
            if first is None:
                first = ev
            ok = ev[2] <= E[trial]
            Q_new[trial[ok]] = Qt[ok]
            accepted[trial[ok]] = True
            step[trial[~ok]] *= 0.5
            if accepted.all():
                break
        all_first = accepted.all() and step.min() == 1.0  # every search took its full step: reuse that state
        age += 1
        st, r, E, sat, unmet = first if all_first else evaluate(Q_new)
        history.append(unmet.copy())
        old = history[-1 - stall] if len(history) > stall else None
        stuck = ~accepted | ((age > stall) & (old is not None) & (unmet > 0.99 * (old if old is not None else 0)))
        stuck &= ~sat
        Q = Q_new
        if stuck.any():  # new random starts replace the searches that are going nowhere
            Q[stuck] = tree.random_configurations(rng, int(stuck.sum()))
            age[stuck] = 0
            st, r, E, sat, unmet = evaluate(Q)
            history[-1] = unmet.copy()
