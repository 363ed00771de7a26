# SPDX-License-Identifier: GPL-3.0-or-later
"""The compiled path (numba): the whole Levenberg-Marquardt solve in machine code, for the problems it covers.

numpy's per-call overhead, not arithmetic, is what a solve of a 7-joint arm spends its time on (about 0.25 ms
an iteration in ``lm``); compiling only FK and the Jacobian gains 2x at most, so the loop itself is compiled:
FK, residuals, Jacobian, the damped step within the limits, the projection, the shorter-step search and the
stopping rules of :func:`solvers.lm.run`, one formula each, the same law. The numpy path stays the reference
(tests require the same FK and Jacobians to 1e-9 and solutions as good) and the fallback: where numba is not
installed, where it is switched off (``FULLBODY_IK_NUMPY=1`` or :func:`set_enabled`), and for what this does
not cover yet, which :func:`kernel` says by returning None.

Covered: trees of revolute, continuous, prismatic and fixed joints (URDF robots; ``Tree.from_urdf``) with
Position, Orientation, Pose and LookAt goals. Not yet: Blender bone joints (swing ellipse, twist, stretch), free
roots, and the other objectives: those problems run on numpy.

The compile happens once per machine (``cache=True``; the cache in ``NUMBA_CACHE_DIR``, else the user's cache
folder, else a temporary one); :func:`warm` runs it on a small problem.
"""

import math
import os
import tempfile

import numpy as np

from .rotations import jl_inverse_coefficient

_enabled = not os.environ.get("FULLBODY_IK_NUMPY")
try:
    import numba

    if not os.environ.get("NUMBA_CACHE_DIR"):  # cache=True needs a writable folder (a read-only install has none)
        for base in (os.path.join(os.path.expanduser("~"), ".cache"), tempfile.gettempdir()):
            folder = os.path.join(base, "fullbody_ik", "numba")
            try:
                os.makedirs(folder, exist_ok=True)
                if os.access(folder, os.W_OK):
                    numba.config.CACHE_DIR = folder
                    break
            except OSError:
                continue
    from numba import njit
except ImportError:  # the numpy path serves
    numba = None

    def njit(*args, **kwargs):
        return (lambda f: f) if not (len(args) == 1 and callable(args[0])) else args[0]


def available():
    """True when the compiled path can run (numba importable) and is not switched off."""
    return numba is not None and _enabled


def status():
    """What serves the solves, in a few words (the UI shows it)."""
    if numba is None:
        return "numpy (numba is not installed here)"
    if not _enabled:
        return "numpy (the compiled core is switched off)"
    return "compiled for robot joints (URDF), numpy for bones"


def set_enabled(flag):
    """Switch the compiled path on or off for this process (off: every solve runs on numpy)."""
    global _enabled
    _enabled = bool(flag)


# Status codes of lm_kernel, and the messages of solvers.lm.run they stand for.
MESSAGES = ("every objective within tolerance", "budget exhausted",
            "converged (no step decreases the error: local minimum or limits)", "stalled (local minimum or limits)",
            "converged (step or residual change below tolerance)")
_NONE, _REVOLUTE, _PRISMATIC = 0, 1, 2


