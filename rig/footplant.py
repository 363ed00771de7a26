# SPDX-License-Identifier: GPL-3.0-or-later
"""Terrain-adaptive foot placement, baked into keyframes (paper 000 §IV-G, extended).

From the source motion: the sole points of each foot (heel, ball and its two sides, toe tip), their contacts
with the source floor (height and speed, with hysteresis and a minimum duration; or the contact channels a
user edited), and the terrain under them (rays cast down, several terrain objects). Per frame, position goals:
a foot that touches is the source foot moved as one rigid body, held against skate, turned to the terrain under
its sole and set on it with the source's clearance (slid onto one tread when it would land across a step
edge); a swinging foot is raised as a whole over the terrain under it (smoothed ahead in time, never below the
terrain: no toe through a step), blended into and out of its contacts; the pelvis rises or lowers by what the
lower foot needs, smoothed; a displacement goal keeps the body on the source motion. Solved frame by frame by
the tracker and keyed by the Baker (a new action; the source untouched), then judged on the pose Blender shows.
"""

import json
import time
from dataclasses import dataclass, field

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..solvers import Displacement, Orientation, Position
from ..solvers.rotations import exp_so3, log_so3, skew
from .armature import RigError, _matrices, chains_to, constrained
from .bake import (BakeOptions, Baker, check_bake, frame_ranges as _ranges, keep_report, outside_warning,
                   summary_lines)
from .evaluation import evaluating_only
from .feet import _side, find_feet, up_vector
from .goals import cached_tree
from .reading import one_job_each_call
from .terrain import Terrain

CONTACT_PREFIX = "fbik_contact"
FEET_REPORT_PROPERTY = "fullbody_ik_feet_report"
POINT_NAMES = ("heel", "ball", "ball_in", "ball_out", "toe")
HALF_LIFE = 0.08  # seconds: a foot's tilt and toe bend, where its contacts leave them free, fade at this rate


@dataclass
class FootOptions:
    frame_start: int
    frame_end: int
    terrain: list  # terrain object names
    feet: str = ""  # "ANKLE:BALL,ANKLE:BALL" by hand; empty: found from names
    step: int = 1
    method: str = ""
    time_limit: float = 0.0
    max_error: float = 0.01  # world units: a contact point further off the terrain than this fails the job
    blend_frames: int = 3  # swing targets blend into and out of contacts over this many frames
    pelvis_smoothing: float = 0.3  # seconds: the pelvis offset is averaged over this window
    body_weight: float = 1e-4  # weight of staying on the source pose (displacement goal; radians vs metres)
    held: dict = field(default_factory=dict)  # {bone: (F, 3) world targets of its head}: also held (not judged)
    # Points in contact touch the terrain, the foot turned so that they all do (retargeting: a clip on another
    # character, whose copied feet stand tilted and above or below its floor); else (a clip placed on terrain)
    # they keep the clip's clearance over its floor and the foot its tilt.
    on_floor: bool = False
    # Sides of the feet whose contact channels were keyed by a detector (the retargeting's, on its source), not
    # edited by a user: a foot it missed fails the job as one detected here would.
    detected_contacts: tuple = ()
    # Each frame solved from the source's pose there, not from the previous frame's answer: frames in parallel
    # (BakeOptions.independent); ``workers``: threads (0: automatic).
    independent: bool = False
    workers: int = 0


def _channel(foot, point):
    """The custom property keyed with a sole point's contacts (the ball's sides share the ball's)."""
    return f"{CONTACT_PREFIX}_{foot.side}_{'ball' if point.startswith('ball') else point}"


def _runs(mask):
    """[(first, last)] index runs of True in a 1-D bool array."""
    out, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        if not m and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(mask) - 1))
    return out


def detect_contacts(height, speed, h_on, v_on, min_frames, pts=None):
    """(F, P) contacts from heights above the floor and speeds: on below h_on and v_on, off above 1.5x
    either (hysteresis), runs shorter than ``min_frames`` dropped; with the points ``pts`` (F, P, 3), gaps
    shorter than that filled where the point stays below 1.5x h_on and comes back to within h_on of where it
    left (mocap noise, not a step or a slide)."""
    F, P = height.shape
    out = np.zeros((F, P), dtype=bool)
    v_on = np.broadcast_to(np.asarray(v_on, dtype=float), (P,))  # per point, or one for all
    for p in range(P):
        on = False
        for t in range(F):
            if not on and height[t, p] < h_on and speed[t, p] < v_on[p]:
                on = True
            elif on and (height[t, p] > 1.5 * h_on or speed[t, p] > 1.5 * v_on[p]):
                on = False
            out[t, p] = on
        for a, b in _runs(out[:, p]):
            if b - a + 1 < min_frames:
                out[a:b + 1, p] = False
        if pts is None:
            continue
        runs = _runs(out[:, p])
        for (_, b), (a, _) in zip(runs, runs[1:]):
            if a - b - 1 < min_frames and (height[b + 1:a, p] < 1.5 * h_on).all() and \
                    np.linalg.norm(pts[a, p] - pts[b, p]) < h_on:
                out[b + 1:a, p] = True
    return out


def _own_floor(z):
    """(P,) each sole point's own lowest height (2nd percentile) over frames of heights ``z`` (F, P): mocap
    soles are not at one height; a foot's floor is the lowest of its points'."""
    return np.percentile(z, 2, axis=0)


def detect_sole_contacts(pts, speed, cols, leg, fps, in_place, level_cols=None):
    """((F, P) contacts, (F, feet) floor heights under the feet, (feet,) whether each foot stood still while
    another swung) of sole points ``pts`` (F, P, 3, world) with speeds (F, P): below 3 % of the hip height
    ``leg`` over the floor where the point rests and slower than 15 % of it per second (a foot in stance), with
    hysteresis and a minimum duration. ``cols``: the points' columns per foot; ``level_cols``: those of them
    that say where the foot stands (default all: not points guessed beside the bones, a sole's width).

    The floor where a point rests is its own lowest height (mocap soles are not at one height), or on uneven
    ground (a clip recorded on rocks or stairs) the low height (5th percentile; the first quartile where that is
    much higher: a toe poked through the floor as it leaves) of the foot's lowest point over a stance (a run of
    frames where a point of the foot is slow) on the floor the feet walk on (_on_drifting_floor), or that
    carries the body: another foot swings meanwhile (the weight is on this one: a step up onto a rock or a box)
    and it lasts at least half as long as the clip's stances do (not the feet slowing together at a jump's top),
    or it is no higher than where another foot stands (both feet on the top tread); not a raised foot held still
    while the other stands.
    The speed threshold grows with the feet's swing speed (a fifth of the calmer foot's 90th percentile, up to
    30 % of the hip height per second): a clip at its own 120 Hz, where mocap jitter moves a standing foot,
    reads like one slowed to a 24 fps scene; a jittering foot does not raise it. In place, the speed given is
    vertical and the threshold at least 1.5x its slowest fifth (a stylized run whose feet never stop). The
    floor under a foot is where it stands (in a stance whose lowest point drifts, that low height over the
    half second around each frame: a mocap floor drifts), blended linearly between its stances, never above the
    foot."""
    F, P = speed.shape
    z = pts[..., 2]
    h_on, min_frames = 0.03 * leg, max(2, int(round(0.08 * fps)))
    if in_place:
        v_on = np.maximum(0.15 * leg, 1.5 * np.percentile(speed, 20, axis=0))
    else:
        swing = min(float(np.median(np.percentile(speed[:, c], 90, axis=0))) for c in cols)
        v_on = np.full(P, max(0.15 * leg, min(0.2 * swing, 0.3 * leg)))
    own = _own_floor(z)
    ground = np.tile(own, (F, 1))  # per frame and point: the floor it is judged against
    slow = speed < v_on
    swinging = np.array([~slow[:, c].any(axis=1) for c in cols]).T  # (F, feet): no point of the foot is slow
    # The feet's stances: runs where a point of the foot is slow (the toe stays while the heel rises), joined
    # over fewer than min_frames fast frames; the foot's floor in each is the low height of its lowest point,
    # each point's floor that plus the point's own offset (a heel higher than the ball on a mocap skeleton).
    stances = []  # (foot, first, stop: where the next stance begins, floor, on its own lowest floor)
    local = np.full((F, len(cols)), np.nan)  # where each foot's lowest point stands, near each frame of a stance
    half = max(1, int(round(0.25 * fps)))
    for k, c in enumerate(cols):
        merged = []
        for a, b in _runs(slow[:, c].any(axis=1)):
            if merged and a - merged[-1][1] - 1 < min_frames:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        lowest = z[:, (level_cols or cols)[k]].min(axis=1)
        for n, (a, b) in enumerate(merged):
            low, most = np.percentile(lowest[a:b + 1], [5, 25])
            low = float(most if most - low > h_on else low)  # (a toe poked through the floor as it leaves: no level)
            local[a:b + 1, k] = low
            if np.percentile(lowest[a:b + 1], 75) - low > 0.5 * h_on:  # a stance whose level drifts (mocap): its
                # level the same low height over the half second around each frame (within the stance)
                near = sliding_window_view(np.pad(lowest[a:b + 1], half, constant_values=np.nan), 2 * half + 1)
                near_low, near_most = np.nanpercentile(near, [5, 25], axis=1)
                local[a:b + 1, k] = np.where(near_most - near_low > h_on, near_most, near_low)
            stop = merged[n + 1][0] if n + 1 < len(merged) else F
            stances.append((k, a, b, stop, low, low - own[c].min() < h_on))
    stances = _on_drifting_floor(stances, h_on, int(round(2.0 * fps)))
    # Above its lowest floor, a stance holds the body when another foot swings meanwhile (the weight is on this
    # one), or when it is no higher than where another foot stands then (both feet on the top tread); not a
    # raised foot held still.
    standing = np.full((F, len(cols)), np.inf)  # the floor each foot stands on, where that is sure
    floors = np.full((F, len(cols)), np.nan)  # the floor under each foot: where it stands, in between blended
    stood = np.zeros(len(cols), dtype=bool)
    lengths = [b - a + 1 for _, a, b, _, _, base in stances if base and b - a + 1 >= min_frames] or \
        [b - a + 1 for _, a, b, _, _, _ in stances if b - a + 1 >= min_frames]
    typical = float(np.median(lengths)) if lengths else 0.0  # a stance's length in this clip (on the floor)
    for k, a, b, _, low, base in stances:
        others = np.delete(swinging, k, axis=1)
        carries = others.size > 0 and int(others[a:b + 1].any(axis=1).sum()) >= min_frames
        stood[k] |= carries and b - a + 1 >= min_frames
        # Not the feet slowing together at a jump's top: that is shorter than a stance.
        if base or (carries and b - a + 1 >= 0.5 * typical):
            standing[a:b + 1, k] = low
    for k, a, b, stop, low, base in stances:
        c = cols[k]
        if np.isfinite(standing[a, k]):
            level = standing[a, k]
        else:
            beside = np.delete(standing[a:b + 1], k, axis=1).min(axis=1, initial=np.inf)  # where another stands
            level = low if int((np.isfinite(beside) & (low <= beside + h_on)).sum()) >= min_frames else np.inf
        floor = level  # (each stance on its own level: a mocap sole is not at one height over its floor)
        ground[a:stop, c] = floor + own[c] - own[c].min()
        floors[a:b + 1, k] = floor + local[a:b + 1, k] - low if np.isfinite(floor) else floor
    height = np.where(np.isfinite(ground), z - ground, np.inf)  # no floor: a foot held in the air
    t = np.arange(F)
    for k, c in enumerate(cols):  # between its stances a foot's floor goes from one to the next
        known = np.isfinite(floors[:, k])
        floors[:, k] = np.interp(t, t[known], floors[known, k]) if known.any() else own[c].min()
        floors[:, k] = np.minimum(floors[:, k], z[:, c].min(axis=1))  # never over the foot (a step down at the end)
    return detect_contacts(height, speed, h_on, v_on, min_frames, pts), floors, stood


