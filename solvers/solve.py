# SPDX-License-Identifier: GPL-3.0-or-later
"""One entry point for every method: ``solve(tree, objectives, seed_q, method=...)``."""

import numpy as np

from . import compiled, lm
from .blas import single_thread_blas
from .methods import METHODS, method as method_record, register_method  # noqa: F401 (the public names)
from .objectives import Objective
from .problem import Budget, Problem


# Generations of a global method (memetic) without a time_limit or max_iterations: it stops when it meets every
# objective, and an unreachable goal (or one out of the limits) would never end it. Table I's arms and Table II's
# human with the look-at were solved within 4 generations (100 targets, 50 setups, compiled): 100 is ample.
GLOBAL_ITERATIONS = 100


def solve(tree, objectives, seed_q=None, method="lm", time_limit=None, max_iterations=None, rng=None,
          restarts=None, nearby=None, **options):
    """Solve IK from ``seed_q`` (default: zeros) and return a :class:`~.problem.Result`.

    Every method keeps q feasible (the tree's projection). ``time_limit`` is in seconds and
    ``max_iterations`` counts iterations over all restarts. ``restarts`` (default: on when a
    ``time_limit`` is given; True, False or a count) retries a local method that ended without success
    from random feasible seeds drawn from ``rng`` while the budget lasts, and keeps the best answer.
    ``nearby`` (radians): restart instead from the best answer so far, perturbed by normal noise of this
    size (tracking: the answer stays near the previous frame's, where random seeds would jump). A global method
    (memetic, or one registered with local=False) given neither limit runs GLOBAL_ITERATIONS iterations at most.
    Unreachable goals give the best effort found and ``success=False``, never an exception.
    """
    goals = [objectives] if isinstance(objectives, Objective) else objectives
    covered = compiled.covers(tree, goals)
    if covered:  # compiled or loaded before the clock starts, once per process
        compiled.prepare("memetic" if method == "memetic" else "core")
    record = method_record(method)
    if options:
        record.check_options(options)
    if method == "lm" and covered:
        # compiled: no BLAS to hold to one thread (limiting it costs more than such a solve); the kernel projects
        # the seed (a call less)
        if record.run is lm.run:  # (not a method registered over "lm")
            done = _compiled_lm(tree, goals, seed_q, time_limit, max_iterations, rng, restarts, nearby, options)
            if done is not None:
                return done
        return _solve(tree, objectives, seed_q, method, record, time_limit, max_iterations, rng, restarts, nearby,
                      True, **options)
    with single_thread_blas():
        return _solve(tree, objectives, seed_q, method, record, time_limit, max_iterations, rng, restarts, nearby,
                      False, **options)