class Kernel:
    """A problem encoded as arrays for the compiled functions: the tree (parent, origin, joint kind, axis and
    variable per link; bounds, weights, continuous variables, ancestors) and the goals (link, offset, position
    and rotation targets, sqrt weight, tolerances)."""

    def __init__(self, problem):
        tree = problem.tree
        self.tree = tree
        arrays = tree.__dict__.get("_compiled_arrays")
        if arrays is None:  # per tree, once: its joints do not change (its origins may: read at each solve)
            L = len(tree.link_names)
            kind, axis, var = np.zeros(L, dtype=np.int64), np.zeros((L, 3)), np.full(L, -1, dtype=np.int64)
            continuous = np.zeros(tree.n, dtype=np.bool_)
            for m in tree.models:
                for row, frame in enumerate(m.frames):
                    var[frame], axis[frame] = m.vars[row, 0], m.axes[row]
                    kind[frame] = _PRISMATIC if m.prismatic[row] else _REVOLUTE
                    continuous[m.vars[row, 0]] = bool(m.continuous[row])
            arrays = tree._compiled_arrays = (
                np.ascontiguousarray(tree.parent, dtype=np.int64), kind, axis, var,
                np.ascontiguousarray(tree._clip_lower, dtype=float), np.ascontiguousarray(tree._clip_upper, dtype=float),
                continuous, np.ascontiguousarray(tree.weights, dtype=float),
                np.ascontiguousarray(tree.ancestors, dtype=np.bool_))
        (self.parent, self.kind, self.axis, self.var, self.lower, self.upper, self.continuous, self.weights,
         self.ancestors) = arrays
        from .objectives import LookAt, Orientation, Pose, Position

        G = len(problem.objectives)
        self.links = np.zeros(G, dtype=np.int64)
        self.offsets, self.targets_p = np.zeros((G, 3)), np.zeros((G, 3))
        self.targets_R = np.tile(np.eye(3), (G, 1, 1))
        self.has_p, self.has_R = np.zeros(G, dtype=np.bool_), np.zeros(G, dtype=np.bool_)
        self.has_L, self.look_axes = np.zeros(G, dtype=np.bool_), np.zeros((G, 3))
        self.sqrt_w, self.tol_p, self.tol_R = np.zeros(G), np.full(G, np.inf), np.full(G, np.inf)
        for g, o in enumerate(problem.objectives):
            position = o.position if isinstance(o, Pose) else o if isinstance(o, Position) else None
            orientation = o.orientation if isinstance(o, Pose) else o if isinstance(o, Orientation) else None
            self.links[g] = tree.link(o.link)
            self.sqrt_w[g] = math.sqrt(o.weight)
            if position is not None:
                self.has_p[g], self.offsets[g], self.targets_p[g] = True, position.offset, position.target
                self.tol_p[g] = position.tolerance
            if orientation is not None:
                self.has_R[g], self.targets_R[g], self.tol_R[g] = True, orientation.target, orientation.tolerance
            if isinstance(o, LookAt):  # its target in targets_p, its tolerance (an angle) in tol_R
                self.has_L[g], self.look_axes[g], self.targets_p[g], self.tol_R[g] = True, o.axis, o.target, o.tolerance

    def result(self, problem, q, method, budget, message, restarts=0):
        """The Result of q judged by the compiled evaluation (the numpy objectives' errors, tolerances and cost:
        tested equal), without a numpy FK."""
        from .objectives import LookAt, Orientation, Pose
        from .problem import Result

        errors, cost = judge(np.ascontiguousarray(q, dtype=float), *self.arrays())
        out_errors, satisfied, details = np.empty(len(problem.objectives)), [], []
        for g, o in enumerate(problem.objectives):
            ep, ea = float(errors[g, 0]), float(errors[g, 1])
            ok = (not self.has_p[g] or ep <= self.tol_p[g]) and (not (self.has_R[g] or self.has_L[g]) or
                                                                  ea <= self.tol_R[g])
            out_errors[g] = ea if isinstance(o, (Orientation, LookAt)) else ep
            satisfied.append(bool(ok))
            details.append({"error": ep, "angular_error": ea} if isinstance(o, Pose) else {"error": out_errors[g]})
        return Result(q=q, success=all(satisfied), errors=out_errors, iterations=budget.iterations,
                      elapsed=budget.elapsed(), message=message, method=method, cost=float(cost), satisfied=satisfied,
                      details=details, restarts=restarts)

    def arrays(self):
        """The arguments every kernel takes after q, in order."""
        return (self.parent, np.ascontiguousarray(self.tree.origin, dtype=float), self.kind, self.axis, self.var,
                self.lower, self.upper, self.continuous, self.weights, self.ancestors, self.links, self.offsets,
                self.targets_p, self.targets_R, self.has_p, self.has_R, self.has_L, self.look_axes, self.sqrt_w,
                self.tol_p, self.tol_R)


def covers(tree, objectives):
    """Whether the compiled path is on and covers this tree and these objectives."""
    if not available():
        return False
    from .joints import ScalarModel
    from .objectives import LookAt, Orientation, Pose, Position

    if tree.has_stretch or not all(type(m) is ScalarModel for m in tree.models):
        return False
    return all(type(o) in (Position, Orientation, Pose, LookAt) for o in objectives)


