# SPDX-License-Identifier: GPL-3.0-or-later
"""The soles of the feet in motion: each foot's sole points (heel, ball and its two sides, toe tip) where Blender
shows them, sampled over an action's frames with the pelvis, the ankles and the contacts (rig.contacts); and
the geometry of a sole (the points between its points, the plane under it)."""

from dataclasses import dataclass, field

import numpy as np

from .armature import RigError, _matrices
from .contacts import CONTACT_HEIGHT, detect_sole_contacts, read_contacts, runs, shortest_contact, stance_levels
from .evaluation import evaluating_only
from .feet import up_vector
from .knees import find_knees, posed_bend


POINT_NAMES = ("heel", "ball", "ball_in", "ball_out", "toe")
SIDE_WIDTH = 0.2  # a foot's half width at the ball over its length, heel to toe tip, where no skin tells it


class SoleSampler:
    """World positions of every sole point of the feet at the current frame (as Blender evaluates it)."""

    def __init__(self, obj, feet):
        self.obj, self.feet = obj, feet
        up = up_vector(obj)
        self.specs = []  # (foot index, point name, bone, offset)
        for k, foot in enumerate(feet):
            pts = {p.name: p for p in foot.points}
            heel, ball, toe = pts["heel"].rest, pts["ball"].rest, pts["toe"].rest
            side = np.cross(ball - heel, up)
            # (from the skin, else a human foot's: a fifth of its length either side of the ball; guessed wider,
            # a mocap foot rolled as it stood was planted on a side point that far out, its ball up to 28 mm high)
            width = foot.half_width or SIDE_WIDTH * np.linalg.norm(toe - heel)
            side *= width / max(np.linalg.norm(side), 1e-12)
            for name in POINT_NAMES:
                if name in pts:
                    p = pts[name]
                    self.specs.append((k, name, p.bone, p.offset))
                    continue
                base = pts["ball"]
                rest = base.rest + (side if name == "ball_in" else -side) * (1 if foot.side == "left" else -1)
                M = np.array(obj.data.bones[base.bone].matrix_local)
                self.specs.append((k, name, base.bone, (np.linalg.inv(M) @ np.append(rest, 1.0))[:3]))
        self.rows = np.array([obj.pose.bones.find(bone) for _, _, bone, _ in self.specs])
        self.offsets = np.array([np.append(off, 1.0) for _, _, _, off in self.specs])  # (P, 4)
        self.ankles = np.array([obj.pose.bones.find(f.ankle) for f in feet])
        self.cols = [[j for j, sp in enumerate(self.specs) if sp[0] == k] for k in range(len(feet))]  # per foot
        self.column = {(feet[k].side, name): j for j, (k, name, _, _) in enumerate(self.specs)}  # by side and point

    def sample(self, rotations=False):
        """(P, 3) world sole points; with ``rotations``, also (feet, 3, 3) the ankles' world rotations."""
        M = _matrices(self.obj.pose.bones, "matrix", len(self.obj.pose.bones))
        W = np.array(self.obj.matrix_world)
        pts = np.einsum("ij,pjk,pk->pi", W, M[self.rows], self.offsets)[:, :3]
        if not rotations:
            return pts
        R = (W[:3, :3] @ M[self.ankles, :3, :3])
        return pts, R / np.linalg.norm(R, axis=1, keepdims=True)


def legs_root(obj, feet):
    """The bone both legs hang from (lowest common ancestor of the ankles, or of the legs of feet parented to
    the root)."""
    chains = []
    for foot in feet:
        b, chain = obj.data.bones[foot.shin or foot.ankle], []
        while b is not None:
            chain.append(b.name)
            b = b.parent
        chains.append(chain)
    common = [n for n in chains[0] if all(n in c for c in chains[1:])]
    if not common:
        raise RigError(f"the feet of {obj.name!r} do not hang from one bone: no pelvis to move")
    return common[0]


