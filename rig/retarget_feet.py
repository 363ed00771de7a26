# SPDX-License-Identifier: GPL-3.0-or-later
"""A retarget's feet: the mapped feet with their sole points, the travel a body needs so that its standing feet do
not slide, how a source's feet lie when they stand flat, and the pitch of feet much longer for their legs than the
source's."""

import numpy as np

from ..solvers.rotations import exp_so3, turn_between, unit
from .contacts import moving
from .feet import find_feet
from .humanoid import SIDES


def feet_travel(points, feet, contacts=None, standing_share=0.15):
    """(F, 2) horizontal travel of a body whose standing feet do not slide, from its sole points (F, P, 3), world,
    ``feet`` the point columns of each foot: the body moves against the standing feet's slide, and keeps its last
    step's pace while no foot stands (a run's flight). With ``contacts`` (F, P), a foot stands on a frame and the
    one before when at least half its points touch on both, flat feet (all of them) preferred: a heel landing or
    lifting moves against the belt; without, on its lowest sole point when that is within ``standing_share`` of
    its swing height over its lowest."""
    F = len(points)
    out, pace = np.zeros((F, 2)), np.zeros(2)
    standing = []  # per foot, (F, points): the points it may stand on
    for cols in feet:
        if contacts is not None:
            standing.append(np.asarray(contacts)[:, cols].astype(bool))
            continue
        h = points[:, cols, 2]
        h = h - h.min()
        on = np.zeros(h.shape, dtype=bool)
        on[np.arange(F), np.argmin(h, axis=1)] = True
        standing.append(on & (h.min(axis=1) <= standing_share * max(float(h.max()), 1e-9))[:, None])
    for t in range(1, F):
        flat, half = [], []
        for cols, on in zip(feet, standing):
            both = on[t] & on[t - 1]
            if both.sum() * 2 < len(cols) and (contacts is not None or not both.any()):
                continue
            c = np.array(cols)[both]
            (flat if both.all() else half).append(np.median(points[t, c, :2] - points[t - 1, c, :2], axis=0))
        if flat or half:
            pace = -np.mean(flat or half, axis=0)
        out[t] = out[t - 1] + pace
    return out


def planted_travel(motion, feet, pose, ankles, to_world, moved, slack):
    """(F, 2) the travel the character's pelvis needs besides the source's scaled so that its feet do not slide
    while the source's stand (feet_travel on the copy's heel and ball, on the source's contacts), but for
    ``slack`` a frame (world): a character whose hips are wider than the source's swings its standing foot round
    as the copy turns about its pelvis (a cartoon's, a metre in a walk that turns back), where a stride a little
    unlike the scaled source's slides it a millimetre a frame (its travel kept the source's, scaled; the foot
    placement holds that). ``pose`` {bone: (F, 4, 4)} and ``ankles`` (F, 2, 3) the copy's (armature space),
    ``moved`` (F, 3) the pelvis's move so far (world)."""
    where = motion.sampler.column
    points, contacts, cols = [], [], []
    for foot in feet:
        mine = [p for p in foot.points if p.bone == foot.ankle and (foot.side, p.name) in where]
        if foot.ankle not in pose or len(mine) < 2:
            continue
        R = pose[foot.ankle][:, :3, :3]
        cols.append(list(range(len(points), len(points) + len(mine))))
        for p in mine:
            points.append(to_world(ankles[:, SIDES.index(foot.side)] + R @ p.offset) + moved)
            contacts.append(motion.contacts[:, where[(foot.side, p.name)]])
    if not cols:
        return np.zeros((len(ankles), 2))
    pace = np.diff(feet_travel(np.stack(points, axis=1), cols, np.stack(contacts, axis=1)), axis=0)
    speed = np.linalg.norm(pace, axis=1, keepdims=True)
    pace *= np.clip(1.0 - slack / np.maximum(speed, 1e-12), 0.0, None)  # (what is past the slack)
    if len(pace) > 2:  # eased over a fifth of a second: a foot landing as another leaves changes it at once
        pace = moving(pace, max(3, int(round(0.2 * motion.fps)) | 1), np.mean)
    return np.concatenate([np.zeros((1, 2)), np.cumsum(pace, axis=0)])


