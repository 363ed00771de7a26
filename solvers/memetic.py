# SPDX-License-Identifier: GPL-3.0-or-later
"""The memetic full-body solver of paper 000 ("BioIK"), Algorithm 1, vectorized over the population.

One generation: exploitation of the elites (eq. 21-22), then offspring by rank-based selection,
recombination with momentum (eq. 17), mutation driven by extinction factors (eq. 18-19) and adoption
(eq. 20), kept feasible by the tree's projection, evaluated together (batched FK) and used for niching by
pre-selection (eq. 23); the new population is sorted, the solution updated, and the population wiped out
and re-initialised around the solution when nothing improved (eq. 24). Fitness is the RMSE of the weighted
normalised losses (eq. 14-15).

Vectorization: the paper breeds children one by one because niching removes beaten parents from the
mating pool as it goes; here children are bred in a few *waves* (one batched evaluation each) and niching
is applied between waves.
"""

import time

import numpy as np
from . import lbfgsb, lm
from .objectives.pose import CartesianGroup, LookAt, Orientation, Pose, Position
from .tree import BatchState


def default_population(n):
    """Paper §IV-A: 50-150 individuals; more variables, more individuals. The larger end for small trees
    too: the batched evaluation makes individuals cheap (measured on four arms, 150 targets each, 5 elites:
    100 individuals solved 96-99 % within 10 ms, 30 solved 78-96 %)."""
    return int(np.clip(15 * n, 50, 150))


def default_elites(n):
    """Paper §IV-A: 2-5 elites. Five: their L-BFGS-B runs are evaluated together, so more elites cost little
    and more starts find the goal sooner (measured on four arms, 150 targets each: 2 elites solved 80-85 %
    within 10 ms, 4 elites 80-97 %, 5 elites 93-99 %)."""
    return 5


class Fitness:
    """Omega (eq. 14) over a batch, and Omega^2 with its analytic gradient for one configuration."""

    def __init__(self, problem):
        self.problem, self.tree = problem, problem.tree
        probe = problem.state(np.zeros(self.tree.n))
        weights = [np.full(o.losses(probe).shape[-1], o.weight) for o in problem.objectives]
        self.weights = np.concatenate(weights)
        self.k = len(self.weights)
        # evaluate(): the Cartesian goals and look-ats together (one group), then the others one by one; weights in
        # that order (the sums of eq. 14 do not depend on it).
        grouped = [type(o) in (Position, Orientation, Pose, LookAt) for o in problem.objectives]
        self.group = CartesianGroup(self.tree, [o for o, g in zip(problem.objectives, grouped) if g]) \
            if any(grouped) else None
        self.others = [o for o, g in zip(problem.objectives, grouped) if not g]
        self.weights_grouped = np.concatenate([w for w, g in zip(weights, grouped) if g]
                                              + [w for w, g in zip(weights, grouped) if not g])

    def batch(self, Q):
        state = BatchState(self.tree, Q)
        L = np.concatenate([o.losses(state) for o in self.problem.objectives], axis=-1)
        if not np.all(np.isfinite(L)):
            L = np.nan_to_num(L, nan=1e150, posinf=1e150)  # a Distance inside its sphere: worst, not NaN
        return np.sqrt(np.sum(self.weights * L * L, axis=-1) / self.k)

    def squared_with_gradient(self, Q):
        """Omega^2 and its gradient (eq. 21 with analytic derivatives; Omega^2 has Omega's minimizers and
        no kink at zero), for one configuration (float, (n,)) or a batch ((P,), (P, n))."""
        f, g, _ = self.evaluate(Q)
        return f, g

    def evaluate(self, Q):
        """(Omega^2, its gradient, every objective met) of one configuration or of a batch (one FK)."""
        Q = np.asarray(Q, dtype=float)
        state = self.problem.state(Q) if Q.ndim == 1 else BatchState(self.tree, Q)
        terms = [o.fitness_terms(state) for o in self.others]
        if self.group is not None:
            L, G, met = self.group.terms(state)
            terms.insert(0, (L, G, met.all(axis=-1)))
        L = np.concatenate([t[0] for t in terms], axis=-1) if len(terms) > 1 else terms[0][0]
        if not np.isfinite(L).all():
            L = np.nan_to_num(L, nan=1e150, posinf=1e150)
        G = np.concatenate([t[1] for t in terms], axis=-2) if len(terms) > 1 else terms[0][1]  # (..., k, n)
        wL = self.weights_grouped * L
        f = (wL * L).sum(-1) / self.k
        g = (2.0 / self.k) * (wL[..., None, :] @ G)[..., 0, :]
        met = terms[0][2]
        for t in terms[1:]:
            met = met & t[2]
        return (float(f), g, bool(met)) if Q.ndim == 1 else (f, g, met)


