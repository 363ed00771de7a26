# SPDX-License-Identifier: GPL-3.0-or-later
"""Every objective's analytic Jacobian against finite differences; batched evaluation; eq. 15 losses."""

import numpy as np
import pytest
from helpers import numeric_jacobian, random_tree

from fullbody_ik.solvers import (
    Displacement, Distance, JointFunction, JointValue, LookAt, Orientation, Pose, Position, Tree,
)
from fullbody_ik.solvers.rotations import exp_so3
from fullbody_ik.solvers.objectives.base import point_on
from fullbody_ik.solvers.tree import BatchState


def objectives_for(tree, rng):
    links = tree.link_names[1:]
    pick = lambda: links[rng.integers(len(links))]  # noqa: E731
    T = np.eye(4)
    T[:3, :3] = exp_so3(rng.normal(size=3))
    T[:3, 3] = rng.normal(size=3)
    var = tree.joint_names[rng.integers(tree.n)]
    other = tree.joint_names[rng.integers(tree.n)]
    return [
        Position(pick(), rng.normal(size=3), offset=rng.normal(size=3) * 0.1),
        Orientation(pick(), exp_so3(rng.normal(size=3))),
        Pose(pick(), T, weight=2.0),
        LookAt(pick(), rng.normal(size=3) * 3, axis=rng.normal(size=3)),
        Distance(pick(), 50.0, point=rng.normal(size=3) * 0.1, other_link=pick()),  # active: far inside
        Distance(pick(), 50.0, other_point=rng.normal(size=3)),
        Displacement(rng.normal(size=tree.n)),
        JointValue(var, 0.3),
        JointFunction(var, lambda q: np.sin(q).sum() * 0.2),
        JointFunction(var, lambda q, k=tree.joint_names.index(other): 0.5 * q[k] ** 2,
                      gradient=lambda q, k=tree.joint_names.index(other): np.eye(len(q))[k] * q[k]),
    ]


@pytest.mark.parametrize("seed", range(6))
def test_objective_jacobians_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(seed, n_links=8, free_root=seed % 2 == 1)
    q = tree.random_configurations(rng, 1)[0] * 0.8
    for obj in objectives_for(tree, rng):
        J = obj.jacobian(tree.state(q))
        J_fd = numeric_jacobian(lambda x: obj.residual(tree.state(x)), q)
        assert J.shape == (obj.size, tree.n)
        assert np.allclose(J, J_fd, atol=2e-5), type(obj).__name__


@pytest.mark.parametrize("seed", range(3))
def test_batched_residuals_and_losses_match_single(seed):
    rng = np.random.default_rng(seed)
    tree = random_tree(seed, n_links=7)
    Q = tree.random_configurations(rng, 5)
    batch = BatchState(tree, Q)
    for obj in objectives_for(tree, rng):
        rb, lb, eb = obj.residual(batch), obj.losses(batch), obj.error(batch)
        for p in range(5):
            st = tree.state(Q[p])
            assert np.allclose(rb[p], obj.residual(st))
            assert np.allclose(lb[p], obj.losses(st))
            assert np.allclose(eb[p], obj.error(st))


def test_errors_are_in_natural_units_and_losses_follow_eq15():
    tree = Tree.from_urdf("""<robot name="r"><link name="a"/><link name="b"/><link name="c"/>
      <joint name="j1" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 1"/>
      <axis xyz="0 1 0"/><limit lower="-3" upper="3"/></joint>
      <joint name="j2" type="fixed"><parent link="b"/><child link="c"/><origin xyz="1 0 0"/></joint></robot>""")
    st = tree.state(np.zeros(1))  # c is at (1, 0, 1); chain length L = 2
    pos = Position("c", [1.0, 0.0, 1.3])
    assert pos.error(st) == pytest.approx(0.3)
    d, lam, L = 0.3, np.sqrt(2.0), 2.0
    assert pos.losses(st)[0] == pytest.approx(np.pi * d / np.sqrt((L + d) * (lam + d)))
    ori = Orientation("c", exp_so3([0.0, 0.0, 0.4]))
    assert ori.error(st) == pytest.approx(0.4)
    look = LookAt("c", [1.0, 0.0, 5.0], axis=(1, 0, 0))  # x axis vs straight up: 90 degrees
    assert look.error(st) == pytest.approx(np.pi / 2)
    dist = Distance("c", 2.0, other_point=[1.0, 0.0, 0.0])  # 1 m away, 2 m wanted
    assert dist.error(st) == pytest.approx(1.0) and dist.losses(st)[0] == np.inf
    far = Distance("c", 0.5, other_point=[1.0, 0.0, 0.0])
    assert far.error(st) == 0.0 and far.losses(st)[0] == pytest.approx(2.0)
    assert JointValue("j1", 0.25).error(st) == pytest.approx(0.25)
    assert Displacement([0.5]).losses(st)[0] == pytest.approx(0.5)
    pose = Pose("c", np.eye(4))
    assert not pose.satisfied(st) and set(pose.details(st)) == {"error", "angular_error"}


def test_bad_objective_input_is_refused_clearly():
    with pytest.raises(ValueError, match="finite"):
        Position("a", [np.nan, 0, 0])
    with pytest.raises(ValueError, match="beyond"):
        Position("a", [1e300, 0, 0])
    with pytest.raises(ValueError, match="weight"):
        Position("a", [0, 0, 0], weight=-1)
    with pytest.raises(ValueError, match="reflection"):
        Orientation("a", np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="zero"):
        LookAt("a", [1, 2, 3], axis=(0, 0, 0))


