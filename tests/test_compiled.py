# SPDX-License-Identifier: GPL-3.0-or-later
"""The compiled path (numba) against the numpy reference: the same FK, residuals and Jacobians (1e-9) on the
robots of data/urdf and on random trees of every joint kind it covers; solutions as good; the fallback to numpy
where it does not apply or is switched off; the compile cache in a writable folder."""

import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import helpers
from fullbody_ik.solvers import (Displacement, Distance, JointValue, LookAt, Orientation, Pose, Position, Tree, compiled,
                                 solve)
from fullbody_ik.solvers.joints import Joint
from fullbody_ik.solvers.problem import Problem, Result
from fullbody_ik.solvers.rotations import exp_so3

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed")

URDF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "urdf")
ROBOTS = [("kuka_iiwa", "lbr_iiwa_link_0", "lbr_iiwa_link_7"), ("franka_panda", "panda_link0", "panda_link8"),
          ("ur5", "base_link", "ee_link"), ("pr2", "torso_lift_link", "r_wrist_roll_link"),
          ("baxter", "right_arm_mount", "right_wrist"), ("kuka_kr120r2500pro", "base_link", "tool0")]


def _py(function):
    """A compiled inner function called from here: its twin that Python can call (the kernels' inner functions are
    compiled without Python's wrappers)."""
    return compiled.python_callable(function)


def _robot(name, base, tip):
    return Tree.from_urdf(os.path.join(URDF, f"{name}.urdf"), base_link=base, tip_links=[tip])


def random_tree(rng, links=12):
    """A branching tree of revolute, continuous, prismatic and fixed joints with random frames and axes."""
    joints = []
    for i in range(1, links + 1):
        T = np.eye(4)
        T[:3, :3] = exp_so3(rng.normal(size=3))
        T[:3, 3] = rng.normal(scale=0.3, size=3)
        kind = ["revolute", "continuous", "prismatic", "fixed"][rng.integers(4)]
        lo = -rng.uniform(0.2, 3.0)
        joints.append(Joint(f"j{i}", kind, f"l{int(rng.integers(i))}", f"l{i}", T, tuple(rng.normal(size=3)),
                            lo if kind != "continuous" else -np.inf, -lo if kind != "continuous" else np.inf))
    return Tree(joints, root="l0")


def _compare(tree, goals, q):
    problem = Problem(tree, goals)
    k = compiled.kernel(problem)
    assert k is not None
    T, G = k.tree_arrays(), k.goal_arrays()
    W = _py(compiled.fk)(q, T)
    assert np.abs(W - tree.fk_batch(q[None])[0]).max() < 1e-9
    m = _py(compiled.size)(G)
    r, J, errors = np.empty(m), np.empty((m, tree.n)), np.zeros((len(goals), 2))
    ws = _py(compiled.workspace)(tree.n, len(tree.link_names), G)
    met, _ = _py(compiled.evaluate)(q, T, G, ws, r, J, True, errors)
    state = problem.state(q)
    # each row's one variable (Displacement, JointValue; -1 for the others' rows: the dual step's dense rows)
    rows = [np.full(o.size, -1) if not isinstance(o, (Displacement, JointValue)) else
            np.array([tree.var(o.joint)]) if isinstance(o, JointValue) else o._indices(problem)
            for o in problem.objectives]
    assert np.array_equal(ws[5], np.concatenate(rows))
    assert np.abs(r - problem.residual(state)).max() < 1e-9
    assert np.abs(J - problem.jacobian(state)).max() < 1e-9
    assert met == problem.satisfied(state)
    # The Result judged on the compiled path is the numpy one: errors, met, details, cost.
    from fullbody_ik.solvers.problem import Budget

    fast, ref = k.result(q, "lm", Budget(), "x"), Problem(tree, goals).result(q, "lm", Budget(), "x")
    assert np.allclose(fast.errors, ref.errors, atol=1e-12) and fast.satisfied == ref.satisfied
    assert abs(fast.cost - ref.cost) < 1e-9 * max(1.0, ref.cost) and fast.success == ref.success
    assert all(d1.keys() == d2.keys() and np.allclose(list(d1.values()), list(d2.values()), atol=1e-12)
               for d1, d2 in zip(fast.details, ref.details))


def _bone_trees(seed, count):
    """Random trees of every joint kind the compiled path covers: scalar joints, Blender bones with random locks,
    limits, stiffness and IK stretch (balls, swing and twist, elbows, one-axis hinges), half of them under a free
    root."""
    rng = np.random.default_rng(seed)
    trees = []
    while len(trees) < count:
        tree = helpers.random_tree(rng, n_links=int(rng.integers(3, 12)), free_root=bool(rng.random() < 0.5))
        if tree.n:
            trees.append(tree)
    return rng, trees


def _every_goal(tree, rng):
    links = [tree.link_names[i] for i in rng.choice(len(tree.link_names), 3)]
    return [Position(links[0], rng.normal(size=3), offset=rng.normal(size=3)),
            Orientation(links[1], exp_so3(rng.normal(size=3)), weight=0.5), Pose(links[2], np.eye(4), weight=3.0),
            LookAt(links[0], rng.normal(size=3), axis=(1.0, 0.0, 0.0)), Displacement(rng.normal(size=tree.n), 0.01),
            Displacement(rng.normal(size=tree.n), 0.2, joints=tree.joint_names[::-2]),
            JointValue(tree.joint_names[0], 0.3, weight=0.2),
            Distance(links[0], 5.0, point=rng.normal(size=3), other_link=links[1], weight=0.4),  # too close: active
            Distance(links[2], 5.0, point=rng.normal(size=3), other_point=rng.normal(size=3)),
            Distance(links[1], 0.01, other_link=links[2])]  # far enough (as a rule): zero


def test_bones_and_free_roots_match_numpy():
    """FK, residuals, Jacobians, the projection onto Blender's limits (clips, wraps, the swing ellipse, radial and
    nearest) and the judged Result, on random bone trees with every objective covered, at feasible and
    infeasible configurations."""
    rng, trees = _bone_trees(1, 30)
    kinds = set()
    for tree in trees:
        kinds |= {type(m).__name__ + ("-elbow" if getattr(m, "elbow", False) else "") for m in tree.models}
        for q in list(tree.random_configurations(rng, 2)) + [3.0 * rng.normal(size=tree.n)]:
            k = compiled.kernel(Problem(tree, _every_goal(tree, rng)))
            assert np.abs(_py(compiled.project)(q, k.tree_arrays()) - tree.project(q[None])[0]).max() < 1e-12
            _compare(tree, _every_goal(tree, rng), tree.project(q[None])[0])
        for m in tree.models:
            if hasattr(m, "nearest"):
                m.nearest = True
        tree._compiled_arrays = None
        q = 3.0 * rng.normal(size=tree.n)
        k = compiled.kernel(Problem(tree, _every_goal(tree, rng)))
        assert np.abs(_py(compiled.project)(q, k.tree_arrays()) - tree.project(q[None])[0]).max() < 1e-12
    assert {"ScalarModel", "BallModel", "FreeModel", "SwingTwistModel", "SwingTwistModel-elbow", "StretchModel"} <= kinds