def standing_tilts(h, R, rest, index, motion):
    """{role: T} for the source's feet and toes: the world turn from a bone's rest to how it lies when it stands
    flat on the floor (a foot: its heel and ball touching; a toe: its ball and tip), found from the motion (the
    bone's up while flat, averaged over those frames, turned to the world's). A clip's rest pose need not stand
    flat (a BVH's feet point where its T-pose put them); without such frames (a run on its toes): none."""
    names = [n for _, n, _, _ in motion.sampler.specs]
    out = {}
    for k, foot in enumerate(motion.sampler.feet):
        cols = {names[j]: j for j in motion.sampler.cols[k]}
        for role, pair in ((f"{foot.side} foot", ("heel", "ball")), (f"{foot.side} toe", ("ball", "toe"))):
            bone = h.roles.get(role)
            if bone is None or any(p not in cols for p in pair):
                continue
            flat = motion.contacts[:, cols[pair[0]]] & motion.contacts[:, cols[pair[1]]]
            if flat.sum() < max(5, 0.05 * len(flat)):
                continue
            up = unit(np.einsum("tji,j->i", R[flat, index[bone]], np.array([0.0, 0.0, 1.0])))  # bone frame
            out[role] = turn_between(rest[index[bone]] @ up, np.array([0.0, 0.0, 1.0]))
    return out


def feet_spec(h):
    """The mapped feet as --feet writes them, "ANKLE:BALL,ANKLE:BALL" (the left first)."""
    return ",".join(f"{h.bone(f'{s} foot')}:{h.bone(f'{s} toe')}" for s in SIDES)


def humanoid_feet(obj, h):
    """The feet (rig.feet.Foot: sole points, a root-parented foot's leg) of a mapped humanoid: a foot that does
    not hang from its shin follows that shin."""
    feet = find_feet(obj, feet_spec(h))
    for foot in feet:  # (the mapped shin, not a bone whose tail happens to be at the ankle: tails are guesses)
        shin = h.bone(f"{foot.side} shin")
        if shin:
            foot.shin = "" if shin in {p.name for p in obj.data.bones[foot.ankle].parent_recursive} else shin
    return feet


def long_feet(S, T, source_feet, target_feet, Rt_rest):
    """{target foot bone: (its rest rotation (3, 3), heel-to-toe direction (3,), both world; ratio)} for the
    character's feet that are longer for its legs than the source's (ratio: the target's foot length over leg
    length, over the source's, above 1.05): their pitch is scaled down so that a heel rises, for the legs, as
    the source's does (a big foot turned as far as a small one lifts the leg high and digs its toes in)."""
    def length(obj, foot):
        W = np.array(obj.matrix_world)
        at = {p.name: (W @ np.append(p.rest, 1.0))[:3] for p in foot.points}
        return at["toe"] - at["heel"]

    src = {f.side: float(np.linalg.norm(length(S.obj, f))) / max(S.leg_length(), 1e-9) for f in source_feet}
    soles = T._soles()  # (in its reference pose, as Rt_rest)
    out = {}
    for f in target_feet:
        d = soles[f.side]["toe"] - soles[f.side]["heel"] if f.side in soles else length(T.obj, f)
        ratio = float(np.linalg.norm(d)) / max(T.leg_length(), 1e-9) / max(src.get(f.side, np.inf), 1e-9)
        if ratio > 1.05:
            out[f.ankle] = (Rt_rest[T.index[f.ankle]], unit(d), ratio)
    return out


def foot_pitch_scaled(G, rest, forward, ratio):
    """World rotations G (F, 3, 3) of a foot whose rest rotation is ``rest`` and rest heel-to-toe direction
    ``forward`` (world), each turned about the horizontal across the foot so that the sine of its pitch (its
    heel-to-toe direction's rise) is divided by ``ratio``."""
    f = (G @ rest.T) @ forward  # (F, 3)
    horizontal = f.copy()
    horizontal[:, 2] = 0.0
    n = np.linalg.norm(horizontal, axis=1)
    ok = n > 1e-6
    pitch = np.arcsin(np.clip(f[:, 2], -1.0, 1.0))
    delta = np.arcsin(np.clip(f[:, 2] / ratio, -1.0, 1.0)) - pitch
    axis = np.zeros_like(f)
    axis[ok] = np.cross(horizontal[ok] / n[ok, None], np.array([0.0, 0.0, 1.0]))
    Q = np.array([exp_so3(delta[i] * axis[i]) if ok[i] else np.eye(3) for i in range(len(G))])
    return Q @ G