def kernel(problem):
    """The Kernel of a problem when the compiled path covers it and is on, else None (numpy serves)."""
    if not covers(problem.tree, problem.objectives):
        return None
    k = problem.__dict__.get("_kernel")
    if k is None:
        k = problem._kernel = Kernel(problem)
    return k


# -- kinematics ---------------------------------------------------------------------------------------------

@njit(cache=True)
def _matmul4(A, B, out):
    for i in range(4):
        for j in range(4):
            s = 0.0
            for k in range(4):
                s += A[i, k] * B[k, j]
            out[i, j] = s


@njit(cache=True)
def fk(q, parent, origin, kind, axis, var):
    """(L, 4, 4) world matrices of every link (links in the tree's order, parents first)."""
    W = np.empty((parent.shape[0], 4, 4))
    fk_into(q, parent, origin, kind, axis, var, W)
    return W


@njit(cache=True)
def fk_into(q, parent, origin, kind, axis, var, W):
    """fk into W (L, 4, 4)."""
    L = parent.shape[0]
    M = np.empty((4, 4))
    local = np.empty((4, 4))
    W[0] = origin[0]
    for i in range(1, L):
        M[:, :] = 0.0
        M[0, 0] = M[1, 1] = M[2, 2] = M[3, 3] = 1.0
        if kind[i] == _REVOLUTE:  # R = I + sin q K + (1 - cos q) K^2, K = [axis]x
            t = q[var[i]]
            s, c1 = math.sin(t), 1.0 - math.cos(t)
            x, y, z = axis[i, 0], axis[i, 1], axis[i, 2]
            M[0, 0] = 1.0 - c1 * (y * y + z * z)
            M[1, 1] = 1.0 - c1 * (x * x + z * z)
            M[2, 2] = 1.0 - c1 * (x * x + y * y)
            M[0, 1], M[1, 0] = -s * z + c1 * x * y, s * z + c1 * x * y
            M[0, 2], M[2, 0] = s * y + c1 * x * z, -s * y + c1 * x * z
            M[1, 2], M[2, 1] = -s * x + c1 * y * z, s * x + c1 * y * z
        elif kind[i] == _PRISMATIC:
            t = q[var[i]]
            M[0, 3], M[1, 3], M[2, 3] = t * axis[i, 0], t * axis[i, 1], t * axis[i, 2]
        _matmul4(origin[i], M, local)
        _matmul4(W[parent[i]], local, W[i])


@njit(cache=True)
def _log_so3(M, out):
    """Rotation vector of M (paper 001 eq. 21-22), the near-pi case from the symmetric part (rotations.log_so3)."""
    lx, ly, lz = M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]
    ln = math.sqrt(lx * lx + ly * ly + lz * lz)
    theta = math.atan2(ln, M[0, 0] + M[1, 1] + M[2, 2] - 1.0)
    if theta <= math.pi - 1e-3:
        scale = 0.5 if ln < 1e-12 else theta / ln
        out[0], out[1], out[2] = lx * scale, ly * scale, lz * scale
        return theta
    c = math.cos(theta)
    best, k = -1.0, 0
    for i in range(3):
        d = max(((M[i, i] + M[i, i]) * 0.5 - c) / (1.0 - c), 0.0)
        if d > best:
            best, k = d, i
    a = np.empty(3)
    for j in range(3):
        a[j] = ((M[k, j] + M[j, k]) * 0.5 - (c if j == k else 0.0)) / (1.0 - c)
    a /= math.sqrt(max(best, 1e-300))
    if a[0] * lx + a[1] * ly + a[2] * lz < 0.0:
        a = -a
    a /= math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
    out[0], out[1], out[2] = a[0] * theta, a[1] * theta, a[2] * theta
    return theta


_jl_coefficient = njit(cache=True)(jl_inverse_coefficient)  # the numpy path's formula, compiled


