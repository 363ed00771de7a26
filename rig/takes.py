# SPDX-License-Identifier: GPL-3.0-or-later
"""Frames of a clip that are not part of its take: a reference or calibration pose held at the start or the end
(CMU's first frame: every channel but the root's zero; a T-pose before the motion starts), found as the rest pose
held (every bone but the root unturned) before or after a take that is not, or as a jump to or from a pose far
from its neighbours, much larger than the take's own frame-to-frame motion."""

import numpy as np

WINDOW = 60  # frames read at each end of the clip
JUMP = 5.0  # a step this many times the take's median step ...
MIN_JUMP_DEG = 10.0  # ... and at least this large (RMS over the bones) is a jump


def _rotations(scene, obj, frames):
    """(F, N, 3, 3) rotations of the pose bones (their own, from their parents) at ``frames``."""
    pb = obj.pose.bones
    out = np.zeros((len(frames), len(pb), 3, 3))
    for i, f in enumerate(frames):
        scene.frame_set(f)
        for k, b in enumerate(pb):
            out[i, k] = np.array(b.matrix_basis.to_3x3())
    return out


def _steps_deg(R):
    """(F-1,) RMS over the bones of the angle turned from each frame to the next."""
    rel = np.einsum("fnji,fnjk->fnik", R[:-1], R[1:])
    cos = np.clip((np.trace(rel, axis1=2, axis2=3) - 1.0) / 2.0, -1.0, 1.0)
    return np.degrees(np.sqrt(np.mean(np.arccos(cos) ** 2, axis=1)))


def _from_rest_deg(R):
    """(F,) RMS over the bones but the first (the root) of their turn from their rest."""
    cos = np.clip((np.trace(R[:, 1:], axis1=2, axis2=3) - 1.0) / 2.0, -1.0, 1.0)
    return np.degrees(np.sqrt(np.mean(np.arccos(cos) ** 2, axis=1))) if R.shape[1] > 1 else np.full(len(R), 90.0)


def reference_frames(scene, obj, first, last):
    """([frames], why) of ``first``..``last`` that are a pose held apart from the take at its start or its end
    (at most a tenth of the frames at each end), or ([], "")."""
    total = last - first + 1
    if total < 10 or not obj.pose.bones:
        return [], ""
    n = min(WINDOW, total // 2)
    here = scene.frame_current
    head = list(range(first, first + n))
    tail = list(range(last - n + 1, last + 1))
    try:
        R_head, R_tail = _rotations(scene, obj, head), _rotations(scene, obj, tail)
        steps_head, steps_tail = _steps_deg(R_head), _steps_deg(R_tail)
    finally:
        scene.frame_set(here)
    rest_head, rest_tail = _from_rest_deg(R_head), _from_rest_deg(R_tail)
    typical = float(np.median(np.r_[steps_head, steps_tail]))
    limit = max(JUMP * typical, MIN_JUMP_DEG)
    most = max(1, min(total // 10, n - 1))
    out, why = [], []
    jumps = np.flatnonzero((steps_head[:most] > limit) | ((rest_head[:most] < 0.5) & (rest_head[1:most + 1] > 5.0)))
    if len(jumps):
        k = int(jumps[-1])  # frames head[0..k] come before the jump into the take
        out += head[:k + 1]
        why.append(f"frame{'s' if k else ''} {head[0]}{f'-{head[k]}' if k else ''}: a pose held before the take "
                   f"(a {steps_head[k]:.0f} deg jump into it, the take's frames move {typical:.1f} deg)")
    jumps = np.flatnonzero((steps_tail[len(steps_tail) - most:] > limit)
                           | ((rest_tail[-most:] < 0.5) & (rest_tail[-most - 1:-1] > 5.0)))
    if len(jumps):
        k = len(steps_tail) - most + int(jumps[0])  # frames tail[k+1..] come after the jump out of the take
        out += tail[k + 1:]
        why.append(f"frame{'s' if len(tail) - k > 2 else ''} {tail[k + 1]}"
                   f"{f'-{tail[-1]}' if len(tail) - k > 2 else ''}: a pose held after the take (a "
                   f"{steps_tail[k]:.0f} deg jump out of it)")
    return out, "; ".join(why)
