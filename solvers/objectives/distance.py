# SPDX-License-Identifier: GPL-3.0-or-later
"""Distance: keep at least ``min_distance`` between two link points, or a link point and a fixed point
(collision spheres). An inequality: zero residual while far enough, a one-sided hinge when too close."""

import numpy as np

from .base import POSITION_TOLERANCE, Objective, as_point, point_on


class Distance(Objective):
    size = 1
    inequality = True

    def __init__(
        self, link, min_distance, point=(0, 0, 0), other_link=None, other_point=(0, 0, 0), weight=1.0,
        tolerance=POSITION_TOLERANCE, priority=0,
    ):
        super().__init__(weight, tolerance, priority)
        if not np.isfinite(min_distance) or min_distance < 0:
            raise ValueError(f"Distance: min_distance must be finite and >= 0, got {min_distance}")
        self.link, self.other_link = link, other_link
        self.min_distance = float(min_distance)
        self.point = as_point(point, "Distance point")
        self.other_point = as_point(other_point, "Distance other point")

    def _points(self, state):
        a = point_on(state, self._link(state, self.link), self.point)
        if self.other_link is None:
            b = np.broadcast_to(self.other_point, a.shape)
        else:
            b = point_on(state, self._link(state, self.other_link), self.other_point)
        return a, b

    def distance(self, state):
        a, b = self._points(state)
        return np.linalg.norm(a - b, axis=-1)

    def constraint(self, state):
        """g(q) = min_distance - d <= 0 when satisfied."""
        return self.min_distance - self.distance(state)

    def constraint_gradient(self, state):
        """(..., n) gradient of g = min_distance - d."""
        a, b = self._points(state)
        diff = a - b
        d = np.linalg.norm(diff, axis=-1, keepdims=True)
        u = np.where(d > 1e-12, diff / np.maximum(d, 1e-12), np.array([1.0, 0.0, 0.0]))
        J = state.point_jacobian(self._link(state, self.link), a)[..., :3, :]
        if self.other_link is not None:
            J = J - state.point_jacobian(self._link(state, self.other_link), b)[..., :3, :]
        return -(u[..., None, :] @ J)[..., 0, :]

    def compute_residual(self, state):
        return np.maximum(self.constraint(state), 0.0)[..., None]

    def jacobian(self, state):
        active = self.constraint(state) > 0.0
        return np.where(np.asarray(active)[..., None], self.constraint_gradient(state), 0.0)[..., None, :]

    def error(self, state):
        return np.maximum(self.constraint(state), 0.0)

    def losses(self, state):
        # Paper 000 eq. 15: infinite inside the sphere, 1 / (d - d_min) outside (a soft barrier).
        gap = -self.constraint(state)
        with np.errstate(divide="ignore"):
            return np.where(gap > 0.0, 1.0 / np.where(gap > 0.0, gap, 1.0), np.inf)[..., None]

    def loss_jacobian(self, state):
        gap = -self.constraint(state)
        inside = gap <= 0.0  # infinite loss: no useful gradient
        scale = np.where(inside, 0.0, 1.0 / np.where(inside, 1.0, gap) ** 2)
        return (self.constraint_gradient(state) * np.asarray(scale)[..., None])[..., None, :]  # d(1/gap) = -d gap / gap^2
