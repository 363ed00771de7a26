# SPDX-License-Identifier: GPL-3.0-or-later
"""The Objective protocol shared by every solver (one small file per family of objectives).

An objective evaluates on a *state*: ``state.tree``, ``state.q`` (..., n) and ``state.world``
(..., L, 4, 4). Leading dimensions are a batch (the memetic population) or absent (one state).

- ``residual(state)`` (..., m): zero at the goal; least-squares solvers minimize sum w |r|^2 / 2.
- ``jacobian(state)`` (m, n): d residual / dq for one state (analytic; tested against finite differences).
- ``error(state)`` (...): the error in the objective's own unit (m or rad); ``satisfied`` compares it
  with ``tolerance``.
- ``losses(state)`` (..., c): the normalised losses of paper 000, eq. 15, for the RMSE fitness (eq. 14).
- ``priority``: larger is more important (used by the nullspace solver; others merge all priorities).
"""

import math

import numpy as np

POSITION_TOLERANCE = 1e-4  # m
ANGULAR_TOLERANCE = 1e-3  # rad
MAX_COORDINATE = 1e9  # larger coordinates overflow squared errors; no rig or robot is that large


class Objective:
    size = 0
    inequality = False

    def __init__(self, weight=1.0, tolerance=POSITION_TOLERANCE, priority=0):
        weight = float(weight)
        if not math.isfinite(weight) or weight < 0.0:
            raise ValueError(f"{type(self).__name__}: weight must be finite and >= 0, got {weight}")
        self.weight = weight
        self.tolerance = float(tolerance)
        self.priority = int(priority)

    # -- to fill in ----------------------------------------------------------------------------
    def compute_residual(self, state):
        raise NotImplementedError

    def jacobian(self, state):
        raise NotImplementedError

    def error(self, state):
        return np.linalg.norm(self.residual(state), axis=-1)

    def losses(self, state):
        return self.error(state)[..., None]

    def loss_jacobian(self, state):
        """(..., c, n) gradients of ``losses`` (the memetic exploitation's analytic gradient), for one state
        or a batch.

        Default: the loss is the error, a function of |r|: d loss = f'(|r|) (r / |r|)^T J.
        """
        r = self.residual(state)
        norm = np.sqrt(np.sum(r * r, axis=-1))
        u = np.where(norm[..., None] > 1e-300, r / np.maximum(norm, 1e-300)[..., None], 0.0)
        u = u * self._error_slope(norm)[..., None]
        return u[..., None, :] @ self.jacobian(state)

    def fitness_terms(self, state):
        """(losses, loss_jacobian, satisfied) together, for one state or a batch: what the memetic
        exploitation asks of every evaluated point (Cartesian goals compute them fused)."""
        return self.losses(state), self.loss_jacobian(state), self.satisfied(state)

    @staticmethod
    def _error_slope(norm):
        return np.ones_like(norm)

    # -- shared ----------------------------------------------------------------------------------
    def residual(self, state):
        """compute_residual, kept in ``state.cache`` (solvers ask for it several times per state)."""
        key = (self, "residual")  # the object, not id(): a freed objective's id can be reused
        value = state.cache.get(key)
        if value is None:
            value = state.cache[key] = self.compute_residual(state)
        return value

    def satisfied(self, state):
        return self.error(state) <= self.tolerance

    def details(self, state):
        """Named measurements for reports (one state)."""
        return {"error": float(self.error(state))}

    @staticmethod
    def _link(state, name):
        return state.tree.link(name)

    def __repr__(self):
        return f"{type(self).__name__}(weight={self.weight}, priority={self.priority})"


def as_point(p, what):
    # (a copy, C-ordered: a goal does not change with the caller's array, and compiled code packs it in one layout)
    p = np.array(p, dtype=float).reshape(-1)
    if p.shape != (3,):
        raise ValueError(f"{what} must be three finite numbers, got {p.tolist()}")
    x, y, z = p.tolist()  # (scalar checks: a tracking frame builds these by the dozen)
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        raise ValueError(f"{what} must be three finite numbers, got {p.tolist()}")
    if max(abs(x), abs(y), abs(z)) > MAX_COORDINATE:
        raise ValueError(f"{what} {p.tolist()} is beyond {MAX_COORDINATE:g} in magnitude: check the units")
    return p


def as_rotation(R, what):
    R = np.asarray(R, dtype=float)
    if R.shape != (3, 3) or not all(map(math.isfinite, R.ravel().tolist())):
        raise ValueError(f"{what} must be a finite 3x3 matrix")
    # Re-orthonormalize (targets often come from float32 matrices with scale removed).
    U, _, Vt = np.linalg.svd(R)
    R = U @ Vt
    (a, b, c), (d, e, f), (g, h, i) = R.tolist()
    if a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) < 0:
        raise ValueError(f"{what} is a reflection, not a rotation")
    return R


def point_on(state, link, offset):
    """World position of a point fixed to a link, (..., 3)."""
    W = state.world[..., link, :, :]
    return W[..., :3, 3] + W[..., :3, :3] @ offset
