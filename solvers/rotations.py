# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation helpers, vectorized over any leading batch dimensions (``(..., 3)``, ``(..., 3, 3)``)."""

import math

import numpy as np

_SMALL = 1e-6


def skew(v):
    """(..., 3) -> (..., 3, 3) cross-product matrices."""
    v = np.asarray(v, dtype=float)
    K = np.zeros(v.shape[:-1] + (3, 3))
    K[..., 0, 1], K[..., 0, 2] = -v[..., 2], v[..., 1]
    K[..., 1, 0], K[..., 1, 2] = v[..., 2], -v[..., 0]
    K[..., 2, 0], K[..., 2, 1] = -v[..., 1], v[..., 0]
    return K


def _exp_coefficients(theta, need_a=True, need_c=True):
    """a = sin t / t, b = (1 - cos t) / t^2, c = (t - sin t) / t^3, with Taylor series near 0 (None for the
    ones not asked for)."""
    t2 = theta * theta
    small = theta < _SMALL
    if not small.any():  # the common case: no series, sin and cos once
        s = np.sin(theta)
        b = (1.0 - np.cos(theta)) / t2
        return (s / theta if need_a else None), b, ((theta - s) / (t2 * theta) if need_c else None)
    t = np.where(small, 1.0, theta)
    s = np.sin(t)
    a = np.where(small, 1.0 - t2 / 6.0, s / t) if need_a else None
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(t)) / (t * t))
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0, (t - s) / (t * t * t)) if need_c else None
    return a, b, c


def exp_so3(v):
    """Rotation vector (..., 3) -> rotation matrix (..., 3, 3) (Rodrigues)."""
    v = np.asarray(v, dtype=float)
    theta = np.sqrt((v * v).sum(-1))
    a, b, _ = _exp_coefficients(theta, need_c=False)
    K = skew(v)
    return np.eye(3) + a[..., None, None] * K + b[..., None, None] * (K @ K)


def left_jacobian_so3(v):
    """J_l(v): d exp(v) = [J_l(v) dv]x exp(v); its columns are world angular velocities per unit dv."""
    v = np.asarray(v, dtype=float)
    theta = np.sqrt((v * v).sum(-1))
    _, b, c = _exp_coefficients(theta, need_a=False)
    K = skew(v)
    return np.eye(3) + b[..., None, None] * K + c[..., None, None] * (K @ K)


def log_so3(R):
    """Rotation matrix (..., 3, 3) -> rotation vector (..., 3) with norm in [0, pi].

    The equivalent angle-axis vector of paper 001, Appendix A (eq. 21-22), with the
    near-pi case taken from the symmetric part so that it stays accurate there.
    """
    R = np.asarray(R, dtype=float)
    if R.ndim == 2:
        return _log_so3_single(R)
    flat = R.reshape(R.shape[:-2] + (9,))
    l = flat[..., _VEE_PLUS] - flat[..., _VEE_MINUS]  # (R - R^T) as a vector: 2 sin(theta) axis
    ln = np.sqrt((l * l).sum(-1))
    theta = np.arctan2(ln, flat[..., 0] + flat[..., 4] + flat[..., 8] - 1.0)  # eq. 22
    out = l * np.where(ln < 1e-12, 0.5, theta / np.maximum(ln, 1e-300))[..., None]
    near_pi = theta > np.pi - 1e-3
    if near_pi.any():
        out[near_pi] = _log_near_pi(R[near_pi], l[near_pi], theta[near_pi])
    return out


_VEE_PLUS, _VEE_MINUS = [7, 2, 3], [5, 6, 1]


def _log_near_pi(R, l, theta):
    """Near pi, sin(theta) ~ 0 makes l inaccurate: the axis comes from the symmetric part,
    (R + R^T) / 2 = cos(theta) I + (1 - cos(theta)) a a^T, exactly; the sign from l."""
    c = np.cos(theta)[:, None, None]
    A = (0.5 * (R + np.swapaxes(R, -1, -2)) - c * np.eye(3)) / (1.0 - c)  # a a^T
    diag = np.clip(np.stack([A[:, 0, 0], A[:, 1, 1], A[:, 2, 2]], axis=-1), 0.0, None)
    k = np.argmax(diag, axis=-1)
    idx = np.arange(len(k))
    axis = A[idx, k, :] / np.sqrt(np.maximum(diag[idx, k], 1e-300))[:, None]
    axis *= np.where(np.sum(axis * l, axis=-1) < 0.0, -1.0, 1.0)[:, None]
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    return axis * theta[:, None]