def test_bones_lm_takes_the_numpy_steps():
    """The same iterations as lm.run on bone trees: after 1, 3 and 10 iterations the same configuration (1e-9):
    the held bounds, the swings sliding along their limit ellipse, the shorter steps and the stopping rules (the
    stall rule too), with a Distance hinge among the goals; the damping from its default start and from paper
    001's (damping_start=1), which takes other steps."""
    rng, trees = _bone_trees(2, 25)
    slid, other = 0, 0
    for tree in trees:
        qt, q0 = tree.random_configurations(rng, 2)
        tip, mid = tree.link_names[-1], tree.link_names[len(tree.link_names) // 2]
        goals = [Pose(tip, tree.fk(qt)[tip]), Position(mid, tree.fk(qt)[mid][:3, 3]), Displacement(q0, weight=1e-4),
                 Distance(tip, 0.5, other_point=tree.fk(qt)[mid][:3, 3])]
        for its, stall, ratio, start in ((1, None, None, None), (3, None, None, None), (10, None, None, None),
                                         (10, 3, None, None), (10, 2, 0.8, None), (3, None, None, 1.0)):
            rule = {} if ratio is None else {"stall_ratio": ratio}  # (the restarts' rule: 20 % over two)
            rule |= {} if start is None else {"damping_start": start}
            fast = solve(tree, goals, q0, "lm", max_iterations=its, restarts=False, stall=stall, **rule)
            compiled.set_enabled(False)
            try:
                ref = solve(tree, goals, q0, "lm", max_iterations=its, restarts=False, stall=stall, **rule)
            finally:
                compiled.set_enabled(True)
            assert np.abs(fast.q - ref.q).max() < 1e-9 and fast.message == ref.message
            assert fast.iterations == ref.iterations and fast.success == ref.success
        other += np.abs(fast.q - solve(tree, goals, q0, "lm", max_iterations=3, restarts=False).q).max() > 1e-6
        slid += bool(tree.swing_limits(fast.q[None]))
    assert slid  # some searches ended on a swing limit
    assert other > len(trees) // 2  # the damping's start is not ignored
    for enabled in (True, False):  # not a positive number: refused on both paths (compiled divided by zero)
        compiled.set_enabled(enabled)
        try:
            for bad in (0.0, -1.0, float("nan")):
                for restarts in (False, True):
                    with pytest.raises(ValueError, match="damping_start must be a positive number"):
                        solve(tree, goals, q0, "lm", max_iterations=3, restarts=restarts, damping_start=bad)
        finally:
            compiled.set_enabled(True)


def test_the_dual_step_is_the_normal_equations_step():
    """_dual_step (an m_d x m_d system for the dense rows, Woodbury) gives _damped_step's dq (n x n) on bone trees,
    with one-variable rows, held variables and swings sliding along their limits, damping from 1e-9 to 1; so does
    _dual_resolve, its system updated from fewer held variables and sliding swings."""
    rng, trees = _bone_trees(11, 40)
    slid = dense_compared = grown = 0
    for tree in trees:
        T = compiled.Kernel(tree, [Position(tree.link_names[-1], np.zeros(3))]).tree_arrays()
        cols, n, L = T[5], tree.n, len(tree.link_names)
        swings = [i for i in range(L) if cols[i, 0] >= 0 and cols[i, 2] >= 0]
        for _ in range(5):
            m = int(rng.integers(1, 2 * n + 3))
            row_var = np.where(rng.random(m) < 0.4, rng.integers(0, n, m), -1).astype(np.int64)
            if _ == 0:  # one-variable rows alone: no dense row, a 0 x 0 system
                row_var = rng.integers(0, n, m).astype(np.int64)
            J, r, D = rng.normal(size=(m, n)), rng.normal(size=m), rng.uniform(0.1, 1.0, n)
            held = rng.random(n) < 0.2
            blocks, sliding = np.tile(np.eye(2), (L, 1, 1)), np.zeros(L, dtype=bool)
            for i in swings:
                if rng.random() < 0.5:
                    nu = rng.normal(size=2)
                    nu /= np.linalg.norm(nu)
                    blocks[i] -= np.outer(nu, nu)
                    sliding[i] = True
            lam = 10.0 ** rng.uniform(-9, 0)
            N, grad = np.empty((n, n)), np.empty(n)
            _py(compiled._normal_equations)(J, r, D, row_var, N, grad)
            primal = np.empty(n)
            _py(compiled._damped_step)(N, grad, lam, D, held, cols, blocks, sliding, sliding.any(), primal,
                                       np.empty((n, n)), np.empty(n), np.empty((n, n)), np.empty(n))
            dw = _py(compiled._dual_workspace)(row_var, n, L, True)
            _py(compiled._sparse_rows)(J, r, D, row_var, dw[1][0], dw[1][1])
            dual = np.empty(n)
            _py(compiled._dual_step)(J, r, lam, D, held, cols, blocks, sliding, sliding.any(), dual, dw)
            # and grown to it (_dual_resolve): from about half of the held variables and sliding swings, the rest
            # added to the system a unit at a time, as _constrained_step grows its active set
            held0, sliding0 = held & (rng.random(n) < 0.5), sliding & (rng.random(L) < 0.5)
            _py(compiled._dual_step)(J, r, lam, D, held0, cols, blocks, sliding0, sliding0.any(), np.empty(n), dw)
            resolved, before = np.empty(n), np.concatenate([held0, sliding0])
            _py(compiled._dual_resolve)(lam, J, D, held, before[:n], cols, blocks, sliding, before[n:], resolved, dw)
            grown += (held0 != held).any() or (sliding0 != sliding).any()
            # the same system solved two ways: equal to what the condition numbers of both systems allow
            P, C = np.eye(n), np.zeros(n)
            for i in np.flatnonzero(sliding):
                P[np.ix_(cols[i, [0, 2]], cols[i, [0, 2]])] = blocks[i]
            np.add.at(C, row_var[row_var >= 0], (J[row_var >= 0, row_var[row_var >= 0]] * D[row_var[row_var >= 0]]) ** 2)
            Z = np.diag(~held).astype(float)
            A = (J[row_var < 0] * D) @ Z @ P
            Lam = P @ Z @ np.diag(C) @ Z @ P + lam * np.eye(n)
            cond = np.linalg.cond(A.T @ A + Lam)
            if len(A):
                cond = max(cond, np.linalg.cond(np.eye(len(A)) + A @ np.linalg.solve(Lam, A.T)))
            for x in (dual, resolved):
                assert np.abs(x - primal).max() <= max(1e-11, 1e-15 * cond) * max(1.0, np.abs(primal).max())
                assert not x[held].any()
            slid += sliding.any()
            dense_compared += 0 < len(dw[0]) < n
    assert slid > 20 and dense_compared > 20 and grown > 50
    use_dual = _py(compiled._use_dual)
    assert not use_dual(6, 7) and use_dual(21, 96)  # Table I's arm: n x n; the tracked human: dual


@pytest.mark.parametrize("robot", ROBOTS, ids=[r[0] for r in ROBOTS])
def test_fk_residuals_and_jacobians_match_numpy_on_the_robots(robot):
    tree = _robot(*robot)
    rng = np.random.default_rng(3)
    tip, middle = robot[2], tree.link_names[len(tree.link_names) // 2]
    for q in tree.random_configurations(rng, 10):
        T = tree.fk_batch(tree.random_configurations(rng, 1))[0, tree.link(tip)]
        goals = [Pose(tip, T, offset=(0.0, 0.05, 0.1)), Position(middle, rng.normal(size=3), weight=0.3),
                 Orientation(tip, exp_so3(rng.normal(size=3)), weight=2.0),
                 LookAt(middle, rng.normal(size=3), axis=rng.normal(size=3), weight=0.7)]
        _compare(tree, goals, q)


def test_fk_residuals_and_jacobians_match_numpy_on_random_trees():
    rng = np.random.default_rng(7)
    for _ in range(20):
        tree = random_tree(rng)
        for q in tree.random_configurations(rng, 3):
            links = rng.choice(len(tree.link_names), 3)
            goals = [Position(tree.link_names[links[0]], rng.normal(size=3), offset=rng.normal(size=3)),
                     Orientation(tree.link_names[links[1]], exp_so3(rng.normal(size=3)), weight=0.5),
                     Pose(tree.link_names[links[2]], np.eye(4), weight=3.0),
                     LookAt(tree.link_names[links[0]], rng.normal(size=3), axis=(1.0, 0.0, 0.0))]
            _compare(tree, goals, q)
    # A rotation of the goal near pi takes log's symmetric-part branch.
    tree = random_tree(rng)
    q = np.zeros(tree.n)
    R = tree.fk_batch(q[None])[0, -1, :3, :3] @ exp_so3(np.array([0.0, 0.0, np.pi - 1e-4]))
    _compare(tree, [Orientation(tree.link_names[-1], R)], q)


def _solve_all(tree, tip, targets, seeds, enabled, **kw):
    compiled.set_enabled(enabled)
    try:
        return [solve(tree, [Pose(tip, T)], q0, "lm", **kw) for T, q0 in zip(targets, seeds)]
    finally:
        compiled.set_enabled(True)


@pytest.mark.parametrize("robot", ROBOTS[:3], ids=[r[0] for r in ROBOTS[:3]])
def test_the_compiled_lm_solves_as_well_as_numpy(robot):
    """The same targets and seeds, the same iteration budget: as many solved (one search, and with restarts),
    each success judged by the numpy objectives."""
    tree = _robot(*robot)
    rng = np.random.default_rng(11)
    tip = robot[2]
    targets = tree.fk_batch(tree.random_configurations(rng, 40))[:, tree.link(tip)]
    seeds = tree.random_configurations(rng, 40)
    for kw in ({"max_iterations": 100, "restarts": False}, {"max_iterations": 600, "restarts": True}):
        fast, ref = _solve_all(tree, tip, targets, seeds, True, **kw), _solve_all(tree, tip, targets, seeds, False, **kw)
        solved_fast, solved_ref = sum(r.success for r in fast), sum(r.success for r in ref)
        assert solved_fast >= solved_ref - 1 and solved_fast >= (0.25 if not kw["restarts"] else 0.95) * 40, \
            (kw, solved_fast, solved_ref)
        for r, T in zip(fast, targets):
            assert r.method == "lm" and np.all(tree.project(r.q) == r.q)  # feasible
            if r.success:
                W = tree.fk_batch(r.q[None])[0, tree.link(tip)]
                assert np.linalg.norm(W[:3, 3] - T[:3, 3]) <= 1e-4
    # With limits that bind: the arm's joints held to a tenth of their range still end inside it.
    narrow = _robot(*robot)
    mid = 0.5 * (narrow.lower + narrow.upper)
    narrow._clip_lower = narrow.lower = mid - 0.05 * (narrow.upper - narrow.lower)
    narrow._clip_upper = narrow.upper = mid + 0.05 * (narrow.upper - narrow.lower)
    for r in _solve_all(narrow, tip, targets[:10], [mid] * 10, True, max_iterations=100, restarts=False):
        assert np.all(r.q >= narrow.lower - 1e-12) and np.all(r.q <= narrow.upper + 1e-12)


def test_solve_goes_straight_to_the_compiled_search_with_the_same_outcome(iiwa, monkeypatch):
    """solve's short way to the compiled LM (no Problem, no method record) answers as its general way does: the
    same configuration, message, iterations, restarts and judgement, with restarts or one search, under an
    iteration budget or none; options reach the search (a tighter stall changes the outcome)."""
    import importlib

    module = importlib.import_module("fullbody_ik.solvers.solve")
    rng = np.random.default_rng(5)
    tip = "lbr_iiwa_link_7"
    targets = iiwa.fk_batch(iiwa.random_configurations(rng, 12))[:, iiwa.link(tip)]
    seeds = iiwa.random_configurations(rng, 12)
    calls = []
    short = module._compiled_lm
    monkeypatch.setattr(module, "_compiled_lm", lambda *a: calls.append(1) or short(*a))
    cases = ({"max_iterations": 40, "restarts": True}, {"max_iterations": 6, "restarts": False},
             {"restarts": 3}, {"max_iterations": 40, "restarts": True, "stall": 1, "backtracks": 2})
    for kw in cases:
        for i, (T, q0) in enumerate(zip(targets, seeds)):
            goals = [Pose(tip, T)] if i % 2 else [Position(tip, T[:3, 3]), Orientation(tip, T[:3, :3])]
            fast = solve(iiwa, goals, q0, rng=i, **kw)
            monkeypatch.setattr(module, "_compiled_lm", lambda *a: None)
            try:
                ref = solve(iiwa, goals, q0, rng=i, **kw)
            finally:
                monkeypatch.setattr(module, "_compiled_lm", lambda *a: calls.append(1) or short(*a))
            assert np.array_equal(fast.q, ref.q) and fast.message == ref.message, (kw, i)
            assert (fast.iterations, fast.restarts, fast.success) == (ref.iterations, ref.restarts, ref.success)
            assert np.array_equal(fast.errors, ref.errors) and fast.satisfied == ref.satisfied
            assert fast.details == ref.details and fast.cost == ref.cost
            if i < 2:  # (the short way's Result makes its lists when first read: it reads, copies and pickles as one)
                mine, theirs = dataclasses.asdict(fast), dataclasses.asdict(ref)
                assert isinstance(fast, Result) and mine.keys() == theirs.keys() and mine["elites"] == [] == ref.elites
                assert mine["details"] == theirs["details"] and mine["satisfied"] == theirs["satisfied"]
                changed = dataclasses.replace(fast, message="changed")
                assert changed.message == "changed" and changed.details == ref.details and changed.success == ref.success
                back = pickle.loads(pickle.dumps(fast))
                assert np.array_equal(back.q, fast.q) and np.array_equal(back.errors, ref.errors)
                assert (back.details, back.success, back.message) == (ref.details, ref.success, ref.message)
    assert len(calls) == len(cases) * len(targets)
    # a goal on a link the tree does not have: the general way names it
    with pytest.raises(ValueError, match="no link named 'hand'"):
        solve(iiwa, [Position("hand", [0, 0, 1])], None, time_limit=0.01)


def test_the_short_ways_clock_counts_packing_the_goals(iiwa, monkeypatch):
    """The time a solve reports (and its time_limit counts) begins before the goals are packed for the kernel, not
    after; a bad time limit or count of restarts is refused as the general way refuses it, after a goal on an
    unknown link is named."""
    import importlib
    import time

    module = importlib.import_module("fullbody_ik.solvers.solve")
    tip = "lbr_iiwa_link_7"
    goal = Pose(tip, iiwa.fk(np.zeros(iiwa.n))[tip])
    solve(iiwa, goal, np.zeros(iiwa.n), time_limit=0.01)  # (compiled before the clock)
    Kernel = compiled.Kernel

    class Slow(Kernel):
        def __init__(self, *args):
            time.sleep(0.02)
            super().__init__(*args)

    monkeypatch.setattr(compiled, "Kernel", Slow)
    calls = []
    short = module._compiled_lm
    monkeypatch.setattr(module, "_compiled_lm", lambda *a: calls.append(1) or short(*a))
    res = solve(iiwa, goal, np.zeros(iiwa.n), time_limit=0.5)
    assert calls and res.success and res.elapsed >= 0.02, res.elapsed
    with pytest.raises(ValueError, match="time_limit must be positive"):
        solve(iiwa, goal, np.zeros(iiwa.n), time_limit=-1.0)
    with pytest.raises(ValueError, match="no link named 'hand'"):
        solve(iiwa, [Position("hand", [0, 0, 1])], None, time_limit=-1.0)
    with pytest.raises(ValueError, match="no link named 'hand'"):  # (a bad count of restarts is told after it)
        solve(iiwa, [Position("hand", [0, 0, 1])], None, restarts=-1)
    with pytest.raises(ValueError, match="restarts must be"):
        solve(iiwa, goal, None, restarts=-1)


def test_the_compiled_searchs_edges_keep_their_meaning(iiwa):
    """A single search whose cost is not finite still says why it ended (not "budget exhausted" with iterations
    left); run_multistart asked for no restart keeps its own rule (a stalled search stops: 20 % over two
    iterations); a negative count of restarts is refused, not taken as no limit; a method registered over "lm" is
    the one solve runs."""
    from fullbody_ik.solvers import lm, methods
    from fullbody_ik.solvers.problem import Budget

    tip = "lbr_iiwa_link_7"
    far = solve(iiwa, [Position(tip, [3.0, 0.0, 0.5], weight=1e308)], None, restarts=False)
    assert not far.success and far.iterations < 200 and far.message != compiled.MESSAGES[1], far
    problem = Problem(iiwa, [Position(tip, [3.0, 0.0, 0.5])])
    budget = Budget(None, 200)
    _, message, count = lm.run_multistart(problem, np.zeros(7), budget, rng=0, max_restarts=0)
    assert message.startswith("stalled") and count == 0 and budget.iterations < 20, (message, budget.iterations)
    with pytest.raises(ValueError, match="restarts must be"):
        solve(iiwa, [Position(tip, [0.3, 0.0, 0.5])], None, restarts=-1, max_iterations=50)
    builtin = methods.METHODS["lm"]
    try:
        methods.register_method("lm", lambda problem, q0, budget, **_: (q0, "custom run"), local=True)
        assert solve(iiwa, [Position(tip, [0.3, 0.0, 0.5])], None, max_iterations=5).message.startswith("custom run")
    finally:
        methods.METHODS["lm"] = builtin


def test_what_it_does_not_cover_runs_on_numpy():
    from fullbody_ik.solvers import BoneJoint

    tree = _robot(*ROBOTS[0])
    T = tree.fk_batch(np.zeros((1, tree.n)))[0, -1]
    assert compiled.kernel(Problem(tree, [Pose(ROBOTS[0][2], T), Displacement(np.zeros(tree.n))])) is not None
    assert compiled.kernel(Problem(tree, [Pose(ROBOTS[0][2], T), Distance(ROBOTS[0][2], 0.5)])) is not None
    from fullbody_ik.solvers.objectives.joint import JointFunction

    assert compiled.kernel(Problem(tree, [JointFunction(tree.joint_names[0], lambda q: 0.0)])) is None
    bones = Tree([BoneJoint("b", "root", "tip", np.eye(4))])
    assert compiled.kernel(Problem(bones, [Position("tip", (0, 1, 0))])) is not None
    stretching = Tree([BoneJoint("b", "root", "tip", np.eye(4), stretch=0.5)])
    assert compiled.kernel(Problem(stretching, [Position("tip", (0, 1, 0))])) is not None
    assert compiled.status().startswith("compiled")  # what the sidebar shows
    compiled.set_enabled(False)
    try:
        assert "switched off" in compiled.status()
        assert compiled.kernel(Problem(tree, [Pose(ROBOTS[0][2], T)])) is None
        assert solve(tree, [Pose(ROBOTS[0][2], T)], np.full(tree.n, 0.1), "lm", max_iterations=200).success
    finally:
        compiled.set_enabled(True)
    env = dict(os.environ, FULLBODY_IK_NUMPY="1")
    out = subprocess.run([sys.executable, "-c", "from fullbody_ik.solvers import compiled; print(compiled.available())"],
                         env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_a_kernel_is_compiled_once_per_argument_type_not_per_constant_passed():
    """numba types a constant argument by its value: evaluate(..., True, ...) and (..., False, ...) compiled evaluate
    and all it calls twice, some 5 s of a first compile. compiled.njit compiles a kernel once per type."""
    def scaled(x, flag, k):
        return x * k if flag else -x

    inner = compiled.njit()(scaled)

    def outer(x, flag):
        return inner(x, True, 2) + inner(x, False, 3) + inner(x, flag, 4) + inner(x, x > 0.0, 5)

    assert compiled.njit(entry=True)(outer)(1.5, True) == 1.5 * 2 - 1.5 + 1.5 * 4 + 1.5 * 5
    assert len(inner.overloads) == 1, list(inner.overloads)


def test_a_lone_pose_is_packed_as_the_general_loop_packs_it(iiwa):
    """Kernel packs a list holding one Pose in one step, compiled (_pack_pose, once warm has it: a Table I solve's):
    the same goal array, references and checks as its loop over goals makes (given a tuple, which takes the loop),
    with an offset, a weight and tolerances of its own, for a Pose made from a 4x4 and one aimed at a new target
    as a bake aims its goals."""
    from fullbody_ik.rig.goals import aimed

    compiled.prepare("core")
    assert compiled._pose_packing
    tree, tip = iiwa, "lbr_iiwa_link_7"
    target = tree.fk(np.full(tree.n, 0.3))[tip]
    pose = Pose(tip, target, offset=(0.01, 0.02, 0.03), weight=2.0, tolerance=2e-4, angular_tolerance=3e-3)
    moved = tree.fk(np.full(tree.n, -0.2))[tip]
    again = aimed(pose, position=aimed(pose.position, target=moved[:3, 3].copy()),
                  orientation=aimed(pose.orientation, target=np.ascontiguousarray(moved[:3, :3])))
    for goal in (pose, again):
        short, loop = compiled.Kernel(tree, [goal]), compiled.Kernel(tree, (goal,))
        assert short._checks == loop._checks
        for a, b in zip(short._gp, loop._gp):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert not np.array_equal(compiled.Kernel(tree, [pose])._gp[0], compiled.Kernel(tree, [again])._gp[0])


def test_a_continuity_goals_reference_is_packed_in_the_kernels_own_type(iiwa):
    """A lone Displacement over every variable is packed without a loop: from a copy, so that a read-only reference
    (numba's type of its own: a compile of the kernel anew, 25 s, mid-bake) or one the caller changes after the solve
    reaches the kernel as the others do."""
    tree, tip = iiwa, "lbr_iiwa_link_7"
    q = np.full(tree.n, 0.3)
    target = tree.fk(q)[tip]
    from numba import typeof

    writable = compiled.Kernel(tree, [Pose(tip, target), Displacement(np.zeros(tree.n), weight=0.1)])
    reference = np.zeros(tree.n)
    reference.flags.writeable = False
    goals = [Pose(tip, target), Displacement(reference, weight=0.1)]
    res = solve(tree, goals, q, time_limit=0.05, restarts=False)
    k = compiled.Kernel(tree, goals)
    assert typeof(k.arrays()[1]) == typeof(writable.arrays()[1]), "a read-only reference is a type of its own"
    refs = k.arrays()[1][1]
    assert refs.flags.writeable and refs.flags.c_contiguous and refs.base is not reference
    assert res.success and np.allclose(refs[0], reference)


def test_only_the_entry_points_are_compiled_with_pythons_wrappers():
    """The kernels' inner functions are compiled without the wrappers Python calls through (some 6 s of the
    core's cold compile); the entry points Python calls have them, and an inner function's twin serves a test."""
    for entry in (compiled.restarts_kernel, compiled.make_work, compiled.judge, compiled.project_packed,
                  compiled.memetic):
        assert not entry.targetoptions.get("no_cpython_wrapper"), entry
    for inner in (compiled._lm, compiled.evaluate, compiled.fk_into, compiled._tree, compiled._generation):
        assert inner.targetoptions.get("no_cpython_wrapper") and inner.targetoptions.get("no_cfunc_wrapper"), inner
    twin = _py(compiled._use_dual)
    assert twin is _py(compiled._use_dual) and twin(21, 96)


def test_the_compile_cache_goes_to_a_writable_folder(tmp_path):
    """With no NUMBA_CACHE_DIR and a home that cannot be written, the cache goes to the temporary folder and
    a solve runs (numba's own default, beside a read-only package, would fail). That first compile does not compile
    numba's message for a slice assigned from an array of another shape (string formatting: 3 s of the core's 25,
    for an error the kernels cannot make; compiled._copy assigns instead). It compiles HELPER_PART's functions, with no
    helper, first (as the core reaches them) for the types _helper_signatures gives (the entry points run as Python
    up to each call): a helper's compile of each is the one the core loads."""
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(HOME=str(home), TMPDIR=str(tmp_path), FULLBODY_IK_COMPILE_HELPER="0")  # (every kernel counted here)
    code = ("import numba; from numba.core import event; from fullbody_ik.solvers import compiled\n"
            "names = []\n"
            "class Compiles(event.Listener):\n"
            "    def on_start(self, e): names.append(e.data['dispatcher'].py_func.__qualname__)\n"
            "    def on_end(self, e): pass\n"
            "event.register('numba:compile', Compiles())\n"
            "print(numba.config.CACHE_DIR); print(compiled.warm() >= 0)\n"
            "print(len(names), sum('raise_with_shape_context' in n for n in names))\n"
            "tree, problem = compiled._warm_problem()\n"
            "found = compiled._helper_signatures(compiled.Kernel(tree, problem.objectives))\n"
            "print(list(found) == list(compiled.HELPER_PART) and all(next(iter(vars(compiled)[name].overloads)) == "
            "signature for name, signature in found.items()))")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    finally:
        home.chmod(0o700)
    assert out.returncode == 0, out.stderr[-2000:]
    folder, ok, compiles, shape_messages, typed_alike = out.stdout.split()
    assert ok == "True" and folder.startswith(str(tmp_path)) and os.access(folder, os.W_OK)
    assert int(compiles) > 50 and shape_messages == "0", (compiles, shape_messages)
    assert typed_alike == "True"


HELPED = """
import json, os, sys
from numba.core import event
import numpy as np
from fullbody_ik.solvers import Pose, Tree, compiled, solve
names = []
class Compiles(event.Listener):
    def on_start(self, e): names.append(e.data['dispatcher'].py_func.__name__)
    def on_end(self, e): pass
event.register('numba:compile', Compiles())
import pickle
for f in (*map(vars(compiled).get, compiled.HELPER_PART), compiled.judge, compiled.memetic):  # indexes an earlier
    # source left (the same names)
    cache = f._cache._cache_file
    os.makedirs(os.path.dirname(cache._index_path), exist_ok=True)
    with open(cache._index_path, "wb") as fh:
        pickle.dump(cache._version, fh, protocol=-1)
        fh.write(pickle.dumps(("an earlier source", {"a signature": "a file"})))
started = []
start_helper = compiled._start_helper
compiled._start_helper = lambda part: started.append(start_helper(part)) or started[-1]
seconds = compiled.warm(sys.argv[2])
tree = Tree.from_urdf(sys.argv[1], base_link="lbr_iiwa_link_0", tip_links="lbr_iiwa_link_7")
target = tree.fk(np.full(tree.n, 0.4))["lbr_iiwa_link_7"]
res = solve(tree, [Pose("lbr_iiwa_link_7", target)], np.zeros(tree.n), time_limit=0.5, rng=1)
timings = {"compiled": True}
memetic = res if sys.argv[2] == "core" else solve(tree, [Pose("lbr_iiwa_link_7", target)], None, "memetic",
                                                  time_limit=1.0, rng=1, timings=timings)
folder = compiled.numba.config.CACHE_DIR
from numba.core.caching import _CacheLocator
kernels = os.listdir(os.path.join(folder, _CacheLocator.get_suitable_cache_subpath(compiled.__file__)))
helper = started[0] and started[0][1]
print("REPORT" + json.dumps({"seconds": seconds, "compiled_here": names, "kernels": kernels,
                             "helper_folder": helper, "folder_gone": bool(helper) and not os.path.exists(helper),
                             "success": bool(res.success and memetic.success and timings.get("compiled")),
                             "files": os.listdir(folder), "helper": compiled._helper is None}))
"""


@pytest.mark.parametrize("part", ["core", "memetic"])
def test_a_cold_compile_has_a_helper_process_compile_part_of_it_meanwhile(tmp_path, part):
    """A cold compile (two cores or more) starts a helper process that compiles its plan (_helper_plan): of the
    core, evaluate, the LM's constrained step and a restart's new start with all they call, then judge; of
    everything, the same but judge, then the memetic solver's entry point; while this one compiles the rest (the
    solver's loop waits for each where it calls it and loads it). None of them is compiled in this process, though
    the cache held indexes of an earlier source under their names; the solvers then solve here, and the helper's
    folder is gone."""
    if (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) < 2:
        pytest.skip("one core: no helper")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("FULLBODY_IK_COMPILE_HELPER", None)
    out = subprocess.run([sys.executable, "-c", HELPED, os.path.join(helpers.URDF, "kuka_iiwa.urdf"), part], env=env,
                         capture_output=True, text=True, timeout=600)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("REPORT")]
    assert out.returncode == 0 and line, out.stderr[-3000:]
    r = json.loads(line[0][len("REPORT"):])
    here = set(r["compiled_here"])
    assert "_lm" in here and "restarts_kernel" in here and "make_work" in here  # (a cold compile it was)
    # (with what they call: fk_into and generators are inlined into evaluate, compiled there, without an index)
    helped = {*compiled._helper_plan(part), "_log_so3", "_distance", "_damped_step", "_restart"} | \
        (set() if part == "core" else {"_generation"})
    assert not here & helped, sorted(here & helped)
    assert r["success"] and r["helper"]
    indexes = {f.split("-")[0] for f in r["kernels"] if f.endswith(".nbi")}  # (what it compiled: in this cache now)
    assert {f"compiled.{name}" for name in helped | {"_lm", "restarts_kernel"}} <= indexes, sorted(indexes)
    assert r["helper_folder"] and r["folder_gone"], r["helper_folder"]
    print(f"cold compile ({part}) with the helper: {r['seconds']:.1f} s")


def test_a_helper_that_cannot_compile_part_of_its_plan_goes_on_and_says_so(tmp_path):
    """A helper whose run as Python does not reach a function of its plan (its types unknown) compiles the rest,
    marks every name done (the compile waiting for the missing one compiles it itself at once) and ends with an error
    naming it, so the compile it helps prints its output."""
    compiled.prepare("core")
    shutil.copytree(compiled.numba.config.CACHE_DIR, tmp_path / "cache")  # (loaded, not compiled again)
    code = ("from fullbody_ik.solvers import compiled\n"
            "found = compiled._helper_signatures\n"
            "compiled._helper_signatures = lambda k, names: {n: s for n, s in found(k, names).items()\n"
            "                                                if n != '_constrained_step'}\n"
            "compiled._compile_helper('core')\n")
    env = dict(os.environ, FULLBODY_IK_HELPER_TOKEN="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "could not compile all of its plan" in out.stderr, out.stderr[-2000:]
    assert all((tmp_path / "cache" / f"{name}.ok").exists() for name in compiled._helper_plan("core"))


def test_a_compile_waits_for_its_helper_only_while_the_helper_runs(tmp_path, monkeypatch):
    """_await_helper returns when the helper says the function is in its cache, when the helper has ended (it
    failed: the compile then does the work itself), or at its deadline; at once with no helper, or for a function
    not in the helper's plan."""
    monkeypatch.setattr(compiled.numba.config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "_current", lambda function: False)  # (this process's cache holds it: no wait)
    marker = tmp_path / "helper" / "evaluate.ok"
    marker.parent.mkdir()

    def waited(process, deadline=60.0, marker_after=None, name="evaluate"):
        start = time.monotonic()
        monkeypatch.setattr(compiled, "_helper", (process, str(marker.parent), start + deadline, ("evaluate",)))
        if marker_after is not None:
            threading.Timer(marker_after, marker.touch).start()
        compiled._await_helper(name)
        return time.monotonic() - start

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert 0.3 <= waited(sleeper, marker_after=0.3) < 5.0  # told it is there
        marker.unlink()
        assert 0.5 <= waited(sleeper, deadline=0.5) < 5.0  # its deadline
        assert waited(sleeper, deadline=5.0, name="_next_start") < 0.5  # not in its plan: compiled here at once
    finally:
        sleeper.kill()
        sleeper.wait()
    failing = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); raise SystemExit(1)"])
    assert waited(failing) < 10.0 and failing.returncode == 1  # it ended without saying so
    monkeypatch.setattr(compiled, "_current", lambda function: True)  # in this process's cache already: no wait
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert waited(sleeper) < 0.5
    finally:
        sleeper.kill()
        sleeper.wait()
    monkeypatch.setattr(compiled, "_helper", None)
    start = time.monotonic()
    compiled._await_helper("evaluate")
    assert time.monotonic() - start < 0.1


SHIPPED = """
import json, os
from fullbody_ik.solvers import compiled
out = {"file": compiled.__file__, "adopted": compiled._adopted, "stamp": os.path.exists(compiled._warm_stamp("core"))}
if out["adopted"]:
    compiled.prepare("memetic")
    kernels = [v for v in vars(compiled).values() if hasattr(v, "stats") and hasattr(v, "py_func")]
    out["compiled"] = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    out["loaded"] = sum(sum(k.stats.cache_hits.values()) for k in kernels)
print("REPORT" + json.dumps(out))
"""


def test_a_shipped_compiled_core_is_loaded_where_the_extension_is_installed(tmp_path):
    """The zip ships the kernels compiled for any CPU of this architecture (tools/build.py): an extension installed
    elsewhere, with an empty cache folder, copies them there on import and loads them, nothing compiled. Kernels
    shipped from another source are not used."""
    sys.path.insert(0, os.path.join(helpers.ROOT, "tools"))
    import build

    package = tmp_path / "site" / "fullbody_ik"
    shutil.copytree(os.path.join(helpers.ROOT, "solvers"), package / "solvers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(helpers.ROOT, "__init__.py"), package / "__init__.py")
    assert build.compile_cache(str(package / "numba_cache")) == [compiled.cache_tag()]

    def run(cache):
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
        env.update(NUMBA_CACHE_DIR=str(tmp_path / cache), PYTHONPATH=str(tmp_path / "site"))
        out = subprocess.run([sys.executable, "-c", SHIPPED], env=env, capture_output=True, text=True, timeout=600)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("REPORT")]
        assert out.returncode == 0 and line, out.stderr[-3000:]
        return json.loads(line[0][len("REPORT"):])

    report = run("user")
    assert report["file"].startswith(str(tmp_path)) and report["adopted"] and not report["stamp"]
    assert report["compiled"] == 0 and report["loaded"] >= 4  # (the four entry points; the stamps written once they
    # loaded)
    assert not run("user")["adopted"]  # the next process finds them there
    with open(package / "solvers" / "compiled.py", "a") as fh:  # another source: its shipped kernels are stale
        fh.write("\n# changed\n")
    assert not run("other user")["adopted"]


BACKGROUND = """
import json, os, sys, time
import numpy as np
from fullbody_ik.solvers import Position, Tree, compiled, solve
from fullbody_ik.solvers.joints import BoneJoint
from fullbody_ik.solvers.problem import Problem, Result
out = {"started": compiled.warm_in_background()}
out["available_while"], out["status_while"] = compiled.available(), compiled.status()
up = np.eye(4)
up[1, 3] = 1.0
tree = Tree([BoneJoint("a", "root", "b", np.eye(4)), BoneJoint("b", "b", "tip", up)])
goal = Position("tip", (0.6, 0.8, 0.0))
out["kernel_while"] = compiled.kernel(Problem(tree, [goal])) is not None
out["solved_while"] = bool(solve(tree, [goal], np.full(tree.n, 0.1), "lm", max_iterations=200).success)
start = time.monotonic()
while compiled.compiling() and time.monotonic() - start < 600:
    time.sleep(0.2)
out["available_after"], out["status_after"] = compiled.available(), compiled.status()
out["stamp"] = os.path.exists(compiled._warm_stamp())
timings = {}  # the memetic solver's part compiles last: meanwhile it runs on numpy (no compiled "generations")
out["memetic_compiling"], out["status_while_memetic"] = compiled.memetic_compiling(), compiled.status()
out["memetic_while"] = solve(tree, [goal], None, "memetic", max_iterations=2, rng=0, timings=timings).success and \
    "compiled" not in timings
while compiled.memetic_compiling() and time.monotonic() - start < 600:
    time.sleep(0.2)
out["memetic_status_after"], out["memetic_stamp"] = compiled.status(), os.path.exists(compiled._warm_stamp("memetic"))
timings = {}
solve(tree, [goal], None, "memetic", max_iterations=2, rng=0, timings=timings)
out["memetic_after"] = timings.get("compiled", False)
t = time.perf_counter()
compiled.warm()
out["load_seconds"] = time.perf_counter() - t
out["kernel_after"] = compiled.kernel(Problem(tree, [goal])) is not None
out["again"] = compiled.warm_in_background()
print("REPORT" + json.dumps(out))
"""


def test_the_first_compile_runs_in_another_process_while_numpy_serves(tmp_path):
    """Blender's UI never waits for the compile: warm_in_background compiles into the cache in another process;
    meanwhile the compiled path is off and solves run on numpy; when it ends, this process loads the cache; a
    cache that already holds the kernels starts nothing."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", BACKGROUND], env=env, capture_output=True, text=True, timeout=900)
    line = [l for l in out.stdout.splitlines() if l.startswith("REPORT")]
    assert out.returncode == 0 and line, out.stdout[-2000:] + out.stderr[-2000:]
    import json

    r = json.loads(line[0][len("REPORT"):])
    assert r["started"] and not r["available_while"] and "compiles" in r["status_while"]
    assert not r["kernel_while"] and r["solved_while"]
    assert r["available_after"] and r["status_after"].startswith("compiled") and r["stamp"]
    if r["memetic_compiling"]:  # (the core's stamp seen while the memetic part compiles; else it ended first)
        assert r["memetic_while"] and "memetic solver on numpy" in r["status_while_memetic"]
    assert r["memetic_status_after"] == "compiled" and r["memetic_stamp"] and r["memetic_after"]
    assert r["kernel_after"] and r["again"] is False
    print(f"loading the compiled core from the cache: {r['load_seconds']:.2f} s")


@pytest.mark.parametrize("restarts", [True, False])
def test_a_seed_the_kernel_never_sees_is_still_projected(restarts):
    """The compiled LM projects its seed itself (solve leaves that to the kernel); a solve whose budget is over
    before the kernel runs returns the seed projected all the same: finite, inside the limits, as numpy's."""
    rng = np.random.default_rng(3)
    tree = helpers.random_tree(rng, n_links=6, free_root=True)
    goal = [Position(tree.link_names[-1], [0.3, 0.2, 0.1])]
    for q0 in (np.full(tree.n, np.nan), np.full(tree.n, 1e6), rng.normal(size=tree.n) * 4):
        res = solve(tree, goal, q0, "lm", time_limit=1e-12, restarts=restarts, rng=1)
        assert res.iterations == 0
        assert np.array_equal(res.q, tree.project(np.where(np.isfinite(q0), q0, 0.0)))
        assert tree.is_feasible(res.q, tol=1e-9) and np.all(np.isfinite(res.q))


def test_search_calls_the_kernel_past_numbas_dispatcher_with_the_types_it_compiled_for(monkeypatch):
    """search calls restarts_kernel through _direct: past the dispatcher's typing of each argument, at the entry point
    of the overload the dispatcher ran for the first call's types. That is right only while every call's arguments
    have those same types: on random bone trees and an arm, with every goal kind, seeds of other dtypes, read-only,
    as lists, with and without restarts and limits of iterations and time, every call's types are the first's, and
    the entry point is that overload's. A seed in float32 or a list gives the float64 seed's answer."""
    from numba import typeof

    seen, direct = set(), compiled._direct

    def typed(dispatcher, *args):
        if dispatcher is compiled.restarts_kernel:
            seen.add(tuple(typeof(a) for a in args))
        return direct(dispatcher, *args)

    monkeypatch.setattr(compiled, "_direct", typed)
    rng, trees = _bone_trees(5, 6)
    arm, tip = _robot(*ROBOTS[0]), ROBOTS[0][2]
    cases = [(tree, _every_goal(tree, rng)) for tree in trees] + [(arm, [Pose(tip, arm.fk(np.full(arm.n, 0.4))[tip])])]
    for tree, goals in cases:
        seed = tree.random_configurations(rng, 1)[0]
        frozen = seed.copy()
        frozen.flags.writeable = False
        for q, options in ((seed, {"max_iterations": 30}), (frozen, {"time_limit": 0.002}),
                           (seed.astype(np.float32), {"max_iterations": 40, "restarts": 3, "rng": 2}),
                           (seed.tolist(), {"max_iterations": 40, "restarts": 3, "rng": 2})):
            res = solve(tree, goals, q, **options)
            assert np.isfinite(res.q).all() and res.q.dtype == np.float64
        a, b = (solve(tree, goals, q, max_iterations=40, restarts=3, rng=2)
                for q in (seed.astype(np.float32).astype(np.float64), seed.astype(np.float32)))
        assert np.array_equal(a.q, b.q) and a.message == b.message
    assert len(seen) == 1, seen
    (types,) = seen
    assert compiled._entry_points[compiled.restarts_kernel] is compiled.restarts_kernel.overloads[types].entry_point


def _restarts(q, *args):
    """restarts_kernel from a copy of q, its arrays made: (q to go on from, the best q, met, E, errors, new starts,
    iterations, ran out, status)."""
    q, gp = q.copy(), args[-1]
    best, errors = np.empty_like(q), np.empty((gp[0].shape[0] // compiled._GOAL_FLOATS, 2))
    met, E, used, total, ran_out, status = compiled.restarts_kernel(q, *args, best, errors)
    return q, best, met, E, errors, used, total, ran_out, status


def test_a_search_that_ends_with_a_calls_iterations_is_restarted_not_resumed():
    """A kernel call's iterations (a chunk of the budget) can run out just as its search ends, stalled: the next call
    begins the next search (a start counted, its configuration returned to go on from), not the stalled one again."""
    tree = _robot(*ROBOTS[0])
    problem = Problem(tree, [Position(ROBOTS[0][2], (5.0, 5.0, 5.0))])  # out of reach: the search stalls
    k = compiled.kernel(problem)
    work, gp = k.work(), k.arrays()[1]
    q0 = np.full(tree.n, 0.1)
    q_end, status, its = compiled.lm_kernel(q0.copy(), 500, 5, 0.99, 1e-3, 1.0, 1.0, 1e-12, 1e-12, 8, work, gp)[:3]
    assert status == 3 and its < 500  # stalled
    for budget, starts in ((its, 1), (its + 1, 1)):  # ending with the search, and one iteration into the next
        out = _restarts(q0.copy(), np.zeros(1, dtype=np.int64), 10, budget, -1, 0, 5, 0.99, 1e-3,
                          1.0, 1.0, 1e-12, 1e-12, 8, work, gp)
        assert out[5] == starts and out[6] == budget and out[7]  # a start made, the iterations used, ran out
        assert not np.allclose(out[0], q_end)  # the next search's configuration, not the stalled answer
        assert np.allclose(out[1], q_end)  # the best answer so far: the first search's


@pytest.mark.parametrize("which", ["arm", "human", "bones"])
def test_a_search_restarted_within_a_kernel_call_is_the_search_from_its_start(which):
    """A kernel call's searches share their work arrays (_lm_workspace): the second search of a call, stopped one
    iteration short, is bit for bit the search lm_kernel makes alone from that search's start (nothing carried over
    from the first: errors, trail, held variables, sliding swings, the dual step's flags). On an arm (the normal
    equations), on the human (the goals' side, its dual step) and on a bone tree (swings sliding on their limits)."""
    if which == "arm":
        tree, link = _robot(*ROBOTS[0]), ROBOTS[0][2]
    elif which == "human":
        tree, link = Tree.from_urdf(os.path.join(URDF, "human.urdf")), "right_hand"
    else:
        tree = next(t for t in _bone_trees(3, 8)[1] if any(hasattr(m, "nearest") for m in t.models))
        link = tree.link_names[-1]
    k = compiled.kernel(Problem(tree, [Position(link, (50.0, 50.0, 50.0))]))  # out of reach: every search stalls
    work, gp = k.work(), k.arrays()[1]
    settings = (5, 0.99, 1e-3, 1.0, 1.0, 1e-12, 1e-12, 8)
    q0 = np.full(tree.n, 0.1)
    status, its = compiled.lm_kernel(q0.copy(), 500, *settings, work, gp)[1:3]
    assert status == 3  # stalled
    out = _restarts(q0.copy(), np.zeros(1, dtype=np.int64), 10, its, -1, 7, *settings, work, gp)
    assert out[5] == 1 and out[7]  # the call ended with the first search: its result, the second's start
    start = out[0]
    its2 = compiled.lm_kernel(start.copy(), 500, *settings, work, gp)[2]
    assert its2 >= 2
    alone = compiled.lm_kernel(start.copy(), its2 - 1, *settings, work, gp)[0]
    out = _restarts(q0.copy(), np.zeros(1, dtype=np.int64), 10, its + its2 - 1, -1, 7, *settings,
                     work, gp)
    assert out[5] == 1 and out[7] and out[8] == 1  # the second search ran out of the call's iterations
    assert np.array_equal(out[0], alone)


def test_a_kept_work_space_gives_what_a_fresh_one_gives():
    """restarts_kernel keeps its arrays between calls (Kernel.work: one Work per tree and thread): a call after
    others, with other goals (an angle left in the goals' errors by an Orientation before a Position), more goals,
    or more iterations than the work space was made for, returns bit for bit what a Work made for it returns. A
    frame copy of the tree and another thread get Works of their own."""
    import threading

    tree, tip = _robot(*ROBOTS[0]), ROBOTS[0][2]
    settings = (2, 0.8, 1e-3, 1.0, 0.1, 1e-12, 1e-12, 4)
    q0 = np.full(tree.n, 0.2)
    W = tree.fk_batch(np.full((1, tree.n), 0.7))[0]
    tip_rotation, tip_point = W[tree.link(tip), :3, :3], W[tree.link(tip), :3, 3]
    elbow = tree.link_names[4]
    cases = [([Orientation(tip, tip_rotation)], 200), ([Position(tip, tip_point + 0.05)], 200),
             ([Position(tip, (5.0, 5.0, 5.0))], 500),  # out of reach: restarts, then more iterations than kept
             ([Position(tip, tip_point), Position(elbow, W[tree.link(elbow), :3, 3])], 200),
             ([Pose(tip, W[tree.link(tip)])], 60)]
    kept = compiled.Kernel(tree, cases[0][0]).work()
    for goals, iterations in cases:
        k = compiled.Kernel(tree, goals)
        assert k.work() is kept  # (one per tree and thread, whatever the goals)
        tp, gp = k.arrays()
        fresh = compiled.make_work(tp, gp, iterations)
        a, b = (_restarts(q0.copy(), np.zeros(1, dtype=np.int64), 10, iterations, 3, 5, *settings, w,
                           gp) for w in (kept, fresh))
        for x, y in zip(a, b):
            assert np.array_equal(x, y), goals
        if type(goals[0]) is Position:
            assert not a[4][:, 1].any()  # no angle: a Position has none
    assert compiled.Kernel(tree.frame_copy(), cases[0][0]).work() is not kept
    other = []
    thread = threading.Thread(target=lambda: other.append(compiled.Kernel(tree, cases[0][0]).work()))
    thread.start()
    thread.join()
    assert other[0] is not kept and compiled.Kernel(tree, cases[0][0]).work() is kept


def test_a_restart_changes_only_the_stuck_limbs_first():
    """On the human (wrists and feet), a restart for a stuck right hand takes new values for the right arm alone
    (level 0), then for every variable the hand depends on, the spine too (level 1), then for all (level 2); goals
    met or still converging keep theirs; a stuck foot, whose leg serves no other goal, its leg alone at every level. And the solver with these restarts meets all four poses on targets where
    its first search does not."""
    tree = Tree.from_urdf(os.path.join(URDF, "human.urdf"))
    rng = np.random.default_rng(4)
    W = tree.fk_batch(tree.random_configurations(rng, 12))
    hands_feet = ["left_hand", "right_hand", "left_foot", "right_foot"]
    problem = Problem(tree, [Pose(link, W[0, tree.link(link)]) for link in hands_feet])
    k = compiled.kernel(problem)
    T, G = k.tree_arrays(), k.goal_arrays()
    q, seed = np.zeros(tree.n), tree.random_configurations(rng, 1)[0]
    stuck = np.array([False, True, False, False])
    moves = tree.ancestors[tree.link("right_hand")]
    others = tree.ancestors[[tree.link(x) for x in ("left_hand", "left_foot", "right_foot")]].any(axis=0)
    changed = []
    for level in (0, 1, 2):
        start = np.empty(tree.n)
        partial = _py(compiled._restart)(q, seed, stuck, level, T, G, np.zeros(tree.n, dtype=bool), start)
        assert partial == (level < 2)
        changed.append(start != q)
    assert np.array_equal(changed[0], moves & ~others) and changed[0].sum() >= 4  # the right arm
    assert np.array_equal(changed[1], moves) and (changed[1] & others).any()  # and the spine
    assert changed[2].sum() >= tree.n - 2  # everything (a seed value may happen to be 0)
    # A stuck foot shares no variable with the other goals (the root is fixed): every level draws its leg alone,
    # a whole start would only undo the limbs met.
    leg = tree.ancestors[tree.link("right_foot")]
    rest = tree.ancestors[[tree.link(x) for x in ("left_hand", "right_hand", "left_foot")]].any(axis=0)
    assert not (leg & rest).any() and leg.sum() >= 4
    for level in (0, 1, 2):
        start = np.empty(tree.n)
        assert _py(compiled._restart)(q, seed, np.array([False, False, False, True]), level, T, G,
                                      np.zeros(tree.n, dtype=bool), start)
        assert np.array_equal(start != q, leg)
    first_failed = solved = 0
    for i in range(1, 12):
        objectives = [Pose(link, W[i, tree.link(link)]) for link in hands_feet]
        one = solve(tree, objectives, np.zeros(tree.n), max_iterations=400, restarts=False)
        if not one.success:
            first_failed += 1
            solved += solve(tree, objectives, np.zeros(tree.n), max_iterations=3000, restarts=True, rng=i).success
    assert first_failed >= 3 and solved == first_failed, (first_failed, solved)


def test_a_restart_leaves_alone_what_no_goal_sees():
    """A position goal at a link's origin (a bone's head: a bake's head goal) does not depend on the link's own
    turn; a restart of that goal draws its chain afresh, not that turn, which nothing would bring back (a baked
    head spun 98 degrees between two frames). With an offset (the bone's tail), an orientation or a prismatic
    joint of its own, the link's own variable does move the goal and is drawn."""
    joints = [Joint("a", "revolute", "base", "l1", axis=(0, 0, 1), lower=-3, upper=3),
              Joint("b", "revolute", "l1", "l2", origin=helpers.transform(xyz=(1, 0, 0)), axis=(0, 1, 0),
                    lower=-3, upper=3),
              Joint("c", "revolute", "l2", "l3", origin=helpers.transform(xyz=(1, 0, 0)), axis=(1, 0, 0),
                    lower=-3, upper=3),
              Joint("d", "prismatic", "l2", "l4", origin=helpers.transform(xyz=(0, 1, 0)), axis=(0, 0, 1),
                    lower=-1, upper=1)]
    tree = Tree(joints)
    q, seed = np.zeros(tree.n), np.full(tree.n, 0.5)
    drawn = {}
    for label, goal in (("head", Position("l3", [1, 1, 1])), ("tail", Position("l3", [1, 1, 1], offset=(0, 0, 1))),
                        ("pose", Pose("l3", np.eye(4))), ("prismatic", Position("l4", [1, 1, 1]))):
        k = compiled.kernel(Problem(tree, [goal]))
        start = np.empty(tree.n)
        _py(compiled._restart)(q, seed, np.array([True]), 0, k.tree_arrays(), k.goal_arrays(),
                               np.zeros(tree.n, dtype=bool), start)
        drawn[label] = {name for name in tree.joint_names if start[tree.var(name)] != 0.0}
    assert drawn["head"] == {"a", "b"}
    assert drawn["tail"] == drawn["pose"] == {"a", "b", "c"}
    assert drawn["prismatic"] == {"a", "b", "d"}


def test_the_random_restarts_are_drawn_in_the_kernel_from_the_solves_rng():
    """The restarts' random starts are drawn inside the kernel (no return to Python to draw them: one kernel call
    for a solve within its chunk), from numba's generator seeded from the solve's rng: the same rng (a seed or a
    Generator) gives the same answer, another rng another search; without any budget, at most ten restarts."""
    tree = Tree.from_urdf(os.path.join(URDF, "human.urdf"))
    rng = np.random.default_rng(8)
    hands_feet = ["left_hand", "right_hand", "left_foot", "right_foot"]
    compiled.prepare("core")  # (its warm-up solve calls the kernel too)
    calls, kernel = [], compiled.restarts_kernel

    def counted(*args):
        calls.append(args)
        return kernel(*args)

    restarted = 0
    for W in tree.fk_batch(tree.random_configurations(rng, 6)):
        goals = [Pose(link, W[tree.link(link)]) for link in hands_feet]
        compiled.restarts_kernel = counted
        try:
            calls.clear()
            a = solve(tree, goals, np.zeros(tree.n), max_iterations=150, restarts=True, rng=3)
            assert len(calls) == 1  # (150 iterations: one chunk)
        finally:
            compiled.restarts_kernel = kernel
        b = solve(tree, goals, np.zeros(tree.n), max_iterations=150, restarts=True, rng=3)
        assert np.array_equal(a.q, b.q) and a.message == b.message and a.iterations == b.iterations
        c = solve(tree, goals, np.zeros(tree.n), max_iterations=150, restarts=True, rng=np.random.default_rng(3))
        d = solve(tree, goals, np.zeros(tree.n), max_iterations=150, restarts=True, rng=np.random.default_rng(3))
        assert np.array_equal(c.q, d.q)
        if "starts)" in a.message:
            restarted += 1
            other = solve(tree, goals, np.zeros(tree.n), max_iterations=150, restarts=True, rng=4)
            assert not np.array_equal(other.q, a.q)
        assert np.all(tree.project(a.q) == a.q)
    assert restarted >= 2
    # No budget at all: ten restarts at most (as solve allows a local method), the eleventh start not made.
    far = [Position("right_hand", [5.0, 0.0, 0.0])]  # out of reach: every search fails
    res = solve(tree, far, np.zeros(tree.n), restarts=True, rng=0)
    assert not res.success and res.message.endswith("(best of 11 starts)")


@pytest.mark.parametrize("enabled", [True, False], ids=["compiled", "numpy"])
def test_a_restart_count_holds_for_the_searches_run_at_once(enabled):
    """solve(restarts=3) without a budget, a goal out of reach: at most three restarts, then the best answer; and
    restarts=True without a budget: ten (the searches run at once ignored the count: compiled made ten whatever
    it was, numpy never stopped). Result.restarts counts them (it said 0)."""
    from fullbody_ik.solvers.lm import default_starts

    tree = _robot(*ROBOTS[0])
    far = [Position(ROBOTS[0][2], [5.0, 0.0, 0.0])]
    compiled.set_enabled(enabled)
    try:
        three = solve(tree, far, np.zeros(tree.n), restarts=3, rng=0)
        ten = solve(tree, far, np.zeros(tree.n), restarts=True, rng=0)
    finally:
        compiled.set_enabled(True)
    at_once = 1 if enabled else default_starts(tree.n)  # (numpy runs its first starts together)
    for res, allowed in ((three, 3), (ten, 10)):
        starts = int(res.message.rsplit("best of ", 1)[1].split(" ")[0])
        assert not res.success and at_once < starts <= at_once + allowed, (res.message, allowed)
        assert res.restarts == starts - 1  # (the Result says what the message says)
    assert enabled is False or (three.message.endswith("(best of 4 starts)")
                                and ten.message.endswith("(best of 11 starts)"))


def _memetic_all(tree, problems, enabled, **kw):
    compiled.set_enabled(enabled)
    try:
        return [solve(tree, objectives, q0, "memetic", rng=i, **kw) for i, (objectives, q0) in enumerate(problems)]
    finally:
        compiled.set_enabled(True)


def _judged_by_numpy(tree, objectives, res):
    assert np.allclose(tree.project(res.q), res.q, rtol=0, atol=1e-12)  # feasible
    return res.success and Problem(tree, objectives).satisfied(tree.state(res.q))


@pytest.mark.parametrize("robot", ROBOTS[1:4], ids=[r[0] for r in ROBOTS[1:4]])
def test_the_compiled_memetic_solves_as_well_as_numpy(robot):
    """The same targets, seeds and generations: the compiled memetic solver (LM as its exploitation, its default
    there; and with L-BFGS-B) solves as many as numpy's (L-BFGS-B, its default there), each success judged by the
    numpy objectives; the elites it returns are feasible and ranked."""
    tree = _robot(*robot)
    rng = np.random.default_rng(5)
    tip = robot[2]
    targets = tree.fk_batch(tree.random_configurations(rng, 16))[:, tree.link(tip)]
    problems = [([Pose(tip, T)], q0) for T, q0 in zip(targets, tree.random_configurations(rng, 16))]
    ref = _memetic_all(tree, problems, False, max_iterations=30)
    solved_ref = sum(_judged_by_numpy(tree, p[0], r) for p, r in zip(problems, ref))
    for exploit in ("lm", "lbfgsb"):
        fast = _memetic_all(tree, problems, True, max_iterations=30, exploit=exploit)
        solved = sum(_judged_by_numpy(tree, p[0], r) for p, r in zip(problems, fast))
        assert solved >= solved_ref - 1 and solved >= 13, (exploit, solved, solved_ref)
        for r in fast:
            fits = [f for _, f in r.elites]
            assert r.iterations <= 30 and fits[0] == min(fits) and all(np.all(tree.project(q) == q) for q, _ in r.elites)


def test_the_compiled_memetic_solves_bone_trees_with_many_goals():
    """Random bone trees (limits, locks, stiffness, stretch; free roots) with up to three reachable poses and a
    look-at each: the compiled memetic solver (either exploitation) meets all within five generations as often as
    numpy's does."""
    rng, trees = _bone_trees(21, 12)
    problems = []
    for tree in trees:
        W = tree.fk_batch(tree.random_configurations(rng, 1))[0]
        links = [tree.link_names[i] for i in rng.choice(np.arange(1, len(tree.link_names)), 4)]
        goals = [Pose(link, W[tree.link(link)]) for link in dict.fromkeys(links[:3])]
        M = W[tree.link(links[3])]
        goals.append(LookAt(links[3], M[:3, 3] + M[:3, :3] @ [0.0, 2.0, 0.0]))
        problems.append((tree, goals, tree.random_configurations(rng, 1)[0]))
    solved = {}
    for enabled, exploit in ((False, None), (True, "lm"), (True, "lbfgsb")):
        results = [_memetic_all(tree, [(goals, q0)], enabled, max_iterations=5, exploit=exploit)[0]
                   for tree, goals, q0 in problems]
        solved[enabled, exploit] = sum(_judged_by_numpy(t, g, r) for (t, g, _), r in zip(problems, results))
    assert min(solved.values()) >= max(solved[False, None] - 1, 10), solved
    print(f"solved within five generations (path, exploitation): {solved} of {len(problems)}")


def test_the_compiled_fitness_is_numpys_eq14_with_its_gradient():
    """fitness_gradients (what the compiled generations select by and L-BFGS-B minimises): Omega^2 equal to
    memetic.Fitness's (eq. 14 over eq. 15's losses) on random bone trees with every goal but Distance (whose loss
    is LM's residual there), its gradient equal to finite differences; the extinction factors (eq. 18) numpy's."""
    from fullbody_ik.solvers import memetic

    rng, trees = _bone_trees(31, 6)
    for tree in trees:
        goals = [g for g in _every_goal(tree, rng) if not isinstance(g, Distance)]
        problem = Problem(tree, goals)
        k = compiled.kernel(problem)
        tp, gp = k.arrays()
        chain = tree.chain_length(np.arange(len(tree.link_names)))
        Q = tree.random_configurations(rng, 4)
        f, g, met = compiled.fitness_gradients(Q, tp, gp, chain)
        assert np.allclose(f, memetic.Fitness(problem).batch(Q) ** 2, rtol=1e-9, atol=1e-14)
        for p, q in enumerate(Q):
            eps, fd = 1e-6, np.zeros(tree.n)
            for v in range(tree.n):
                e = np.eye(tree.n)[v] * eps
                fd[v] = (compiled.fitness_gradients((q + e)[None], tp, gp, chain)[0][0]
                         - compiled.fitness_gradients((q - e)[None], tp, gp, chain)[0][0]) / (2 * eps)
            assert np.allclose(g[p], fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))
            assert met[p] == problem.satisfied(problem.state(q))
    phi = np.sort(np.random.default_rng(0).random(9))
    assert np.allclose(_py(compiled._extinction)(phi), memetic._extinction(phi), atol=1e-15)


def _population(tree, goals, P, seed):
    problem = Problem(tree, goals)
    k = compiled.kernel(problem)
    T, G = k.tree_arrays(), k.goal_arrays()
    tp, gp = k.arrays()
    chain = tree.chain_length(np.arange(len(tree.link_names)))
    n = tree.n
    X, M, phi = np.empty((P, n)), np.empty((P, n)), np.empty(P)
    best, best_phi = tree.random_configurations(seed, 1)[0], np.empty(1)
    none = np.empty((0, n))

    def call(task, X_new, seed):
        return compiled.memetic(task, X, M, phi, best, best_phi, X_new, none, np.zeros(0, dtype=bool), seed, 2, tp, gp,
                                chain)

    call(compiled._START, none, seed)
    best[:], best_phi[0] = X[0], phi[0]
    return X, M, phi, best, best_phi, call, (T, G, chain, k)


def test_a_compiled_generation_keeps_elites_sorted_feasible_individuals():
    """One generation with the elites not exploited (X_new = the elites): they are kept (elitism), the population
    is sorted by its fitness, every individual is feasible and its phi its own, the solution never worsens; an
    elite's exploited point that is fitter replaces it, with its momentum g <- U g + (x' - x)."""
    tree = _robot(*ROBOTS[0])
    goal = [Position(ROBOTS[0][2], [0.4, 0.3, 0.5]), LookAt("lbr_iiwa_link_5", [1.0, 0.0, 2.0])]
    X, M, phi, best, best_phi, call, (T, G, chain, k) = _population(tree, goal, 40, 3)
    E = 4
    for generation in range(5):
        elites, before = X[:E].copy(), best_phi[0]
        call(compiled._GENERATION, np.ascontiguousarray(X[:E]), 100 + generation)
        assert np.all(np.diff(phi) >= 0) and best_phi[0] <= before
        assert np.allclose(np.sqrt(compiled.fitness_gradients(X, *k.arrays(), chain)[0]), phi, rtol=1e-12)
        assert all(tree.is_feasible(x) for x in X)
        kept = [any(np.array_equal(x, e) for x in X) for e in elites]
        wiped = any(np.array_equal(x, best) for x in X) and sum(kept) <= 1  # eq. 24: the solution and new ones
        assert all(kept) or wiped, kept
    # a fitter exploited point replaces its elite, and moves its momentum by the step
    X_new = X[:E].copy()
    X_new[1] = X[0]  # as fit as the best: fitter than elite 1 unless equal
    old_x, old_m, old_phi = X[1].copy(), M[1].copy(), phi[1]
    ws = _py(compiled._memetic_workspace)(tree.n, T, G)
    improved, _ = _py(compiled._adopt_elites)(X, M, phi, X_new, T, G, chain, *ws)
    if phi[0] < old_phi:
        assert improved and np.array_equal(X[1], X_new[1]) and phi[1] == phi[0]
        step = X_new[1] - old_x
        assert np.all((M[1] - step) * np.sign(old_m) >= -1e-12) and np.all(np.abs(M[1] - step) <= np.abs(old_m) + 1e-12)


def test_compiled_offspring_are_new_feasible_and_bred_from_the_population():
    """_offspring (eq. 17-20, 23): the elites stay, every other individual is a new one (no parent copied), feasible,
    its phi its own, the population sorted; bred from the parents: with every parent at one configuration and no
    momentum, recombination and adoption give it back and only mutation (by the extinction factors, eq. 18-19)
    moves genes, each by at most the factor times its span."""
    tree = _robot(*ROBOTS[2])
    tip = ROBOTS[2][2]
    goal = [Pose(tip, tree.fk_batch(tree.random_configurations(1, 1))[0, tree.link(tip)])]
    X, M, phi, best, best_phi, call, (T, G, chain, k) = _population(tree, goal, 30, 5)
    ws = _py(compiled._memetic_workspace)(tree.n, T, G)
    E = 3
    before = X.copy()
    _py(compiled._offspring)(X, M, phi, _py(compiled._extinction)(phi), E, 2, T, G, chain, *ws)
    assert all(any(np.array_equal(x, e) for x in X) for e in before[:E])
    new = [x for x in X if not any(np.array_equal(x, e) for e in before[:E])]
    assert len(new) == len(X) - E and not any(np.array_equal(x, y) for x in new for y in before)
    assert all(tree.is_feasible(x) for x in X) and np.all(np.diff(phi) >= 0)
    assert np.allclose(np.sqrt(compiled.fitness_gradients(X, *k.arrays(), chain)[0]), phi, rtol=1e-12)
    q = tree.random_configurations(2, 1)[0]
    X[:] = q
    M[:] = 0.0
    phi[:] = np.linspace(1.0, 2.0, len(phi))  # extinction factors 0 (the best) ... 1
    xi = _py(compiled._extinction)(phi)
    np.random.seed(0)
    _py(compiled._offspring)(X, M, phi, xi, E, 2, T, G, chain, *ws)
    moved = np.abs(X - q)
    assert moved.max() > 0.01 and np.all(moved <= tree.span() + 1e-9)
    assert np.allclose(M[np.all(moved < 1e-15, axis=1)], 0.0)


def test_the_memetic_exploitation_defaults_to_each_paths_best():
    """Compiled, LM exploits the elites; on numpy, L-BFGS-B; either can be asked for on both; a misspelt
    exploitation is an error on both."""
    tree = _robot(*ROBOTS[0])
    goal = [Position(ROBOTS[0][2], [9.0, 9.0, 9.0])]  # unreachable: every generation runs
    for enabled in (True, False):
        compiled.set_enabled(enabled)
        try:
            for exploit in (None, "lm", "lbfgsb"):
                timings = {}
                res = solve(tree, goal, None, "memetic", max_iterations=2, rng=0, timings=timings, exploit=exploit)
                assert res.iterations == 2 and timings["exploitation"] > 0 and timings["offspring"] > 0
                assert timings.get("compiled", False) == enabled
                if enabled:
                    assert timings["exploit"] == exploit or (exploit is None and timings["exploit"] == "lm")
            with pytest.raises(ValueError, match="exploit"):
                solve(tree, goal, None, "memetic", max_iterations=2, exploit="bfgs")
        finally:
            compiled.set_enabled(True)


def test_a_failed_compile_of_the_memetic_part_leaves_the_core_on(tmp_path, monkeypatch):
    """The background compile fails after the core's part was ready: the core keeps serving, only the memetic solver
    runs on numpy, and the status says why; a failure before the core was ready switches the compiled path off."""
    class Ended:
        returncode = 1

        def poll(self):
            return 1

    log = tmp_path / "warm.log"
    log.write_text("numba: something went wrong\n")
    was = compiled._enabled
    monkeypatch.setattr(compiled, "_background", [Ended(), __import__("time").monotonic(), str(log), True])
    monkeypatch.setattr(compiled, "_memetic_error", "")
    monkeypatch.setattr(compiled, "_background_error", "")
    try:
        assert not compiled.compiling() and compiled.memetic_compiling() and compiled.available()
        assert "memetic solver on numpy (its part failed" in compiled.status()
        monkeypatch.setattr(compiled, "_warm_stamp", lambda part="core": str(tmp_path / f"no-{part}"))
        assert compiled.warm_in_background() is False  # not again this session (though no stamp says it compiled)
        tree = _robot(*ROBOTS[0])
        timings = {}
        solve(tree, [Position(ROBOTS[0][2], [0.3, 0.2, 0.6])], None, "memetic", max_iterations=2, rng=0,
              timings=timings)
        assert "compiled" not in timings
        monkeypatch.setattr(compiled, "_memetic_error", "")
        monkeypatch.setattr(compiled, "_background", [Ended(), __import__("time").monotonic(), str(log), False])
        assert not compiled.compiling() and not compiled.available() and "failed to compile" in compiled.status()
    finally:
        compiled.set_enabled(was)


def test_the_compile_happens_before_a_solve_starts_its_clock(monkeypatch):
    """A process's first solve compiles (or loads) its part of the compiled core before its budget's clock starts:
    a 50 ms budget is not spent compiling (here a 0.3 s stand-in for it), and each part is prepared once."""
    compiled.warm()  # the real kernels ready (a cold cache compiles here, not in the solves timed below)
    calls = []

    def slow_warm(part="memetic"):
        calls.append(part)
        __import__("time").sleep(0.3)
        return 0.3

    monkeypatch.setattr(compiled, "warm", slow_warm)
    monkeypatch.setattr(compiled, "_prepared", set())
    tree = _robot(*ROBOTS[0])
    target = tree.fk_batch(tree.random_configurations(3, 1))[0, -1]
    for method in ("lm", "lm", "memetic", "memetic"):
        res = solve(tree, [Pose(ROBOTS[0][2], target)], None, method, time_limit=0.05, rng=1)
        assert res.success and res.elapsed < 0.3, (method, res.elapsed)
    assert calls == ["core", "memetic"]


def test_a_first_compile_says_so(monkeypatch, capsys, tmp_path):
    """A cold compile (no stamp in the cache folder) is announced on stderr with the seconds it took, so a
    command-line job's first frame does not seem to hang; a warm load says nothing."""
    monkeypatch.setattr(compiled, "warm", lambda part="memetic": 41.0)
    monkeypatch.setattr(compiled, "_prepared", set())
    monkeypatch.setattr(compiled, "_warm_stamp", lambda part="core": str(tmp_path / f"{part}.ok"))
    compiled.prepare("core")
    err = capsys.readouterr().err
    assert "compiling the solver's core (once per machine" in err and "compiled in 41 s" in err
    (tmp_path / "memetic.ok").touch()
    compiled.prepare("memetic")  # (its stamp there: loaded from the cache, quietly)
    assert capsys.readouterr().err == ""