@pytest.mark.parametrize("seed", range(6))
def test_loss_gradients_match_finite_differences(seed):
    """The memetic exploitation's analytic gradients of the eq. 15 losses."""
    rng = np.random.default_rng(seed + 100)
    tree = random_tree(seed, n_links=8, free_root=seed % 2 == 1)
    q = tree.random_configurations(rng, 1)[0] * 0.8
    objs = objectives_for(tree, rng) + [
        Distance(tree.link_names[-1], 1e-3, other_point=rng.normal(size=3) * 5)]  # outside: finite barrier
    for obj in objs:
        L = obj.losses(tree.state(q))
        if not np.all(np.isfinite(L)):
            continue
        G = obj.loss_jacobian(tree.state(q))
        G_fd = numeric_jacobian(lambda x: obj.losses(tree.state(x)), q)
        assert G.shape == (L.shape[-1], tree.n)
        assert np.allclose(G, G_fd, atol=1e-5 * max(1.0, np.abs(G_fd).max())), type(obj).__name__


@pytest.mark.parametrize("seed", range(4))
def test_batched_loss_gradients_match_single(seed):
    """The memetic exploitation evaluates its elites together: batched loss gradients, row by row equal to
    the single ones (objectives of every kind, a Distance barrier inside its sphere for one row)."""
    rng = np.random.default_rng(seed + 30)
    tree = random_tree(seed, n_links=8, free_root=seed % 2 == 0)
    Q = tree.random_configurations(rng, 5) * 0.9
    tip = tree.link_names[-1]
    inside = point_on(tree.state(Q[0]), tree.link(tip), np.zeros(3))
    objs = objectives_for(tree, rng) + [Distance(tip, 0.5, other_point=inside),
                                        Displacement(np.zeros(tree.n), weight=0.1)]
    batch = BatchState(tree, Q)
    for obj in objs:
        G = obj.loss_jacobian(batch)
        assert G.shape == (5, obj.losses(batch).shape[-1], tree.n), type(obj).__name__
        for p in range(5):
            assert np.allclose(G[p], obj.loss_jacobian(tree.state(Q[p])), atol=1e-10), type(obj).__name__
    assert np.all(Distance(tip, 0.5, other_point=inside).loss_jacobian(batch)[0] == 0.0)


@pytest.mark.parametrize("seed", range(4))
def test_fused_fitness_terms_equal_losses_gradients_and_satisfied(seed):
    """fitness_terms (what the memetic exploitation evaluates) is losses, loss_jacobian and satisfied in one
    pass: batched and single, with offsets, a target met exactly and one half a turn away."""
    rng = np.random.default_rng(seed + 60)
    tree = random_tree(seed, n_links=8, free_root=seed % 2 == 1)
    Q = tree.random_configurations(rng, 4) * 0.9
    tip = tree.link_names[-1]
    W = tree.fk(Q[0])[tip]
    flipped = W[:3, :3] @ exp_so3(np.array([0.0, 0.0, np.pi - 1e-5]))
    objs = objectives_for(tree, rng) + [
        Pose(tip, W), Position(tip, W[:3, 3], offset=[0.1, 0.0, 0.0]), Orientation(tip, flipped),
        Pose(tip, np.block([[flipped, W[:3, 3:]], [np.zeros((1, 3)), np.ones((1, 1))]]), offset=[0, 0.2, 0]),
        LookAt(tip, W[:3, 3], axis=[0.0, 0.0, 1.0]),  # row 0 stands on its target: nothing to aim at
        LookAt(tip, W[:3, 3] + W[:3, :3] @ np.array([0.0, 2.0, 0.0]))]  # row 0 looks straight at it
    for state in (BatchState(tree, Q), tree.state(Q[0]), tree.state(Q[1])):
        for obj in objs:
            L, G, met = obj.fitness_terms(state)
            assert np.allclose(L, obj.losses(state), atol=1e-12), type(obj).__name__
            assert np.allclose(G, obj.loss_jacobian(state), atol=1e-9), type(obj).__name__
            assert np.array_equal(met, obj.satisfied(state)), type(obj).__name__
    assert Pose(tip, W).fitness_terms(tree.state(Q[0]))[2] and objs[-1].fitness_terms(tree.state(Q[0]))[2]


@pytest.mark.parametrize("seed", range(4))
def test_batched_jacobians_match_single(seed):
    rng = np.random.default_rng(seed + 7)
    tree = random_tree(seed, n_links=8, free_root=seed % 2 == 0)
    Q = tree.random_configurations(rng, 4) * 0.9
    batch = BatchState(tree, Q)
    for obj in objectives_for(tree, rng):
        Jb = obj.jacobian(batch)
        assert Jb.shape == (4, obj.size, tree.n), type(obj).__name__
        for p in range(4):
            assert np.allclose(Jb[p], obj.jacobian(tree.state(Q[p])), atol=1e-10), type(obj).__name__


def test_goal_targets_are_their_own():
    """A goal keeps its targets as they were given: a caller's matrix changed afterwards does not move it (the
    targets are copies, C-ordered: the compiled path packs them in one layout)."""
    T = np.eye(4)
    T[:3, 3] = 0.1, 0.2, 0.3
    goal, point = Pose("tip", T), Position("tip", T[:3, 3])
    T[:3, 3] = 9.0
    assert goal.position.target.tolist() == [0.1, 0.2, 0.3] == point.target.tolist()
    assert goal.position.target.flags.c_contiguous and goal.orientation.target.flags.c_contiguous
