# SPDX-License-Identifier: GPL-3.0-or-later
"""Levenberg-Marquardt with residual damping (paper 001), kept feasible by projection."""

import numpy as np

from . import compiled


def bias(tree, damping_bias=None):
    """The damping bias w_N of eq. 15: ``damping_bias``, or by default 1e-3 l^2 for the tree's characteristic
    length l (its links' mean offset): §III finds 1e-1 l^2 to 1e-3 l^2 robust and the smaller faster to converge
    (measured: the human's wrists + feet solved within 10 ms 93 -> 98 %, against a fixed 1e-3), and it scales
    with the rig as E does."""
    return 1e-3 * tree.characteristic_length ** 2 if damping_bias is None else float(damping_bias)


def first_damping(damping_start=None):
    """The damping multiplier's first value: ``damping_start``, or compiled.DAMPING_START; a positive number."""
    if damping_start is None:
        return compiled.DAMPING_START
    value = float(damping_start)
    if not 0.0 < value < float("inf"):
        raise ValueError(f"lm: damping_start must be a positive number, got {damping_start!r}")
    return value


_PLAIN = (None, None, None, None, 1e-12, 1e-12, 1.0)  # compiled_search's defaults: its settings made once per tree


def compiled_search(k, q, budget, rng=None, max_restarts=0, damping_bias=None, step_tol=1e-12, residual_tol=1e-12,
                    backtracks=None, stall=None, damping_scale=1.0, stall_ratio=None, damping_start=None,
                    restarting=None, **_):
    """LM on the compiled kernel ``k`` (compiled.search) with run's options and defaults, or, ``restarting``
    (default: when ``max_restarts`` > 0; None: while the budget lasts, ten times without any budget),
    run_multistart's, the searches one after another (cheaper compiled than a batch) and each given up sooner when
    it stalls (compiled.RESTART_STALL). (q, message, new starts made)."""
    if max_restarts is None:
        max_restarts = 10 if budget.deadline is None and budget.max_iterations is None else 10**9
    if not 0 <= max_restarts:
        raise ValueError(f"max_restarts must be >= 0 or None, got {max_restarts!r}")
    if restarting is None:
        restarting = max_restarts > 0
    seed = compiled.kernel_seed(rng) if restarting else -1
    # the defaults' settings made once per tree, with or without restarts and a stall (a tracking frame's), not
    # converted and checked again at every solve
    plain = (damping_bias, backtracks, stall_ratio, damping_start, step_tol, residual_tol, damping_scale) == _PLAIN
    known = k.tree.__dict__.setdefault("_lm_settings", {}) if plain else None
    key = (restarting, stall)
    settings = known.get(key) if plain else None
    if settings is None:
        if restarting:
            stall, stall_ratio = stall or compiled.RESTART_STALL, stall_ratio or compiled.RESTART_STALL_RATIO
        elif stall_ratio is None:
            stall_ratio = compiled.STALL_RATIO
        settings = compiled.settings(stall, stall_ratio, bias(k.tree, damping_bias), damping_scale,
                                     first_damping(damping_start), step_tol, residual_tol,
                                     (4 if restarting else 8) if backtracks is None else backtracks)
        if plain:
            known[key] = settings
    return compiled.search(k, q, budget, seed, max_restarts, settings)


