# SPDX-License-Identifier: GPL-3.0-or-later
"""The memetic solver (paper 000, Algorithm 1)."""

import numpy as np
import pytest
from helpers import random_tree

from fullbody_ik.solvers import Distance, LookAt, Orientation, Pose, Position, compiled, solve
from fullbody_ik.solvers.memetic import Fitness, _extinction, default_elites, default_population
from fullbody_ik.solvers.problem import Problem


@pytest.fixture(params=["compiled", "numpy"])
def path(request):
    """Each test of the solver's behaviour on both paths: its generations compiled, and the numpy reference."""
    if request.param == "compiled" and not compiled.available():
        pytest.skip("numba is not installed, or the compiled path is switched off")
    was = compiled._enabled
    compiled.set_enabled(request.param == "compiled")
    yield request.param
    compiled.set_enabled(was)


@pytest.mark.parametrize("exploit", ["lbfgsb", "lm"])
def test_memetic_solves_full_poses(iiwa, exploit, path):
    rng = np.random.default_rng(0)
    solved = 0
    for k in range(8):
        target = iiwa.fk(iiwa.random_configurations(rng, 1)[0])["lbr_iiwa_link_7"]
        res = solve(iiwa, [Pose("lbr_iiwa_link_7", target)], iiwa.random_configurations(rng, 1)[0],
                    method="memetic", max_iterations=40, rng=k, exploit=exploit)
        solved += res.success
        assert iiwa.is_feasible(res.q)
    assert solved >= 7


def test_same_seed_same_generations_same_answer(iiwa, path):
    objs = [Position("lbr_iiwa_link_7", [2.0, 1.0, 0.5]), LookAt("lbr_iiwa_link_4", [0.0, 1.0, 2.0])]  # unreachable
    a = solve(iiwa, objs, None, method="memetic", max_iterations=3, rng=42)
    b = solve(iiwa, objs, None, method="memetic", max_iterations=3, rng=42)
    c = solve(iiwa, objs, None, method="memetic", max_iterations=3, rng=43)
    assert np.array_equal(a.q, b.q) and a.iterations == b.iterations == 3
    assert not np.array_equal(a.q, c.q)


def test_elites_are_distinct_and_ranked(iiwa, path):
    res = solve(iiwa, [Position("lbr_iiwa_link_7", [0.3, 0.2, 0.6])], None, method="memetic", max_iterations=5,
                rng=1, population=60, elites=4)
    assert 1 <= len(res.elites) <= 4
    fits = [f for _, f in res.elites]
    assert fits[0] == min(fits)
    qs = [q for q, _ in res.elites]
    for i in range(len(qs)):
        assert iiwa.is_feasible(qs[i])
        for j in range(i):
            assert np.max(np.abs(qs[i] - qs[j])) > 1e-4


def test_fitness_is_eq14_rmse_and_its_gradient_matches_finite_differences(iiwa):
    objs = [Pose("lbr_iiwa_link_7", iiwa.fk(np.full(7, 0.2))["lbr_iiwa_link_7"], weight=2.0),
            LookAt("lbr_iiwa_link_4", [1.0, 1.0, 1.0], weight=0.5)]
    fit = Fitness(Problem(iiwa, objs))
    Q = iiwa.random_configurations(3, 4)
    for q, phi in zip(Q, fit.batch(Q)):
        st = iiwa.state(q)
        L = np.concatenate([o.losses(st) for o in objs])
        w = np.array([2.0, 2.0, 0.5])
        assert phi == pytest.approx(np.sqrt(np.sum(w * L**2) / 3))
        f2, g = fit.squared_with_gradient(q)
        assert f2 == pytest.approx(phi**2)
        eps, fd = 1e-6, np.zeros(7)
        for k in range(7):
            e = np.eye(7)[k] * eps
            fd[k] = (fit.squared_with_gradient(q + e)[0] - fit.squared_with_gradient(q - e)[0]) / (2 * eps)
        assert np.allclose(g, fd, atol=1e-6)


def test_extinction_factors_eq18():
    phi = np.array([1.0, 2.0, 4.0, 8.0])
    xi = _extinction(phi)
    expected = (phi + 1.0 * (np.arange(4) / 3 - 1.0)) / 8.0
    assert np.allclose(xi, expected) and xi[0] == 0.0 and xi[-1] == 1.0


def test_defaults_follow_the_paper():
    assert all(50 <= default_population(n) <= 150 for n in range(1, 200))
    assert default_population(3) < default_population(7) <= default_population(36) == 150
    assert all(2 <= default_elites(n) <= 5 for n in range(1, 200))


@pytest.mark.parametrize("seed", range(6))
def test_memetic_keeps_limits_on_random_trees_and_unreachable_goals(seed, path):
    rng = np.random.default_rng(seed)
    tree = random_tree(seed, n_links=6, free_root=seed % 2 == 0)
    links = tree.link_names[1:]
    objs = [Position(links[-1], rng.normal(size=3) * 100),  # unreachable without a free root
            Distance(links[0], 0.5, other_point=rng.normal(size=3) * 0.1)]
    res = solve(tree, objs, rng.normal(size=tree.n), method="memetic", max_iterations=4, rng=seed)
    assert np.all(np.isfinite(res.q)) and tree.is_feasible(res.q)
    if seed % 2:
        assert not res.success


