# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation helpers: batched and single forms agree, exp/log are inverse (also near 0 and near pi), the left
Jacobian's inverse is its inverse."""

import numpy as np
import pytest

from fullbody_ik.solvers.rotations import (
    cross, exp_so3, left_jacobian_inverse_so3, left_jacobian_so3, log_so3, skew,
)


def rotation_vectors(rng, count):
    axes = rng.normal(size=(count, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = np.concatenate([rng.uniform(0, np.pi, count - 6), [0.0, 1e-9, 1e-5, np.pi - 1e-4, np.pi - 1e-9, np.pi]])
    return axes * angles[:, None]


@pytest.mark.parametrize("seed", range(3))
def test_log_inverts_exp_batched_and_single(seed):
    V = rotation_vectors(np.random.default_rng(seed), 40)
    R = exp_so3(V)
    L = log_so3(R)
    for v, l, r in zip(V, L, R):
        assert np.allclose(exp_so3(l), r, atol=1e-9)
        assert np.allclose(log_so3(r), l, atol=1e-9)  # the single path gives the batched answer
        assert abs(np.linalg.norm(l) - np.linalg.norm(v)) < 1e-8
        if np.linalg.norm(v) < np.pi - 1e-3:
            assert np.allclose(l, v, atol=1e-9)
    assert log_so3(R.reshape(4, 10, 3, 3)).shape == (4, 10, 3)


@pytest.mark.parametrize("seed", range(3))
def test_left_jacobian_inverse(seed):
    V = rotation_vectors(np.random.default_rng(seed), 30)[:-1] * 0.999  # J_l is singular at 2 pi, fine at pi
    Ji = left_jacobian_inverse_so3(V)
    assert np.allclose(Ji @ left_jacobian_so3(V), np.eye(3), atol=1e-8)
    for v, ji in zip(V, Ji):
        assert np.allclose(left_jacobian_inverse_so3(v), ji, atol=1e-12)


def test_skew_and_cross():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(5, 7, 3)), rng.normal(size=(5, 7, 3))
    assert np.allclose((skew(a) @ b[..., None])[..., 0], np.cross(a, b))
    assert np.allclose(cross(a, b), np.cross(a, b))
    assert np.allclose(skew(a[0, 0]) @ b[0, 0], np.cross(a[0, 0], b[0, 0]))
