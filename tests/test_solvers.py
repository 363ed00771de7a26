# SPDX-License-Identifier: GPL-3.0-or-later
"""The four local solvers and the nullspace optimizer: they reach goals, respect limits whatever the input,
and share one result type."""

import numpy as np
import pytest
from helpers import random_tree, transform, urdf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fullbody_ik.solvers import (
    BoneJoint, Displacement, Distance, Joint, JointValue, LookAt, Pose, Position, Tree, Tracker, METHODS, solve,
)
from fullbody_ik.solvers.nullspace import minimize

LOCAL = ["lm", "projected_gradient", "ncg", "nullspace"]


@pytest.mark.parametrize("method", ["lm", "nullspace"])
def test_second_order_methods_reach_full_poses(iiwa, method):
    rng = np.random.default_rng(0)
    solved = 0
    for k in range(20):
        target = iiwa.fk(iiwa.random_configurations(rng, 1)[0])["lbr_iiwa_link_7"]
        res = solve(iiwa, [Pose("lbr_iiwa_link_7", target)], iiwa.random_configurations(rng, 1)[0],
                    method=method, max_iterations=400, rng=k, restarts=True)
        solved += res.success
        if res.success:
            T = iiwa.fk(res.q)["lbr_iiwa_link_7"]
            assert np.linalg.norm(T[:3, 3] - target[:3, 3]) <= 1e-4
            assert res.errors[0] <= 1e-4 and res.details[0]["angular_error"] <= 1e-3
    assert solved >= 19


@pytest.mark.parametrize("method", ["projected_gradient", "ncg"])
def test_first_order_methods_reach_positions(iiwa, method):
    rng = np.random.default_rng(1)
    solved = 0
    for k in range(10):
        target = iiwa.fk(iiwa.random_configurations(rng, 1)[0])["lbr_iiwa_link_7"][:3, 3]
        res = solve(iiwa, [Position("lbr_iiwa_link_7", target)], np.zeros(iiwa.n), method=method,
                    max_iterations=3000, rng=k, restarts=True)
        solved += res.success
    assert solved >= 8


@pytest.mark.parametrize("method", LOCAL)
def test_descent_from_the_seed_and_result_fields(iiwa, method):
    target = iiwa.fk(np.full(iiwa.n, 0.3))["lbr_iiwa_link_7"]
    objs = [Pose("lbr_iiwa_link_7", target)]
    res = solve(iiwa, objs, np.zeros(iiwa.n), method=method, max_iterations=50)
    assert res.method == method and res.iterations <= 50 and res.elapsed > 0
    assert res.cost < 0.5 * np.sum(Pose("lbr_iiwa_link_7", target).residual(iiwa.state(np.zeros(iiwa.n))) ** 2)
    assert len(res.errors) == 1 and len(res.satisfied) == 1 and isinstance(res.message, str)
    assert iiwa.is_feasible(res.q)


def test_time_limit_is_respected(iiwa):
    far = Position("lbr_iiwa_link_7", [5.0, 5.0, 5.0])  # unreachable: the solver never succeeds
    for method in LOCAL:
        res = solve(iiwa, [far], None, method=method, time_limit=0.02, rng=0)
        assert not res.success and res.elapsed < 0.02 + 0.05
        assert np.linalg.norm(iiwa.fk(res.q)["lbr_iiwa_link_7"][:3, 3]) > 1.0  # it reached toward the target


def test_unknown_names_and_methods_are_clear_errors(iiwa):
    with pytest.raises(ValueError, match="no link named 'hand'"):
        solve(iiwa, [Position("hand", [0, 0, 1])], None)
    with pytest.raises(ValueError, match="unknown method"):
        solve(iiwa, [Position("lbr_iiwa_link_7", [0, 0, 1])], None, method="magic")
    with pytest.raises(ValueError, match="at least one objective"):
        solve(iiwa, [], None)
    with pytest.raises(ValueError, match="seed has 3 values"):
        solve(iiwa, [Position("lbr_iiwa_link_7", [0, 0, 1])], [0, 0, 0])


