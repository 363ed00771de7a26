# SPDX-License-Identifier: GPL-3.0-or-later
"""A foot's toes in foot placement: a toe that bends is bent onto the terrain where it touches and follows its
neighbouring frames elsewhere; a foot whose toes cannot bend turns on its toe tip as the source's heel rises.
With what the two passes over the frames (forward and back) say joined by how near each one's fixing frame is."""

import numpy as np

from ..solvers.rotations import exp_so3, unit
from .swing import pitch_axis

HALF_LIFE = 0.08  # seconds: a foot's tilt and toe bend, where its contacts leave them free, fade at this rate


def bend_track(obj, sampler, foot, cols, targets, contacts, terrain, leg, fps):
    """With on_floor, a foot's points off its ankle bone (the toe tip) turned about their joint across the foot
    (the toe bends): onto the terrain while they touch and the foot stands on its other points, up onto it where
    they would go under it; elsewhere (the swing, standing on the toe alone) the bend follows the neighbouring
    frames' (forward and back, decaying), so the toe bends smoothly, and a foot on its toe alone is moved to keep
    it on the terrain. ``targets`` (F, P, 3) changed in place."""
    names = {sampler.specs[j][1]: i for i, j in enumerate(cols)}
    bones = [sampler.specs[j][2] for j in cols]
    rigid = np.array([b == foot.ankle for b in bones])
    if rigid.all() or rigid.sum() < 3 or not {"ball_in", "ball_out"} <= set(names):
        return
    W = np.array(obj.matrix_world)
    rest = np.array([(W @ np.array(obj.data.bones[b].matrix_local) @ sampler.offsets[j])[:3]
                     for b, j in zip(bones, cols)])
    joints = np.array([(W @ np.array(obj.data.bones[b].matrix_local))[:3, 3] for b in bones])
    across0 = unit(rest[names["ball_in"]] - rest[names["ball_out"]])
    a = rest[rigid]
    ca = a.mean(axis=0)
    F = len(targets)
    T = targets[:, cols]
    cb = T[:, rigid].mean(axis=1)
    U, _, Vt = np.linalg.svd(np.swapaxes(T[:, rigid] - cb[:, None], 1, 2) @ (a - ca))
    D = np.broadcast_to(np.eye(3), U.shape).copy()
    D[:, 2, 2] = np.linalg.det(U @ Vt)
    R = U @ D @ Vt  # (F, 3, 3) the foot's turn from its rest
    across = R @ across0
    touching = contacts[:, cols]
    # Bent onto the terrain while the foot stands flat on it (heel and ball down) or on its toe alone (where the
    # bend reaches it): as the heel lifts over the ball, the toe follows the neighbouring frames' bend (a leg near
    # its reach cannot also bend the toe to the floor).
    heel, ball = names.get("heel"), names.get("ball")
    stands = (touching & rigid).any(axis=1)  # on points of its ankle bone
    flat = stands.copy()
    if heel is not None and ball is not None:  # heights over the terrain under each (a slope is flat ground)
        length = np.linalg.norm(T[:, heel] - T[:, ball], axis=-1)
        over = []
        for j in (heel, ball):
            hj, _, okj = terrain.below(T[:, j], T[:, j, 2] + 0.5 * leg)
            over.append(np.where(okj, T[:, j, 2] - hj, np.nan))
        flat &= np.abs(over[0] - over[1]) < 0.1 * np.maximum(length, 1e-9)  # NaN (no terrain): not flat
    decay = 0.5 ** (1.0 / max(HALF_LIFE * fps, 1.0))
    for i in np.flatnonzero(~rigid):
        J = cb + np.einsum("fij,j->fi", R, joints[i] - ca)
        r = T[:, i] - J
        h, _, ok = terrain.below(T[:, i], T[:, i, 2] + 0.5 * leg)

        def angle(t, height):  # the least turn about across[t] putting J + r at height (or nearest)
            ax = across[t]
            k = ax[2] * (ax @ r[t])
            A, B, C = r[t, 2] - k, np.cross(ax, r[t])[2], height - J[t, 2] - k
            amp, phase = np.hypot(A, B), np.arctan2(B, A)
            if amp < 1e-12:
                return 0.0
            base = np.arccos(np.clip(C / amp, -1.0, 1.0))
            wrap = lambda x: (x + np.pi) % (2 * np.pi) - np.pi  # noqa: E731
            return min((wrap(phase + base), wrap(phase - base)), key=abs)

        fixed = {t: angle(t, h[t]) for t in range(F) if touching[t, i] and flat[t] and ok[t]}
        for t in np.flatnonzero(touching[:, i] & ~stands & ok):  # on its toe alone: bent onto the terrain where
            a = angle(t, h[t])  # the bend reaches it
            if abs((J[t] + r[t] @ exp_so3(a * across[t]).T)[2] - h[t]) < 1e-4 * leg:
                fixed[int(t)] = a
        passes = []
        for seq in (range(F), range(F - 1, -1, -1)):
            theta, s, out, near = 0.0, 0.0, np.zeros(F), np.zeros(F)
            for t in seq:
                theta, s = (fixed[t], 1.0) if t in fixed else (theta * decay, s * decay)
                out[t], near[t] = theta, s
            passes.append((out, near))
        theta = np.where([t in fixed for t in range(F)], passes[0][0], joined(passes[0][0], passes[0][1],
                                                                              passes[1][0], passes[1][1]))
        for t in range(F):
            p = J[t] + r[t] @ exp_so3(theta[t] * across[t]).T
            if ok[t] and p[2] < h[t] and t not in fixed:  # never under the terrain: bent up onto it
                theta[t] = angle(t, h[t])
                p = J[t] + r[t] @ exp_so3(theta[t] * across[t]).T
            if touching[t, i] and not stands[t] and ok[t]:  # on its toe alone: the foot moved to keep it in place,
                # only up or down where it was bent onto the terrain (a toe bent far swings its tip along the ground;
                # moved back to its place, the foot jumped sideways)
                place = p[:2] if t in fixed else T[t, i, :2]
                shift = np.array([place[0], place[1], h[t]]) - p
                targets[t, cols] += shift
                p = p + shift
            targets[t, cols[i]] = p