@njit(cache=True)
def _jl_inverse(v, out):
    """J_l(v)^-1 = I - K/2 + (1/t^2 - (1 + cos t) / (2 t sin t)) K^2 (rotations.left_jacobian_inverse_so3)."""
    d = _jl_coefficient(math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
    K = np.zeros((3, 3))
    K[0, 1], K[0, 2], K[1, 0], K[1, 2], K[2, 0], K[2, 1] = -v[2], v[1], v[2], -v[0], -v[1], v[0]
    for i in range(3):
        for j in range(3):
            s = 0.0
            for k in range(3):
                s += K[i, k] * K[k, j]
            out[i, j] = (1.0 if i == j else 0.0) - 0.5 * K[i, j] + d * s


@njit(cache=True)
def _size(has_p, has_R, has_L):
    m = 0
    for g in range(has_p.shape[0]):
        m += 3 * has_p[g] + 3 * has_R[g] + 3 * has_L[g]
    return m


@njit(cache=True)
def evaluate(q, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R, has_L,
             look_axes, sqrt_w, tol_p, tol_R, r, J, want_jacobian, errors):
    """Weighted residuals into r (m,) and, when asked, their Jacobian into J (m, n): Position rows p - target,
    Orientation rows log(R R_d^T) with J_l^-1 omega (the numpy objectives' formulas); each goal's position
    error and angle into errors (G, 2). Returns (every goal met, unmet: sum w |r|^2 / 2 over the goals not
    met)."""
    return _evaluate(q, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R, has_L,
                     look_axes, sqrt_w, tol_p, tol_R, r, J, want_jacobian, errors, _workspace(q.shape[0], var))


@njit(cache=True)
def _workspace(n, var):
    """evaluate's work space: 3-vectors (7, 3), 3x3 matrices (2, 3, 3), each variable's link (n,)."""
    var_link = np.full(n, -1, dtype=np.int64)
    for i in range(var.shape[0]):
        if var[i] >= 0:
            var_link[var[i]] = i
    return np.empty((7, 3)), np.empty((2, 3, 3)), var_link


@njit(cache=True)
def _evaluate(q, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R, has_L, look_axes,
              sqrt_w, tol_p, tol_R, r, J, want_jacobian, errors, ws):
    n = q.shape[0]
    row = 0
    met_all = True
    unmet = 0.0
    vectors, matrices, var_link = ws
    phi, p, a, d, Vl, dl, dp = vectors[0], vectors[1], vectors[2], vectors[3], vectors[4], vectors[5], vectors[6]
    Rm, Ji = matrices[0], matrices[1]
    for g in range(links.shape[0]):
        Wg = W[links[g]]
        w = sqrt_w[g]
        for k in range(3):
            p[k] = Wg[k, 3] + Wg[k, 0] * offsets[g, 0] + Wg[k, 1] * offsets[g, 1] + Wg[k, 2] * offsets[g, 2]
        sq, ok = 0.0, True
        rp, rR = -1, -1
        if has_p[g]:
            e = 0.0
            for k in range(3):
                x = p[k] - targets_p[g, k]
                r[row + k] = w * x
                e += x * x
            sq += e
            errors[g, 0] = math.sqrt(e)
            ok = ok and errors[g, 0] <= tol_p[g]
            rp = row
            row += 3
        if has_R[g]:
            for i in range(3):
                for j in range(3):
                    Rm[i, j] = Wg[i, 0] * targets_R[g, j, 0] + Wg[i, 1] * targets_R[g, j, 1] + \
                        Wg[i, 2] * targets_R[g, j, 2]
            theta = _log_so3(Rm, phi)
            for k in range(3):
                r[row + k] = w * phi[k]
            sq += theta * theta
            errors[g, 1] = theta
            ok = ok and theta <= tol_R[g]
            rR = row
            row += 3
            if want_jacobian:
                _jl_inverse(phi, Ji)
        rL, dist, far = -1, 1.0, False
        if has_L[g]:  # LookAt: r = V - d, V the link's axis, d the unit direction to the target
            dist = 0.0
            for k in range(3):
                Vl[k] = Wg[k, 0] * look_axes[g, 0] + Wg[k, 1] * look_axes[g, 1] + Wg[k, 2] * look_axes[g, 2]
                dl[k] = targets_p[g, k] - Wg[k, 3]
                dist += dl[k] * dl[k]
            dist = math.sqrt(dist)
            far = dist > 1e-12
            e = 0.0
            for k in range(3):
                dl[k] = dl[k] / max(dist, 1e-12) if far else Vl[k]
                r[row + k] = w * (Vl[k] - dl[k])
                e += (Vl[k] - dl[k]) ** 2
            sq += e
            angle = 2.0 * math.asin(min(max(0.5 * math.sqrt(e), 0.0), 1.0))
            errors[g, 1] = angle
            ok = ok and angle <= tol_R[g]
            rL = row
            row += 3
        if not ok:
            met_all = False
            unmet += 0.5 * w * w * sq
        if not want_jacobian:
            continue
        for v in range(n):
            if rp >= 0:
                J[rp, v] = J[rp + 1, v] = J[rp + 2, v] = 0.0
            if rR >= 0:
                J[rR, v] = J[rR + 1, v] = J[rR + 2, v] = 0.0
            if rL >= 0:
                J[rL, v] = J[rL + 1, v] = J[rL + 2, v] = 0.0
            if not ancestors[links[g], v]:
                continue
            i = var_link[v]
            Wi = W[i]
            for k in range(3):
                a[k] = Wi[k, 0] * axis[i, 0] + Wi[k, 1] * axis[i, 1] + Wi[k, 2] * axis[i, 2]
            if kind[i] == _REVOLUTE:
                for k in range(3):
                    d[k] = p[k] - Wi[k, 3]
                if rp >= 0:
                    J[rp, v] = w * (a[1] * d[2] - a[2] * d[1])
                    J[rp + 1, v] = w * (a[2] * d[0] - a[0] * d[2])
                    J[rp + 2, v] = w * (a[0] * d[1] - a[1] * d[0])
                if rR >= 0:
                    for k in range(3):
                        J[rR + k, v] = w * (Ji[k, 0] * a[0] + Ji[k, 1] * a[1] + Ji[k, 2] * a[2])
            elif rp >= 0:  # prismatic: moves the point along its axis, turns nothing
                for k in range(3):
                    J[rp + k, v] = w * a[k]
            if rL >= 0:  # dV - dd: omega x V + (I - d d^T) dp / |T - p|, dp the link origin's velocity
                revolute = kind[i] == _REVOLUTE
                for k in range(3):
                    dp[k] = Wg[k, 3] - Wi[k, 3]
                if revolute:
                    x0 = a[1] * dp[2] - a[2] * dp[1]
                    x1 = a[2] * dp[0] - a[0] * dp[2]
                    x2 = a[0] * dp[1] - a[1] * dp[0]
                    dp[0], dp[1], dp[2] = x0, x1, x2
                else:
                    dp[0], dp[1], dp[2] = a[0], a[1], a[2]
                dd = dl[0] * dp[0] + dl[1] * dp[1] + dl[2] * dp[2]
                for k in range(3):
                    col = (dp[k] - dl[k] * dd) / dist if far else 0.0
                    if revolute:
                        col += (a[(k + 1) % 3] * Vl[(k + 2) % 3] - a[(k + 2) % 3] * Vl[(k + 1) % 3])
                    J[rL + k, v] = w * col
    return met_all, unmet


@njit(cache=True)
def project(q, lower, upper, continuous):
    """The tree's projection for these joints: non-finite values to 0, clipped to the bounds, continuous
    joints wrapped to (-pi, pi]."""
    out = np.empty_like(q)
    for v in range(q.shape[0]):
        x = q[v] if np.isfinite(q[v]) else 0.0
        x = min(max(x, lower[v]), upper[v])
        if continuous[v]:
            x = math.atan2(math.sin(x), math.cos(x))
        out[v] = x
    return out


@njit(cache=True)
def _spd_solve(H, b, x, Lc, y):
    """x = H^-1 b for a symmetric positive definite H (Cholesky; H is J^T J + lambda I); Lc (n, n) and y (n,)
    are work space."""
    n = H.shape[0]
    for j in range(n):
        s = H[j, j]
        for k in range(j):
            s -= Lc[j, k] * Lc[j, k]
        Lc[j, j] = math.sqrt(max(s, 1e-300))
        for i in range(j + 1, n):
            s = H[i, j]
            for k in range(j):
                s -= Lc[i, k] * Lc[j, k]
            Lc[i, j] = s / Lc[j, j]
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= Lc[i, k] * y[k]
        y[i] = s / Lc[i, i]
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= Lc[k, i] * x[k]
        x[i] = s / Lc[i, i]


@njit(cache=True)
def _damped_step(J, r, lam, D, held, dq, H, b, Lc, y):
    """dq = -D (J_h^T J_h + lam I)^-1 J_h^T r with the held variables' columns removed (eq. 11-12); H, Lc (n, n)
    and b, y (n,) are work space."""
    m, n = J.shape
    for i in range(n):
        for j in range(i, n):
            s = 0.0
            if not (held[i] or held[j]):
                for k in range(m):
                    s += J[k, i] * J[k, j]
            H[i, j] = H[j, i] = s
        H[i, i] += lam
        s = 0.0
        if not held[i]:
            for k in range(m):
                s += J[k, i] * r[k]
        b[i] = -s
    _spd_solve(H, b, dq, Lc, y)
    for i in range(n):
        dq[i] = 0.0 if held[i] else D[i] * dq[i]


@njit(cache=True)
def lm_kernel(q, max_iterations, stall, damping_bias, damping_scale, step_tol, residual_tol, backtracks,
              parent, origin, kind, axis, var, lower, upper, continuous, D, ancestors, links, offsets, targets_p,
              targets_R, has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R):
    """solvers.lm.run compiled: q <- P(q + D dq), (J^T J + W_N) dq = -J^T r, W_N = mu (E_k + w_N) I (paper 001
    eq. 11-15), the step solved within the box bounds it pushes against, a shorter step when the full one is
    worse (damping raised by 1/t for the usable fraction t, halved back after full steps), the same stopping
    rules. Returns (q, status: an index of MESSAGES, iterations, every goal met, E = |r|^2 / 2)."""
    n = q.shape[0]
    m = _size(has_p, has_R, has_L)
    r, J = np.empty(m), np.empty((m, n))
    r_new = np.empty(m)
    Jd = np.empty((m, n))
    errors = np.zeros((links.shape[0], 2))
    H, Lc, b, y = np.empty((n, n)), np.empty((n, n)), np.empty(n), np.empty(n)
    ws = _workspace(n, var)
    W = fk(q, parent, origin, kind, axis, var)
    met, unmet = _evaluate(q, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R,
                          has_L, look_axes, sqrt_w, tol_p, tol_R, r, J, True, errors, ws)
    E = 0.5 * np.dot(r, r)
    history = np.empty(max_iterations + 1)
    history[0] = unmet
    mu = 1.0
    it = 0
    dq = np.empty(n)
    held = np.zeros(n, dtype=np.bool_)
    grid = np.array([1.0, 0.8, 0.6, 0.45, 0.3, 0.2, 0.12, 0.06, 0.02])
    while True:
        if met:
            return q, 0, it, met, E
        if it >= max_iterations:
            return q, 1, it, met, E
        it += 1
        for k in range(m):
            for v in range(n):
                Jd[k, v] = J[k, v] * D[v]
        lam = mu * (damping_scale * E + damping_bias)
        held[:] = False
        _damped_step(Jd, r, lam, D, held, dq, H, b, Lc, y)
        for _ in range(3):  # constrained_step: hold the variables on a bound that the step pushes outward
            grown = False
            for v in range(n):
                h = (q[v] <= lower[v] + 1e-12 and dq[v] < 0.0) or (q[v] >= upper[v] - 1e-12 and dq[v] > 0.0)
                if h and not held[v]:
                    held[v] = True
                    grown = True
            if not grown:
                break
            _damped_step(Jd, r, lam, D, held, dq, H, b, Lc, y)
        q_new = project(q + dq, lower, upper, continuous)
        fk_into(q_new, parent, origin, kind, axis, var, W)
        met_new, unmet_new = _evaluate(q_new, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R,
                                       has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R, r_new, J, False, errors,
                                       ws)
        E_new = 0.5 * np.dot(r_new, r_new)
        if E_new > E:  # shorter_step: the halvings and the longest grid step that stays inside the bounds
            inside_t = -1.0
            for t in grid:
                trial = q + t * dq
                if np.max(np.abs(project(trial, lower, upper, continuous) - trial)) <= 1e-12:
                    inside_t = t
                    break
            best_E, best_t = np.inf, -1.0
            for k in range(backtracks + 1):
                t = 0.5 ** (k + 1) if k < backtracks else inside_t
                if t <= 0.0:
                    continue
                qt = project(q + t * dq, lower, upper, continuous)
                fk_into(qt, parent, origin, kind, axis, var, W)
                _evaluate(qt, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R,
                         has_L, look_axes, sqrt_w, tol_p, tol_R, r_new, J, False, errors, ws)
                Et = 0.5 * np.dot(r_new, r_new)
                if Et < best_E:
                    best_E, best_t = Et, t
            if not best_E <= E:
                return q, 2, it, met, E
            q_new = project(q + best_t * dq, lower, upper, continuous)
            step = np.max(np.abs(q_new - q)) / max(np.max(np.abs(dq)), 1e-300)
            mu = min(mu / max(step, 1e-3), 1e8)
        else:
            mu = max(mu / 2.0, 1.0)
        moved = np.max(np.abs(q_new - q)) if n else 0.0
        fk_into(q_new, parent, origin, kind, axis, var, W)
        met, unmet = _evaluate(q_new, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p,
                              has_R, has_L, look_axes, sqrt_w, tol_p, tol_R, r, J, True, errors, ws)
        E_prev = E
        E = 0.5 * np.dot(r, r)
        change = abs(math.sqrt(2.0 * E) - math.sqrt(2.0 * E_prev))
        q = q_new
        history[it] = unmet
        if stall > 0 and it > stall and history[it] > 0.99 * history[it - stall] and history[it - stall] > 0.0:
            return q, 3, it, met, E
        if moved < step_tol or change < residual_tol:
            return q, 0 if met else 4, it, met, E


@njit(cache=True)
def restarts_kernel(q, seeds, max_iterations, stall, damping_bias, damping_scale, step_tol, residual_tol, backtracks,
                    parent, origin, kind, axis, var, lower, upper, continuous, D, ancestors, links, offsets, targets_p,
                    targets_R, has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R):
    """lm_kernel from q, then from each of ``seeds`` in turn (each search given up when it stalls), until one
    meets every goal or max_iterations run out. Returns (the search's q when the iterations ran out (to go on
    from) or the last answer, the best q, its (met, E), seeds used, iterations, whether the iterations ran out)."""
    total, used = 0, 0
    best_q, best_met, best_E = q.copy(), False, np.inf
    while True:
        q_end, status, its, met, E = lm_kernel(q, max_iterations - total, stall, damping_bias, damping_scale,
                                               step_tol, residual_tol, backtracks, parent, origin, kind, axis, var,
                                               lower, upper, continuous, D, ancestors, links, offsets, targets_p,
                                               targets_R, has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R)
        total += its
        if (met and not best_met) or (met == best_met and E < best_E):
            best_q, best_met, best_E = q_end.copy(), met, E
        if met:
            return q_end, best_q, best_met, best_E, used, total, False
        if status == 1 or total >= max_iterations:
            return q_end, best_q, best_met, best_E, used, total, True
        if used >= seeds.shape[0]:
            return q_end, best_q, best_met, best_E, used, total, False
        q = seeds[used].copy()
        used += 1


@njit(cache=True)
def judge(q, parent, origin, kind, axis, var, lower, upper, continuous, D, ancestors, links, offsets, targets_p,
          targets_R, has_p, has_R, has_L, look_axes, sqrt_w, tol_p, tol_R):
    """(errors (G, 2): each goal's position error and angle, cost sum w |r|^2 / 2) at q."""
    m = _size(has_p, has_R, has_L)
    r, J = np.empty(m), np.empty((0, 0))
    errors = np.zeros((links.shape[0], 2))
    W = fk(q, parent, origin, kind, axis, var)
    evaluate(q, W, kind, axis, var, ancestors, links, offsets, targets_p, targets_R, has_p, has_R, has_L, look_axes,
             sqrt_w, tol_p, tol_R, r, J, False, errors)
    return errors, 0.5 * np.dot(r, r)


# -- the solver methods' compiled runs --------------------------------------------------------------------------

CHUNK = 200  # iterations per kernel call: the wall-clock budget is checked between calls


def run(k, problem, q, budget, damping_bias=1e-3, step_tol=1e-12, residual_tol=1e-12, backtracks=8, stall=None,
        damping_scale=1.0):
    """solvers.lm.run on the compiled kernel: (q, message). Iterations count into ``budget``; the wall clock is
    looked at every CHUNK iterations (a kernel call cannot read it), so a solve overruns its time limit by at
    most one chunk (about a millisecond on a 7-joint arm)."""
    args = k.arrays()
    q = np.ascontiguousarray(q, dtype=float)
    met = None  # not judged yet: nothing ran
    while True:
        left = CHUNK if budget.max_iterations is None else min(CHUNK, budget.max_iterations - budget.iterations)
        if left <= 0 or budget.past_deadline():
            if met is None:
                met = problem.satisfied(problem.state(q))
            return q, MESSAGES[0] if met else MESSAGES[1]
        q, status, iterations, met, _ = lm_kernel(q, left, int(stall or 0), float(damping_bias), float(damping_scale),
                                                  float(step_tol), float(residual_tol), int(backtracks), *args)
        budget.iterations += iterations
        if status != 1:
            return q, MESSAGES[status]


def run_restarts(k, problem, q, budget, rng=None, stall=5, damping_bias=1e-3, step_tol=1e-12, residual_tol=1e-12,
                 backtracks=8, damping_scale=1.0, starts=None):
    """Restarts for the compiled LM (the numpy path runs its starts as one batch; compiled, one after another
    is cheaper), inside the kernel: from the seed, then from random feasible configurations drawn eight at a
    time, each search given up when it stalls, until one meets every objective or the budget ends. (q, message)
    of the first success, else of the best."""
    args = k.arrays()
    tree = problem.tree
    q = np.ascontiguousarray(q, dtype=float)
    seeds = np.empty((0, tree.n))
    best_q, best_key, count = q, (True, np.inf), 0
    while True:
        left = CHUNK if budget.max_iterations is None else min(CHUNK, budget.max_iterations - budget.iterations)
        if left <= 0 or budget.past_deadline():
            break
        q, found, met, E, used, iterations, ran_out = restarts_kernel(
            q, seeds, left, int(stall or 0), float(damping_bias), float(damping_scale), float(step_tol),
            float(residual_tol), int(backtracks), *args)
        budget.iterations += iterations
        count += used
        seeds = seeds[used:]
        if (not met, E) < best_key:
            best_q, best_key = found, (not met, E)
        if met or (budget.deadline is None and budget.max_iterations is None and count >= 10):
            break  # (no budget at all: ten restarts, as solve allows a local method)
        if not ran_out:  # the seeds are used up: more, and on from the first of them
            if not isinstance(rng, np.random.Generator):
                rng = np.random.default_rng(rng)
            seeds = np.ascontiguousarray(tree.random_configurations(rng, 8))
            q, seeds, count = seeds[0].copy(), seeds[1:], count + 1
    if best_key[1] == np.inf:  # nothing ran: judge the seed
        st = problem.state(q)
        return q, MESSAGES[0] if problem.satisfied(st) else MESSAGES[1]
    message = MESSAGES[0] if not best_key[0] else MESSAGES[1] if budget.exhausted() else MESSAGES[3]
    if count:
        message += f" (best of {count + 1} starts)"
    return best_q, message


def warm():
    """Compile (or load from the cache) every kernel by solving a small problem: the first solve of a session
    then costs no compile. Returns the seconds it took."""
    import time

    from .objectives import Pose
    from .tree import Joint, Tree

    start = time.perf_counter()
    if not available():
        return 0.0
    T = np.eye(4)
    T[2, 3] = 0.3
    joints = [Joint("j1", "revolute", "base", "l1", T, (0, 0, 1), -3.0, 3.0),
              Joint("j2", "prismatic", "l1", "l2", T, (1, 0, 0), -1.0, 1.0),
              Joint("j3", "continuous", "l2", "l3", T, (0, 1, 0))]
    tree = Tree(joints)
    from .problem import Budget, Problem

    problem = Problem(tree, [Pose("l3", tree.fk(np.array([0.3, 0.2, 0.1]))["l3"])])
    run(Kernel(problem), problem, np.zeros(3), Budget(None, 50))
    return time.perf_counter() - start