@pytest.mark.parametrize("name", list(METHODS))
def test_a_misspelt_option_is_an_error_not_ignored(iiwa, name):
    goal = [Position("lbr_iiwa_link_7", [0.3, 0.2, 0.6])]
    with pytest.raises(ValueError, match=f"method '{name}' has no option 'stal'"):
        solve(iiwa, goal, None, method=name, max_iterations=2, stal=3)
    with pytest.raises(ValueError, match="has no option 'stal'"):
        Tracker(iiwa, name, 0.01, stal=3)
    for option in METHODS[name].options:  # every option the table names is taken by the method
        if option not in ("timings", "starts"):
            value = METHODS[name].options[option]
            solve(iiwa, goal, None, method=name, max_iterations=2, rng=0, **{option: value})


def test_tracker_first_frame_local_then_follows_with_continuity(iiwa):
    """A first frame whose seed is close is solved locally (no restarts: the answer stays near the seed); later
    frames start from the previous answer, the continuity goal dropped from the result's lists."""
    rng = np.random.default_rng(5)
    q = iiwa.random_configurations(rng, 1)[0]
    path = [q + 0.02 * k for k in range(6)]
    tracker = Tracker(iiwa, "lm", 0.02, continuity=1e-4, seed=3)
    assert tracker.previous is None
    answers = []
    for k, qk in enumerate(path):
        goal = [Position("lbr_iiwa_link_7", iiwa.fk(qk)["lbr_iiwa_link_7"][:3, 3])]
        res = tracker.step(goal, path[0] if k == 0 else None)
        assert res.success and len(res.errors) == 1 and res.restarts == 0
        assert np.array_equal(tracker.previous, res.q)
        answers.append(res.q)
    jumps = np.abs(np.diff(answers, axis=0)).max()
    assert jumps < 0.2  # redundant arm: it follows, it does not jump to another solution
    with pytest.raises(ValueError, match="unknown method"):
        Tracker(iiwa, "magic")


def test_tracker_meets_goals_that_preferences_pull_outside_their_tolerance(iiwa):
    """A preference (infinite tolerance) never makes a frame fail: when its pull holds a goal outside its
    tolerance at the weighted optimum (however long the search), the tracker meets the goals alone from there,
    and reports the frame on every objective it was given."""
    rng = np.random.default_rng(11)
    q0, q1 = iiwa.random_configurations(rng, 2)
    tip = lambda q: iiwa.fk(q)["lbr_iiwa_link_7"][:3, 3]  # noqa: E731
    tracker = Tracker(iiwa, "lm", 0.05, continuity=1e-4, seed=1)
    tracker.step([Position("lbr_iiwa_link_7", tip(q0))], q0)
    goal = Position("lbr_iiwa_link_7", tip(q1))
    keep = Displacement(q0, weight=1.0)  # as heavy as the goal: the weighted optimum lies far from the goal
    weighted = solve(iiwa, [goal, keep], q0, "lm", max_iterations=500, restarts=False)
    assert not weighted.success and weighted.errors[0] > 10 * goal.tolerance  # what the old policy returned
    res = tracker.step([goal, keep])
    assert res.success and len(res.errors) == 2 and res.errors[0] <= goal.tolerance
    assert np.isfinite(res.errors[1]) and res.cost > 0.0


@pytest.mark.parametrize("compiled_core", [True, False], ids=["compiled", "numpy"])
def test_tracker_leaves_a_dead_end_only_for_a_pose_that_meets_the_goals(compiled_core):
    """A turntable limited to [-3, 3] rad, its arm's tip following a goal round the circle through the gap at pi:
    the frames in the gap are out of reach (best effort: the arm waits at the limit, it does not wander); past
    the gap the goal is in reach again, but only from the limit's other side, where nothing near the pose leads.
    The tracker draws the stuck joint afresh there and meets those frames; without jumps (a drag) it stays."""
    from fullbody_ik.solvers import compiled

    tree = Tree([Joint("turn", "revolute", "base", "arm", axis=(0, 0, 1), lower=-3.0, upper=3.0),
                 Joint("tip", "fixed", "arm", "tip", origin=transform(xyz=(1.0, 0.0, 0.0)))])
    angles = np.linspace(2.8, 2 * np.pi - 2.8, 15)  # 2.8 ... 3.48 (= -2.8): the gap is (3, 2 pi - 3)
    goals = [[Position("tip", [np.cos(a), np.sin(a), 0.0])] for a in angles]
    reach = np.abs(np.angle(np.exp(1j * angles))) <= 3.0
    assert reach[:3].all() and not reach[5:10].any() and reach[-3:].all()  # (the path as described)
    compiled.set_enabled(compiled_core)
    try:
        for jumps in (True, False):
            tracker = Tracker(tree, "lm", 0.02, seed=4, jumps=jumps)
            results = [tracker.step(g, np.array([2.8])) for g in goals]
            met = np.array([r.success for r in results])
            q = np.array([r.q[0] for r in results])
            assert met[:3].all() and not met[~reach].any()
            first_out = int(np.argmin(reach))
            assert np.allclose(q[first_out:np.flatnonzero(~reach)[-1] + 1], 3.0, atol=1e-6)  # waits at its limit
            if jumps:
                assert met[reach].all()
                assert np.allclose(q[reach & (angles > np.pi)], angles[reach & (angles > np.pi)] - 2 * np.pi,
                                   atol=1e-3)
            else:
                assert not met[-3:].any() and np.allclose(q[-3:], 3.0, atol=1e-6)
    finally:
        compiled.set_enabled(True)