def _extinction(phi):
    """Eq. 18 for a population sorted by fitness: xi_i = (phi_i + phi_min ((i - 1)/(P - 1) - 1)) / phi_max."""
    P = len(phi)
    i = np.arange(P)
    phi_max = phi[-1]
    if not np.isfinite(phi_max) or phi_max <= 0.0:
        return np.zeros(P)
    return np.clip((phi + phi[0] * (i / max(P - 1, 1) - 1.0)) / phi_max, 0.0, 1.0)


def _rank_select(rng, available, count):
    """Rank-based selection among the available (sorted) individuals: weight P - rank."""
    w = (len(available) - np.arange(len(available))).astype(float)
    return available[rng.choice(len(available), size=count, p=w / w.sum())]


def run(problem, q0, budget, rng=None, population=None, elites=None, exploit=None, exploit_iterations=None,
        waves=2, timings=None, **_):
    """Algorithm 1. ``max_iterations`` of the budget counts generations. Returns (q, message, elites).

    ``exploit``: "lbfgsb" (paper 000's) or "lm"; by default LM (10 iterations an elite) where the compiled core
    serves and L-BFGS-B (40) on numpy, each path's best as measured (benchmarks/table1, table2: compiled, LM's
    exploitation solved the human's wrists + feet within 10 ms 87 % against L-BFGS-B's 8 %; on numpy, L-BFGS-B
    solves the arms 93-99 % against LM's 81-94 %).

    ``timings``: a dict that receives the seconds spent in exploitation and in breeding/evaluating offspring
    (and on the compiled path "compiled": True and the exploitation used).
    """
    clock = {} if timings is None else timings
    clock.setdefault("exploitation", 0.0)
    clock.setdefault("offspring", 0.0)
    tree = problem.tree
    rng = np.random.default_rng(rng)
    n = tree.n
    P = int(population or default_population(n))
    E = int(min(elites or default_elites(n), P - 1))
    if P < 3:
        raise ValueError("memetic: the population needs at least 3 individuals")
    from . import compiled

    k = compiled.kernel(problem) if not compiled.memetic_compiling() else None  # (its part compiles last)
    if exploit is None:
        exploit = "lm" if k is not None else "lbfgsb"
    if exploit not in ("lm", "lbfgsb"):
        raise ValueError(f"memetic: exploit must be 'lm' or 'lbfgsb', not {exploit!r}")
    if k is not None:  # the same algorithm, its generations compiled
        iters = int(exploit_iterations or (10 if exploit == "lm" else 40))
        return compiled.run_memetic(k, problem, tree.project(q0), budget, rng, P, E, exploit, iters, int(waves), clock)
    iters = int(exploit_iterations or (3 if exploit == "lm" else 40))
    return _generations(problem, q0, budget, rng, P, E, exploit, iters, waves, clock)


def _generations(problem, q0, budget, rng, P, E, exploit, iters, waves, clock):
    """Algorithm 1 on numpy (run): (q, message, elites), P individuals, E elites exploited by ``iters`` iterations
    of ``exploit`` each generation, offspring bred in ``waves``."""
    tree, n = problem.tree, problem.tree.n
    span = tree.span()
    fit = Fitness(problem)

    blm = lm.BatchLM(problem) if exploit == "lm" else None

    def initialise(first):  # eq. 16: the population ranked
        X = np.vstack([first[None], tree.random_configurations(rng, P - 1)])
        return _ranked(X, np.zeros((P, n)), fit.batch(X))

    X, G, phi = initialise(tree.project(q0))
    best_q, best_phi = X[0].copy(), phi[0]
    message = "budget exhausted"
    while True:
        if problem.satisfied(problem.state(best_q)):
            message = "every objective within tolerance"
            break
        if budget.exhausted():
            break
        budget.tick()
        xi = _extinction(phi)
        pool = np.ones(P, dtype=bool)  # the mating pool, in rank order
        # Exploitation of the elites (eq. 21-22).
        elite_improved = False
        t_exploit = time.perf_counter()
        X_new, solved = _exploited(X[:E].copy(), blm, fit, tree, budget, iters)
        phi_new = fit.batch(X_new)
        better = phi_new < phi[:E]
        if better.any():
            elite_improved = True
            G[:E][better] = rng.random((int(better.sum()), n)) * G[:E][better] + (X_new - X[:E])[better]
            X[:E][better], phi[:E][better] = X_new[better], phi_new[better]
        clock["exploitation"] += time.perf_counter() - t_exploit
        if solved is not None:  # an elite meets every objective: it is the answer
            candidate = X_new[solved]
            if problem.satisfied(problem.state(candidate)):
                best_q, best_phi = candidate.copy(), phi_new[solved]
                message = "every objective within tolerance"
                break
        # Offspring, in waves (eq. 17, 19, 20, 23).
        t_offspring = time.perf_counter()
        X_off, G_off, phi_off = [], [], []
        for wave in np.array_split(np.arange(P - E), max(1, min(waves, P - E))):
            m = len(wave)
            if budget.past_deadline():  # keep the unbred rest of the population as it was
                X_off.append(X[E:][wave]), G_off.append(G[E:][wave]), phi_off.append(phi[E:][wave])
                continue
            available = np.flatnonzero(pool)
            if len(available) == 0:
                Xw = tree.random_configurations(rng, m)
                X_off.append(Xw), G_off.append(np.zeros((m, n))), phi_off.append(fit.batch(Xw))
                continue
            Xw, Gw, p1, p2 = _offspring(rng, X, G, xi, available, m, span, tree)
            phi_w = fit.batch(Xw)
            pool[p1[phi_w < phi[p1]]] = False  # eq. 23: niching by pre-selection
            pool[p2[phi_w < phi[p2]]] = False
            X_off.append(Xw), G_off.append(Gw), phi_off.append(phi_w)
        clock["offspring"] += time.perf_counter() - t_offspring
        X, G, phi = _ranked(np.vstack([X[:E]] + X_off), np.vstack([G[:E]] + G_off), np.concatenate([phi[:E]] + phi_off))
        improved = phi[0] < best_phi
        if improved:
            best_q, best_phi = X[0].copy(), phi[0]
        if not improved and not elite_improved:  # eq. 24: wipe out, keep the solution
            X, G, phi = initialise(best_q)
    return best_q, message, _distinct_elites(X, phi, E, best_q, best_phi)