def run(problem, q, budget, damping_bias=None, step_tol=1e-12, residual_tol=1e-12, backtracks=8, stall=None,
        damping_scale=1.0, stall_ratio=None, damping_start=None, **_):
    """Iterate q <- P(q + D dq), (J^T J + W_N) dq = -J^T r, W_N = mu (E_k 1 + w_N 1) (eq. 11-15).

    D = diag(1 - stiffness) scales each variable's step (Blender's IK weight). The step is solved within the
    limits it meets (constrained_step). A full step that the projection (or the nonlinearity) makes worse
    is replaced by the best shorter one (shorter_step), and the damping is multiplied by 1/t for the
    fraction t that was usable. mu starts at ``damping_start`` (default compiled.DAMPING_START, 0.1: a tenth of
    paper 001's damping) and is
    halved after each full step, down to compiled.DAMPING_FLOOR (Marquardt's rule: near a solution the model serves and less damping converges in fewer
    iterations). Stops as in §IV: all |dq| < 1e-12, or | |e_k| - |e_k-1| | < 1e-12, or every objective within
    tolerance, or the budget. With ``stall = k`` (set by ``solve`` when it may restart), also when the error of
    the objectives not yet met fell by less than the fraction 1 - ``stall_ratio`` (default 1 %) over the last k
    iterations: a local minimum, better left for a new start.
    """
    k = compiled.kernel(problem)
    if k is not None:  # the same iteration, compiled
        return compiled_search(k, q, budget, None, 0, damping_bias, step_tol, residual_tol, backtracks, stall,
                               damping_scale, stall_ratio, damping_start)[:2]
    damping_bias = bias(problem.tree, damping_bias)
    stall_ratio = compiled.STALL_RATIO if stall_ratio is None else float(stall_ratio)
    damping_start = first_damping(damping_start)
    tree = problem.tree
    D = tree.weights
    state = problem.state(q)
    r = problem.residual(state)
    E = 0.5 * float(r @ r)
    eye = np.eye(tree.n)
    history = [problem.unmet(state)]
    mu = damping_start  # damping multiplier: grows when limits or nonlinearity cut the steps short, halves after full steps
    while True:
        stop = problem.stop(state, budget)
        if stop:
            return q, stop
        J = problem.jacobian(state) * D
        lam = mu * (damping_scale * E + damping_bias)  # eq. 14-15 (lambda = damping_scale)
        dq = -D * np.linalg.solve(J.T @ J + lam * eye, J.T @ r)  # eq. 11-12
        dq = constrained_step(tree, q, dq, J, r, lam, D)
        q_new = tree.project(q + dq)
        state_new = problem.state(q_new)
        r_new = problem.residual(state_new)
        E_new = 0.5 * float(r_new @ r_new)
        if E_new > E:  # the projection (or the nonlinearity) made the full step worse: shorter ones, at once
            found = shorter_step(problem, q, dq, E, backtracks)
            if found is None:
                return q, "converged (no step decreases the error: local minimum or limits)"
            # Only a fraction t of the step was usable: damp harder (by 1/t) so the next step is shaped for
            # the distance it can actually go, not just cut shorter. (A departure from paper 001, whose
            # damping has no memory, as is its halving after full steps.)
            # (the distance moved, at most t: a full-turn joint wrapped by the projection moves by about 2 pi)
            t = min(np.max(np.abs(found[0] - q)) / max(np.max(np.abs(dq)), 1e-300), found[4])
            mu = min(mu / max(t, 1e-3), 1e8)
            q_new, state_new, r_new, E_new = found[:4]
        else:
            mu = max(mu / 2.0, compiled.DAMPING_FLOOR)
        moved = np.max(np.abs(q_new - q), initial=0.0)
        change = abs(np.sqrt(2 * E_new) - np.sqrt(2 * E))
        q, state, r, E = q_new, state_new, r_new, E_new
        history.append(problem.unmet(state))
        if stall and len(history) > stall and history[-1] > stall_ratio * history[-1 - stall] > 0.0:
            return q, "stalled (local minimum or limits)"
        if moved < step_tol or change < residual_tol:
            if problem.satisfied(state):
                return q, "every objective within tolerance"
            return q, "converged (step or residual change below tolerance)"


def shorter_step(problem, q, dq, E, halvings=8):
    """The best of the shorter steps along dq, evaluated together (one batched FK): the halvings 1/2 ...
    1/2^halvings, searched from the longest until E rises again past one that lowers it (along a descent
    direction E falls, then rises: the shorter ones are worse; compiled, they are not evaluated), and the
    longest step that reaches the first limit without being clamped (a step clamped by a limit can turn uphill;
    one that stops at the limit adds it to the limits the next step slides along). (q, state, residual, E, its
    fraction t of dq) of the best if it lowers E, else None."""
    from .tree import BatchState

    tree = problem.tree
    grid = np.array(compiled.SHORTER_STEP_GRID)
    trial = q + grid[:, None] * dq
    inside = np.max(np.abs(tree.project(trial) - trial), axis=1) <= 1e-12
    ts = 0.5 ** np.arange(1, halvings + 1)
    if inside.any() and not inside[0]:  # (the full step inside the bounds is the one known worse)
        ts = np.append(ts, grid[np.argmax(inside)])
    Q = tree.project(q + ts[:, None] * dq)
    st = BatchState(tree, Q)
    R = problem.residual(st)
    Es = 0.5 * np.sum(R * R, axis=-1)
    best = np.inf
    for h in range(halvings):
        if Es[h] < best:
            best = Es[h]
        elif best <= E:  # risen again: the shorter halvings are not candidates
            Es[h:halvings] = np.inf
            break
    k = int(np.argmin(Es))
    if not Es[k] <= E:
        return None
    state = problem.state(Q[k])
    return Q[k], state, problem.residual(state), float(Es[k]), float(ts[k])


