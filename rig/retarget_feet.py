# SPDX-License-Identifier: GPL-3.0-or-later
"""A retarget's feet: the mapped feet with their sole points, the travel a body needs so that its standing feet do
not slide, how a source's feet lie when they stand flat, and the pitch of feet much longer for their legs than the
source's."""

import numpy as np

from ..solvers.rotations import exp_so3, log_so3, turn_between, unit
from .contacts import CONTACT_HEIGHT, moving
from .feet import find_feet
from .humanoid import SIDES
from .swing import smoothstep

FEWEST_FLAT = 3  # frames a foot stands flat in to read how it lies then (a run's stances are short)


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


def flat_frames(h, motion, lowest=False):
    """{role: (F,) bool} the frames where each of the source's feet and toes stands flat on the floor (a foot: its
    heel and ball touching, else with ``lowest`` its lowest stances: _lowest_stances; a toe: its ball and tip),
    for the roles the motion shows so often enough."""
    names = [n for _, n, _, _ in motion.sampler.specs]
    out = {}
    for k, foot in enumerate(motion.sampler.feet):
        cols = {names[j]: j for j in motion.sampler.cols[k]}
        for role, pair in ((f"{foot.side} foot", ("heel", "ball")), (f"{foot.side} toe", ("ball", "toe"))):
            if h.roles.get(role) is None or any(p not in cols for p in pair):
                continue
            flat = motion.contacts[:, cols[pair[0]]] & motion.contacts[:, cols[pair[1]]]
            enough = flat.sum() >= max(5, 0.05 * len(flat))
            if not enough and pair[0] == "heel" and lowest:
                flat = _lowest_stances(motion, k, cols[pair[1]])
                enough = flat.sum() >= FEWEST_FLAT
            if enough:
                out[role] = flat
    return out


def standing_tilts(h, R, rest, index, flat):
    """{role: T} for the source's bones that stand flat on the ``flat`` frames ({role: (F,) bool}): the world turn
    from a bone's rest to how it lies then (the bone's up while flat, averaged over those frames, turned to the
    world's). A clip's rest pose need not stand flat (a BVH's feet point where its T-pose put them)."""
    out = {}
    for role, frames in flat.items():
        bone = index[h.roles[role]]
        out[role] = turn_between(rest[bone] @ flat_up(R[frames, bone]), np.array([0.0, 0.0, 1.0]))
    return out


def flat_up(R):
    """The world's up in a bone's own frame while it stands flat (R (n, 3, 3): its world rotations then), averaged."""
    return unit(np.einsum("tji,j->i", R, np.array([0.0, 0.0, 1.0])))


def flat_alignment(R, ref, forward, target_forward):
    """A (3, 3), the world turn taking the character's rest foot onto the source's reference-pose foot ``ref``, so
    that wherever the source's foot stands flat (R (n, 3, 3): its world rotations on those frames) the character's
    stands as flat as at rest, heading where the source's does (``forward``: the source's ankle to toe in its
    reference pose; ``target_forward``: the character's foot's heading at rest, level), averaged over the frames.
    Read from the frames themselves, not from the reference pose's heading: there a run's foot may swing toes
    down behind the body, its heading turned round."""
    local = ref.T @ forward
    A = np.zeros((3, 3))
    for Rf in R:
        heading = Rf @ local
        heading[2] = 0.0
        A += ref @ Rf.T @ turn_between(target_forward, unit(heading))  # (ref R_f^T Y: R_f maps onto Y at rest)
    U, _, Vt = np.linalg.svd(A)
    return U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt


def _lowest_stances(motion, k, ball):
    """(F,) bool: the frames where foot ``k``'s ball touches and its ankle is as low over the floor as it comes
    while the ball touches (within a sixth of a contact's height): the foot flat, read without its heel (a
    skeleton's heel point sits at its ankle when the rest pose shows nothing under it: Bandai Namco's lies down;
    a run's stance is a few frames long)."""
    on = motion.contacts[:, ball]
    if not on.any():
        return on
    height = motion.ankles[:, k, 2] - motion.floors[:, k]
    return on & (height <= height[on].min() + CONTACT_HEIGHT * motion.leg / 6.0)


def sole_heights(motion, side):
    """(F,) the lowest sole point of the source's foot on ``side`` over the floor under it."""
    k = next(k for k, f in enumerate(motion.sampler.feet) if f.side == side)
    return motion.pts[:, motion.sampler.cols[k], 2].min(axis=1) - motion.floors[:, k]


def swinging_turns(R, flat, pointed, up, height, leg):
    """(F, 3, 3) a foot's constant turn per frame (the character's foot's world rotation: R C, R (F, 3, 3) the
    source foot's): ``flat`` (flat_alignment) near the floor (``height`` (F,): the source's sole over it, within
    3 % of the hip height ``leg``) or while its sole is within 60 degrees of level (``up``: its up when standing
    flat, flat_up: a walk's swing); turning smoothly to ``pointed`` (its ankle to toe and the ankle's axis on the
    source's) as it rises a tenth of the hip height further and tilts to 120 degrees (a run's foot kicked back). A
    skeleton's foot is a line from ankle to toe: where it stands its sole is what shows; swinging far from
    standing, the way it points (a Bandai Namco run's foot kicked back, turned about that line by the capture,
    turned the long block of Quaternius' Robot's foot sideways)."""
    ease = lambda x: smoothstep(np.clip(x, 0.0, 1.0))  # noqa: E731
    tilt = np.arccos(np.clip((R @ up)[:, 2], -1.0, 1.0))
    w = ease((tilt - np.pi / 3) / (np.pi / 3)) * ease((height - CONTACT_HEIGHT * leg) / (0.1 * leg))
    return flat @ exp_so3(w[:, None] * log_so3(flat.T @ pointed))


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