def _log_so3_single(R):
    """log_so3 for one matrix with scalar arithmetic (the hot path of the local solvers)."""
    lx, ly, lz = R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]
    ln = math.sqrt(lx * lx + ly * ly + lz * lz)
    theta = math.atan2(ln, R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    if theta > math.pi - 1e-3:
        return log_so3(R[None])[0]
    scale = 0.5 if ln < 1e-12 else theta / ln
    return np.array([lx * scale, ly * scale, lz * scale])


def unit(v):
    """``v`` over its length (a vector of no length is returned as it is)."""
    return v / max(float(np.linalg.norm(v)), 1e-12)


def turn_between(a, b):
    """The smallest rotation taking unit vector a to unit vector b (Rodrigues); the identity where they are
    parallel (or opposite: no one smallest turn)."""
    v, c = np.cross(a, b), float(a @ b)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3)
    K = skew(v)
    return np.eye(3) + K + K @ K / (1.0 + c)


def cross(a, b):
    """np.cross for (..., 3) arrays without its axis bookkeeping."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def axis_rotation(axis_index, angle):
    """Rotation about the local X (0), Y (1) or Z (2) axis; angle (...,) -> (..., 3, 3)."""
    angle = np.asarray(angle, dtype=float)
    c, s = np.cos(angle), np.sin(angle)
    R = np.zeros(angle.shape + (3, 3))
    i, j = [(1, 2), (2, 0), (0, 1)][axis_index]
    R[..., axis_index, axis_index] = 1.0
    R[..., i, i] = c
    R[..., j, j] = c
    R[..., i, j] = -s
    R[..., j, i] = s
    return R


def rpy_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes X, then Y, then Z): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    return axis_rotation(2, y) @ axis_rotation(1, p) @ axis_rotation(0, r)


def quaternion_to_matrix(q):
    """Unit quaternion (..., 4) as (w, x, y, z) -> (..., 3, 3)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - w * z)
    R[..., 0, 2] = 2 * (x * z + w * y)
    R[..., 1, 0] = 2 * (x * y + w * z)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - w * x)
    R[..., 2, 0] = 2 * (x * z - w * y)
    R[..., 2, 1] = 2 * (y * z + w * x)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def random_rotation(rng, size=()):
    """Uniformly distributed rotations (Shoemake), (*size, 3, 3)."""
    q = rng.normal(size=tuple(np.atleast_1d(size)) + (4,)) if size != () else rng.normal(size=4)
    return quaternion_to_matrix(q)


def jl_inverse_coefficient(theta):
    """d of J_l^-1 = I - K/2 + d K^2 for a rotation of angle theta (scalar; the compiled path compiles this)."""
    if theta < 1e-4:
        return 1.0 / 12.0 + theta * theta / 720.0
    t = min(theta, math.pi - 1e-9)
    return 1.0 / (t * t) - (1.0 + math.cos(t)) / (2.0 * t * math.sin(t))


def left_jacobian_inverse_so3(v):
    """J_l(v)^-1 = I - K/2 + (1/t^2 - (1 + cos t) / (2 t sin t)) K^2, K = [v]x (singular at t = 2 pi)."""
    v = np.asarray(v, dtype=float)
    if v.ndim == 1:  # one vector: scalar arithmetic (hot path of orientation Jacobians)
        d = jl_inverse_coefficient(math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))
        K = skew(v)
        return np.eye(3) - 0.5 * K + d * (K @ K)
    theta = np.linalg.norm(v, axis=-1)
    small = theta < 1e-4
    t = np.where(small, 1.0, np.minimum(theta, np.pi - 1e-9))
    d = np.where(small, 1.0 / 12.0 + theta**2 / 720.0, 1.0 / t**2 - (1.0 + np.cos(t)) / (2.0 * t * np.sin(t)))
    K = skew(v)
    return np.eye(3) - 0.5 * K + d[..., None, None] * (K @ K)