@dataclass
class Motion:
    """An armature's feet over frames, as Blender evaluates them: sole points, ankles, pelvis, contacts."""
    sampler: SoleSampler
    pts: np.ndarray  # (F, P, 3) sole points, world
    rotations: np.ndarray  # (F, feet, 3, 3) ankles' world rotations
    pelvis_name: str
    pelvis: np.ndarray  # (F, 3)
    ankles: np.ndarray  # (F, feet, 3)
    pelvis_rotation: np.ndarray  # (F, 3, 3) the pelvis's rotation in the armature's space
    fps: float
    floor: float
    leg: float  # hip height over the floor: the character's size
    travel: float
    in_place: bool
    contacts: np.ndarray  # (F, P) bool
    source: str  # "detected", "the action's contact channels", or channels for some feet
    treadmill: bool = False  # in place with feet sliding under the body while they stand
    floors: np.ndarray = None  # (F, feet) the source ground's height under each foot (uneven ground: not one)
    stood: np.ndarray = None  # (feet,) a foot stood still while another swung (it carried the body)
    detected_feet: list = field(default_factory=list)  # feet whose contacts were detected (no channel keyed)
    knees: list = field(default_factory=list)  # Knee or None per foot (rig.knees)
    knee_bends: np.ndarray = None  # (F, feet) radians, NaN for a foot with no Knee


def _contacts(pts, pelvis, sampler, channels, fps, travel, height):
    """(contacts (F, P), the feet detected (no channel), floors (F, feet), stood (feet,), floor, leg, in place) of
    sole points ``pts`` (F, P, 3, world): the contact channels where a foot has them (a user's edits, or a
    previous run's), else detected; the floor where the feet stand (not where a long foot's swinging toe dips
    through it); the hip height over it (the character's size: at least a third of its rest ``height``, for a
    rig whose legs hang from a root on the floor)."""
    F, P = pts.shape[:2]
    floor = float(np.percentile(pts[..., 2], 1))
    leg = max(float(np.median(pelvis[:, 2]) - floor), height / 3.0, 1e-3)
    in_place = travel < 0.1 * leg
    speed = np.zeros((F, P))
    if F > 1:
        v = np.gradient(pts, axis=0) * fps
        # In place (a cycle on a treadmill) the foot on the ground slides back at the walking speed: only its
        # vertical speed tells it touches.
        speed = np.abs(v[..., 2]) if in_place else np.linalg.norm(v, axis=-1)
    bones = [[j for j in cols if sampler.specs[j][1] not in ("ball_in", "ball_out")] for cols in sampler.cols]
    detected, floors, stood = detect_sole_contacts(pts, speed, sampler.cols, leg, fps, in_place, bones)
    if in_place and F > 1:
        detected = _on_the_belt(detected, v, leg, fps)
    for cols in sampler.cols:  # the sides of the ball touch when the ball does
        names = [sampler.specs[j][1] for j in cols]
        ball = cols[names.index("ball")]
        for j in cols:
            if sampler.specs[j][1] in ("ball_in", "ball_out"):
                detected[:, j] = detected[:, ball]
    contacts, detected_feet = detected.copy(), list(range(len(sampler.feet)))
    if channels is not None:
        keyed_feet = [k for k, cols in enumerate(sampler.cols) if channels[1][cols].any()]
        for k in keyed_feet:
            cols = sampler.cols[k]
            contacts[:, cols] = channels[0][:, cols]
            touching = contacts[:, cols].any(axis=1)
            if touching.any():  # its floor no further under where its keyed contacts stand (between them
                # joined) than a contact's height, never over it: found from its own motion alone, a copied toe
                # curled under the floor as it swung was taken for a stance, the floor fell 24 cm under the
                # contacts and a swing kept that much over it was lifted 18 cm in a frame
                lowest = pts[:, cols, 2].min(axis=1)
                keyed = stance_levels(lowest, touching) - CONTACT_HEIGHT * leg
                floors[:, k] = np.minimum(np.maximum(floors[:, k], keyed), lowest)
        detected_feet = [k for k in detected_feet if k not in keyed_feet]
    if contacts.any():
        floor = float(np.percentile(pts[..., 2][contacts], 5))
    return contacts, detected_feet, floors, stood, floor, leg, in_place