def _solve(tree, objectives, seed_q, method, record, time_limit, max_iterations, rng, restarts, nearby, compiled_lm,
           **options):
    problem = Problem(tree, objectives)
    if not record.local and time_limit is None and max_iterations is None:
        max_iterations = GLOBAL_ITERATIONS  # (a global search has no end of its own short of success)
    budget = Budget(time_limit, max_iterations)
    # rng: a Generator, a seed or None, handed on as it is; drawn from (made a Generator) only when a restart
    # needs it (making one from the OS's entropy costs more than a compiled solve).
    q0 = _seed(tree, seed_q)
    if q0.shape != (tree.n,):
        raise ValueError(f"seed has {q0.shape[0]} values, the tree has {tree.n} variables")
    if not compiled_lm:  # (else the compiled LM kernel projects it)
        q0 = tree.project(q0)
    if tree.n == 0:  # nothing can move: the answer is the (empty) configuration, judged as it is
        return problem.result(q0, method, budget, "the tree has no movable joints")
    if compiled_lm:  # (covered, known: the kernel made here, not asked for again)
        problem._kernel = compiled.Kernel(tree, problem.objectives)
    run = record.run
    if not record.local:  # global methods: no restarts
        out = run(problem, q0, budget, rng=rng, **options)
        result = problem.result(out[0], method, budget, out[1])
        if len(out) > 2:
            result.elites = out[2]
        return result

    max_restarts = _max_restarts(restarts, time_limit, max_iterations)
    best_q, best_msg, best_key, count = None, "", None, 0
    seed = q0
    if max_restarts and record.multistart is not None and (options.get("starts") or 2) > 1 and not nearby:
        # With restarts allowed, LM runs several searches at once (vectorized), replacing stalled ones.
        q, message, count = record.multistart(problem, q0, budget, rng=rng, max_restarts=max_restarts, **options)
        return problem.result(q, method, budget, message, restarts=count)
    if max_restarts and record.stall_restarts:
        options.setdefault("stall", 5)  # give up a local minimum early: a new start is cheaper
    while True:
        q, message = run(problem, seed, budget, **options)
        if not max_restarts:  # one search: nothing to rank it against (a tracking frame's usual case)
            best_q, best_msg = q, message
            break
        k = problem.__dict__.get("_kernel")
        if k is not None:  # solved on the compiled path: judged there
            key = k.key(q)
        else:
            state = problem.state(q)
            key = (not problem.satisfied(state), problem.cost(state))
        if best_key is None or key < best_key:
            best_q, best_msg, best_key = q, message, key
        if not best_key[0] or count >= max_restarts or budget.exhausted():
            break
        count += 1
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        if nearby:
            if count == 1:  # (what the objectives move: a goal at a bone's head does not see the bone's own turn,
                # and a perturbation there would stay, a pop between two frames of a bake)
                seen = np.any(problem.jacobian(problem.state(best_q)) != 0.0, axis=0)
            seed = tree.project(best_q + rng.normal(0.0, float(nearby), tree.n) * tree.weights * seen)
        else:
            seed = tree.random_configurations(rng, 1)[0]
    if count:
        best_msg += f" (best of {count + 1} starts)"
    return problem.result(best_q, method, budget, best_msg, restarts=count)


def _seed(tree, seed_q):
    """The seed as a flat float array (zeros when None; a float64 vector as it is)."""
    if seed_q is None:
        return np.zeros(tree.n)
    if type(seed_q) is np.ndarray and seed_q.ndim == 1 and seed_q.dtype == np.float64:
        return seed_q
    return np.asarray(seed_q, dtype=float).reshape(-1)


def _max_restarts(restarts, time_limit, max_iterations):
    """solve's ``restarts`` as a count: None is on with a time_limit; True restarts while the budget lasts
    (10**9), at most 10 times when there is no budget; an int, at most that many."""
    if restarts is None:
        restarts = time_limit is not None
    if not isinstance(restarts, bool):
        if int(restarts) < 0:
            raise ValueError(f"restarts must be True, False, None or a count >= 0, got {restarts!r}")
        return int(restarts)
    return 0 if not restarts else 10 if time_limit is None and max_iterations is None else 10**9


def _compiled_lm(tree, goals, seed_q, time_limit, max_iterations, rng, restarts, nearby, options):
    """_solve's LM on the compiled path without its layers (Problem, the method's run, Problem.result; 1.5 of a
    Table I solve's 25 us from its answer). The same searches, options and Result (lm.compiled_search,
    Kernel.result); None where _solve's own way is needed: a goal the kernel cannot pack (an unknown link or
    joint: Problem names it), no goal, no variable, a bad seed, restarts one by one (starts=1) or near the best answer
    (``nearby``)."""
    try:
        budget = Budget(time_limit, max_iterations)  # (its clock first: packing the goals is the solve's time too)
        k = compiled.Kernel(tree, goals)
        max_restarts = _max_restarts(restarts, time_limit, max_iterations)
    except Exception:  # (Problem, Budget and _solve raise the error that names what is wrong, in their order)
        return None
    if max_restarts and (nearby or options and (options.get("starts") or 2) <= 1) or tree.n == 0 or not k._checks:
        return None
    q0 = _seed(tree, seed_q)
    if q0.shape != (tree.n,):
        return None
    q, message, count = lm.compiled_search(k, q0, budget, rng, max_restarts, **options)
    return k.result(q, "lm", budget, message, count)