def constrained_step(tree, q, dq, J, r, lam, D):
    """The LM step (eq. 11) re-solved within the limits q rests on and dq pushes against: variables on a box
    bound are held (their columns removed) and swings on their limit ellipse slide along it (the step is
    solved in the ellipse's tangent). Without this the projection throws part of the step away, or bends it
    uphill, and convergence crawls or stops on a limit. Works on one q or a batch (rows)."""
    batch = np.ndim(q) == 2
    held = np.zeros(np.shape(q), dtype=bool)
    P = None
    limits = tree.swing_limits(np.atleast_2d(q))
    for _ in range(3):  # a re-solved step may push against another limit: grow the active set
        held_new = held | tree.held(q, dq)
        P_new = tree.tangent_projector(q, dq, D, P, limits) if limits else None
        if (held_new == held).all() and (P_new is None or (P is not None and np.array_equal(P_new, P))):
            return dq
        P = P_new
        held = held_new
        Jr = J * ~held[..., None, :] if batch else J * ~held
        if P is not None:
            Jr = Jr @ P
        Jt = np.swapaxes(Jr, -1, -2)
        eye = np.eye(tree.n)
        H = Jt @ Jr + (lam[:, None, None] * eye if batch else lam * eye)
        du = -np.linalg.solve(H, (Jt @ r[..., None])[..., 0][..., None])[..., 0]
        if P is not None:
            du = (P @ du[..., None])[..., 0]
        du = np.where(held, 0.0, du)
        dq = D * du
    return dq


class BatchLM:
    """The iteration of :func:`run` over a batch of configurations, with FK, Jacobians and the linear
    solves vectorized across the batch (each row is an independent search)."""

    def __init__(self, problem, damping_bias=None, backtracks=4, damping_scale=1.0):
        self.problem, self.tree = problem, problem.tree
        damping_bias = bias(problem.tree, damping_bias)
        self.damping_bias, self.backtracks, self.damping_scale = damping_bias, backtracks, damping_scale

    def evaluate(self, Q):
        """(state, residuals (K, m), E (K,), all met (K,), unmet error (K,)) of the rows of Q."""
        from .tree import BatchState

        st = BatchState(self.tree, Q)
        r = self.problem.residual(st)
        sat, unmet = self.problem.progress(st)
        return st, r, 0.5 * np.sum(r * r, axis=-1), sat, unmet

    def _direction(self, Q, J, r, E):
        D = self.tree.weights
        lam = self.damping_scale * E + self.damping_bias  # eq. 14-15, per row
        Jt = np.swapaxes(J, 1, 2)
        dq = -D * np.linalg.solve(Jt @ J + lam[:, None, None] * np.eye(self.tree.n), Jt @ r[..., None])[..., 0]
        return constrained_step(self.tree, Q, dq, J, r, lam, D)

    def step(self, Q, ev):
        """One iteration for every row; returns (Q_new, evaluation of Q_new, rows that descended)."""
        st, r, E = ev[0], ev[1], ev[2]
        dq = self._direction(Q, self.problem.jacobian(st) * self.tree.weights, r, E)
        K = len(Q)
        Q_new, step, accepted, first = Q.copy(), np.ones(K), np.zeros(K, dtype=bool), None
        for _ in range(self.backtracks + 1):
            trial = np.flatnonzero(~accepted)
            Qt = self.tree.project(Q[trial] + step[trial, None] * dq[trial])
            ev_t = self.evaluate(Qt)
            first = ev_t if first is None else first
            ok = ev_t[2] <= E[trial]
            Q_new[trial[ok]] = Qt[ok]
            accepted[trial[ok]] = True
            step[trial[~ok]] *= 0.5
            if accepted.all():
                break
        if accepted.all() and step.min() == 1.0:  # every row took its full step: that state is the new one
            return Q_new, first, accepted
        return Q_new, self.evaluate(Q_new), accepted