def _on_the_belt(contacts, v, leg, fps):
    """``contacts`` (F, P) of an in-place clip (found from vertical speeds) without the frames where a point moves
    over the ground unlike a standing one: on a treadmill (the standing points' median horizontal velocity over
    a fifth of the hip height ``leg`` per second) a point whose horizontal velocity (``v`` (F, P, 3) per second)
    is further from the belt's than the belt's own speed (a toe skimming the floor as its foot swings forward);
    runs left shorter than a contact's least duration dropped."""
    if not contacts.any():
        return contacts
    belt = np.median(v[..., :2][contacts], axis=0)
    speed = float(np.linalg.norm(belt))
    if speed <= 0.2 * leg:
        return contacts
    out = contacts & (np.linalg.norm(v[..., :2] - belt, axis=-1) <= speed)
    shortest = shortest_contact(fps)
    for j in range(out.shape[1]):
        for a, b in runs(out[:, j]):
            if b - a + 1 < shortest:
                out[a:b + 1, j] = False
    return out


def _level_sides(sampler, pts, rotations, contacts):
    """Re-reads the sides of each foot's ball (ball_in, ball_out: points across the foot, made from the rest pose)
    as level across the foot while it stands (the mean over its contact frames of the horizontal across its
    heel-to-ball line, in the ankle bone's frame), where that turns them by more than 5 degrees: a mocap foot
    bone's twist about its length need not be the foot's (CMU's stand rolled some 20 degrees: their outer side
    point 4 cm under the sole, the rest of the foot floating that much over the ground where it was planted).
    Updates the sampler and the points ``pts`` (F, P, 3) in place; whether any changed."""
    changed = False
    up = np.array([0.0, 0.0, 1.0])
    for k, cols in enumerate(sampler.cols):
        names = [sampler.specs[j][1] for j in cols]
        heel, ball = cols[names.index("heel")], cols[names.index("ball")]
        sides = [j for j in cols if sampler.specs[j][1] in ("ball_in", "ball_out")]
        standing = np.flatnonzero(contacts[:, cols].any(axis=1))
        if len(sides) != 2 or len(standing) < 5 or sampler.specs[ball][2] != sampler.feet[k].ankle:
            continue
        forward = pts[standing, ball] - pts[standing, heel]
        forward[:, 2] = 0.0
        across = np.cross(forward, up)
        n = np.linalg.norm(across, axis=1)
        ok = n > 1e-9
        if ok.sum() < 5:
            continue
        side = np.einsum("tji,tj->i", rotations[standing[ok], k], across[ok] / n[ok, None])  # sum of R^T across
        if np.linalg.norm(side) < 1e-6:
            continue
        side /= np.linalg.norm(side)
        for j in sides:  # (each side point: the ball's offset plus its own width along the level side)
            width = sampler.offsets[j, :3] - sampler.offsets[ball, :3]
            size = np.linalg.norm(width)
            sign = np.sign(width @ side) or 1.0
            if size < 1e-12 or sign * (width @ side) / size >= np.cos(np.radians(5.0)):
                continue
            new = sampler.offsets[ball, :3] + sign * size * side
            scale = np.linalg.norm(pts[0, j] - pts[0, ball]) / size  # world length of one unit of the bone's
            pts[:, j] = pts[:, ball] + scale * np.einsum("tij,j->ti", rotations[:, k], new - sampler.offsets[ball, :3])
            sampler.offsets[j, :3] = new
            spec = sampler.specs[j]
            sampler.specs[j] = (spec[0], spec[1], spec[2], new)
            changed = True
    return changed


def sole_sampler(scene, obj, feet, frames):
    """The SoleSampler the foot placement uses for ``obj``'s motion over ``frames``: the ball's sides levelled as
    its feet stand (_level_sides). What a test or a benchmark measures the soles with."""
    return sample_motion(scene, obj, feet, frames).sampler