def joined(a, sa, b, sb):
    """What two passes over the frames (forward, backward) say at one frame, ``a`` and ``b`` (arrays), each
    weighed by how near the frame it came from is (``sa``, ``sb``: 1 there, decaying away): continuous as one
    side's frames end (an even mean would halve a foot's turn the frame its last contact lifts)."""
    total = sa + sb
    return np.where(total > 1e-12, (sa * a + sb * b) / np.maximum(total, 1e-12), 0.5 * (a + b))


def on_its_tip(points, R, is_tip, ground, ok, ankle_z, ankle):
    """A foot whose toes cannot bend, standing on its toe tip alone (``points`` (P, 3) placed with the tip on the
    ``ground`` under it, ``R`` its turn so far): turned about the tip, down toward level, until its ankle (at
    ``ankle``) is no higher than ``ankle_z`` (where the source's ankle is over the ground). Lifted whole to its tip,
    the ankle stood higher than the source's by as far as the copied tip had gone under the ground (a source's
    toe bends there): a stiff foot rolling onto its tip raised its ankle twice the source's. Never turned past
    level, nor any point taken under the ground. Returns (points, R)."""
    tip = points[is_tip].mean(axis=0)
    arm = ankle - tip
    axis = pitch_axis(points)  # (a turn about it raises the toes about the ankle: about the tip, lowers the heel)
    if ankle[2] <= ankle_z or axis is None:
        return points, R
    pitch = np.arctan2(points[0, 2] - tip[2], np.linalg.norm((points[0] - tip)[:2]))  # heel over the tip
    best = 0.0
    for a in np.linspace(0.0, max(float(pitch), 0.0), 41)[1:]:
        Ra = exp_so3(a * axis)
        moved = tip + (points - tip) @ Ra.T
        if np.any(ok & ~is_tip & (moved[:, 2] < ground)) or tip[2] + (Ra @ arm)[2] < ankle_z:
            break
        best = a
    Ra = exp_so3(best * axis)
    return tip + (points - tip) @ Ra.T, Ra @ R


def rolled_onto_toes(contacts, pts, sampler, feet, stiff):
    """``contacts`` (F, P) for a foot whose toes cannot bend (no toe bone, or one nothing turns) as it rolls onto
    its toe tip (``pts`` (F, P, 3)): a source's toes bend, so its ball stays down as the heel rises; this foot's
    ball cannot touch once it is pitched toe down (its tip is the lowest point). Its heel off the ground and the
    ball over the tip, the ball's contacts (and its sides') are the tip's: the foot turns on its tip as the
    source's heel rises; pitched more than 15 degrees, the ball touches in no case. Held on its ball, the foot was
    turned flat about it to keep its tip over the ground, the heel dropping a twentieth of the character's height
    in a frame and rising back after."""
    out = contacts.copy()
    for k, cols in enumerate(sampler.cols):
        names = [sampler.specs[j][1] for j in cols]
        if not {"heel", "ball", "toe"} <= set(names):
            continue
        heel, toe, ball = (cols[names.index(n)] for n in ("heel", "toe", "ball"))
        if sampler.specs[toe][2] != feet[k].ankle and feet[k].ball not in stiff:
            continue  # (its toe bends: the ball stays down)
        balls = [j for j, name in zip(cols, names) if name in ("ball", "ball_in", "ball_out")]
        rise = pts[:, ball, 2] - pts[:, toe, 2]
        reach = np.linalg.norm(pts[:, ball] - pts[:, toe], axis=1)
        onto_tip = (rise > 0.0) & ~contacts[:, heel] & contacts[:, balls].any(axis=1)
        out[onto_tip, toe] = True
        out[np.ix_(onto_tip | (rise > np.sin(np.radians(15.0)) * reach), balls)] = False
    return out
