# SPDX-License-Identifier: GPL-3.0-or-later
"""Cartesian goals on a link: Position, Orientation, Pose, LookAt."""

import numpy as np

from ..rotations import cross, left_jacobian_inverse_so3, log_so3, skew
from .base import ANGULAR_TOLERANCE, POSITION_TOLERANCE, Objective, as_point, as_rotation, point_on


def position_loss(state, link, p, d):
    """Paper 000 eq. 15: pi d / sqrt((L + d)(lambda + d)), L the chain length, lambda |root -> X|."""
    L = state.tree.chain_length(link)
    lam = np.linalg.norm(p, axis=-1)
    return np.pi * d / np.sqrt((L + d) * (lam + d) + 1e-300)


class CartesianGroup:
    """Position, Orientation, Pose and LookAt goals evaluated together for the memetic fitness (this runs for
    every evaluated point): one point Jacobian per goal from shared motion generators, every loss, gradient
    and tolerance check as arrays over the goals, in few array operations. ``terms(state)`` returns the
    objectives' losses (as ``losses``), their gradients (these goals' ``loss_jacobian``: tested against finite
    differences) and whether each is met (as ``satisfied``), in the objectives' order."""

    def __init__(self, tree, objectives):
        self.objectives = list(objectives)
        G = len(self.objectives)
        self.links = np.zeros(G, dtype=int)
        self.offsets, self.rotations = np.zeros((G, 3)), np.tile(np.eye(3), (G, 1, 1))
        self.targets = np.zeros((G, 2, 3))  # per goal: the position target, and the root (lambda = |p - 0|)
        self.tolerance = np.full((G, 2), np.inf)  # position, angle
        columns = []  # which of (position losses (G), angles (G), look-at angles) each objective's losses are
        look = [g for g, o in enumerate(self.objectives) if isinstance(o, LookAt)]
        self.look = np.array(look, dtype=int)
        self.look_axes = np.array([self.objectives[g].axis for g in look]).reshape(-1, 3)
        self.look_targets = np.array([self.objectives[g].target for g in look]).reshape(-1, 3)
        self.look_tolerance = np.array([self.objectives[g].tolerance for g in look])
        for g, o in enumerate(self.objectives):
            position = o.position if isinstance(o, Pose) else o if isinstance(o, Position) else None
            orientation = o.orientation if isinstance(o, Pose) else o if isinstance(o, Orientation) else None
            self.links[g] = tree.link(o.link)
            if isinstance(o, LookAt):
                columns.append(2 * G + look.index(g))
            if position is not None:
                self.offsets[g], self.targets[g, 0] = position.offset, position.target
                self.tolerance[g, 0] = position.tolerance
                columns.append(g)
            if orientation is not None:
                self.rotations[g] = orientation.target
                self.tolerance[g, 1] = orientation.tolerance
                columns.append(G + g)
        self.columns = np.array(columns, dtype=int)
        self.has_rotation = np.isin(np.arange(G) + G, self.columns)  # goals whose angle is a loss
        self.lengths = np.array([tree.chain_length(int(i)) for i in self.links])  # paper 000's L per goal
        self.has_offset = bool(self.offsets.any())

    def terms(self, state):
        """(losses (..., c), gradients (..., c, n), every objective met (..., len(objectives)) as one array)."""
        W = state.world[..., self.links, :, :]  # (..., G, 4, 4)
        p = W[..., :3, 3] + (W[..., :3, :3] @ self.offsets[:, :, None])[..., 0] if self.has_offset else W[..., :3, 3]
        J = state.points_jacobian(self.links, p)  # (..., G, 6, n)
        # Position, eq. 15: pi d / sqrt((L + d)(lambda + d)) and its gradient through d and lambda.
        both = p[..., None, :] - self.targets  # (..., G, 2, 3): residual and root -> X
        dl = np.sqrt((both * both).sum(-1))  # (..., G, 2): d, lambda
        d, lam, L = dl[..., 0], dl[..., 1], self.lengths
        grads_dl = (both / np.maximum(dl, 1e-300)[..., None]) @ J[..., :3, :]  # (..., G, 2, n)
        s = (L + d) * (lam + d) + 1e-300
        root = np.sqrt(s)
        # df/dd = pi (s^-1/2 - d s^-3/2 (L + lam + 2 d) / 2);  df/dlam = -pi d s^-3/2 (L + d) / 2
        k = (0.5 * np.pi) * d / np.maximum(s * root, 1e-300)  # d = lambda = L = 0: no 0 / 0
        f_dl = np.empty(d.shape + (2,))
        f_dl[..., 0] = np.pi / root - k * (L + lam + 2.0 * d)
        f_dl[..., 1] = -k * (L + d)
        # Orientation: the angle of R R_d^T (paper 001 eq. 22; eq. 15's 2 acos |q_X . q_Y|) and its gradient
        # (phi / theta)^T omega: phi = log(R R_d^T) is an eigenvector of J_l^-1 and of its transpose.
        M = state.rotation(self.links) @ np.swapaxes(self.rotations, -1, -2)
        l = (M - np.swapaxes(M, -1, -2)).reshape(M.shape[:-2] + (9,))[..., [7, 2, 3]]  # vee(M - M^T)
        ln = np.sqrt((l * l).sum(-1))
        theta = np.arctan2(ln, np.trace(M, axis1=-2, axis2=-1) - 1.0)
        if (self.has_rotation & (theta > np.pi - 1e-3)).any():  # near pi: the axis from the symmetric part
            u, theta = _unit(log_so3(M))
        else:
            u = l / np.maximum(ln, 1e-300)[..., None]  # zero when l is
        losses = [np.pi * d / root, theta]
        grads = [(f_dl[..., None, :] @ grads_dl)[..., 0, :], (u[..., None, :] @ J[..., 3:, :])[..., 0, :]]
        met = (d <= self.tolerance[:, 0]) & (theta <= self.tolerance[:, 1])
        if len(self.look):
            angle, gradient = self._look_terms(W[..., self.look, :, :], J[..., self.look, :, :], state)
            losses.append(angle), grads.append(gradient)
            met[..., self.look] &= angle <= self.look_tolerance
        return (np.concatenate(losses, axis=-1)[..., self.columns],
                np.concatenate(grads, axis=-2)[..., self.columns, :], met)

    def _look_terms(self, W, J, state):
        """LookAt's angle e = 2 asin(|V - d| / 2) between the axis V and the direction d to the target, and
        its gradient f'(|r|) u^T (dV - dd) with u = r / |r|: u^T dV = (V x u)^T J_w and
        u^T dd = -((u - (u.d) d) / dist)^T J_p (as LookAt.jacobian, with fewer products)."""
        R = state.rotation(self.links[self.look])
        V = (R @ self.look_axes[:, :, None])[..., 0]
        delta = self.look_targets - W[..., :3, 3]
        dist = np.sqrt((delta * delta).sum(-1))
        far = dist > 1e-12
        dhat = np.where(far[..., None], delta / np.maximum(dist, 1e-12)[..., None], V)  # on the target: nothing to aim at
        r = V - dhat
        rn = np.sqrt((r * r).sum(-1))
        angle = 2.0 * np.arcsin(np.clip(0.5 * rn, 0.0, 1.0))
        u = r / np.maximum(rn, 1e-300)[..., None]  # zero when r is
        slope = 1.0 / np.sqrt(np.maximum(1.0 - 0.25 * rn * rn, 1e-12))
        w = cross(V, u)
        v = np.where(far[..., None], (u - (u * dhat).sum(-1)[..., None] * dhat) / np.maximum(dist, 1e-12)[..., None], 0.0)
        gradient = (w[..., None, :] @ J[..., 3:, :] + v[..., None, :] @ J[..., :3, :])[..., 0, :]
        return angle, slope[..., None] * gradient


