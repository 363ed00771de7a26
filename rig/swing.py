# SPDX-License-Identifier: GPL-3.0-or-later
"""A swinging foot's path in foot placement: its height over where it stands as the source's for the character's
legs, its toes turned up at the ankle before a swing is lifted whole to clear the terrain, the least lift that
keeps it over the terrain; and the rigid motion that carries a point (an ankle) with a foot's points."""

import numpy as np

from ..solvers.rotations import exp_so3
from .contacts import frames_to, rise_over_stances, runs


def swing_to(targets, pts, ankle, cols, on_ankle, touching, want, fps):
    """Raises (or lowers) a foot's targets (``cols`` of ``targets`` (F, P, 3), planned from ``pts``) while it
    swings so that its ankle (``ankle`` (F, 3) as ``pts`` put it, carried as the points on the ankle bone are)
    rises over where it stands to within a tenth of ``want`` (F,): a character whose legs are built unlike the
    source's (a short shin under a long thigh) lifts its feet, for its legs, as high as the source's, the joint
    angles bending a little more or less. Nothing at contacts, eased in and out over a tenth of a second."""
    if touching.all() or not touching.any():
        return
    on = [c for c, o in zip(cols, on_ankle) if o] or list(cols)
    own = rise_over_stances(carried(pts[:, on], targets[:, on], ankle)[:, 2], touching)
    lo, hi = np.minimum(0.9 * want, 1.1 * want), np.maximum(0.9 * want, 1.1 * want)
    w = np.clip(frames_to(touching) / max(1.0, 0.1 * fps), 0.0, 1.0)
    targets[:, cols, 2] += (smoothstep(w) * (np.clip(own, lo, hi) - own))[:, None]


def carried(a, b, p):
    """Points p (F, 3) moved by the rigid motions that best take points a (F, n, 3) onto b (Kabsch, per row)."""
    ca, cb = a.mean(axis=1, keepdims=True), b.mean(axis=1, keepdims=True)
    U, _, Vt = np.linalg.svd(np.swapaxes(b - cb, 1, 2) @ (a - ca))
    D = np.broadcast_to(np.eye(3), U.shape).copy()
    D[:, 2, 2] = np.linalg.det(U @ Vt)
    R = U @ D @ Vt
    return cb[:, 0] + np.einsum("fij,fj->fi", R, p - ca[:, 0])


PITCH_MAX = np.radians(60.0)  # the most a swinging foot is turned at its ankle (toes up or down) to clear the terrain


def pitch_axis(points):
    """The horizontal axis across a foot (points (P, 3), heel first, toe tip last) about which a positive turn
    raises its toes."""
    forward = points[-1] - points[0]
    forward[2] = 0.0
    n = np.linalg.norm(forward)
    if n < 1e-12:
        return None
    return np.cross(forward / n, np.array([0.0, 0.0, 1.0]))


def pitched(points, pivot, angle):
    """Points (P, 3) of a foot turned toes-up by ``angle`` about ``pivot`` (its ankle)."""
    axis = pitch_axis(points)
    if axis is None:
        return points
    return pivot + (points - pivot) @ exp_so3(angle * axis).T


def swing_lift(z, terrain, lowest, P):
    """(A,) how far a swinging foot must rise on each frame so that none of its probes (heights z (A, Q) over
    ``terrain`` (A, Q)) is under the terrain and its lowest sole point (the first P probes) keeps ``lowest`` (A,)
    over it: its swing height as the source's, whatever turn its shape took."""
    over = z - terrain
    return np.maximum(np.maximum(-over.min(axis=1), lowest - over[:, :P].min(axis=1)), 0.0)


TURN_COST = 0.5  # a turn at the ankle weighs half the distance it moves the foot's far end against the lift it saves


def swing_pitch(probes, ankles, terrain, lowest, P, air, points, fps):
    """(A,) the turn at the ankle (positive: toes up) of a swinging foot on each of its frames ``air`` that leaves
    the least to lift it by (swing_lift) for what the turn costs (TURN_COST: a lift of a few millimetres is not
    traded for a turn that moves the toes centimetres); the smallest such turn, at most PITCH_MAX either way (a
    toe under the terrain turns up; a heel under it, near the ankle, is mostly lifted), eased over neighbouring
    frames (at most 90 degrees a second) so the foot turns smoothly; probes (A, Q, 3), ``points`` (A, P, 3) the
    foot's sole points (heel first, toe tip last)."""
    grid = np.linspace(-PITCH_MAX, PITCH_MAX, 37)
    grid = grid[np.lexsort((-grid, np.abs(grid)))]  # the smaller turns first, toes up before down
    out = np.zeros(len(air))
    before = swing_lift(probes[..., 2], terrain, lowest, P)
    for i in np.flatnonzero(before > 0.0):
        axis = pitch_axis(points[i])
        if axis is None:
            continue
        z = np.array([(ankles[i] + (probes[i] - ankles[i]) @ exp_so3(a * axis).T)[:, 2] for a in grid])
        lifts = swing_lift(z, np.broadcast_to(terrain[i], z.shape), np.full(len(grid), lowest[i]), P)
        reach = np.max(np.linalg.norm(probes[i] - ankles[i], axis=1))  # the turn moves the foot's far end this much
        cost = lifts + TURN_COST * reach * np.abs(grid)  # a radian
        out[i] = grid[int(np.flatnonzero(cost <= cost.min() + 1e-4)[0])]
    slope = np.radians(90.0) / max(fps, 1.0)
    for x, y in runs(np.isin(np.arange(air.max() + 1 if len(air) else 0), air)):
        k = np.searchsorted(air, [x, y + 1])
        # each way eased apart, so a turn up and one down meet continuously
        part = out[k[0]:k[1]]
        out[k[0]:k[1]] = slope_limited(np.maximum(part, 0.0), slope) - slope_limited(np.maximum(-part, 0.0), slope)
    return out


def slope_limited(x, slope):
    """(n,) the least values at or above ``x`` (n,) that change by at most ``slope`` from one place to the next (a
    cone under every value: a turn or lift eased in and out around its peak)."""
    t = np.arange(len(x))
    return (x[None, :] - slope * np.abs(t[:, None] - t[None, :])).max(axis=1)


def smoothstep(x):
    """Smoothstep: 0 at 0, 1 at 1, flat at both ends."""
    return x * x * (3.0 - 2.0 * x)