def test_a_first_frame_out_of_reach_keeps_the_answer_near_its_seed_unless_a_far_one_is_worth_the_move():
    """A first frame short of its goals ranks the full solve's answer against the local one with continuity to
    the seed, as later frames rank theirs (a bake carries the first frame's correction through the clip)."""
    tree = Tree([Joint("turn", "revolute", "base", "arm", axis=(0, 0, 1), lower=-3.0, upper=3.0),
                 Joint("tip", "fixed", "arm", "tip", origin=transform(xyz=(1.0, 0.0, 0.0)))])
    a = np.pi + 0.01  # in the gap, a little nearer the limit at -3 than the one at 3, where the seed is
    goal = [Position("tip", [np.cos(a), np.sin(a), 0.0])]
    near = Tracker(tree, "lm", 0.02, continuity=1e-3, seed=1).step(goal, np.array([2.8]))
    assert not near.success and abs(near.q[0] - 3.0) < 1e-6  # the move to -3 costs more than its 2 cm
    far = Tracker(tree, "lm", 0.02, continuity=1e-5, seed=1).step(goal, np.array([2.8]))
    assert not far.success and abs(far.q[0] + 3.0) < 1e-6  # worth it with a weaker continuity


def test_a_later_frame_out_of_reach_ranks_its_answers_with_continuity():
    """A frame short of its goals ranks its polish against its first search's answer by the goals' cost and the
    continuity's together, as that search ranked them: a polish a little closer on the goals but far from the
    last frame's pose is not taken (a pop), unless the continuity is weak enough for the move to be worth it. The
    polish is made to land far (at the other limit), as restarts near the answer can on a rig."""
    tree = Tree([Joint("turn", "revolute", "base", "arm", axis=(0, 0, 1), lower=-3.0, upper=3.0),
                 Joint("tip", "fixed", "arm", "tip", origin=transform(xyz=(1.0, 0.0, 0.0)))])
    on = lambda a: [Position("tip", [np.cos(a), np.sin(a), 0.0])]  # noqa: E731
    a = np.pi + 0.01  # in the gap, a little nearer the limit at -3 than the one at 3
    kept = {}
    for continuity in (1e-3, 1e-5):
        tracker = Tracker(tree, "lm", 0.02, continuity=continuity, seed=1)
        assert tracker.step(on(2.9), np.array([2.9])).success
        plain = tracker._solve

        def far_polish(objectives, seed_q, time_limit, rng, **kw):  # the polish: restarts near the answer
            return plain(objectives, np.array([-2.99]) if kw.get("nearby") else seed_q, time_limit, rng, **kw)

        tracker._solve = far_polish
        res = tracker.step(on(a))
        assert not res.success
        kept[continuity] = res.q[0]
    assert abs(kept[1e-3] - 3.0) < 1e-6  # 6 rad from the last frame for 2 cm: not worth it
    assert abs(kept[1e-5] + 3.0) < 1e-6  # with a weaker continuity it is