def default_starts(n):
    """Searches run at once: 16 for small trees (measured on the six arms, 300 targets each, 10 ms: 1681 vs
    1636 of 1800 solved with 8), 8 for larger ones, where each batched iteration costs more."""
    return 16 if n <= 10 else 8


def run_multistart(problem, q, budget, rng=None, starts=None, damping_bias=None, backtracks=4, stall=None,
                   damping_scale=1.0, max_restarts=None, stall_ratio=None, damping_start=None, **_):
    """Several LM searches at once (:class:`BatchLM`): the seed and ``starts - 1`` random feasible
    configurations (default: default_starts(n)). The first search that meets every objective wins; a search
    that stalls (its unmet error fell by less than the fraction 1 - ``stall_ratio`` over ``stall`` iterations:
    by default 1 % over 5; compiled, one search after another, 20 % over 2: compiled.RESTART_STALL) or cannot
    descend is
    replaced by a new random start, ``max_restarts`` times at most (None: while the budget lasts); with none
    left, the best answer once every search has stopped. Returns (q, message, searches started after the first).
    """
    k = compiled.kernel(problem)
    if k is not None:  # compiled, the starts one after another cost less than a batch
        return compiled_search(k, q, budget, rng, max_restarts, damping_bias, backtracks=backtracks, stall=stall,
                               damping_scale=damping_scale, stall_ratio=stall_ratio, damping_start=damping_start,
                               restarting=True)
    damping_bias = bias(problem.tree, damping_bias)
    # (the batch: a stalled search replaced costs an evaluation of every search; giving up sooner, 20 % over 2,
    # measured 8 % slower in median on Table I's arms, the same iterations. Its damping is paper 001's, without
    # the multiplier: damping_start is checked, not used)
    first_damping(damping_start)
    stall, stall_ratio = stall or 5, stall_ratio or compiled.STALL_RATIO
    tree = problem.tree
    rng = np.random.default_rng(rng)
    K = int(starts or default_starts(tree.n))
    blm = BatchLM(problem, damping_bias, backtracks, damping_scale)
    Q = tree.project(np.vstack([q[None], tree.random_configurations(rng, K - 1)]))
    ev = blm.evaluate(Q)
    history = [ev[4].copy()]
    age = np.zeros(K, dtype=int)
    best_q, best_key = Q[0].copy(), (True, np.inf)
    left = np.inf if max_restarts is None or max_restarts >= 10**9 else int(max_restarts)  # restarts allowed
    count, stopped = 0, np.zeros(K, dtype=bool)  # searches stuck with no restart left
    while True:
        sat, E = ev[3], ev[2]
        i = min(range(K), key=lambda k: (not sat[k], E[k]))
        if (not sat[i], E[i]) < best_key:
            best_q, best_key = Q[i].copy(), (not sat[i], E[i])
        if sat.any():
            return Q[int(np.flatnonzero(sat)[0])].copy(), "every objective within tolerance", count + K - 1
        if budget.exhausted():
            return best_q, "budget exhausted", count + K - 1
        if stopped.all():
            return best_q, f"stalled (local minimum or limits) (best of {count + K} starts)", count + K - 1
        budget.tick()
        Q, ev, accepted = blm.step(Q, ev)
        age += 1
        unmet = ev[4]
        history.append(unmet.copy())
        old = history[-1 - stall] if len(history) > stall else np.full(K, np.inf)
        stuck = (~accepted | ((age > stall) & (unmet > stall_ratio * old))) & ~ev[3] & ~stopped
        if stuck.sum() > left - count:  # no restart left for some: they stop where they are
            over = np.flatnonzero(stuck)[int(max(left - count, 0)):]
            stopped[over], stuck[over] = True, False
        if stuck.any():  # new random starts replace the searches that are going nowhere
            count += int(stuck.sum())
            Q[stuck] = tree.random_configurations(rng, int(stuck.sum()))
            age[stuck] = 0
            ev = blm.evaluate(Q)
            history[-1] = ev[4].copy()
