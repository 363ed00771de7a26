# SPDX-License-Identifier: GPL-3.0-or-later
"""Knees that fold one way. A leg with no IK limits of its own may bend either way at a solve: where the motion
holds it straight (many captures straighten the knee at each stance) and a goal pulls the foot, the solver can
cross straight and fold it backward, and from there keep it so over the frames that follow. Each knee gets the
limit its own motion implies: it bends back no further than the clip's own knee does (a few degrees of slack),
about the hinge its rest pose shows (across the hips, right to left), where that hinge is one of the shin's
own swing axes (x or z, as Blender's IK limits are). A knee its motion never bends back is held folded forward by
at least FOLD, so that a solve needing the leg shorter folds it forward."""

from dataclasses import dataclass

import numpy as np

from ..solvers.rotations import unit

SLACK = np.radians(3.0)  # how much further back than the clip's straightest a knee may bend
FOLD = np.radians(1.5)  # the least bend of a knee whose motion never bends it back: folded forward a little, a
# solve that needs the leg shorter folds it further (from straight, either way is as short: it stayed straight)
ALIGNED = 0.9  # the hinge within about 25 degrees of a swing axis of the shin


@dataclass
class Knee:
    thigh: str
    shin: str
    ankle: str
    across: np.ndarray  # the hinge, in the thigh's frame: a turn about it folds the shin back
    axis: str  # "x" or "z": the shin's swing axis along the hinge
    sign: float  # +1 when a turn about that axis folds the knee, -1 when it unfolds it
    rest: float  # the knee's bend at rest, radians


def _rotation(matrix):
    R = np.array(matrix)[:3, :3]
    return R / np.linalg.norm(R, axis=0, keepdims=True)


def bend(hip, knee, ankle, across):
    """The knee's bend (radians): the turn from the thigh's direction to the shin's about ``across``; positive
    folding the shin back behind a forward-facing leg."""
    t, s = unit(np.asarray(knee) - hip), unit(np.asarray(ankle) - knee)
    return float(np.arctan2(np.dot(np.cross(t, s), across), np.dot(t, s)))


def _legs(obj, foot):
    """(thigh, shin, ankle) bones of ``foot``'s leg, or None when its shin hangs from nothing."""
    bones = obj.data.bones
    ankle = bones[foot.ankle]
    shin = bones.get(foot.shin) if foot.shin else ankle.parent
    if shin is None or shin.parent is None:
        return None
    return shin.parent, shin, ankle


def _across(obj, feet):
    """The hinge of a forward-facing knee (armature space, unit): from the right thigh's head to the left's (the
    character's own left, as its legs are named), else across the first foot's heel-to-toe line; None when neither
    tells (a foot's sole points need not: an importer's guessed tails turned Babylon's toes backward)."""
    heads = {}
    for foot in feet:
        legs = _legs(obj, foot)
        if legs:
            heads[foot.side] = np.array(legs[0].head_local)
    if {"left", "right"} <= set(heads) and np.linalg.norm(heads["left"] - heads["right"]) > 1e-9:
        return unit(heads["left"] - heads["right"])
    for foot in feet:
        rest = {p.name: np.asarray(p.rest, dtype=float) for p in foot.points}
        if "heel" in rest and "toe" in rest:
            W = _rotation(obj.matrix_world)
            forward = W @ (rest["toe"] - rest["heel"])
            forward[2] = 0.0
            if np.linalg.norm(forward) > 1e-9:
                return unit(W.T @ np.cross([0.0, 0.0, 1.0], unit(forward)))
    return None


def find_knees(obj, feet):
    """[Knee or None] for each of ``feet``'s legs in ``obj`` (armature): None for a leg with no thigh above its
    shin, or whose hinge no swing axis of the shin is near, or when nothing tells which way the character faces."""
    across = _across(obj, feet)
    return [_knee(obj, _legs(obj, foot), across) if across is not None else None for foot in feet]


def _knee(obj, legs, across):
    if legs is None:
        return None
    thigh, shin, ankle = legs
    local = _rotation(shin.matrix_local).T @ across
    a = 0 if abs(local[0]) >= abs(local[2]) else 2
    if abs(local[a]) < ALIGNED:
        return None
    heads = [np.array(b.head_local) for b in (thigh, shin, ankle)]
    return Knee(thigh.name, shin.name, ankle.name, _rotation(thigh.matrix_local).T @ across, "xz"[a // 2],
                float(np.sign(local[a])), bend(*heads, across))


def posed_bend(obj, knee):
    """The knee's bend as ``obj`` is posed now (the hinge carried by the thigh)."""
    pb = obj.pose.bones
    thigh = pb[knee.thigh]
    return bend(np.array(thigh.head), np.array(pb[knee.shin].head), np.array(pb[knee.ankle].head),
                _rotation(thigh.matrix) @ knee.across)


def knee_limits(knees, bends):
    """{shin: {axis: (min, max)}}: the IK limit of each knee (``knees``: Knee or None per foot; ``bends`` (F,
    feet) the motion's bends) that keeps it from bending back further than the motion's straightest less SLACK
    where the motion bends it back, else from straightening past FOLD; a turn of the shin's swing about the hinge
    changes the bend by as much."""
    out = {}
    for k, knee in enumerate(knees):
        if knee is None or not np.isfinite(bends[:, k]).any():
            continue
        straightest = float(np.nanmin(bends[:, k]))
        least = (straightest - SLACK if straightest < 0.0 else FOLD) - knee.rest  # as a turn from rest
        least = max(least, -np.pi)
        out[knee.shin] = {knee.axis: (least, np.pi) if knee.sign > 0 else (-np.pi, -least)}
    return out