def test_restarts_near_the_answer_leave_alone_what_no_objective_sees():
    """Restarts near the best answer perturb only the variables the objectives move: a goal at a bone's head
    does not see the bone's own turn, and a perturbation of it would stay (a pop between two frames of a bake)."""
    tree = Tree([Joint("a", "revolute", "base", "l1", axis=(0, 0, 1), lower=-3, upper=3),
                 Joint("b", "revolute", "l1", "l2", origin=transform(xyz=(1, 0, 0)), axis=(0, 1, 0), lower=-3, upper=3),
                 Joint("c", "revolute", "l2", "l3", origin=transform(xyz=(1, 0, 0)), axis=(1, 0, 0), lower=-3, upper=3)])
    seed = np.array([0.2, 0.3, 0.7])
    far = [Position("l3", [5.0, 1.0, 1.0])]  # out of reach: every restart is made
    res = solve(tree, far, seed, "lm", time_limit=0.05, nearby=0.1, rng=2)
    assert res.restarts > 3 and not res.success
    assert res.q[2] == 0.7 and abs(res.q[0] - seed[0]) > 1e-3
    tail = [Position("l3", [5.0, 1.0, 1.0], offset=(0, 0, 1))]  # the tail: c turns it, and is perturbed
    res = solve(tree, tail, seed, "lm", time_limit=0.05, nearby=0.1, rng=2)
    assert res.restarts > 3 and res.q[2] != 0.7


def test_same_seed_same_answer(iiwa):
    objs = [Position("lbr_iiwa_link_7", [5.0, 0.0, 0.0])]
    a = solve(iiwa, objs, None, method="lm", max_iterations=60, rng=7, restarts=True)
    b = solve(iiwa, objs, None, method="lm", max_iterations=60, rng=7, restarts=True)
    assert np.array_equal(a.q, b.q)


def test_nullspace_priorities_meet_the_higher_goal_first(iiwa):
    q_a, q_b = np.full(iiwa.n, 0.4), np.full(iiwa.n, -0.6)
    high = Position("lbr_iiwa_link_7", iiwa.fk(q_a)["lbr_iiwa_link_7"][:3, 3], priority=1)
    low = Position("lbr_iiwa_link_7", iiwa.fk(q_b)["lbr_iiwa_link_7"][:3, 3], priority=0, weight=10.0)
    res = solve(iiwa, [high, low], np.zeros(iiwa.n), method="nullspace", max_iterations=200)
    assert res.satisfied[0] and not res.satisfied[1]
    # Lower priority moves only in the nullspace: an elbow goal is met as far as the hand allows.
    hand = Position("lbr_iiwa_link_7", iiwa.fk(q_a)["lbr_iiwa_link_7"][:3, 3], priority=1)
    elbow_target = iiwa.fk(q_a)["lbr_iiwa_link_4"][:3, 3]
    elbow = Position("lbr_iiwa_link_4", elbow_target, priority=0)
    res = solve(iiwa, [hand, elbow], np.zeros(iiwa.n), method="nullspace", max_iterations=300)
    assert res.satisfied[0] and res.errors[1] < 1e-3


def test_nullspace_distance_is_an_inequality(iiwa):
    q_t = np.array([0.3, 0.8, 0.0, -1.2, 0.0, 0.5, 0.0])
    target = iiwa.fk(q_t)["lbr_iiwa_link_7"][:3, 3]
    elbow = iiwa.fk(q_t)["lbr_iiwa_link_4"][:3, 3]
    objs = [Position("lbr_iiwa_link_7", target, priority=1),
            Distance("lbr_iiwa_link_4", 0.15, other_point=elbow, priority=1)]
    res = solve(iiwa, objs, q_t + 0.05, method="nullspace", max_iterations=500)
    assert res.success, res
    assert np.linalg.norm(iiwa.fk(res.q)["lbr_iiwa_link_4"][:3, 3] - elbow) >= 0.15 - 1e-4


def test_multi_objective_human():
    """Both hands and both feet (full poses) of the 36-joint human, from zero; targets from FK of random
    valid configurations (some are near-singular: a knee folded to its limit converges slowly)."""
    tree = Tree.from_urdf(urdf("human.urdf"))
    for seed in range(3):
        W = tree.fk(tree.random_configurations(np.random.default_rng(seed), 1)[0])
        objs = [Pose(l, W[l]) for l in ["left_hand", "right_hand", "left_foot", "right_foot"]]
        objs.append(Displacement(np.zeros(tree.n), weight=1e-6))
        res = solve(tree, objs, np.zeros(tree.n), method="lm", max_iterations=3000, rng=0, restarts=True)
        assert res.success, (seed, res)


# --- properties over random trees, limits and targets ---------------------------------------------

finite = st.floats(-1e6, 1e6, allow_nan=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), method=st.sampled_from(LOCAL + ["memetic"]), free_root=st.booleans(),
       target=st.tuples(finite, finite, finite), weird_seed=st.sampled_from(["random", "nan", "huge"]))