def _unit(v):
    """(v / |v|, |v|) over the last axis; zero where v is zero."""
    n = np.sqrt(np.sum(v * v, axis=-1))
    return np.where(n[..., None] > 1e-300, v / np.maximum(n, 1e-300)[..., None], 0.0), n


class _Grouped:
    """Cartesian goals get their memetic fitness terms from CartesianGroup (one implementation, fused)."""

    def fitness_terms(self, state):
        L, G, met = CartesianGroup(state.tree, [self]).terms(state)
        return L, G, met[..., 0]

    def loss_jacobian(self, state):
        return CartesianGroup(state.tree, [self]).terms(state)[1]


class Position(_Grouped, Objective):
    """Bring a point of ``link`` (``offset`` in link coordinates) to a world position."""

    size = 3

    def __init__(self, link, point_xyz, weight=1.0, tolerance=POSITION_TOLERANCE, priority=0, offset=(0, 0, 0)):
        super().__init__(weight, tolerance, priority)
        self.link = link
        self.target = as_point(point_xyz, "Position target")
        self.offset = as_point(offset, "Position offset")

    def point(self, state):
        return point_on(state, self._link(state, self.link), self.offset)

    def compute_residual(self, state):
        return self.point(state) - self.target

    def jacobian(self, state):
        i = self._link(state, self.link)
        return state.point_jacobian(i, self.point(state))[..., :3, :]

    def losses(self, state):
        p = self.point(state)
        d = np.linalg.norm(p - self.target, axis=-1)
        return position_loss(state, self._link(state, self.link), p, d)[..., None]