def _on_drifting_floor(stances, h_on, window):
    """``stances`` (foot, first, last, stop, level, on the floor) with those on the floor the feet walk on: within
    ``h_on`` of the clip's lowest floor, or of a stance on it near in time (overlapping it or within ``window``
    frames, or each foot's nearest before or after it). A mocap floor drifts (CMU 131's soles stand 6 cm higher at the end of the take
    than at its start): a stance is on the floor where its neighbours stand, not only where the take began. A
    foot held raised while the other stands, or a step up onto a box, is further than that from its neighbours."""
    on = [s[5] for s in stances]
    changed = True
    while changed:
        changed = False
        for i, (_, a, b, _, low, _) in enumerate(stances):
            if on[i]:
                continue
            near = [j for j in range(len(stances)) if on[j] and max(stances[j][1] - b, a - stances[j][2]) <= window]
            for foot in {s[0] for s in stances}:
                floor = [j for j in range(len(stances)) if on[j] and stances[j][0] == foot]
                near.append(max((j for j in floor if stances[j][2] < a), key=lambda j: stances[j][2], default=None))
                near.append(min((j for j in floor if stances[j][1] > b), key=lambda j: stances[j][1], default=None))
            if any(abs(low - stances[j][4]) < h_on for j in near if j is not None):
                on[i] = changed = True
    return [s[:5] + (o,) for s, o in zip(stances, on)]


def _moving(values, window, fn):
    """fn (np.max or np.mean) over a centred window of ``window`` frames, per column."""
    h = max(int(window) // 2, 0)
    out = np.empty_like(values)
    for t in range(len(values)):
        out[t] = fn(values[max(0, t - h):t + h + 1], axis=0)
    return out


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
            width = foot.half_width or 0.35 * np.linalg.norm(toe - heel)  # (from the skin, else from the length)
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

    def sample(self, rotations=False):
        """(P, 3) world sole points; with ``rotations``, also (feet, 3, 3) the ankles' world rotations."""
        M = _matrices(self.obj.pose.bones, "matrix", len(self.obj.pose.bones))
        W = np.array(self.obj.matrix_world)
        pts = np.einsum("ij,pjk,pk->pi", W, M[self.rows], self.offsets)[:, :3]
        if not rotations:
            return pts
        R = (W[:3, :3] @ M[self.ankles, :3, :3])
        return pts, R / np.linalg.norm(R, axis=1, keepdims=True)


@dataclass
class FootPlan:
    frames: list
    points: np.ndarray  # (F, P, 3) source sole points, world
    contacts: np.ndarray  # (F, P) bool
    terrain: np.ndarray  # (F, P) terrain height under the source points
    normals: np.ndarray  # (F, P, 3)
    hits: np.ndarray  # (F, P) bool
    targets: np.ndarray  # (F, P, 3) world
    pelvis: np.ndarray  # (F, 3) world target of the pelvis head
    floor: float  # the source floor height
    clearance: np.ndarray  # (F, P) source height above its floor
    source_contacts: str = "detected"  # or "the action's contact channels"
    off_terrain: list = field(default_factory=list)  # frames where a sole point has no terrain under it
    rotations: np.ndarray = None  # (F, feet, 3, 3) the source ankles' world rotations
    warnings: list = field(default_factory=list)
    ankles: np.ndarray = None  # (F, feet, 3) where each ankle's head goes: the foot's motion applied to the source's
    source_on_terrain: bool = False  # the source already stands on the terrain (a second run): its floor is it
    pelvis_rotation: np.ndarray = None  # (F, 3, 3) the source pelvis's rotation, armature space
    flat: np.ndarray = None  # (F, feet, 3, 3) with on_floor: the ankles' rest rotations (a level sole)
    untouched: list = field(default_factory=list)  # feet (sides) that carried the body with no contact detected
    floors: np.ndarray = None  # (F, feet) the floor under each foot in the source: where it stood in each stance


def _pelvis(obj, feet):
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


def read_contacts(obj, sampler, frames):
    """((F, P) contacts from the armature's contact channels (keyed custom properties), (P,) which points have
    a channel), or None when none has."""
    ad = obj.animation_data
    if ad is None or ad.action is None:
        return None
    from bpy_extras import anim_utils

    bag = anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot) if ad.action_slot else None
    if bag is None:
        return None
    out = np.zeros((len(frames), len(sampler.specs)), dtype=bool)
    keyed = np.zeros(len(sampler.specs), dtype=bool)
    for j, (k, name, _, _) in enumerate(sampler.specs):
        fc = bag.fcurves.find(f'["{_channel(sampler.feet[k], name)}"]')
        if fc is None:
            continue
        keyed[j] = True
        out[:, j] = [fc.evaluate(f) > 0.5 for f in frames]
    return (out, keyed) if keyed.any() else None


def write_contacts(obj, action, slot, sampler, frames, contacts, skip=()):
    """Key the contacts (one channel per foot and sole point, constant interpolation) into ``action``: seen and
    edited in the Dope Sheet and Graph Editor; a later run uses the edited ones. Feet whose side is in ``skip``
    (the detector missed them) get no channel, so a later run detects them again rather than read "never"."""
    from bpy_extras import anim_utils

    bag = anim_utils.action_ensure_channelbag_for_slot(action, slot)
    done = set()
    for j, (k, name, _, _) in enumerate(sampler.specs):
        prop = _channel(sampler.feet[k], name)
        if prop in done:
            continue
        done.add(prop)
        path = f'["{prop}"]'
        fc = bag.fcurves.find(path)
        if fc is not None:
            bag.fcurves.remove(fc)
        if sampler.feet[k].side in skip:
            continue
        obj[prop] = 0.0
        fc = bag.fcurves.new(path, group_name="Full-Body IK contacts")
        fc.keyframe_points.add(len(frames))
        co = np.empty(2 * len(frames), dtype=np.float32)  # (Blender's own type: float64 is written 3x slower)
        co[0::2], co[1::2] = frames, contacts[:, j]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", [0] * len(frames))  # CONSTANT
        fc.update()


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
    for cols in sampler.cols:  # the sides of the ball touch when the ball does
        names = [sampler.specs[j][1] for j in cols]
        ball = cols[names.index("ball")]
        for j in cols:
            if sampler.specs[j][1] in ("ball_in", "ball_out"):
                detected[:, j] = detected[:, ball]
    contacts, detected_feet = detected, list(range(len(sampler.feet)))
    if channels is not None:
        keyed_feet = [k for k, cols in enumerate(sampler.cols) if channels[1][cols].any()]
        for k in keyed_feet:
            contacts[:, sampler.cols[k]] = channels[0][:, sampler.cols[k]]
        detected_feet = [k for k in detected_feet if k not in keyed_feet]
    if contacts.any():
        floor = float(np.percentile(pts[..., 2][contacts], 5))
    return contacts, detected_feet, floors, stood, floor, leg, in_place


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
    pelvis_name = _pelvis(obj, feet)
    pelvis = np.zeros((F, 3))
    ankles = np.zeros((F, len(feet), 3))
    pelvis_rotation = np.zeros((F, 3, 3))
    with evaluating_only(scene, [obj]):  # (the armature alone is read, in one go)
        for i, f in enumerate(frames):
            scene.frame_set(f)
            pts[i], rotations[i] = sampler.sample(rotations=True)
            pb = obj.pose.bones[pelvis_name]
            pelvis[i] = np.array(obj.matrix_world @ pb.head)
            R = np.array(pb.matrix)[:3, :3]
            pelvis_rotation[i] = R / np.linalg.norm(R, axis=0, keepdims=True)
            ankles[i] = [np.array(obj.matrix_world @ obj.pose.bones[foot.ankle].head) for foot in feet]
    fps = scene.render.fps / scene.render.fps_base / max(step, 1)
    travel = float(np.linalg.norm(pelvis[-1, :2] - pelvis[0, :2])) if F > 1 else 0.0
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
                  in_place, contacts, source, treadmill, floors, stood, detected_feet)