def test_limits_hold_and_nothing_breaks_whatever_the_input(seed, method, free_root, target, weird_seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, n_links=int(rng.integers(2, 9)), free_root=free_root)
    links = tree.link_names[1:]
    objs = [
        Position(links[-1], target),
        Pose(links[rng.integers(len(links))], np.eye(4), weight=0.5),
        LookAt(links[0], rng.normal(size=3) * 10),
        Distance(links[rng.integers(len(links))], 0.3, other_point=rng.normal(size=3)),
        JointValue(tree.joint_names[rng.integers(tree.n)], float(rng.normal())),
    ] if tree.n else [Position(links[-1], target)]
    if weird_seed == "nan":
        q0 = np.full(tree.n, np.nan)
    elif weird_seed == "huge":
        q0 = np.full(tree.n, 1e6)
    else:
        q0 = rng.normal(size=tree.n) * 3
    res = solve(tree, objs, q0, method=method, max_iterations=3 if method == "memetic" else 25, rng=seed)
    assert np.all(np.isfinite(res.q))
    assert tree.is_feasible(res.q, tol=1e-9)
    assert np.all(res.q >= tree.lower - 1e-9) and np.all(res.q <= tree.upper + 1e-9)
    assert isinstance(res.success, bool) and np.all(np.isfinite(res.errors))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_bone_limits_hold_in_blenders_terms_after_solving(seed):
    """Solve toward random (often unreachable) targets; every bone stays inside its Blender limits."""
    from test_tree import blender_clamp

    rng = np.random.default_rng(seed)
    joints, parent = [], "base"
    from helpers import transform

    for i in range(4):
        limits = {a: (-rng.uniform(0, 2.5), rng.uniform(0, 2.5)) for a in "xyz" if rng.random() < 0.7}
        joints.append(BoneJoint(f"b{i}", parent, f"bone{i}", transform(xyz=(0, 1, 0)) if i else np.eye(4),
                                limits=limits))
        parent = f"bone{i}"
    tree = Tree(joints)
    res = solve(tree, [Position("bone3", rng.normal(size=3) * 4)], rng.normal(size=tree.n),
                method=["lm", "ncg"][seed % 2], max_iterations=30)
    W = tree.fk(res.q)
    for i, j in enumerate(joints):
        parent_world = np.eye(4) if i == 0 else W[f"bone{i - 1}"]
        R = (np.linalg.inv(parent_world @ j.origin) @ W[f"bone{i}"])[:3, :3]
        if 1.0 + R[1, 1] < 1e-4 or 1.0 + np.trace(R) < 1e-4:
            continue  # swing or twist at 180 degrees: Blender's decomposition (ComputeTwist) is singular there
        assert np.linalg.norm(blender_clamp(R, j.limits) - R) < 1e-8


# --- the general nullspace optimizer (paper 002, §4) ---------------------------------------------


def test_minimize_example_1_convex():
    r = minimize(lambda x: sum((x[k] - (k + 1)) ** 2 for k in range(5)), np.zeros(5),
                 eq=[lambda x: x[0] + 5, lambda x: x[1] - 5], ineq=[lambda x: x[2] + 3, lambda x: x[3] - 3])
    assert r.success and np.allclose(r.x, [-5, 5, -3, 3, 5], atol=2e-3)


def test_minimize_example_2_rosenbrock_in_a_disc():
    r = minimize(lambda x: 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2, [0, 0],
                 ineq=[lambda x: x[0] ** 2 + x[1] ** 2 - 1])
    assert r.success and np.allclose(r.x, [0.7864, 0.6177], atol=1e-3)


def test_minimize_example_3_hs071():
    ineq = [lambda x: 25 - np.prod(x)] + [lambda x, i=i: 1 - x[i] for i in range(4)] + \
           [lambda x, i=i: x[i] - 5 for i in range(4)]
    r = minimize(lambda x: x[0] * x[3] * (x[0] + x[1] + x[2]) + x[2], [1, 5, 5, 1], eq=[lambda x: x @ x - 40],
                 ineq=ineq)
    assert np.allclose(r.x, [1.00, 4.74, 3.82, 1.38], atol=0.03) and r.fun == pytest.approx(17.014, abs=0.01)


