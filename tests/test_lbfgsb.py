# SPDX-License-Identifier: GPL-3.0-or-later
"""The batched L-BFGS-B driver: the iterates of scipy's minimize, run after run, evaluations batched."""

import numpy as np
import pytest
from scipy.optimize import minimize

from fullbody_ik.solvers import lbfgsb


def rosenbrock(X):
    X = np.atleast_2d(X)
    a, b = X[:, :-1], X[:, 1:]
    f = np.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2, axis=1)
    g = np.zeros_like(X)
    g[:, :-1] += -400.0 * a * (b - a * a) - 2.0 * (1.0 - a)
    g[:, 1:] += 200.0 * (b - a * a)
    return f, g


def test_the_driver_is_the_routine_this_scipy_has():
    assert lbfgsb._driver_works()


@pytest.mark.parametrize("maxiter", [1, 4, 25])
def test_each_run_follows_minimize_exactly_with_evaluations_batched(maxiter):
    rng = np.random.default_rng(3)
    X0 = rng.uniform(-2.0, 2.0, (4, 5))
    lower, upper = np.array([-1.5, -np.inf, 0.5, -2.0, -np.inf]), np.array([1.5, 2.0, np.inf, 2.0, np.inf])
    batches = []

    def evaluate(X):
        batches.append(len(X))
        f, g = rosenbrock(X)
        return f, g, np.zeros(len(X), dtype=bool)

    X, F, done = lbfgsb.minimize_batch(evaluate, X0, lower, upper, maxiter)
    assert done is None
    bounds = list(zip([-1.5, None, 0.5, -2.0, None], [1.5, 2.0, None, 2.0, None]))
    for x0, x, f in zip(X0, X, F):
        seen = []

        def fun(x):
            f, g = rosenbrock(x)
            seen.append((f[0], x.copy()))
            return f[0], g[0]

        minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                 options={"maxiter": maxiter, "ftol": 1e-15, "gtol": 1e-14})
        best_f, best_x = min(seen, key=lambda s: s[0])  # the driver returns the best point it evaluated
        assert f == pytest.approx(best_f, rel=0, abs=1e-12)
        assert np.allclose(x, best_x, rtol=0, atol=1e-12)
        assert np.all(x >= np.where(np.isfinite(lower), lower, -np.inf))
        assert np.all(x <= np.where(np.isfinite(upper), upper, np.inf))
    assert max(batches) == 4  # the runs were evaluated together


def test_a_done_point_ends_every_run_and_the_deadline_stops_them():
    X0 = np.array([[-1.2, 1.0], [0.9, 0.8], [2.0, -2.0]])

    def evaluate(X):
        f, g = rosenbrock(X)
        return f, g, f < 1e-3

    X, F, done = lbfgsb.minimize_batch(evaluate, X0, [-5, -5], [5, 5], 200)
    assert done is not None and F[done] < 1e-3 and rosenbrock(X[done])[0][0] == pytest.approx(F[done])
    calls = []

    def slow(X):
        calls.append(1)
        f, g = rosenbrock(X)
        return f, g, np.zeros(len(X), dtype=bool)

    X, F, done = lbfgsb.minimize_batch(slow, X0, [-5, -5], [5, 5], 200, deadline=lambda: len(calls) >= 3)
    assert done is None and len(calls) == 3 and np.all(np.isfinite(F))


def test_the_fallback_gives_the_same_answers(monkeypatch):
    X0 = np.array([[-1.2, 1.0], [0.3, 0.1]])

    def evaluate(X):
        f, g = rosenbrock(X)
        return f, g, np.zeros(len(X), dtype=bool)

    fast = lbfgsb.minimize_batch(evaluate, X0, [-2, -np.inf], [2, np.inf], 15)
    monkeypatch.setattr(lbfgsb, "_checked", [False])
    slow = lbfgsb.minimize_batch(evaluate, X0, [-2, -np.inf], [2, np.inf], 15)
    assert np.allclose(fast[0], slow[0], atol=1e-12) and np.allclose(fast[1], slow[1], atol=1e-12)


@pytest.mark.parametrize("fallback", [False, True])
def test_the_point_that_is_done_is_returned_even_when_an_earlier_one_had_a_lower_f(monkeypatch, fallback):
    if fallback:
        monkeypatch.setattr(lbfgsb, "_checked", [False])

    def evaluate(X):  # the minimum is at 0.3, but "done" (every goal met) only beyond 0.9
        return 3.0 * (X[:, 0] - 0.3) ** 2, 6.0 * (X - 0.3), X[:, 0] > 0.9

    X, F, done = lbfgsb.minimize_batch(evaluate, np.zeros((1, 1)), [-5.0], [5.0], 20)
    assert done == 0 and X[0, 0] > 0.9 and F[0] == pytest.approx(3.0 * (X[0, 0] - 0.3) ** 2)