def plan(scene, obj, feet, terrain, frames, options, stiff=frozenset()):
    """Sample the source motion and compute every frame's targets (world)."""
    m = sample_motion(scene, obj, feet, frames, options.step)
    sampler, pts, rotations, pelvis_name, pelvis, ankles = m.sampler, m.pts, m.rotations, m.pelvis_name, m.pelvis, \
        m.ankles
    fps, floor, leg, travel, in_place, contacts, source = m.fps, m.floor, m.leg, m.travel, m.in_place, m.contacts, \
        m.source
    F, P = len(frames), len(sampler.specs)
    # Each point over the floor under its foot: where the foot's lowest point stands in each stance (blended
    # between stances, never over the foot: detect_sole_contacts). A mocap floor drifts and a mocap skeleton's
    # two soles do not sit at one height (CMU's right some 2 cm over its left): each stance touches where it
    # stood. One level for the whole foot, so a rigid foot keeps its shape (a mocap skeleton's ball stands
    # higher than its toe tip; as the heel rises it keeps that height).
    clearance = pts[..., 2] - m.floors[:, [foot for foot, *_ in sampler.specs]]
    # Terrain under each source point, cast from above the point by half a leg plus where the terrain was
    # the frame before (a character on a bridge deck stays on it, under an overhang stays under it).
    height = np.full((F, P), np.nan)
    normal = np.zeros((F, P, 3))
    hits = np.zeros((F, P), dtype=bool)
    first, first_ok = terrain.nearest(pts[0])  # the first frame: the surface nearest each point, above or below
    offset = np.where(first_ok, first - floor, 0.0)
    for i in range(F):
        start = pts[i, :, 2] + np.maximum(offset, 0.0) + 0.5 * leg
        h, n, ok = terrain.below(pts[i], start)
        height[i], normal[i], hits[i] = h, n, ok
        offset = np.where(ok, h - floor, offset)
    raw = np.where(hits, height - floor, np.nan)
    raw = _fill(raw)
    # A source that already stands on this terrain (a second run, a clip made on it) touches the terrain, not a
    # flat floor: then the terrain is its floor, clearances are over it and there is no offset to add.
    # Told by the contacts: nearer the terrain than the floor, or following the terrain's ups and downs (a
    # second run on stairs: its contacts on the first tread are as near the floor as the terrain).
    over = pts[..., 2] - height
    seen = contacts & np.isfinite(over)
    on_terrain = False
    if seen.any():
        o, c, h = over[seen], (pts[..., 2] - floor)[seen], height[seen]  # over the clip's floor, not its ground
        nearer = np.median(np.abs(o)) < 0.5 * np.median(np.abs(c))
        follows = np.std(h) > 0.01 * leg and np.std(o) < 0.5 * np.std(c)
        # and it stands on it: its contacts as near it as to the ground under them (a clip on rocks over stairs
        # may follow them by chance, some 10 cm off)
        stands = np.median(np.abs(o)) < np.median(np.abs(clearance[seen])) + 0.01 * leg
        on_terrain = bool((nearer or follows) and stands)
        if on_terrain:
            clearance = np.where(np.isfinite(over), over, clearance)
            raw = np.zeros_like(raw)
    if options.on_floor:
        clearance = np.where(contacts, 0.0, clearance)
    window = max(3, int(round(0.25 * fps)) | 1)
    swing_offset = np.maximum(_moving(_moving(raw, window, np.max), window, np.mean), raw)
    feet_cols = sampler.cols
    for cols in feet_cols:  # a swinging foot is raised as a whole, by what its highest-needing point needs
        swing_offset[:, cols] = swing_offset[:, cols].max(axis=1, keepdims=True)
    targets = pts.copy()
    targets[..., 2] += swing_offset
    for k, cols in enumerate(feet_cols):
        if not m.treadmill:  # on a treadmill the foot's slide under the body is the motion: kept
            shift = _skate_shift(pts[:, cols], contacts[:, cols])  # (F, 2): pins the foot while it touches
            targets[:, cols, :2] += shift[:, None, :]
        touching = contacts[:, cols]
        _onto_one_level(targets, cols, touching, terrain, leg)
        # A foot that touches: the source foot (held against skate) turned as a whole from the source floor's
        # normal to the terrain's under its contact points, about its middle, and raised until none of its contact
        # points is closer to the terrain under it than the source's clearance. One rigid motion per frame: goals a
        # foot can meet exactly (on a slope the heel-to-toe distance shortens: per-point heights alone would
        # pull the foot apart), continuous as points touch and lift.
        up = np.array([0.0, 0.0, 1.0])
        turns = {}
        on_ankle = np.array([sampler.specs[j][2] in (feet[k].ankle, *(stiff & {feet[k].ball})) for j in cols])
        is_tip = np.array([sampler.specs[j][1] == "toe" for j in cols])
        foot_length = float(np.median(np.linalg.norm(pts[:, cols[-1]] - pts[:, cols[0]], axis=-1)))  # heel to toe
        prepared = {}
        for t in np.flatnonzero(touching.any(axis=1)):
            c = touching[t]
            foot_pts = targets[t, cols].copy()
            foot_pts[:, 2] = pts[t, cols, 2]
            h_all, _, ok_all = terrain.below(foot_pts, foot_pts[:, 2] + np.nanmax(raw[t, cols]) + 0.5 * leg)
            h, ok = h_all[c], ok_all[c]
            if not ok.any():
                continue
            normal_t = plane_normal(foot_pts[:, :2], h_all, ok_all)
            if normal_t[2] < np.cos(np.radians(45.0)):  # steeper than a foot stands on: an edge, a wall
                normal_t = up
            R = np.eye(3) if on_terrain else _turn(up, normal_t)  # a source on the terrain is turned to it already
            middle = foot_pts.mean(axis=0)
            turned = middle + (foot_pts - middle) @ R.T
            # The terrain under the turned points (turning moves them sideways a little: on a bump that matters).
            h_all, _, ok_all = terrain.below(turned, turned[:, 2] + np.nanmax(raw[t, cols]) + 0.5 * leg)
            if not (c & ok_all).any():
                continue
            prepared[t] = (R, turned, h_all, ok_all)
        # With on_floor the foot is turned until the contact points on its ankle bone are level with the terrain
        # (the toe tip, on the toe bone, bends onto it below); what the contacts leave free (the turn about the
        # ball's line while only the ball touches, any turn on the heel alone) follows the neighbouring frames'.
        tilts = {}
        if options.on_floor:
            level_on = {}
            for t, (R, turned, h_all, ok_all) in prepared.items():
                rigid = touching[t] & ok_all & on_ankle & ~is_tip  # a toe tip on a foot with no toe bone is no sole
                weights = rigid.astype(float)
                if rigid.any():  # a point the copied foot holds above the others (a heel already lifting: its leg
                    # could not reach) is turned down less, by nothing from a sixth of the foot's length up
                    rise = np.where(ok_all, turned[:, 2] - h_all, np.inf)  # a point off the terrain: no weight
                    rise -= rise[rigid].min()
                    weights *= np.clip((1.0 / 6.0 - rise / foot_length) / (1.0 / 6.0 - 1.0 / 20.0), 0.0, 1.0)
                if (weights > 0).sum() < 2:
                    weights = (touching[t] & ok_all).astype(float)
                level_on[t] = (turned, weights, h_all)
            tilts = _level_track(level_on, 0.5 ** (1.0 / max(HALF_LIFE * fps, 1.0)))
        for t, (R, turned, h_all, ok_all) in prepared.items():
            c = touching[t]
            base = c & ok_all  # the points the foot rests on
            if options.on_floor:
                middle = _pivot(turned, level_on[t][1])
                turned = middle + (turned - middle) @ tilts[t].T
                R = tilts[t] @ R
                base = base & on_ankle if (base & on_ankle).any() else base
            rest_on = lambda: h_all[base] + np.maximum(clearance[t, cols][base], 0.0) - turned[base, 2]  # noqa: E731
            turned[:, 2] += float(np.max(rest_on()))  # no contact point below the surface (bumps lift the sole)
            # Its lifted points (a heel coming off, toes down at a heel strike) follow the same motion, above the
            # terrain: a point that would go under it turns the foot about its contact points, not lift it whole
            # (which would leave the contacts floating); with on_floor a toe tip under it bends up onto it.
            lifted = ~c & ok_all
            if options.on_floor:  # a toe tip under the terrain bends up onto it (after, _bend_track)
                lifted &= on_ankle
            under = h_all[lifted] - turned[lifted][:, 2]
            if len(under) and under.max() > 0.0:
                pivot = turned[base].mean(axis=0)
                p = turned[lifted][int(np.argmax(under))]
                arm = p - pivot
                reach = float(np.linalg.norm(arm[:2]))
                if reach > 1e-6:
                    axis = np.cross(up, np.array([arm[0], arm[1], 0.0]) / reach)
                    angle = float(np.arcsin(min(under.max() / reach, 1.0)))
                    if (exp_so3(-angle * axis) @ arm)[2] < arm[2]:  # the sense that raises the points on p's side
                        axis = -axis
                    # The turn (up to 1.5 times that) that leaves the least to lift the whole foot by afterwards: a
                    # turn that lifts a toe may lower the heel under the terrain (a foot pitched on its ball).
                    best, Rp = np.inf, np.eye(3)
                    for a in np.linspace(0.0, min(1.5 * angle, 0.5 * np.pi), 31):
                        Ra = exp_so3(-a * axis)
                        moved = pivot + (turned - pivot) @ Ra.T
                        lift_needed = max(0.0, float(np.max(h_all[lifted] - moved[lifted, 2])),
                                          float(np.max(h_all[base] + np.maximum(clearance[t, cols][base], 0.0) -
                                                       moved[base, 2])))
                        if lift_needed < best - 1e-9:
                            best, Rp = lift_needed, Ra
                    turned = pivot + (turned - pivot) @ Rp.T
                    R = Rp @ R
                turned[:, 2] += float(np.max(np.concatenate([[0.0], h_all[lifted] - turned[lifted][:, 2], rest_on()])))
            targets[t, cols] = turned
            turns[t] = R
        # Blend the swing into and out of each contact: the same rigid motion, a fraction of the contact's turn
        # and of its height change, fading (smoothly) over the blend frames or a third of the swing, the longer.
        air_runs = _runs(~touching.any(axis=1))
        for a, b in _runs(touching.any(axis=1)):
            before = next((y - x + 1 for x, y in air_runs if y == a - 1), 0)
            after = next((y - x + 1 for x, y in air_runs if x == b + 1), 0)
            for side, edge, swing in ((-1, a, before), (1, b, after)):
                n = max(options.blend_frames, swing // 3)
                for d in range(1, n + 1):
                    w = _smooth(1.0 - d / (n + 1))
                    t = edge + side * d
                    if not (0 <= t < F) or touching[t].any() or edge not in turns:
                        continue
                    P = targets[t, cols]
                    middle = P.mean(axis=0)
                    moved = middle + (P - middle) @ _fraction(turns[edge], w).T
                    swing_edge = pts[edge, cols, 2] + swing_offset[edge, cols]
                    moved[:, 2] += w * float(np.mean(targets[edge, cols, 2] - swing_edge))
                    targets[t, cols] = moved
    # Never below the terrain: a swinging foot keeps at least the source's clearance over the terrain right
    # under each of its points (blending toward a contact on another step must not pull a toe through the
    # step), raised as a whole (a foot is rigid: per-point lifts would ask for goals it cannot meet).
    for cols in feet_cols:
        air = np.flatnonzero(~contacts[:, cols].any(axis=1))
        if not len(air):
            continue
        # Probed at its points and along its sole between them (an edge under the middle of the foot), on the
        # terrain under where they go (a foot slid onto one tread is not over the source's step).
        W = _sole_probes([sampler.specs[j][1] for j in cols])  # (probes, points)
        T = np.einsum("qp,tpk->tqk", W, targets[air][:, cols])
        Q = T.shape[1]
        above = np.nanmax(raw[air][:, cols], axis=1).repeat(Q)
        h_t, _, ok_t = terrain.below(T.reshape(-1, 3), T[..., 2].ravel() + 0.5 * leg + above)
        h_src = floor + np.einsum("qp,tp->tq", W, raw[air][:, cols]).ravel()  # else: the terrain under the source
        h_t = np.where(ok_t, h_t, h_src).reshape(len(air), Q)
        keep = clearance[air][:, cols]
        if options.on_floor:  # a foot coming down onto the floor (or going up from it) with its contact may go
            # lower than the source's clearance: by as much as its swing was blended down
            drop = targets[air][:, cols, 2] - pts[air][:, cols, 2] - swing_offset[air][:, cols]
            keep = keep + np.minimum(drop.mean(axis=1, keepdims=True), 0.0)
        lowest = np.maximum(keep, 0.0).min(axis=1)  # the clearance the foot's lowest point keeps over the terrain
        # A toe that would go under (a long foot pitched down as the source's swings) turns up at the ankle first,
        # the leg kept; what that cannot clear lifts the foot whole.
        k = feet_cols.index(cols)
        at_ankle = m.ankles[air, k] + (targets[air][:, cols] - pts[air][:, cols]).mean(axis=1)
        pitch = _swing_pitch(T, at_ankle, h_t, lowest, len(cols), air, targets[air][:, cols], fps)
        for i, t in enumerate(air):
            if pitch[i] != 0.0:
                targets[t, cols] = _pitched(targets[t, cols], at_ankle[i], pitch[i])
        T = np.einsum("qp,tpk->tqk", W, targets[air][:, cols])
        lift = _swing_lift(T[..., 2], h_t, lowest, len(cols))
        slope = 0.02 * leg  # per frame: a lift is eased in and out (a step is not a pop), to nothing at contacts
        for x, y in _runs(np.isin(np.arange(F), air)):
            k = np.searchsorted(air, [x, y + 1])
            part = lift[k[0]:k[1]]
            t = np.arange(len(part))
            cone = (part[None, :] - slope * np.abs(t[:, None] - t[None, :])).max(axis=1)  # >= part, slope-limited
            lift[k[0]:k[1]] = np.maximum(_moving(cone[:, None], 3, np.mean)[:, 0], part)
        targets[air[:, None], np.array(cols)[None, :], 2] += lift[:, None]
    # A foot with no terrain under any of its points (walked off the mesh) is left as the source's there, eased
    # out of and back into its placement over a third of a second; a foot partly over an edge stands on what
    # is under it.
    n = max(options.blend_frames, int(round(0.3 * fps)), 1)
    ease = []
    for cols in feet_cols:
        offs = np.flatnonzero(~hits[:, cols].any(axis=1))
        w = np.ones(F)
        if len(offs):  # 0 off the terrain, easing to 1 over the n placed frames nearest it
            d = np.abs(np.arange(F)[:, None] - offs[None, :]).min(axis=1)
            w = _smooth(np.minimum(d, n + 1) / (n + 1))
        ease.append(w)
        targets[:, cols] = pts[:, cols] + w[:, None, None] * (targets[:, cols] - pts[:, cols])
    ease_pelvis = np.min(ease, axis=0)
    _check_numbers(feet, feet_cols, pts, targets)
    if options.on_floor:
        for k, cols in enumerate(feet_cols):
            if feet[k].ball not in stiff:  # a toe nothing can bend (no control carries it) stays as it is
                _bend_track(obj, sampler, feet[k], cols, targets, contacts, terrain, leg, fps)
    lower = np.min([swing_offset[:, cols[0]] for cols in feet_cols], axis=0)  # one offset per foot (raised whole)
    lower = _moving(lower[:, None], max(1, int(round(options.pelvis_smoothing * fps))), np.mean)[:, 0]
    if options.on_floor and contacts.any():  # the body goes down (or up) by what brought its contacts onto the floor:
        # each frame, by what the foot brought down most needed (a leg cannot reach further), smoothed
        drop = np.where(contacts, targets[..., 2] - pts[..., 2] - swing_offset, np.nan)
        need = np.full(F, np.nan)
        for c in feet_cols:
            touching_any = contacts[:, c].any(axis=1)
            mean_drop = np.nanmean(np.where(contacts[:, c], drop[:, c], np.nan)[touching_any], axis=1)
            need[touching_any] = np.fmin(need[touching_any], mean_drop)
        need = _fill(need[:, None])[:, 0]  # between contacts: from the nearest
        lower += _moving(need[:, None], max(1, int(round(options.pelvis_smoothing * fps))), np.mean)[:, 0]
    pelvis_target = pelvis.copy()
    pelvis_target[:, 2] += ease_pelvis * lower
    warnings = []
    if m.treadmill:
        warnings.append(f"the pelvis moves {travel:.3f} (world units) over the frames: an action without root motion "
                        "(in place); the feet keep their slide under the body (a treadmill), only their heights and "
                        "turns follow the terrain")
    off = [int(f) for f, w in zip(frames, ease_pelvis) if w == 0.0]  # a foot left as the source's
    for k, foot in enumerate(feet):  # the ankle moved as the foot's sole points on it were (Kabsch, each frame)
        on = [j for j in sampler.cols[k] if sampler.specs[j][2] == foot.ankle]
        ankles[:, k] = _rigid(pts[:, on], targets[:, on], ankles[:, k])
    flat = None
    if options.on_floor:  # the rest pose stands flat on its floor (its sole points are level)
        W = np.array(obj.matrix_world)[:3, :3]
        rest = np.array([W @ np.array(obj.data.bones[f.ankle].matrix_local)[:3, :3] for f in feet])
        flat = np.broadcast_to(rest / np.linalg.norm(rest, axis=1, keepdims=True), rotations.shape)
    untouched = untouched_feet(m, [k for k, f in enumerate(feet) if k in m.detected_feet or
                                   f.side in options.detected_contacts])
    return FootPlan(frames, pts, contacts, height, normal, hits, targets, pelvis_target, floor, clearance, source,
                    off, rotations, warnings, ankles, on_terrain, m.pelvis_rotation, flat, untouched, m.floors), \
        sampler, \
        pelvis_name


def untouched_feet(motion, feet=None):
    """Sides of the feet (of ``feet``, indices; default: those whose contacts were detected) that stood still
    while another foot swung, so carried the body, yet have no contact: the detector missed them, so their
    contacts can be neither planted nor judged. A foot that never stands (a hop on the other leg) is not one."""
    feet = motion.detected_feet if feet is None else feet
    return [motion.sampler.feet[k].side for k in feet
            if motion.stood[k] and not motion.contacts[:, motion.sampler.cols[k]].any()]


def _pivot(points, weights):
    """The weighted middle of points (P, 3) (weights (P,) >= 0, some above 0): what a foot is turned about."""
    return (weights[:, None] * points).sum(axis=0) / weights.sum()


def _tilt(points, weights, heights, prior):
    """The horizontal rotation vector w (2,) that, turning a rigid foot's points (P, 3) about their weighted
    middle, puts those of weight above 0 at one height over ``heights`` (P,), weighted least squares, least
    changed from ``prior`` (from a small turn's rise (w x r)_z = w_x r_y - w_y r_x of a point r from the middle:
    a line of points, across the ball, fixes only the turn about it; one point fixes nothing)."""
    w = np.array(prior, dtype=float)
    mask = weights > 0
    if mask.sum() < 2 or not (np.isfinite(points[mask]).all() and np.isfinite(heights[mask]).all()):
        return w  # (a point off the terrain has no height: judged as such elsewhere, not turned toward)
    sw = np.sqrt(weights[mask])
    r0 = points[mask] - _pivot(points, weights)
    for _ in range(4):
        r = r0 @ exp_so3(np.array([w[0], w[1], 0.0])).T
        gap = r[:, 2] - heights[mask]
        target = (weights[mask] * gap).sum() / weights[mask].sum()
        A, b = sw[:, None] * np.column_stack([r[:, 1], -r[:, 0]]), sw * (target - gap)
        if not (np.isfinite(A).all() and np.isfinite(b).all()):
            return np.array(prior, dtype=float)  # (a degenerate foot: no turn read from it)
        step, *_ = np.linalg.lstsq(A, b, rcond=0.1)
        w += step
        if np.hypot(*step) < 1e-7:
            break
    return w


def _bend_track(obj, sampler, foot, cols, targets, contacts, terrain, leg, fps):
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
    across0 = _unit3(rest[names["ball_in"]] - rest[names["ball_out"]])
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
    # Bent onto the terrain only while the foot stands flat on it (heel and ball down): as the heel lifts, the toe
    # follows the neighbouring frames' bend (a leg near its reach cannot also bend the toe to the floor).
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
        passes = []
        for seq in (range(F), range(F - 1, -1, -1)):
            theta, out = 0.0, np.zeros(F)
            for t in seq:
                theta = fixed.get(t, theta * decay)
                out[t] = theta
            passes.append(out)
        theta = np.where([t in fixed for t in range(F)], passes[0], 0.5 * (passes[0] + passes[1]))
        for t in range(F):
            p = J[t] + r[t] @ exp_so3(theta[t] * across[t]).T
            if ok[t] and p[2] < h[t] and t not in fixed:  # never under the terrain: bent up onto it
                theta[t] = angle(t, h[t])
                p = J[t] + r[t] @ exp_so3(theta[t] * across[t]).T
            if touching[t, i] and not stands[t] and ok[t]:  # on its toe alone: the foot moved to keep it in place
                shift = np.array([T[t, i, 0], T[t, i, 1], h[t]]) - p
                targets[t, cols] += shift
                p = p + shift
            targets[t, cols[i]] = p


def _unit3(v):
    return v / max(float(np.linalg.norm(v)), 1e-12)


def _level_track(frames, decay):
    """{t: rotation (3, 3)} for a foot's contact frames {t: (points, mask, heights)}: each frame's _tilt, what its
    contacts leave free taken from the frames before it and after it (decaying by ``decay`` per frame), so the
    foot turns smoothly as points touch and lift."""
    order = sorted(frames)
    passes = []
    for seq in (order, order[::-1]):
        w, t_prev, out = np.zeros(2), None, {}
        for t in seq:
            prior = w * decay ** abs(t - t_prev) if t_prev is not None else w
            w = out[t] = _tilt(*frames[t], prior)
            t_prev = t
        passes.append(out)
    return {t: exp_so3(np.append(_tilt(*frames[t], 0.5 * (passes[0][t] + passes[1][t])), 0.0)) for t in order}


def _check_numbers(feet, feet_cols, pts, targets):
    """A RigError naming the foot whose sole points or targets are not numbers on some frame (a sole of no size in
    the armature's units), before any solve reads them."""
    for foot, cols in zip(feet, feet_cols):
        for what, values in (("sole points", pts[:, cols]), ("targets", targets[:, cols])):
            if not np.isfinite(values).all():
                raise RigError(f"the {foot.label}: its {what} are not numbers on some frames (its sole, from its "
                               "bones or its skin, may have no size in the armature's units): give the feet by hand "
                               "(--feet ANKLE:BALL,ANKLE:BALL)")


def _rigid(a, b, p):
    """Points p (F, 3) moved by the rigid motions that best take points a (F, n, 3) onto b (Kabsch, per row)."""
    ca, cb = a.mean(axis=1, keepdims=True), b.mean(axis=1, keepdims=True)
    U, _, Vt = np.linalg.svd(np.swapaxes(b - cb, 1, 2) @ (a - ca))
    D = np.broadcast_to(np.eye(3), U.shape).copy()
    D[:, 2, 2] = np.linalg.det(U @ Vt)
    R = U @ D @ Vt
    return cb[:, 0] + np.einsum("fij,fj->fi", R, p - ca[:, 0])


PITCH_MAX = np.radians(60.0)  # the most a swinging foot is turned up at its ankle to clear the terrain


def _pitch_axis(points):
    """The horizontal axis across a foot (points (P, 3), heel first, toe tip last) about which a positive turn
    raises its toes."""
    forward = points[-1] - points[0]
    forward[2] = 0.0
    n = np.linalg.norm(forward)
    if n < 1e-12:
        return None
    return np.cross(forward / n, np.array([0.0, 0.0, 1.0]))


def _pitched(points, pivot, angle):
    """Points (P, 3) of a foot turned toes-up by ``angle`` about ``pivot`` (its ankle)."""
    axis = _pitch_axis(points)
    if axis is None:
        return points
    return pivot + (points - pivot) @ exp_so3(angle * axis).T


def _swing_lift(z, terrain, lowest, P):
    """(A,) how far a swinging foot must rise on each frame so that none of its probes (heights z (A, Q) over
    ``terrain`` (A, Q)) is under the terrain and its lowest sole point (the first P probes) keeps ``lowest`` (A,)
    over it: its swing height as the source's, whatever turn its shape took."""
    over = z - terrain
    return np.maximum(np.maximum(-over.min(axis=1), lowest - over[:, :P].min(axis=1)), 0.0)


def _swing_pitch(probes, ankles, terrain, lowest, P, air, points, fps):
    """(A,) the toes-up turn at the ankle of a swinging foot on each of its frames ``air`` that leaves the least to
    lift it by (_swing_lift; the smallest such turn, at most PITCH_MAX), eased over neighbouring frames (at most
    90 degrees a second) so the foot turns smoothly; probes (A, Q, 3), ``points`` (A, P, 3) the foot's sole points
    (heel first, toe tip last)."""
    grid = np.linspace(0.0, PITCH_MAX, 19)
    out = np.zeros(len(air))
    before = _swing_lift(probes[..., 2], terrain, lowest, P)
    for i in np.flatnonzero(before > 0.0):
        axis = _pitch_axis(points[i])
        if axis is None:
            continue
        z = np.array([(ankles[i] + (probes[i] - ankles[i]) @ exp_so3(a * axis).T)[:, 2] for a in grid])
        lifts = _swing_lift(z, np.broadcast_to(terrain[i], z.shape), np.full(len(grid), lowest[i]), P)
        out[i] = grid[int(np.flatnonzero(lifts <= lifts.min() + 1e-4)[0])]
    slope = np.radians(90.0) / max(fps, 1.0)
    for x, y in _runs(np.isin(np.arange(air.max() + 1 if len(air) else 0), air)):
        k = np.searchsorted(air, [x, y + 1])
        part = out[k[0]:k[1]]
        t = np.arange(len(part))
        out[k[0]:k[1]] = (part[None, :] - slope * np.abs(t[:, None] - t[None, :])).max(axis=1)
    return out


def _sole_probes(names):
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


def _smooth(x):
    """Smoothstep: 0 at 0, 1 at 1, flat at both ends."""
    return x * x * (3.0 - 2.0 * x)


def _onto_one_level(targets, cols, touching, terrain, leg):
    """A foot that would stand across a step edge at some frame of a contact (its points over surfaces more
    than 2 cm apart: as it lands, or as it turns about its toe) is slid along its length, by the least
    distance, onto one level for its whole contact (blended in and out): a rigid foot across an edge would rest
    on the edge with its heel or toe in the air."""
    F = len(targets)
    for a, b in _runs(touching.any(axis=1)):
        ts = np.unique(np.r_[a:b + 1:3, b])  # every third frame of the contact and its last
        forward = targets[a, cols[-1], :2] - targets[a, cols[0], :2]  # heel to toe
        length = np.linalg.norm(forward)
        if length < 1e-6:
            continue
        forward /= length
        # The foot's points and two probes, ahead of the toe and behind the heel: a toe that pushes off against
        # a riser would have to rise the step's height in one frame as it leaves.
        P = targets[ts][:, cols]
        ahead, behind = P[:, -1].copy(), P[:, 0].copy()
        ahead[:, :2] += 0.3 * length * forward
        behind[:, :2] -= 0.15 * length * forward
        P0 = np.concatenate([P, ahead[:, None], behind[:, None]], axis=1).reshape(-1, 3)
        start = P0[:, 2] + 0.5 * leg + 1.0

        # heights as a quadratic of each point's place along the foot, as at the contact's first frame (a standing
        # foot's points keep their places along it)
        first = P0[:P0.shape[0] // len(ts), :2]
        fit = np.vander((first - first[0]) @ forward, 3)

        def spread(d, smooth=False):
            """The largest height range under the foot at a frame (``smooth``: the largest departure from a
            quadratic along it, which a bumpy ground's curve meets and a step edge does not), slid by d."""
            Q = P0.copy()
            Q[:, :2] += d * forward
            hq, _, okq = terrain.below(Q, start)
            if not okq.all():
                return np.inf
            H = hq.reshape(len(ts), -1)
            if not smooth:
                return float(np.ptp(H, axis=1).max())
            return float(np.abs(fit @ np.linalg.lstsq(fit, H.T, rcond=None)[0] - H.T).max())

        if spread(0.0) < 0.02:
            continue
        reach = np.arange(1, int(120 * length) + 1) * 0.01  # centimetre steps up to 1.2 foot lengths either way
        steps = np.ravel(np.column_stack([reach, -reach]))
        best = next((d for d in steps if spread(d) < 0.01), None)
        if best is None and spread(0.0, True) >= 0.01:  # no level spot near (a bumpy ground), and the foot
            # across an edge there (its heights far from a curve): the nearest spot where they follow one
            best = next((d for d in steps if spread(d, True) < 0.005), None)
        if best is None:
            continue
        move = np.zeros(3)
        move[:2] = best * forward
        targets[a:b + 1, cols] += move
        # Faded in over the whole swing before the contact and out over the one after it (smoothly: a slide is
        # several centimetres), from and to the neighbouring contacts, or held to the clip's ends.
        air = ~touching.any(axis=1)
        before = a - 1
        while before >= 0 and air[before]:
            before -= 1
        after = b + 1
        while after < F and air[after]:
            after += 1
        for t in range(before + 1, a):
            w = 1.0 if before < 0 else _smooth((t - before) / (a - before))
            targets[t, cols] += w * move
        for t in range(b + 1, after):
            w = 1.0 if after >= F else _smooth((after - t) / (after - b))
            targets[t, cols] += w * move


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


def _fraction(R, w):
    """The rotation by fraction w of R's angle, about its axis."""
    return exp_so3(w * log_so3(R))


def _turn(a, b):
    """The smallest rotation taking unit vector a to unit vector b (Rodrigues)."""
    v, c = np.cross(a, b), float(a @ b)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3)
    K = skew(v)
    return np.eye(3) + K + K @ K / (1.0 + c)


def _skate_shift(points, touching):
    """(F, 2) horizontal shift that holds a foot where it touched: from each contact's first frame, the shift
    cancels the horizontal motion of the point that has touched longest (the heel, then the ball as the heel
    lifts: the shift stays continuous); over a swing it returns smoothly from the last contact's shift to
    zero at the next contact (held after the last contact)."""
    F = len(points)
    shift = np.zeros((F, 2))
    on_any = touching.any(axis=1)
    for a, b in _runs(on_any):
        anchor = None
        for t in range(a + 1, b + 1):
            both = touching[t] & touching[t - 1]
            if anchor is None or not both[anchor]:
                candidates = np.flatnonzero(both)
                anchor = int(candidates[0]) if len(candidates) else None
            step = points[t, anchor, :2] - points[t - 1, anchor, :2] if anchor is not None else 0.0
            shift[t] = shift[t - 1] - step
    for a, b in _runs(~on_any):
        if a == 0:
            continue  # before the first contact: the source's own
        if b + 1 >= F:
            shift[a:] = shift[a - 1]
            continue
        n = b - a + 2
        shift[a:b + 1] = shift[a - 1] * (1.0 - _smooth(np.arange(1, n) / n))[:, None]
    return shift


def _fill(values):
    """NaNs (no terrain) replaced by the nearest value in time, per column (0 where a column has none)."""
    out = values.copy()
    for j in range(out.shape[1]):
        col = out[:, j]
        ok = ~np.isnan(col)
        if not ok.any():
            out[:, j] = 0.0
            continue
        idx = np.arange(len(col))
        out[:, j] = np.interp(idx, idx[ok], col[ok])
    return out


def _driven(obj, name):
    """Whether a bone (or one of its parents) follows active constraints."""
    b = obj.pose.bones[name]
    while b is not None:
        if constrained(b):
            return True
        b = b.parent
    return False


def _chain_link(bone):
    """Whether a bone hangs at the tail of one of its parents (an FK limb's link, maybe through a mechanism
    bone: moving it alone would tear the limb)."""
    return bone.use_connect or any((bone.head_local - p.tail_local).length < 1e-3 * max(p.length, 1e-3)
                                   for p in bone.parent_recursive)


def rig_controls(scene, obj, bones, frames, feet_bones=()):
    """{bone: (control, relation)} for the ``bones`` that follow constraints (a generated Rigify rig's deform
    bones): the constraint-free bone that carries each, found as the one whose pose keeps one relation to it
    over the frames (``relation``: the bone's armature-space matrix in the control's), preferring the same side
    and a foot's (or a torso's) name, then an IK control, then the highest in the hierarchy; never a parentless
    bone (the root carries everything). Bones posed by their own keys are not in it."""
    todo = [b for b in bones if _driven(obj, b)]
    if not todo:
        return {}
    pbs, data = obj.pose.bones, obj.data.bones
    # Candidates: bones keyed by the user (no constraints of their own; a parent may switch spaces), not a
    # rig's mechanism (Rigify's MCH-, ORG- and DEF- bones).
    free = [pb.name for pb in pbs if not constrained(pb)
            and not pb.name.upper().startswith(("MCH-", "ORG-", "DEF-"))]
    frames = np.asarray(frames)
    sample = frames[np.unique(np.linspace(0, len(frames) - 1, min(8, len(frames))).astype(int))]
    M = []
    for f in sample:
        scene.frame_set(int(f))
        M.append(_matrices(pbs, "matrix", len(pbs)))
    M = np.array(M)  # (S, bones, 4, 4)
    size = max(float(np.ptp(M[0, :, :3, 3], axis=0).max()), 1e-6)
    cols = np.array([pbs.find(c) for c in free], dtype=int)
    out = {}
    for name in todo:
        i = pbs.find(name)
        skip = {name} | {c.name for c in data[name].children_recursive}
        rel = np.linalg.inv(M[:, cols]) @ M[:, i][:, None]  # (S, candidates, 4, 4)
        dev = np.abs(rel - rel[:1])
        # Steady to 0.3 degrees and a thousandth of the rig's size (Blender's IK is about that precise).
        steady = (dev[..., :3, :3].max(axis=(0, 2, 3)) < 5e-3) & (dev[..., :3, 3].max(axis=(0, 2)) < 1e-3 * size)
        words = ("foot", "ankle") if name in feet_bones else ("torso", "hips", "pelvis", "root")
        side = _side(name)
        # A foot's control is named a foot's (a steady relation alone proves nothing when the foot stands still).
        found = [(_side(free[c]) != side, not any(w in free[c].lower() for w in words), "ik" not in free[c].lower(),
                  len(data[free[c]].parent_recursive), free[c], c)
                 for c in np.flatnonzero(steady) if free[c] not in skip and data[free[c]].parent is not None
                 and not (name in feet_bones and (_chain_link(data[free[c]])
                                                  or not any(w in free[c].lower() for w in words)))]
        if found:
            *_, control, c = min(found)
            out[name] = (control, rel[0, c])
    return out


class FootGoals:
    """The Baker's goals for foot placement: a position goal per sole point, the pelvis, the source pose. On a
    rig whose feet follow constraints (Rigify's generated rigs), the goals are put on the controls that carry
    them (``controls``: rig_controls), and Blender's own constraints move the legs."""

    def __init__(self, obj, feet, sampler, plan_, pelvis, options, controls=None):
        self.obj, self.plan, self.sampler, self.options = obj, plan_, sampler, options
        controls = controls or {}

        def carried(bone, offset):  # (bone that takes the goal, offset in it), or None (nothing to key moves it)
            if bone in controls:
                control, rel = controls[bone]
                return control, (rel @ np.append(offset, 1.0))[:3]
            return None if _driven(obj, bone) else (bone, np.asarray(offset, dtype=float))

        self.points = [(j, carried(bone, offset)) for j, (_, _, bone, offset) in enumerate(sampler.specs)]
        self.points = [(j, c) for j, c in self.points if c is not None]
        self.pelvis = carried(pelvis, np.zeros(3))
        self.pelvis_bone = pelvis
        # A foot parented to the root (not to its leg) is moved freely; its leg follows it (a goal at the ankle:
        # the foot's rest head held in the shin's frame, not the shin's tail, which an importer may have guessed).
        self.detached = [(k, f.shin, _in_rest_frame(obj, f.shin, f.ankle)) for k, f in enumerate(feet) if f.shin]
        bones = {c[0] for _, c in self.points} | {shin for _, shin, _ in self.detached} | set(options.held)
        bones |= {self.pelvis[0]} if self.pelvis else set()
        free = {f.ankle for f in feet if f.shin} | {control for control, _ in controls.values()}
        # Through controls, only the controls move: the mechanism above them (and the root) keeps its pose. Feet
        # on the root: the pelvis moves on its own, the root (which carries the feet) keeps its pose.
        on_root = bool(self.detached) and self.pelvis is not None and obj.data.bones[self.pelvis[0]].parent is not None \
            and not obj.data.bones[self.pelvis[0]].use_connect
        fixed = (chains_to(obj, bones) - free) if controls else set()
        if on_root:
            free.add(self.pelvis[0])
            fixed |= {b.name for f in feet for b in obj.data.bones[f.ankle].parent_recursive} | \
                {b.name for b in obj.data.bones[self.pelvis[0]].parent_recursive}
        limit_rotation = bool(obj.fullbody_ik.settings.use_limit_rotation)  # the armature's own IK setting
        self.tree, self.mapping = cached_tree(obj, free_root=not (controls or on_root), use_limit_rotation=limit_rotation,
                                              bones=bones, use_stretch=False, free_bones=free, fixed_bones=fixed)
        P = len(self.points) + len(self.detached)
        self.columns = [(j, "error") for j in range(P)]
        self.labels = [f"{sampler.feet[sampler.specs[j][0]].side} {sampler.specs[j][1]}" for j, _ in self.points]
        self.labels += [f"{sampler.feet[k].side} leg ({shin}) at its ankle" for k, shin, _ in self.detached]
        self.units = ["m"] * P
        self.goal_index = list(range(P))
        self.index = {f: i for i, f in enumerate(plan_.frames)}
        from .goals import world_scale

        self.unit = world_scale(obj)  # world length of one tree unit

    def read_objects(self):
        return []  # (the plan is made: each frame reads the armature alone)

    def objectives(self, frame, q_anim, seed):
        i = self.index[frame]
        to_arm = np.linalg.inv(np.array(self.obj.matrix_world))
        local = lambda p: (to_arm @ np.append(p, 1.0))[:3]  # noqa: E731
        out = []
        for j, (bone, offset) in self.points:
            # Contacts to half a millimetre, swings to two (tree units): met sooner, well inside the aims.
            touching = self.plan.contacts[i, j]
            out.append(Position(bone, local(self.plan.targets[i, j]), offset=offset, weight=1.0 if touching else 0.3,
                                tolerance=(5e-4 if touching else 2e-3) / self.unit))
        for k, shin, at_ankle in self.detached:
            out.append(Position(shin, local(self.plan.ankles[i, k]), offset=at_ankle,
                                tolerance=5e-4 / self.unit))
        if self.pelvis:
            out.append(Position(self.pelvis[0], local(self.plan.pelvis[i]), offset=self.pelvis[1], weight=0.01,
                                tolerance=np.inf))
        if self.pelvis and self.pelvis[0] == self.pelvis_bone and self.plan.pelvis_rotation is not None:
            # The body stays upright as the source's: the legs reach, the pelvis does not tip the torso (5 degrees
            # weigh like 9 mm at a contact).
            out.append(Orientation(self.pelvis_bone, self.plan.pelvis_rotation[i], weight=0.01, tolerance=np.inf))
        for bone, targets in self.options.held.items():  # hands held where asked: soft, after the feet
            out.append(Position(bone, local(targets[i]), weight=0.3, tolerance=2e-3 / self.unit))
        out.append(Displacement(q_anim, weight=self.options.body_weight))
        return out


def _in_rest_frame(obj, bone, other):
    """Where bone ``other``'s head is in ``bone``'s frame, in the rest pose (3,)."""
    bones = obj.data.bones
    return (np.linalg.inv(np.array(bones[bone].matrix_local)) @ np.append(np.array(bones[other].head_local), 1.0))[:3]


def foot_metrics(plan_, points, rotations, terrain, sampler, heights=None):
    """Per foot: penetration and float at contacts (mm; the foot's float and each point's over its place, both
    relative to the source's clearance over its floor; the sole's lowest point's clearance against the source's,
    95th percentile of the difference), sole-normal error (deg), skate (mm/frame), frames
    off the terrain, for sole points ``points`` (F, P, 3) and ankle rotations (F, feet, 3, 3), world (the
    source's, or the result's). The sole normal is the source's floor normal turned as the foot turned from
    the source (whatever the rig's rest pose calls flat), against the terrain's normal, on flat-foot frames.
    ``heights`` (F, P): the terrain under the points when already cast (the source's: plan_.terrain)."""
    F, P, _ = points.shape
    h = heights
    if h is None:
        start = points[..., 2] + 0.5 * max(float(np.median(plan_.pelvis[:, 2]) - plan_.floor), 0.1)
        h = np.full((F, P), np.nan)
        for i in range(F):
            h[i] = terrain.below(points[i], start[i] + np.maximum(plan_.terrain[i] - plan_.floor, 0.0))[0]
    out = {}
    names = [n for _, n, _, _ in sampler.specs]
    for k, foot in enumerate(sampler.feet):
        cols = sampler.cols[k]
        c = plan_.contacts[:, cols]
        gap = points[:, cols, 2] - h[:, cols]
        gap_rel = points[:, cols, 2] - (h[:, cols] + np.maximum(plan_.clearance[:, cols], 0.0))
        pen = np.where(c, np.maximum(-gap, 0.0), np.nan)
        # and between them, as the foot touches: a sole across a step edge (its heel below, its ball above) has
        # every point on a tread and its middle in the riser
        between = _sole_probes([names[j] for j in cols])[len(cols):]
        touching = np.flatnonzero(c.any(axis=1))
        if len(between) and len(touching):
            Q = np.einsum("rp,fpk->frk", between, points[touching][:, cols])
            top = np.max(np.where(np.isfinite(h[touching][:, cols]), h[touching][:, cols], -np.inf), axis=1)
            lift = 0.5 * max(float(np.median(plan_.pelvis[:, 2]) - plan_.floor), 0.1)  # (rays from over the foot
            # and the highest ground under it)
            hq = terrain.below(Q.reshape(-1, 3), (np.maximum(Q[..., 2], top[:, None]) + lift).ravel())[0]
            hq = hq.reshape(Q.shape[:2])
            pen = np.concatenate([pen, np.full((F, len(between)), np.nan)], axis=1)
            pen[touching, len(cols):] = np.maximum(hq - Q[..., 2], 0.0)
        flo = np.where(c, np.maximum(gap_rel, 0.0), np.nan)  # each contact point over its place
        # The foot floats when it could come down: by its contact point nearest its place (a rigid foot under
        # which the terrain or the source's own sole is uneven has other points above theirs: point float).
        hover = np.min(np.where(c & np.isfinite(gap_rel), np.maximum(gap_rel, 0.0), np.inf), axis=1)
        hover[~np.isfinite(hover)] = np.nan
        # The sole's clearance as an outside judge measures it: its lowest point over the terrain under it, against
        # the source's lowest point over its floor (none under it: a mocap toe poking through its floor is no
        # clearance to keep), on the frames the foot touches.
        touch = c.any(axis=1) & np.isfinite(h[:, cols]).any(axis=1)
        lowest = np.nanmin(np.where(np.isfinite(h[:, cols]), gap, np.inf), axis=1)
        diff = np.abs(lowest - np.maximum(np.min(plan_.clearance[:, cols], axis=1), 0.0))[touch]
        sk = []
        for j in cols:
            for a, b in _runs(plan_.contacts[:, j]):
                if b > a:
                    sk.append(np.linalg.norm(np.diff(points[a:b + 1, j, :2], axis=0), axis=1))
        skate = np.concatenate(sk) if sk else np.zeros(0)
        heel, bi = (cols[[names[j] for j in cols].index(n)] for n in ("heel", "ball_in"))
        flat = plan_.contacts[:, heel] & plan_.contacts[:, bi]
        # R_result R_source^T n, n the source floor's normal: up, or the terrain's when the source stands on it;
        # with contacts on the floor, R_result R_rest^T up (the rest pose's sole is level).
        n0 = np.tile([0.0, 0.0, 1.0], (F, 1))
        if plan_.source_on_terrain and plan_.flat is None:
            n0 = np.array([plane_normal(plan_.points[i, cols, :2], plan_.terrain[i, cols]) for i in range(F)])
        flat_k = (plan_.rotations if plan_.flat is None else plan_.flat)[:, k]
        sole = np.einsum("tij,tj->ti", rotations[:, k] @ np.swapaxes(flat_k, -1, -2), n0)
        tn = np.array([plane_normal(points[i, cols, :2], h[i, cols]) for i in range(F)])  # the plane under the sole
        ang = np.degrees(np.arccos(np.clip(np.sum(sole * tn, axis=1), -1, 1)))
        ang = np.where(flat & np.isfinite(h[:, cols]).all(axis=1), ang, np.nan)
        nanmax = lambda a: float(np.nanmax(a)) if np.isfinite(a).any() else 0.0  # noqa: E731
        nanmean = lambda a: float(np.nanmean(a)) if np.isfinite(a).any() else 0.0  # noqa: E731
        out[foot.side] = {
            "penetration_mm_max": 1e3 * nanmax(pen), "penetration_mm_mean": 1e3 * nanmean(pen),
            "float_mm_max": 1e3 * nanmax(hover), "float_mm_mean": 1e3 * nanmean(hover),
            "point_float_mm_max": 1e3 * nanmax(flo), "point_float_mm_mean": 1e3 * nanmean(flo),
            "clearance_diff_mm_p95": 1e3 * (float(np.percentile(diff, 95)) if diff.size else 0.0),
            "sole_normal_deg_max": nanmax(ang), "sole_normal_deg_mean": nanmean(ang),
            "skate_mm_per_frame": 1e3 * (float(skate.mean()) if skate.size else 0.0),
            "contact_frames": int(c.any(axis=1).sum()),
            "frames_off_terrain": int((~np.isfinite(h[:, cols])).any(axis=1).sum()),
        }
    return out, h


@dataclass
class FootReport:
    armature: str
    action: str
    source_action: str
    frames: list
    feet: list  # labels
    contacts_from: str
    before: dict
    after: dict
    bake: dict  # the bake's own report (goals, verdict as Blender shows it)
    ok: bool
    verdict: str
    off_terrain: list
    seconds: float
    heights: dict = field(default_factory=dict)  # for the plot
    warnings: list = field(default_factory=list)
    snapshots: dict = field(default_factory=dict)  # side views of the result at a few contact frames
    held_mm: tuple = None  # (mean, max) distance of the held bones from their targets, when some were held
    reference_frames: list = field(default_factory=list)  # frames left out of the default range: not the take's
    # What the source's clearances are measured over: {side: [lowest, highest]} world heights of the floor under
    # each foot as it stood (each stance where its lowest sole point stood), or "terrain" (the source stands on it)
    source_floor: object = None

    def to_dict(self):
        return {"armature": self.armature, "action": self.action, "source_action": self.source_action,
                "frames": [int(self.frames[0]), int(self.frames[-1])], "feet": self.feet,
                "contacts_from": self.contacts_from, "before": self.before, "after": self.after, "ok": self.ok,
                "verdict": self.verdict, "frames_off_terrain": self.off_terrain, "seconds": self.seconds,
                "warnings": self.warnings, "reference_frames": [int(f) for f in self.reference_frames],
                "source_floor": self.source_floor, "bake": self.bake}

    def text(self):
        lines = [f"Full-Body IK foot placement of {self.armature!r}: frames {self.frames[0]}-{self.frames[-1]}, "
                 f"feet {', '.join(self.feet)}, contacts {self.contacts_from}",
                 f"  action: {self.action!r}" + (f" (from {self.source_action!r}, kept)" if self.source_action
                                                 and self.source_action != self.action else ""),
                 f"  verdict: {'OK' if self.ok else 'FAILED'}, {self.verdict}"]
        for side in self.before:
            b, a = self.before[side], self.after[side]
            lines.append(f"  {side} foot ({a['contact_frames']} contact frames), before -> after:")
            for key, label in (("penetration_mm_max", "penetration max mm"), ("float_mm_max", "float max mm"),
                               ("point_float_mm_max", "a contact point over its place, max mm"),
                               ("clearance_diff_mm_p95", "lowest sole point's clearance vs the source's, p95 mm"),
                               ("sole_normal_deg_max", "sole normal max deg"),
                               ("skate_mm_per_frame", "skate mm/frame"),
                               ("frames_off_terrain", "frames with a sole point off the terrain")):
                lines.append(f"    {label}: {b[key]:.2f} -> {a[key]:.2f}")
        if self.source_floor == "terrain":
            lines.append("  measured: each contact point over the terrain under it (cast down), against its clearance "
                         "in the source over the same terrain (the source stands on it)")
        elif self.source_floor:
            levels = ", ".join(f"{side} {lo:.4f}" + (f"-{hi:.4f}" if hi - lo >= 5e-5 else "")
                               for side, (lo, hi) in self.source_floor.items())
            lines.append(f"  measured: each contact point over the terrain under it (cast down), against its clearance "
                         f"in the source over the floor under that foot: where its lowest sole point stood in each "
                         f"stance (heights {levels})")
        if self.off_terrain:
            lines.append(f"  frames where a foot has no terrain under any of its points (left as the source's): "
                         f"{len(self.off_terrain)} ({_ranges(self.off_terrain)})")
        lines += [f"  note: {w}" for w in self.warnings]
        return "\n".join(lines)

    def plot(self, path):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        sides = list(self.heights)
        rows = len(sides) + (1 if self.snapshots else 0)
        fig, axes = plt.subplots(rows, 1, figsize=(9, 3 * rows), squeeze=False)
        for ax, side in zip(axes[:len(sides), 0], sides):
            d = self.heights[side]
            for a, b in _runs(np.asarray(d["contact"])):
                ax.axvspan(self.frames[a], self.frames[b], color="0.85")
            ax.plot(self.frames, d["terrain"], "k-", lw=1, label="terrain under the heel")
            ax.plot(self.frames, d["source"], "--", lw=1, label="heel, source")
            ax.plot(self.frames, d["result"], "-", lw=1.2, label="heel, result")
            ax.set_ylabel(f"{side} height (m)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            ax.set_xlabel("frame")
        axes[0, 0].set_title(f"Foot placement of {self.armature}: heel height and the terrain under it, contacts "
                             "shaded",
                             fontsize=10)
        if self.snapshots:  # the character on the terrain, seen from the side, at a few contact frames
            ax = axes[-1, 0]
            s = self.snapshots
            ax.plot(s["profile_u"], s["profile_z"], "k-", lw=1)
            for frame, segments in zip(s["frames"], s["segments"]):
                for (u0, z0), (u1, z1) in segments:
                    ax.plot([u0, u1], [z0, z1], "-", lw=1.2, color="C0")
                ax.annotate(str(frame), (segments[0][0][0], max(z for seg in segments for _, z in seg)), fontsize=7)
            ax.set_aspect("equal")
            ax.set_xlabel("along the path (world units)")
            ax.set_ylabel("height")
            ax.set_title("the result on the terrain at contact frames (side view)", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)


def _side_views(plan_, terrain, segments):
    """Bones (world segments per frame) and the terrain profile along the walk, projected on the vertical
    plane through the path: {frames, segments [(u, z) pairs], profile_u, profile_z}."""
    if not segments:
        return {}
    pelvis = plan_.pelvis
    start, end = pelvis[0, :2], pelvis[-1, :2]
    d = end - start
    d = d / np.linalg.norm(d) if np.linalg.norm(d) > 1e-6 else np.array([0.0, 1.0])
    u = lambda p: float((p[:2] - start) @ d)  # noqa: E731
    us = np.linspace(min(u(p) for p in pelvis) - 0.5, max(u(p) for p in pelvis) + 0.5, 200)
    line = np.array([[*(start + t * d), 0.0] for t in us])
    h, _, ok = terrain.below(line, np.full(len(line), float(np.nanmax(plan_.points[..., 2])) + 2.0))
    return {"frames": sorted(segments), "profile_u": us[ok].tolist(), "profile_z": h[ok].tolist(),
            "segments": [[((u(a), float(a[2])), (u(b), float(b[2]))) for a, b in segments[f]]
                         for f in sorted(segments)]}


def check_feet_input(obj, options):
    if options.frame_end < options.frame_start:
        raise RigError(f"inverted frame range {options.frame_start}-{options.frame_end}")
    if obj.animation_data is None or obj.animation_data.action is None:
        raise RigError(f"{obj.name!r} has no action to place the feet of")


@one_job_each_call
def foot_placement(scene, obj, options, progress=None):
    """Plant the feet of ``obj``'s action on the terrain objects; returns a FootReport. The source action is
    kept; the result is a new action with keys and contact channels."""
    import bpy

    started = time.perf_counter()
    bake_options = BakeOptions(options.frame_start, options.frame_end, options.step, method=options.method,
                               time_limit=options.time_limit, max_error=options.max_error,
                               max_angle=float("inf"), continuity=1e-4, rescue=4.0,
                               independent=options.independent, workers=options.workers)
    check_bake(obj, bake_options)
    check_feet_input(obj, options)
    objects = []
    for name in options.terrain:
        t = bpy.data.objects.get(name)
        if t is None:
            listed = ", ".join(repr(o.name) for o in bpy.data.objects if o.type == "MESH") or "none"
            raise RigError(f"no terrain object named {name!r} (meshes: {listed})")
        objects.append(t)
    terrain = Terrain(objects, bpy.context.evaluated_depsgraph_get())
    feet = find_feet(obj, options.feet)
    frames = list(range(options.frame_start, options.frame_end + 1, options.step))
    before_frame = (scene.frame_current, scene.frame_subframe)
    source_action = obj.animation_data.action
    a0, a1 = source_action.frame_range
    if options.frame_end < a0 or options.frame_start > a1:
        raise RigError(f"frames {options.frame_start}-{options.frame_end} are outside the action "
                       f"{source_action.name!r} ({a0:g}-{a1:g})")
    outside = [f for f in frames if f < a0 or f > a1]
    # Toes that follow constraints (Rigify's: through a mechanism the solver does not model) are held as keyed:
    # rigid with their foot.
    stiff = {f.ball for f in feet if f.ball and _driven(obj, f.ball)}
    plan_, sampler, pelvis = plan(scene, obj, feet, terrain, frames, options, stiff)
    scene.frame_set(before_frame[0], subframe=before_frame[1])
    if not plan_.contacts.any():
        raise RigError(f"no contact found in the motion of {obj.name!r} over frames {frames[0]}-{frames[-1]} (no sole "
                       "point rests near its lowest height): nothing to plant; key the fbik_contact_* channels by "
                       "hand (1 where a sole point touches), or check the frames")
    if not (plan_.contacts & plan_.hits).any():
        raise RigError(f"no terrain under the feet of {obj.name!r} at any contact: nothing to plant; is the terrain "
                       f"({', '.join(o.name for o in objects)}) under the character?")
    controls = rig_controls(scene, obj, [f.ankle for f in feet] + [pelvis], frames, {f.ankle for f in feet})
    lost = [f.ankle for f in feet if _driven(obj, f.ankle) and f.ankle not in controls]
    if lost:
        raise RigError(f"{', '.join(lost)} follow constraints and no control bone that carries them was found (a "
                       "bone without constraints whose pose keeps one relation to the foot): keys on the feet would "
                       "be overridden (a Rigify rig animated in FK: switch its legs to IK); or give the feet of the "
                       "skeleton that is keyed with --feet, or bake the constraints first")
    goals = FootGoals(obj, feet, sampler, plan_, pelvis, options, controls)
    result = np.full_like(plan_.points, np.nan)
    result_rot = np.zeros_like(plan_.rotations)
    both = np.flatnonzero(plan_.contacts.any(axis=1))
    shots = set(both[np.linspace(0, len(both) - 1, min(4, len(both))).astype(int)].tolist()) if len(both) else set()
    segments = {}
    held = np.zeros((len(frames), len(options.held)))  # held bones' heads from their targets, as shown
    row = {f: i for i, f in enumerate(frames)}

    def read_result(f):  # (the result as Blender shows it, read as the bake judges its goals on it)
        i = row.get(f)
        if i is None:
            return
        result[i], result_rot[i] = sampler.sample(rotations=True)
        for k, (bone, targets) in enumerate(options.held.items()):
            held[i, k] = np.linalg.norm(np.array(obj.matrix_world @ obj.pose.bones[bone].head) - targets[i])
        if i in shots:
            W = np.array(obj.matrix_world)
            segments[f] = [((W @ np.append(np.array(pb.head), 1.0))[:3], (W @ np.append(np.array(pb.tail), 1.0))[:3])
                           for pb in obj.pose.bones if pb.bone.use_deform]

    baker = Baker(scene, obj, bake_options, goals=goals, watch=read_result)
    bake_report = baker.run(progress=progress)
    if np.isnan(result).any():  # (every frame is read as the bake's are judged)
        raise RuntimeError("foot placement: the bake did not show every frame of the result")
    action = obj.animation_data.action
    write_contacts(obj, action, obj.animation_data.action_slot, sampler, frames, plan_.contacts, plan_.untouched)
    scene.frame_set(before_frame[0], subframe=before_frame[1])
    before, _ = foot_metrics(plan_, plan_.points, plan_.rotations, terrain, sampler, heights=plan_.terrain)
    after, h_after = foot_metrics(plan_, result, result_rot, terrain, sampler)
    worst = max(max(a["penetration_mm_max"], a["float_mm_max"]) for a in after.values()) / 1e3
    missed = not bake_report.ok
    ok = worst <= options.max_error and not missed and not plan_.untouched
    if worst <= options.max_error:
        verdict = f"contacts within {options.max_error * 1e3:g} mm of the terrain (worst {worst * 1e3:.2f} mm)"
    else:
        verdict = f"a contact is {worst * 1e3:.1f} mm off the terrain (more than {options.max_error * 1e3:g} mm)"
    if missed:
        verdict += f"; {bake_report.verdict()['text']}"
    if plan_.untouched:
        sides = " and ".join(plan_.untouched)
        where = "the source's" if options.detected_contacts else "its"
        channels = ", ".join(f"{CONTACT_PREFIX}_{side}_*" for side in plan_.untouched)
        verdict += (f"; the {sides} foot stands while another swings but no contact of it was detected: it is "
                    f"neither planted nor judged; key {where} {channels} channels where it touches (all 0 if it "
                    "never does)")
    heights = {}
    for k, foot in enumerate(feet):
        j = next(i for i, s in enumerate(sampler.specs) if s[0] == k and s[1] == "heel")
        heights[foot.side] = {"terrain": np.where(np.isfinite(h_after[:, j]), h_after[:, j], np.nan).tolist(),
                              "source": plan_.points[:, j, 2].tolist(), "result": result[:, j, 2].tolist(),
                              "contact": plan_.contacts[:, j].tolist()}
    snapshots = _side_views(plan_, terrain, segments)
    report = FootReport(obj.name, action.name, source_action.name if source_action else "", frames,
                        [f"{f.side} {f.ankle}" + (f"/{f.ball}" if f.ball else "") for f in feet], plan_.source_contacts,
                        before, after, bake_report.to_dict(), bool(ok), verdict, plan_.off_terrain,
                        time.perf_counter() - started, heights, plan_.warnings, snapshots,
                        (1e3 * float(held.mean()), 1e3 * float(held.max())) if held.size else None)
    report.source_floor = "terrain" if plan_.source_on_terrain else {
        foot.side: [float(np.min(plan_.floors[on, k])), float(np.max(plan_.floors[on, k]))]
        for k, foot in enumerate(sampler.feet)
        if (on := plan_.contacts[:, sampler.cols[k]].any(axis=1)).any()}
    if outside:
        report.warnings.append(outside_warning(frames, (a0, a1), f"the action {source_action.name!r} spans",
                                               "foot placement"))
    keep_report(action, bake_report)
    action[FEET_REPORT_PROPERTY] = json.dumps(report.to_dict())
    return report


def feet_report_summary(action):
    """Short lines about the foot placement report kept on an action (for the panel), or []."""
    return summary_lines(action, FEET_REPORT_PROPERTY, "foot placement", _describe_feet)


def _describe_feet(report):
    lines = [("OK: " if report["ok"] else "FAILED: ") + report["verdict"]]
    for side, a in report["after"].items():
        lines.append(f"{side.title()}: penetration {a['penetration_mm_max']:.1f} mm, float {a['float_mm_max']:.1f} mm,"
                     f" sole {a['sole_normal_deg_max']:.1f} deg")
    return lines
