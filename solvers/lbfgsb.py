# SPDX-License-Identifier: GPL-3.0-or-later
"""scipy's L-BFGS-B run on several starting points at once, their function evaluations batched.

Paper 000 exploits each elite with L-BFGS-B on its own thread (§III-H). Here the elites' runs advance in
lockstep instead: each run is scipy's own L-BFGS-B routine (``setulb``, the reverse-communication core that
``scipy.optimize.minimize(method="L-BFGS-B")`` drives), stepped until it asks for f and g; the points all runs
ask for are then evaluated together (one batched FK). The iterates are those of ``minimize`` exactly (tested).

Driving ``setulb`` directly also saves ``minimize``'s set-up (~150 us per call) and per-evaluation wrapper
(~35 us), measured on scipy 1.17.1 (the version the extension ships). Should the routine not be the one this
driver knows (another scipy), :func:`minimize_batch` falls back to ``minimize``, one start at a time.
"""

import numpy as np

try:
    from scipy.optimize import _lbfgsb
except ImportError:  # pragma: no cover - another scipy layout
    _lbfgsb = None

# setulb's task codes (scipy/optimize/__lbfgsb.h): 3 = wants f and g at x, 1 = a new iterate, 4 = converged,
# 5 = stopped by the caller; anything else is an error or an abnormal line search.
_FG, _NEW_X, _STOP = 3, 1, 5


class _Run:
    """One L-BFGS-B run: scipy's workspace for ``setulb``."""

    def __init__(self, x0, low, up, nbd, m, factr, pgtol, maxls):
        n = len(x0)
        self.x = np.array(x0, dtype=np.float64)
        self.low, self.up, self.nbd = low, up, nbd
        self.m, self.factr, self.pgtol, self.maxls = m, factr, pgtol, maxls
        self.f = np.array(0.0, dtype=np.float64)
        self.g = np.zeros(n, dtype=np.float64)
        self.wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m, np.float64)
        self.iwa = np.zeros(3 * n, dtype=np.int32)
        self.task = np.zeros(2, dtype=np.int32)
        self.ln_task = np.zeros(2, dtype=np.int32)
        self.lsave = np.zeros(4, dtype=np.int32)
        self.isave = np.zeros(44, dtype=np.int32)
        self.dsave = np.zeros(29, dtype=np.float64)
        self.iterations = 0

    def advance(self):
        """Call setulb once; returns its task code."""
        _lbfgsb.setulb(self.m, self.x, self.low, self.up, self.nbd, self.f, self.g, self.factr, self.pgtol,
                       self.wa, self.iwa, self.task, self.lsave, self.isave, self.dsave, self.maxls, self.ln_task)
        return int(self.task[0])


def _bound_arrays(lower, upper):
    """setulb's bound encoding: nbd 0 none, 1 lower only, 2 both, 3 upper only."""
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    has_lo, has_up = np.isfinite(lower), np.isfinite(upper)
    nbd = np.where(has_lo & has_up, 2, np.where(has_lo, 1, np.where(has_up, 3, 0))).astype(np.int32)
    return np.where(has_lo, lower, 0.0), np.where(has_up, upper, 0.0), nbd


