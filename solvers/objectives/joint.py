# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals in joint space: Displacement (stay near a reference), JointValue, JointFunction (q_i = h(q))."""

import numpy as np

from .base import ANGULAR_TOLERANCE, Objective


class Displacement(Objective):
    """Stay near a reference configuration (continuity, smoothness). A preference: by default its
    tolerance is infinite, so it never makes a solve unsuccessful."""

    def __init__(self, reference, weight=1.0, tolerance=np.inf, priority=0, joints=None):
        super().__init__(weight, tolerance, priority)
        self.reference = np.asarray(reference, dtype=float).reshape(-1)
        if not np.all(np.isfinite(self.reference)):
            raise ValueError("Displacement reference must be finite")
        self.joints = joints

    def _indices(self, state):
        if self.reference.shape[0] != state.tree.n:
            raise ValueError(f"Displacement reference has {self.reference.shape[0]} values, tree has {state.tree.n}")
        if self.joints is None:
            return np.arange(state.tree.n)
        return np.array([state.tree.var(j) for j in self.joints], dtype=int)

    def compute_residual(self, state):
        idx = self._indices(state)
        return state.q[..., idx] - self.reference[idx]

    def jacobian(self, state):
        idx = self._indices(state)
        J = np.zeros((len(idx), state.tree.n))
        J[np.arange(len(idx)), idx] = 1.0
        return np.broadcast_to(J, state.q.shape[:-1] + J.shape)

    @property
    def size(self):
        return len(self.reference) if self.joints is None else len(self.joints)

    def losses(self, state):
        return np.sum(np.abs(self.residual(state)), axis=-1)[..., None]  # eq. 15: sum |x*_i - x_i|

    def loss_jacobian(self, state):
        return np.sign(self.residual(state))[..., None, :] @ self.jacobian(state)


class JointValue(Objective):
    """Hold one joint variable (a name from ``tree.joint_names``) at a value."""

    size = 1

    def __init__(self, joint, value, weight=1.0, tolerance=ANGULAR_TOLERANCE, priority=0):
        super().__init__(weight, tolerance, priority)
        self.joint, self.value = joint, float(value)
        if not np.isfinite(self.value):
            raise ValueError("JointValue value must be finite")

    def compute_residual(self, state):
        return (state.q[..., state.tree.var(self.joint)] - self.value)[..., None]

    def jacobian(self, state):
        J = np.zeros((1, state.tree.n))
        J[0, state.tree.var(self.joint)] = 1.0
        return np.broadcast_to(J, state.q.shape[:-1] + J.shape)

    def error(self, state):
        return np.abs(self.residual(state)[..., 0])


class JointFunction(Objective):
    """Couple joints: q_joint = h(q). ``gradient(q)`` (n,) is used when given, else central differences."""

    size = 1

    def __init__(self, joint, function, weight=1.0, tolerance=ANGULAR_TOLERANCE, priority=0, gradient=None):
        super().__init__(weight, tolerance, priority)
        if not callable(function):
            raise TypeError("JointFunction needs a callable h(q)")
        self.joint, self.function, self.gradient = joint, function, gradient

    def _h(self, q):
        q = np.asarray(q)
        if q.ndim == 1:
            return float(self.function(q))
        return np.array([self.function(row) for row in q.reshape(-1, q.shape[-1])]).reshape(q.shape[:-1])

    def compute_residual(self, state):
        return (state.q[..., state.tree.var(self.joint)] - self._h(state.q))[..., None]

    def jacobian(self, state):
        if state.q.ndim > 1:  # a batch: one row at a time (h is a user function of one configuration)
            return np.stack([self._jacobian_at(state.tree, row) for row in state.q.reshape(-1, state.tree.n)]
                            ).reshape(state.q.shape[:-1] + (1, state.tree.n))
        return self._jacobian_at(state.tree, state.q)

    def _jacobian_at(self, tree, q):
        n = tree.n
        if self.gradient is not None:
            g = np.asarray(self.gradient(q), dtype=float).reshape(n)
        else:
            g, eps = np.zeros(n), 1e-6
            for k in range(n):
                e = np.zeros(n)
                e[k] = eps
                g[k] = (self._h(q + e) - self._h(q - e)) / (2 * eps)
        J = -g[None, :]
        J[0, tree.var(self.joint)] += 1.0
        return J

    def error(self, state):
        return np.abs(self.residual(state)[..., 0])