def test_minimize_example_4_three_link_arm():
    def tau(x):
        c1, c12, c123 = np.cos(x[0]), np.cos(x[0] + x[1]), np.cos(x[0] + x[1] + x[2])
        return np.array([2.5 * c1 + 1.5 * c12 + 0.5 * c123, 1.5 * c12 + 0.5 * c123, 0.5 * c123])

    px = lambda x: np.cos(x[0]) + np.cos(x[0] + x[1]) + np.cos(x[0] + x[1] + x[2])  # noqa: E731
    py = lambda x: np.sin(x[0]) + np.sin(x[0] + x[1]) + np.sin(x[0] + x[1] + x[2])  # noqa: E731
    r = minimize(lambda x: tau(x) @ tau(x), [np.pi / 4] * 3, eq=[lambda x: px(x) + 1.0, py])
    x = (r.x + np.pi) % (2 * np.pi) - np.pi
    assert np.allclose(np.abs(x), [1.647, 3.141, 1.647], atol=2e-3) and x[0] * x[2] < 0


def test_minimize_bounds_are_kept():
    r = minimize(lambda x: (x[0] - 3) ** 2 + (x[1] + 3) ** 2, [0, 0], bounds=([-1, -1], [1, 1]))
    assert np.allclose(r.x, [1, -1], atol=1e-3)
    with pytest.raises(ValueError, match="lower bound"):
        minimize(lambda x: x @ x, [0.0], bounds=([1.0], [0.0]))


def test_multistart_lm_is_seeded_feasible_and_solves(iiwa):
    rng = np.random.default_rng(11)
    solved = 0
    for k in range(10):
        target = iiwa.fk(iiwa.random_configurations(rng, 1)[0])["lbr_iiwa_link_7"]
        objs = [Pose("lbr_iiwa_link_7", target)]
        a = solve(iiwa, objs, None, method="lm", max_iterations=200, rng=k, restarts=True, starts=6)
        b = solve(iiwa, objs, None, method="lm", max_iterations=200, rng=k, restarts=True, starts=6)
        assert np.array_equal(a.q, b.q) and iiwa.is_feasible(a.q)
        solved += a.success
    assert solved == 10


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_multistart_lm_keeps_limits_on_random_trees(seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, n_links=int(rng.integers(2, 8)), free_root=bool(seed % 2))
    links = tree.link_names[1:]
    objs = [Position(links[-1], rng.normal(size=3) * 3), LookAt(links[0], rng.normal(size=3) * 5),
            Distance(links[-1], 0.2, other_point=rng.normal(size=3))]
    res = solve(tree, objs, rng.normal(size=tree.n), method="lm", max_iterations=15, restarts=True, rng=seed)
    assert np.all(np.isfinite(res.q)) and tree.is_feasible(res.q)


def test_lm_step_slides_along_a_swing_limit_and_descends():
    """A swing resting on its ellipse, pulled outward and sideways: the LM step solved in the limit's tangent
    stays on the limit to first order and lowers the error; inside the limit, steps are untouched."""
    from fullbody_ik.solvers import BoneJoint
    from fullbody_ik.solvers.lm import constrained_step
    from fullbody_ik.solvers.problem import Problem

    bone = BoneJoint("b", "base", "bone", np.eye(4), limits={"x": (-0.4, 0.6), "z": (-0.5, 0.3)})
    tip = Joint("tip", "fixed", "bone", "tip", transform(xyz=(0, 1, 0)))
    tree = Tree([bone, tip])
    far = Tree([BoneJoint("b", "base", "bone", np.eye(4)), tip]).fk(np.array([0.9, 0.0, 0.2]))["tip"][:3, 3]
    problem = Problem(tree, [Position("tip", far)])  # beyond the limit, off the clamp's ray
    for q, on_limit in ((np.array([0.1, 0.0, 0.05]), False), (tree.project(np.array([2.0, 0.0, 1.0])), True)):
        state = problem.state(q)
        r = problem.residual(state)
        J = problem.jacobian(state)
        lam = 0.5 * r @ r + 1e-3
        free = -np.linalg.solve(J.T @ J + lam * np.eye(3), J.T @ r)
        dq = constrained_step(tree, q, free, J, r, lam, tree.weights)
        if not on_limit:
            assert np.allclose(dq, free)
            continue
        assert not np.allclose(dq, free)
        trial = q + 1e-4 * dq
        assert np.linalg.norm(tree.project(trial) - trial) < 1e-7  # slides along the limit
        E = lambda x: 0.5 * np.sum(problem.residual(problem.state(x)) ** 2)  # noqa: E731
        assert E(tree.project(q + 1e-3 * dq)) < E(q)  # and descends