class Orientation(_Grouped, Objective):
    """Turn ``link`` to a world rotation. Residual: angle-axis of R R_d^T (paper 001, Appendix A)."""

    size = 3

    def __init__(self, link, rotation_3x3, weight=1.0, tolerance=ANGULAR_TOLERANCE, priority=0):
        super().__init__(weight, tolerance, priority)
        self.link = link
        self.target = as_rotation(rotation_3x3, "Orientation target")

    def compute_residual(self, state):
        R = state.rotation(self._link(state, self.link))
        return log_so3(R @ np.swapaxes(self.target, -1, -2))  # (a target per state of a batch: the bake's judging)

    def jacobian(self, state):
        i = self._link(state, self.link)
        Jw = state.point_jacobian(i, state.world[..., i, :3, 3])[..., 3:, :]
        return left_jacobian_inverse_so3(self.residual(state)) @ Jw  # d log(R Rd^T) = J_l^-1 omega

    def losses(self, state):
        return self.error(state)[..., None]  # eq. 15: 2 acos(|q_X . q_Y|), the rotation angle

class Pose(_Grouped, Objective):
    """Position and orientation of ``link`` from a 4x4 world matrix."""

    size = 6

    def __init__(
        self, link, matrix_4x4, weight=1.0, tolerance=POSITION_TOLERANCE, priority=0,
        angular_tolerance=ANGULAR_TOLERANCE, offset=(0, 0, 0),
    ):
        super().__init__(weight, tolerance, priority)
        T = np.asarray(matrix_4x4, dtype=float)
        if T.shape != (4, 4):
            raise ValueError("Pose target must be a 4x4 matrix")
        self.link = link
        self.position = Position(link, T[:3, 3], weight, tolerance, priority, offset=offset)
        self.orientation = Orientation(link, T[:3, :3], weight, angular_tolerance, priority)
        self.angular_tolerance = float(angular_tolerance)

    def compute_residual(self, state):
        return np.concatenate([self.position.residual(state), self.orientation.residual(state)], axis=-1)

    def jacobian(self, state):
        i = self._link(state, self.link)
        p = self.position.point(state)
        J = state.point_jacobian(i, p)  # one geometric Jacobian for both halves
        J[..., 3:, :] = left_jacobian_inverse_so3(self.orientation.residual(state)) @ J[..., 3:, :]
        return J

    def error(self, state):
        """Position error (m); the angular error is in ``details`` and checked by ``satisfied``."""
        return self.position.error(state)

    def satisfied(self, state):
        return self.position.satisfied(state) & self.orientation.satisfied(state)

    def details(self, state):
        return {"error": float(self.position.error(state)), "angular_error": float(self.orientation.error(state))}

    def losses(self, state):
        return np.concatenate([self.position.losses(state), self.orientation.losses(state)], axis=-1)

class LookAt(_Grouped, Objective):
    """Point the local ``axis`` of ``link`` at a world position. Residual: V - d (unit vectors)."""

    size = 3

    def __init__(self, link, target_xyz, axis=(0, 1, 0), weight=1.0, tolerance=ANGULAR_TOLERANCE, priority=0):
        super().__init__(weight, tolerance, priority)
        self.link = link
        self.target = as_point(target_xyz, "LookAt target")
        axis = as_point(axis, "LookAt axis")
        n = np.linalg.norm(axis)
        if n < 1e-12:
            raise ValueError("LookAt axis must not be zero")
        self.axis = axis / n

    def _parts(self, state):
        W = state.world[..., self._link(state, self.link), :, :]
        V = state.rotation(self._link(state, self.link)) @ self.axis
        delta = self.target - W[..., :3, 3]
        dist = np.linalg.norm(delta, axis=-1, keepdims=True)
        d = np.where(dist > 1e-12, delta / np.maximum(dist, 1e-12), V)  # on the target: nothing to aim at
        return V, d, dist, W

    def compute_residual(self, state):
        V, d, _, _ = self._parts(state)
        return V - d

    def jacobian(self, state):
        i = self._link(state, self.link)
        V, d, dist, W = self._parts(state)
        J = state.point_jacobian(i, W[..., :3, 3])
        dV = -skew(V) @ J[..., 3:, :]  # dV = omega x V
        # d = (T - p)/|T - p|: dd = -(1 - d d^T) dp / |T - p|; nothing to aim at on the target itself
        far = dist[..., 0] > 1e-12
        P = (np.eye(3) - d[..., :, None] * d[..., None, :]) / np.where(far, dist[..., 0], 1.0)[..., None, None]
        dd = -P @ J[..., :3, :]
        return dV - np.where(far[..., None, None], dd, 0.0)

    def error(self, state):
        r = np.linalg.norm(self.residual(state), axis=-1)
        return 2.0 * np.arcsin(np.clip(0.5 * r, 0.0, 1.0))  # angle between V and d

    @staticmethod
    def _error_slope(norm):
        return 1.0 / np.sqrt(np.maximum(1.0 - 0.25 * norm * norm, 1e-12))  # d/dn 2 asin(n / 2)