def sample_motion(scene, obj, feet, frames, step=1):
    """The Motion of ``obj`` over ``frames``: contacts from its contact channels when it has them, else
    detected (the foot placement's detector; the retargeting uses it on its source)."""
    sampler = SoleSampler(obj, feet)
    F, P = len(frames), len(sampler.specs)
    pts = np.zeros((F, P, 3))
    rotations = np.zeros((F, len(feet), 3, 3))
    pelvis_name = legs_root(obj, feet)
    pelvis = np.zeros((F, 3))
    ankles = np.zeros((F, len(feet), 3))
    pelvis_rotation = np.zeros((F, 3, 3))
    knees = find_knees(obj, feet)
    knee_bends = np.full((F, len(feet)), np.nan)
    with evaluating_only(scene, [obj]):  # (the armature alone is read, in one go)
        for i, f in enumerate(frames):
            scene.frame_set(f)
            pts[i], rotations[i] = sampler.sample(rotations=True)
            pb = obj.pose.bones[pelvis_name]
            pelvis[i] = np.array(obj.matrix_world @ pb.head)
            R = np.array(pb.matrix)[:3, :3]
            pelvis_rotation[i] = R / np.linalg.norm(R, axis=0, keepdims=True)
            ankles[i] = [np.array(obj.matrix_world @ obj.pose.bones[foot.ankle].head) for foot in feet]
            knee_bends[i] = [posed_bend(obj, knee) if knee else np.nan for knee in knees]
    fps = scene.render.fps / scene.render.fps_base / max(step, 1)
    # how far the pelvis goes from where it starts (not where it ends: a walk that turns and comes back travels)
    travel = float(np.max(np.linalg.norm(pelvis[:, :2] - pelvis[0, :2], axis=1))) if F > 1 else 0.0
    channels = read_contacts(obj, sampler, frames)
    W = np.array(obj.matrix_world)
    heads = np.array([W @ np.append(np.array(b.head_local), 1.0) for b in obj.data.bones])
    height = float(np.ptp(heads[:, 2])) if len(heads) else 0.0
    found = _contacts(pts, pelvis, sampler, channels, fps, travel, height)
    if _level_sides(sampler, pts, rotations, found[0]):  # the ball's sides re-read level as the feet stand:
        found = _contacts(pts, pelvis, sampler, channels, fps, travel, height)  # their contacts and floors again
    contacts, detected_feet, floors, stood, floor, leg, in_place = found
    if not detected_feet:
        source = "the action's contact channels"
    elif len(detected_feet) == len(feet):
        source = "detected"
    else:
        source = (f"the action's contact channels (the {' and '.join(feet[k].side for k in detected_feet)} "
                  f"foot's detected: no channel)")
    # A treadmill: in place, and the feet slide under the body while they stand (a standing jump or an idle,
    # in place too, keeps its feet still: those are pinned as any).
    treadmill = False
    if in_place and F > 1 and contacts.any():
        slide = np.linalg.norm(np.gradient(pts[..., :2], axis=0), axis=-1) * fps
        treadmill = bool(np.median(slide[contacts]) > 0.2 * leg)
    return Motion(sampler, pts, rotations, pelvis_name, pelvis, ankles, pelvis_rotation, fps, floor, leg, travel,
                  in_place, contacts, source, treadmill, floors, stood, detected_feet, knees, knee_bends)


def untouched_feet(motion, feet=None):
    """Sides of the feet (of ``feet``, indices; default: those whose contacts were detected) that stood still
    while another foot swung, so carried the body, yet have no contact: the detector missed them, so their
    contacts can be neither planted nor judged. A foot that never stands (a hop on the other leg) is not one."""
    feet = motion.detected_feet if feet is None else feet
    return [motion.sampler.feet[k].side for k in feet
            if motion.stood[k] and not motion.contacts[:, motion.sampler.cols[k]].any()]


def sole_probes(names):
    """(probes, points) weights: each sole point, and points along the sole from the heel to the ball (thirds)
    and from the ball to the toe tip (half way): what a swinging foot must keep above the terrain."""
    P = len(names)
    rows = list(np.eye(P))
    for a, b, fractions in (("heel", "ball", (1 / 3, 2 / 3)), ("ball", "toe", (0.5,))):
        if a in names and b in names:
            for f in fractions:
                w = np.zeros(P)
                w[names.index(a)], w[names.index(b)] = 1.0 - f, f
                rows.append(w)
    return np.array(rows)


def plane_normal(xy, h, ok=None):
    """The up normal of the least-squares plane z = a x + b y + c through terrain heights ``h`` at ``xy`` (the
    surface a sole can lie on, whatever the faces under it); straight up with fewer than 3 points."""
    ok = np.isfinite(h) if ok is None else ok & np.isfinite(h)
    if ok.sum() < 3:
        return np.array([0.0, 0.0, 1.0])
    A = np.column_stack([xy[ok], np.ones(int(ok.sum()))])
    (a, b, _), *_ = np.linalg.lstsq(A, h[ok], rcond=None)
    n = np.array([-a, -b, 1.0])
    return n / np.linalg.norm(n)