def minimize_batch(evaluate, X0, lower, upper, maxiter, deadline=None, m=10, ftol=1e-15, gtol=1e-14, maxls=20):
    """Minimize from every row of X0 (K, n) within the box [lower, upper] (inf: unbounded).

    ``evaluate(X)`` takes the (k, n) points the runs ask for and returns (f (k,), g (k, n), done (k,)): a point
    that is ``done`` ends every run (the solve is over). Each run stops after ``maxiter``
    iterations or on its own convergence (``ftol``, ``gtol`` as in ``minimize``); all stop at ``deadline``
    (a callable returning True when time is up). Returns (X (K, n) the best point each run evaluated,
    f (K,), index of a done row or None).
    """
    X0 = np.atleast_2d(np.asarray(X0, dtype=float))
    K, n = X0.shape
    low, up, nbd = _bound_arrays(lower, upper)
    X0 = np.clip(X0, np.where(nbd % 3 != 0, low, -np.inf), np.where(nbd >= 2, up, np.inf))
    best_x, best_f = X0.copy(), np.full(K, np.inf)
    if _lbfgsb is None or not _driver_works():
        return _minimize_one_by_one(evaluate, X0, lower, upper, maxiter, deadline, m, ftol, gtol, maxls)
    factr = ftol / np.finfo(float).eps
    runs = [_Run(x, low, up, nbd, m, factr, gtol, maxls) for x in X0]
    active = list(range(K))
    while active:
        asking = []
        for k in active:
            run = runs[k]
            while True:
                task = run.advance()
                if task == _FG:
                    asking.append(k)
                    break
                if task != _NEW_X:
                    break  # converged, or an abnormal end: this run is over
                run.iterations += 1
                if run.iterations >= maxiter:
                    break
        if not asking or (deadline is not None and deadline()):
            break
        f, g, done = evaluate(np.array([runs[k].x for k in asking]))
        g = np.ascontiguousarray(g, dtype=np.float64)
        for i, k in enumerate(asking):
            run = runs[k]
            run.f, run.g = float(f[i]), g[i]  # setulb reads f and g (a contiguous row) on its next call
            if run.f < best_f[k]:
                best_f[k], best_x[k] = run.f, run.x
        if done.any():  # an evaluated point meets every objective: nothing is left to exploit
            i = int(np.argmax(done))
            best_x[asking[i]], best_f[asking[i]] = runs[asking[i]].x, f[i]
            return best_x, best_f, asking[i]
        active = asking
    return best_x, best_f, None


def _minimize_one_by_one(evaluate, X0, lower, upper, maxiter, deadline, m, ftol, gtol, maxls):
    """The fallback: ``scipy.optimize.minimize`` per start (stopped at the deadline or when done)."""
    from scipy.optimize import minimize

    bounds = list(zip(np.where(np.isfinite(lower), lower, None), np.where(np.isfinite(upper), upper, None)))
    X, F = X0.copy(), np.full(len(X0), np.inf)
    for k in range(len(X0)):
        found = []

        def fun(x):
            f, g, done = evaluate(x[None])
            if not found and (done[0] or f[0] < F[k]):  # a point that is done is the answer, better f or not
                X[k], F[k] = x, f[0]
                if done[0]:
                    found.append(k)
            return float(f[0]), g[0]

        def stop(intermediate_result):
            if found or (deadline is not None and deadline()):
                raise StopIteration

        minimize(fun, X0[k], jac=True, method="L-BFGS-B", bounds=bounds, callback=stop,
                 options={"maxiter": maxiter, "ftol": ftol, "gtol": gtol, "maxcor": m, "maxls": maxls})
        if found:
            return X, F, k
        if deadline is not None and deadline():
            break
    return X, F, None


_checked = []


def _driver_works():
    """Once per process: this driver's iterates equal ``minimize``'s on a small bounded problem."""
    if not _checked:
        from scipy.optimize import minimize

        A = np.diag([1.0, 4.0, 9.0])
        fg = lambda x: (0.5 * x @ A @ x + x.sum(), A @ x + 1.0)  # noqa: E731
        x0, lo, hi = np.array([1.0, 1.0, 1.0]), np.array([-0.5, -np.inf, 0.2]), np.array([2.0, 2.0, np.inf])
        ref = minimize(fg, x0, jac=True, method="L-BFGS-B", bounds=list(zip([-0.5, None, 0.2], [2.0, 2.0, None])),
                       options={"maxiter": 3}).x
        try:
            low, up, nbd = _bound_arrays(lo, hi)
            run = _Run(x0, low, up, nbd, 10, 2.2204460492503131e-09 / np.finfo(float).eps, 1e-5, 20)
            while True:
                task = run.advance()
                if task == _FG:
                    f, g = fg(run.x)
                    run.f, run.g = np.float64(f), g
                elif task == _NEW_X:
                    run.iterations += 1
                    if run.iterations >= 3:
                        break
                else:
                    break
            _checked.append(bool(np.allclose(run.x, ref, rtol=0, atol=1e-12)))
        except (TypeError, ValueError, AttributeError):  # not the routine this driver knows
            _checked.append(False)
    return _checked[0]