def test_without_a_budget_an_unreachable_goal_ends(iiwa, path):
    """Neither time_limit nor max_iterations: the generations stop at solve's GLOBAL_ITERATIONS (the search went on
    for ever, never meeting the goal)."""
    from fullbody_ik.solvers.solve import GLOBAL_ITERATIONS

    res = solve(iiwa, [Position("lbr_iiwa_link_7", [9.0, 9.0, 9.0])], None, method="memetic", rng=0)
    assert not res.success and res.iterations == GLOBAL_ITERATIONS and np.all(np.isfinite(res.q))


def test_time_limit_cuts_generations(iiwa, path):
    res = solve(iiwa, [Position("lbr_iiwa_link_7", [9.0, 9.0, 9.0])], None, method="memetic", time_limit=0.03,
                rng=0)
    assert not res.success and res.elapsed < 0.03 + 0.03


def test_exploitation_ends_the_solve_when_an_elite_meets_every_objective(iiwa, monkeypatch):
    """The elites' L-BFGS-B runs are evaluated together, and the first evaluated point that meets every
    objective ends them all (without it each run would go on to its 40 iterations). (numpy path)"""
    monkeypatch.setattr(compiled, "_enabled", False)
    calls = []
    evaluate = Fitness.evaluate

    def counting(self, Q):
        calls.append(len(np.atleast_2d(Q)))
        return evaluate(self, Q)

    monkeypatch.setattr(Fitness, "evaluate", counting)
    rng = np.random.default_rng(5)
    for k in range(3):
        calls.clear()
        target = iiwa.fk(iiwa.random_configurations(rng, 1)[0])["lbr_iiwa_link_7"]
        res = solve(iiwa, [Pose("lbr_iiwa_link_7", target)], iiwa.random_configurations(rng, 1)[0],
                    method="memetic", max_iterations=1, rng=100 + k)
        assert res.success and res.iterations == 1 and res.message == "every objective within tolerance"
        assert max(calls) == default_elites(iiwa.n)  # one batch per round: every elite at once
        assert len(calls) < 40


@pytest.mark.parametrize("seed", range(3))
def test_grouped_evaluation_equals_the_objectives_one_by_one(seed):
    """Fitness.evaluate takes the Cartesian goals together (CartesianGroup) and the others one by one: the
    same Omega^2, gradient and success as summing every objective's own losses, gradients and checks."""
    rng = np.random.default_rng(seed)
    tree = random_tree(seed + 11, n_links=9, free_root=seed != 1)
    links = tree.link_names[1:]
    Q = tree.random_configurations(rng, 6) * 0.8
    W = tree.fk(Q[0])
    a, b, c = links[-1], links[len(links) // 2], links[1]
    objs = [Position(b, W[b][:3, 3], weight=0.7, offset=[0.0, 0.1, 0.0]),
            LookAt(c, [1.0, 2.0, 3.0], weight=0.3),
            Pose(a, W[a], weight=2.0),
            Orientation(b, W[b][:3, :3], weight=1.5),
            Distance(a, 0.05, other_point=[5.0, 0.0, 0.0], weight=0.01)]
    problem = Problem(tree, objs)
    fit = Fitness(problem)
    f, g, met = fit.evaluate(Q)
    for p in range(len(Q)):
        st = tree.state(Q[p])
        L = np.concatenate([o.losses(st) for o in objs])
        G = np.vstack([o.loss_jacobian(st) for o in objs])
        w = np.concatenate([np.full(o.losses(st).shape[-1], o.weight) for o in objs])
        assert f[p] == pytest.approx(np.sum(w * L * L) / len(L), rel=1e-12, abs=1e-15)
        assert np.allclose(g[p], 2.0 / len(L) * (w * L) @ G, rtol=1e-9, atol=1e-12)
        assert met[p] == all(bool(o.satisfied(st)) for o in objs)
        single = fit.evaluate(Q[p])
        assert single[0] == pytest.approx(f[p]) and np.allclose(single[1], g[p]) and single[2] == met[p]
    own = Fitness(Problem(tree, [Pose(a, W[a]), Position(b, W[b][:3, 3]), Orientation(c, W[c][:3, :3])]))
    f, _, met = own.evaluate(Q)  # row 0 is the pose the goals were taken from
    assert met[0] and f[0] < 1e-20 and not met[1:].any()


def test_goals_at_the_world_origin_evaluate_without_warnings(iiwa):
    """The base link sits at the origin: its unused position column is 0 / 0 unless guarded; a position goal
    at the origin on it too. No warning, finite values."""
    import warnings

    base = iiwa.root
    objs = [Orientation(base, np.eye(3)), Position(base, [0.0, 0.0, 0.0]), LookAt(base, [0.0, 0.0, 0.0]),
            Pose("lbr_iiwa_link_7", iiwa.fk(np.full(7, 0.3))["lbr_iiwa_link_7"])]
    fit = Fitness(Problem(iiwa, objs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, g, met = fit.evaluate(iiwa.random_configurations(0, 4))
    assert np.all(np.isfinite(f)) and np.all(np.isfinite(g))