def _ranked(X, G, phi):
    """The population (individuals X, their genes G, fitness phi) in rank order, best first (stable)."""
    order = np.argsort(phi, kind="stable")
    return X[order], G[order], phi[order]


def _exploited(X_elite, blm, fit, tree, budget, iters):
    """Eq. 22's x' for every elite, all elites at once: L-BFGS-B runs in lockstep with their evaluations batched
    (the paper gives each elite a thread), or with ``blm`` (a measured alternative, see benchmarks) LM iterations
    on the residuals. Also returns the index of an elite that met every objective (the solve is then over), or
    None."""
    if blm is not None:
        ev = blm.evaluate(X_elite)
        for _ in range(iters):
            if budget.past_deadline() or ev[3].any():
                break
            X_elite, ev, _ = blm.step(X_elite, ev)
        return X_elite, (int(np.flatnonzero(ev[3])[0]) if ev[3].any() else None)
    X_out, _, done = lbfgsb.minimize_batch(fit.evaluate, X_elite, tree._clip_lower, tree._clip_upper, iters,
                                           deadline=budget.past_deadline)
    return tree.project(X_out), done


def _offspring(rng, X, G, xi, available, m, span, tree):
    """(x (m, n), their genes g (m, n), parents p1 (m,), p2 (m,)): ``m`` children of parents ranked-selected
    from the mating pool (``available``), each made in the order Algorithm 1 draws them: crossed over between its
    two parents with their inherited moves (eq. 17: I_U(x^P1, x^P2) + g), mutated at the parents' extinction
    rate (eq. 19), adopting from their average and a prototype (eq. 20), then projected onto the joints' limits
    (wrap, clip, swing ellipse), the projection counted in its genes."""
    n = X.shape[1]
    p1, p2 = _rank_select(rng, available, m), _rank_select(rng, available, m)
    proto = _rank_select(rng, available, m)
    x = X[p1] + rng.random((m, n)) * (X[p2] - X[p1])
    g = rng.random((m, n)) * G[p1] + rng.random((m, n)) * G[p2]
    x = x + g
    rate = (xi[p1] * (n - 1) + 1.0) / n
    mutate = rng.random((m, n)) < rate[:, None]
    delta = mutate * rng.uniform(-1.0, 1.0, (m, n)) * (0.5 * (xi[p1] + xi[p2]))[:, None] * span
    x, g = x + delta, g + delta
    mean = 0.5 * (X[p1] + X[p2])
    a = rng.random((m, n))
    step = (1.0 - a) * rng.random((m, n)) * (mean - x) + a * rng.random((m, n)) * (X[proto] - x)
    x, g = x + step, g + step
    feasible = tree.project(x)
    return feasible, g + (feasible - x), p1, p2


def _distinct_elites(X, phi, E, best_q, best_phi, tol=1e-4):
    out = [(best_q.copy(), float(best_phi))]
    for x, f in zip(X, phi):
        if len(out) >= max(E, 1):
            break
        if all(np.max(np.abs(x - y)) > tol for y, _ in out):
            out.append((x.copy(), float(f)))
    return out
