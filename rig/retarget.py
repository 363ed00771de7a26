# SPDX-License-Identifier: GPL-3.0-or-later
"""Motion retargeting from one humanoid armature onto another, baked into a new action of the target.

Both skeletons are mapped to roles (rig.humanoid). Each mapped source bone's motion is its world rotation
away from its rest, Q_s(t) = R_s(t) R_s,rest^T; the target bone gets R_t(t) = Q_s(t) A R_t,rest, where A
turns the target's rest onto the source's (limbs by their direction toward the next joint, which the files hold
where bone tails may be an importer's guess; the pelvis, chest and feet by their frames: left-right and up or
forward), so a T-pose clip on an A-pose character (and back) keeps its
arms and legs, whatever the bones' rolls. World rotations become each bone's basis from the root down; bones
with no source stay at rest. The pelvis travels as the source's, scaled by the ratio of leg lengths, over the
target's floor. Contacts then come from the source (the foot placement's detector) and are planted by the
foot placement on the target's floor, or on a terrain, in the same pass.
"""

import json
import time
from dataclasses import dataclass, field

import numpy as np

from ..solvers.rotations import turn_between, unit
from .armature import RigError, _matrices, rotation_channels, rotation_path
from .bake import outside_warning
from .bake_report import REPORT_PROPERTY, REPORT_TEXT
from .contacts import rise_over_stances
from .evaluation import evaluating_only
from .foot_goals import driven_by_rig
from .soles import sample_motion
from .feet import find_feet, standing_turn
from .fingers import FINGERS, finger_next_joint, finger_pairs, hand_fingers, palm
from .humanoid import SIDES, map_humanoid
from .keys import write_keys
from .reading import one_job_each_call
from .retarget_feet import (feet_spec, feet_travel, flat_alignment, flat_frames, flat_up, foot_pitch_scaled,
                            humanoid_feet, long_feet, planted_travel, sole_heights, standing_tilts,
                            swinging_turns)
from .riders import find_riders, key_riders
from .rigify import key_rigify, rigify_controls
from .takes import reference_frames

ROOT_MODES = ("scaled", "kept", "in_place", "from_feet")
SLIDE_SLACK = 0.25  # hips' heights a second: a copy's standing foot sliding slower is left to the foot placement
# Degrees below level past which a foot's ankle-to-toe line, in a reference taken from the take, is matched as it
# points (_Skeleton.swinging_feet), not as a foot standing flat.
STEEP_FOOT = 45.0
UPRIGHT = 0.8  # a reference pose stands when its legs and its spine rise at least this much of their length
NEXT_JOINT = {"thigh": "shin", "shin": "foot", "shoulder": "upper_arm", "upper_arm": "forearm", "forearm": "hand",
              "neck": "head"}  # a limb bone's direction: toward the head of the bone that follows it


@dataclass
class RetargetOptions:
    frame_start: int = None  # default: the source action's range
    frame_end: int = None
    root: str = "scaled"  # the pelvis's travel: scaled by leg lengths, kept as the source's, in place, or from_feet
    # (an in-place clip given the travel its standing feet imply)
    ik: bool = True  # plant the source's contacts with the foot placement
    terrain: list = field(default_factory=list)  # terrain objects for the contacts (default: the target's floor)
    max_error: float = 0.01
    time_limit: float = 0.0
    hands: bool = False  # hold the hands where the source's are relative to its pelvis (scaled)
    source_roles: dict = None  # {role: bone} maps given by hand (default: each armature's own, else found)
    target_roles: dict = None
    feet: str = ""  # the character's feet by hand, "ANKLE:BALL,ANKLE:BALL" (default: found with its bone map)
    independent: bool = True  # the contact solve's frames each from the copied pose, in parallel (FootOptions); off:
    # each from the previous frame's answer
    workers: int = 0
    keep_reference_frames: bool = False  # keep a clip's reference pose (CMU's first frame) in the default range


def _frame(right, up):
    """An orthonormal frame (columns right, forward, up) from a right and an up direction."""
    up = unit(up)
    right = unit(right - (right @ up) * up)
    return np.column_stack([right, np.cross(up, right), up])


class _Skeleton:
    """An armature's reference pose in world space (its rest, or for a clip whose rest does not stand, the frame
    where it stands most upright) and its pose at the current frame."""

    def __init__(self, obj, humanoid):
        self.obj, self.h = obj, humanoid
        self.names = [b.name for b in obj.data.bones]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.rest = _matrices(obj.data.bones, "matrix_local", len(self.names))
        self.ref = self.rest  # armature space; the rest unless a standing frame replaces it
        self.ref_frame = None
        self._fingers = {}  # hand -> its fingers (rig.fingers.hand_fingers)

    def stand_up(self):
        """Where the rest pose lies down (a glTF whose root's pose stands it up), its reference is the rest stood
        up about the armature's origin (rig.feet.standing_turn); a note saying so, else ""."""
        lying, turn = self.standing(), standing_turn(self.obj)
        if lying >= UPRIGHT or np.allclose(turn, np.eye(4)):
            return ""
        self.ref = turn @ self.rest
        return (f"the character's rest pose does not stand (uprightness {lying:.2f} of 1): its bones are matched in "
                f"it stood up about the armature's origin ({self.standing():.2f}), on the floor there")

    def posed(self):
        """(N, 4, 4) armature-space matrices of the pose bones now."""
        return _matrices(self.obj.pose.bones, "matrix", len(self.names))

    def standing(self, M=None):
        """How upright a pose (armature space; default the reference) stands: its legs' hip-to-ankle height over
        their length and its pelvis-to-chest rise over its length, the least of them (1: straight up)."""
        W = np.array(self.obj.matrix_world)
        P = (W @ (self.ref if M is None else M))[:, :3, 3]
        at = lambda role: P[self.index[self.h.bone(role)]]  # noqa: E731
        out = [(at("chest") - at("pelvis"))[2] / max(np.linalg.norm(at("chest") - at("pelvis")), 1e-12)]
        for s in SIDES:
            hip, knee, ankle = at(f"{s} thigh"), at(f"{s} shin"), at(f"{s} foot")
            out.append((hip - ankle)[2] / max(np.linalg.norm(knee - hip) + np.linalg.norm(ankle - knee), 1e-12))
        return float(min(out))

    def tail(self, i):
        """A bone's tail in the reference pose (world)."""
        W = np.array(self.obj.matrix_world)
        return (W @ self.ref[i] @ np.array([0.0, self.obj.data.bones[self.names[i]].length, 0.0, 1.0]))[:3]

    def leg_length(self):
        """The legs' length, hip to knee to ankle, the mean of both (what a stride scales with; a height would
        count a rest pose's splayed legs, CMU's, or hips placed above the pelvis, the metarig's, as shorter)."""
        _, P = self.rest_world()
        at = lambda role: P[self.index[self.h.bone(role)]]  # noqa: E731
        return float(np.mean([np.linalg.norm(at(f"{s} shin") - at(f"{s} thigh"))
                              + np.linalg.norm(at(f"{s} foot") - at(f"{s} shin")) for s in SIDES]))

    def world(self):
        """(rotations (N, 3, 3), heads (N, 3)) of the pose bones now, world space, scale removed."""
        W = np.array(self.obj.matrix_world)
        M = W @ _matrices(self.obj.pose.bones, "matrix", len(self.names))
        R = M[:, :3, :3] / np.linalg.norm(M[:, :3, :3], axis=1, keepdims=True)
        return R, M[:, :3, 3]

    def rest_world(self):
        """(rotations (N, 3, 3), heads (N, 3)) of the reference pose, world space, scale removed (read once per
        reference pose)."""
        if getattr(self, "_rest_of", None) is not self.ref:
            M = np.array(self.obj.matrix_world) @ self.ref
            self._rest_of = self.ref
            self._rest = M[:, :3, :3] / np.linalg.norm(M[:, :3, :3], axis=1, keepdims=True), M[:, :3, 3]
        return self._rest

    def joint_direction(self, role, bone):
        """A mapped bone's direction in the reference pose (world, unit) toward the next joint of its limb (the
        thigh to the knee, the forearm to the wrist, a hand to its knuckles, a finger segment to the next),
        which the file holds (a hand with no fingers: its forearm's, _fingerless); None when nothing follows it (a
        head, a toe, a finger's last segment): the way the bone itself points to its tail may be an importer's
        guess."""
        R, P = self.rest_world()
        i = self.index[bone]
        words = role.split()
        side, part = (words[0], words[1]) if words[0] in SIDES else ("", words[0])
        if part in FINGERS:
            hand = self.h.bone(f"{side} hand")
            if hand not in self._fingers:  # (told once per hand, not once per segment)
                self._fingers[hand] = hand_fingers(self.obj.data.bones, hand)
            after = finger_next_joint(self._fingers[hand], bone)
            d = P[self.index[after]] - P[i] if after else None
        elif part == "spine" and bone in self.h.spine[:-1]:  # toward the next bone up the spine (the chest last)
            after = self.h.spine[self.h.spine.index(bone) + 1]
            d = P[self.index[after]] - P[i]
        elif part == "hand":  # toward its fingers (a hand bone may have no length, CMU's, or point anywhere)
            fingers = self._knuckles(bone)
            d = np.mean([P[k] for k in fingers], axis=0) - P[i] if fingers else self._fingerless(i, side)
        else:
            after = self.h.bone(f"{side} {NEXT_JOINT[part]}".strip()) if part in NEXT_JOINT else ""
            d = P[self.index[after]] - P[i] if after else None
        return unit(d) if d is not None and np.linalg.norm(d) > 1e-9 else None

    def _fingerless(self, i, side):
        """The direction (world) of the fingerless hand bone ``i`` in the reference pose: its forearm's in the rest
        pose, turned with the hand from rest (a clip whose rest lies down, Bandai Namco's, holds its hands
        straight only there; the frame it is matched in may bend them)."""
        fore = self.h.bone(f"{side} forearm")
        if not fore:
            return None
        rotation = lambda M: M[:3, :3] / np.linalg.norm(M[:3, :3], axis=0, keepdims=True)  # noqa: E731
        along = self.rest[i][:3, 3] - self.rest[self.index[fore]][:3, 3]
        return rotation(np.array(self.obj.matrix_world)) @ rotation(self.ref[i]) @ rotation(self.rest[i]).T @ along

    def _knuckles(self, hand):
        """Indices of the first joint (bone head) past the wrist of each finger chain hanging from ``hand``, the
        thumb left out (named so, or the chain starting nearest the wrist when there are three or more): where the
        palm ends, whatever the fingers' curl and whatever hangs further on (a weapon slot under KayKit's hand
        took its direction 19 degrees off its palm's)."""
        bone = self.obj.data.bones[hand]
        kept = lambda c: c.use_deform or not bone.use_deform  # noqa: E731 (a deform hand's fingers, not its controls)
        chains = [c for c in bone.children if kept(c) and (c.children or c.length > 0)]
        wrist = np.array(bone.head_local)
        if len(chains) >= 3 and not any("thumb" in c.name.lower() for c in chains):
            chains.remove(min(chains, key=lambda c: np.linalg.norm(np.array(c.head_local) - wrist)))
        chains = [c for c in chains if "thumb" not in c.name.lower()]
        near = 1e-3 * max(bone.length, max((c.length for c in chains), default=0.0), 1e-9)
        out = []
        for c in chains:  # (a finger block starting at the wrist, CMU's: its fingers' first joints past it)
            while np.linalg.norm(np.array(c.head_local) - wrist) <= near and [k for k in c.children if kept(k)]:
                c = max((k for k in c.children if kept(k)), key=lambda k: len(k.children_recursive))
            out.append(self.index[c.name])
        return out

    def body_frames(self, as_pointed=()):
        """Rest frames of the pelvis (right: left to right thigh; up: to the chest), the chest (right: left to
        right upper arm; up: to the head) and each foot (forward: ankle to toe, up: the world's; on the sides of
        ``as_pointed``, as the foot points: _pointing)."""
        _, P = self.rest_world()
        at = lambda role: P[self.index[self.h.bone(role)]]  # noqa: E731
        top = at(self.h.bone("head") and "head" or "neck") if (self.h.bone("head") or self.h.bone("neck")) else \
            self.tail(self.index[self.h.bone("chest")])  # (no neck nor head: the chest's own tail)
        out = {"pelvis": _frame(at("right thigh") - at("left thigh"), at("chest") - at("pelvis")),
               "chest": _frame(at("right upper_arm") - at("left upper_arm"), top - at("chest"))}
        for s in SIDES:
            forward, up = self.foot_forward(s, level=True), np.array([0.0, 0.0, 1.0])
            pointed = self._pointing(s) if s in as_pointed else None
            out[f"{s} foot"] = pointed if pointed is not None else \
                np.column_stack([unit(np.cross(forward, up)), unit(forward), up])
        return out

    def foot_forward(self, side, level=False):
        """A foot's ankle to toe in the reference pose (world; ``level``: its horizontal part): to its toe's tail,
        else its own; a foot bone with no toe after it may be a speck pointing anywhere (RobotExpressive's points
        back: its heel rose where its toes should), its sole's heel to toe then."""
        toe = self.h.bone(f"{side} toe")
        ankle = self.rest_world()[1][self.index[self.h.bone(f"{side} foot")]]
        forward = self.tail(self.index[toe or self.h.bone(f"{side} foot")]) - ankle
        soles = {} if toe else self._soles()
        flat = lambda v: v * np.array([1.0, 1.0, 0.0]) if level else v  # noqa: E731
        if side in soles:
            sole = soles[side]["toe"] - soles[side]["heel"]
            if np.linalg.norm(flat(forward)) < 0.25 * np.linalg.norm(flat(sole)):
                return flat(sole)
        return flat(forward)

    def _pointing(self, side):
        """The frame (right: the ankle's axis across the foot; forward: ankle to toe; up) of a foot as it points in
        the reference pose, whatever its pitch; None for a foot along its shin (no axis to read)."""
        _, P = self.rest_world()
        ankle, knee = P[self.index[self.h.bone(f"{side} foot")]], P[self.index[self.h.bone(f"{side} shin")]]
        toe = self.h.bone(f"{side} toe")
        along = unit(self.tail(self.index[toe or self.h.bone(f"{side} foot")]) - ankle)
        hinge = np.cross(ankle - knee, along)
        if np.linalg.norm(hinge) < 0.2 * np.linalg.norm(ankle - knee):
            return None
        right = unit(hinge)
        return np.column_stack([right, along, np.cross(right, along)])

    def swinging_feet(self):
        """The sides whose foot, in a reference taken from the take (not a standing rest), points down steeply or
        back (a run's foot, on its toes or swinging toes down behind the body): matched as it points (body_frames),
        not as standing flat with its heading flattened (which turns a foot pointing back round, and tilts the
        character's foot by how far the source's stands on its toes)."""
        out = []
        for side in SIDES if self.ref_frame is not None else ():
            frame = self._pointing(side)
            if frame is None:
                continue
            along, level = frame[:, 1], np.cross(np.array([0.0, 0.0, 1.0]), frame[:, 0])  # (toes when it stands)
            if along[2] < -np.sin(np.radians(STEEP_FOOT)) or along @ level < 0.0:
                out.append(side)
        return out

    def hip_height(self):
        """The hips' height over the soles in the reference pose (world): what a swing's height scales with (a
        tall cartoon foot lifts higher than its shins alone would say)."""
        _, P = self.rest_world()
        hips = float(np.mean([P[self.index[self.h.bone(f"{s} thigh")]][2] for s in SIDES]))
        soles = [p[2] for points in self._soles().values() for p in points.values()]
        return hips - float(min(soles or [P[self.index[self.h.bone(f"{s} foot")]][2] for s in SIDES]))

    def _soles(self):
        """{side: {"heel", "ball", "toe": world point}} of the feet's sole points in the reference pose ({} when the
        feet cannot be found): where its skin or its bones put them."""
        try:
            feet = humanoid_feet(self.obj, self.h)
        except RigError:
            return {}
        W = np.array(self.obj.matrix_world)
        return {f.side: {p.name: (W @ self.ref[self.index[p.bone]] @ np.append(p.offset, 1.0))[:3] for p in f.points}
                for f in feet}


def stored_roles(obj):
    """The bone map kept on an armature (edited in the Retarget panel), or None."""
    props = getattr(obj, "fullbody_ik", None)
    rows = props.bone_map if props is not None else ()
    return {r.role: r.bone for r in rows} if len(rows) else None


def _pairs(source, hs, target, ht):
    """[(role, source bone, target bone)] for the roles both have (a source's hand: the bone that turns its palm,
    rig.fingers.palm), the spine's middle bones by their place along it (fractions of the chain), and the fingers
    both hands have (rig.fingers)."""
    hand_of = lambda r: palm(source.data.bones, hs.roles[r]) if r.endswith(" hand") else hs.roles[r]  # noqa: E731
    out = [(r, hand_of(r), ht.roles[r]) for r in ht.roles if r in hs.roles]
    ms, mt = hs.spine[:-1], ht.spine[:-1]  # the chest is a role of its own
    if ms and mt:
        for i, name in enumerate(mt):
            j = min(range(len(ms)), key=lambda j: abs((j + 1) / (len(ms) + 1) - (i + 1) / (len(mt) + 1)))
            out.append((f"spine {i + 1}", ms[j], name))
    for s in SIDES:
        if hs.bone(f"{s} hand") and ht.bone(f"{s} hand"):
            out += finger_pairs(source.data.bones, hs.bone(f"{s} hand"), target.data.bones, ht.bone(f"{s} hand"), s)
    return out


def _alignments(S, T, pairs, pointed=(), given=None):
    """{role: A}, the world turn taking the target's reference pose of a mapped bone onto the source's: the
    pelvis's, chest's and feet's from their body frames; a limb bone's turned with the body it hangs from (the
    pelvis's or the chest's: its twist follows the way the body faces), then onto the source's direction to its
    next joint. A bone with nothing after it on either side (a head, a hand with no fingers, a toe, a finger's
    last segment) turns as the bone it continues (in a standing reference pose the head stands as the chest, the
    hand continues its forearm, a toe its foot), else as it points. The feet of the sides ``pointed`` as they
    point (_Skeleton.swinging_feet); the roles ``given`` ({role: A}) as given (a bone continuing one of them turns
    with it)."""
    fs, ft = S.body_frames(pointed), T.body_frames(pointed)
    body = {role: fs[role] @ ft[role].T for role in fs}
    trunk = lambda role: body["pelvis" if role.split()[-1] in ("thigh", "shin", "toe") or role.startswith("spine")  # noqa: E731
                                else "chest"]
    out = {}
    for role, sb, tb in pairs:
        ds, dt = S.joint_direction(role, sb), T.joint_direction(role, tb)
        if given and role in given:
            out[role] = given[role]
        elif role in body:
            out[role] = body[role]
        elif ds is not None and dt is not None:
            out[role] = turn_between(trunk(role) @ dt, ds) @ trunk(role)
    Rs, Rt = S.rest_world()[0], T.rest_world()[0]
    for role, sb, tb in pairs:
        if role not in out:
            continued = next((r for r in _continues(role) if r in out), None)
            B = trunk(role)
            out[role] = out[continued] if continued else turn_between(B @ Rt[T.index[tb]][:, 1], Rs[S.index[sb]][:, 1]) @ B
    return out


def _constants(S, T, hs, pairs, Rs, motion):
    """({target bone: (source bone's index, C)}, {target foot: its swinging_turns' (pointed, up, heights)}): per
    pair, the frame-independent part of R_t = R_s C, C = R_s,rest^T A R_t,rest, A turning the target's reference
    pose onto the source's (world). Bones standing flat on the source's floor stand flat on the target's
    (standing_tilts), a foot heading as the reference pose's (a standing rest's feet point ahead). In a reference
    taken from the take (a rest that lies down), a foot the motion shows standing flat (its stances read from its
    ball and lowest ankle where its heel never reads as touching: a run's) stands as the target's rest where the
    source's does, heading as the source's then (its toe turned from it as before it), and, turned far from
    standing as it swings, points as the source's does (swinging_turns); one that never stands, swinging down or
    back in the reference, is matched as it points."""
    (Rs_rest, _), (Rt_rest, _) = S.rest_world(), T.rest_world()
    taken = S.ref_frame is not None
    flat = flat_frames(hs, motion, lowest=taken)
    standing = standing_tilts(hs, Rs, Rs_rest, S.index, flat)
    feet = {role: standing[role] @ flat_alignment(Rs[flat[role], S.index[sb]], Rs_rest[S.index[sb]],
                                                  S.foot_forward(role.split()[0]),
                                                  unit(T.foot_forward(role.split()[0], level=True)))
            for role, sb, _ in pairs if taken and role.endswith(" foot") and role in flat}
    aligned = _alignments(S, T, pairs, [s for s in S.swinging_feet() if f"{s} foot" not in flat], feet)
    C = lambda sb, tb, A: Rs_rest[S.index[sb]].T @ A @ Rt_rest[T.index[tb]]  # noqa: E731
    constant = {tb: (S.index[sb], C(sb, tb, standing.get(role, np.eye(3)).T @ aligned[role]))
                for role, sb, tb in pairs}
    pointed = _alignments(S, T, [p for p in pairs if p[0] in feet], SIDES)  # (the feet alone)
    swinging = {tb: (C(sb, tb, pointed[role]), flat_up(Rs[flat[role], S.index[sb]]),
                     sole_heights(motion, role.split()[0]))
                for role, sb, tb in pairs
                if role in feet and all(K._pointing(role.split()[0]) is not None for K in (S, T))}
    return constant, swinging


def _continues(role):
    """The roles a bone continues, nearest first (a finger's last segment: its previous ones, then the hand)."""
    words = role.split()
    if len(words) == 3 and words[1] in FINGERS:  # "left index 3"
        side, kind, n = words[0], words[1], int(words[2])
        return [f"{side} {kind} {k}" for k in range(n - 1, 0, -1)] + [f"{side} hand", f"{side} forearm"]
    side = words[0] + " " if words[0] in SIDES else ""
    part = words[-1]
    return [side + r for r in {"hand": ("forearm",), "toe": ("foot",)}.get(part, ())] + \
        (["chest"] if part == "head" else [])


@dataclass
class RetargetReport:
    source: str
    target: str
    source_action: str
    action: str
    frames: list
    mapping: list  # [(role, source bone, target bone)]
    scale: float
    seconds: float
    feet: object = None  # the foot placement's report, when contacts were planted
    warnings: list = field(default_factory=list)
    hands_mm: tuple = None  # (mean, max) hand error when the hands were held
    reference_frames: list = field(default_factory=list)  # the source's frames left out: a pose apart from the take

    @property
    def ok(self):
        return self.feet is None or self.feet.ok

    def to_dict(self):
        return {"source": self.source, "target": self.target, "source_action": self.source_action,
                "action": self.action, "frames": [int(self.frames[0]), int(self.frames[-1])],
                "mapping": [list(m) for m in self.mapping], "scale": self.scale, "seconds": self.seconds,
                "ok": self.ok, "warnings": self.warnings, "hands_mm": self.hands_mm,
                "reference_frames": [int(f) for f in self.reference_frames],
                "feet": self.feet.to_dict() if self.feet is not None else None}

    def plot(self, path):
        """The contacts' heights before and after (the foot placement's plot); without contacts, none."""
        if self.feet is None:
            raise RigError("no contacts were planted (rotation copy only): nothing to plot")
        self.feet.plot(path)

    def text(self):
        lines = [f"Full-Body IK retarget of {self.source!r} ({self.source_action!r}) onto {self.target!r}: frames "
                 f"{self.frames[0]}-{self.frames[-1]}, {len(self.mapping)} bones mapped, scale {self.scale:.3f}",
                 f"  action: {self.action!r} ({self.seconds:.1f} s)"]
        if self.feet is not None:
            lines += ["  " + line for line in self.feet.text().splitlines()[2:]]
        if self.hands_mm is not None:
            lines.append(f"  hands held where the source's are (scaled): {self.hands_mm[0]:.1f} mm off on average, "
                         f"{self.hands_mm[1]:.1f} at most")
        lines += [f"  note: {w}" for w in self.warnings]
        return "\n".join(lines)


def _read_source(scene, source, S, hs, frames, lying, progress=None):
    """The source over ``frames`` (world): its mapped bones' rotations (F, bones, 3, 3), pelvis heads (F, 3), hands
    (F, 2, 3: the forearm's end where it has no hand), its most upright frame (how upright, frame, pose: read where
    its rest is ``lying``, else (-inf, None, None)) and its Motion (soles and contacts)."""
    s_hands = [S.index[hs.bone(f"{s} hand") or hs.bone(f"{s} forearm")] for s in SIDES]
    s_pelvis = S.index[hs.bone("pelvis")]
    F = len(frames)
    Rs = np.zeros((F, len(S.names), 3, 3))
    heads, hands = np.zeros((F, 3)), np.zeros((F, 2, 3))
    upright = (-np.inf, None, None)
    with evaluating_only(scene, [source]):  # (the source alone is read, in one go, its contacts too)
        for i, f in enumerate(frames):
            scene.frame_set(f)
            Rs[i], Ps = S.world()
            heads[i], hands[i] = Ps[s_pelvis], Ps[s_hands]
            if lying and i % max(1, F // 60) == 0:
                M = S.posed()
                upright = max(upright, (S.standing(M), f, M), key=lambda u: u[0])
            if progress:
                progress(0.2 * (i + 1) / F)  # the rotation copy: a fifth of the work
        motion = sample_motion(scene, source, humanoid_feet(source, hs), frames)  # its contacts
    return Rs, heads, hands, upright, motion


def take_frames(scene, source, options):
    """(frames, reference frames left out, why) of the source's action to retarget: the options' range, its ends
    the action's where not given, less the poses held apart from the take at an end not given (CMU's first frame,
    a calibration T-pose: takes.reference_frames) unless ``keep_reference_frames``. RigError for a range that is
    inverted or wholly outside the action."""
    action = source.animation_data.action
    a0, a1 = (int(round(f)) for f in action.frame_range)
    first = a0 if options.frame_start is None else options.frame_start
    last = a1 if options.frame_end is None else options.frame_end
    reference, why = [], ""
    if (options.frame_start is None or options.frame_end is None) and not options.keep_reference_frames:
        with evaluating_only(scene, [source]):  # (a range's end given by hand is kept)
            reference, why = reference_frames(scene, source, a0, a1)
        middle = (a0 + a1) / 2
        reference = [f for f in reference if options.frame_start is None and f < middle
                     or options.frame_end is None and f > middle]
        take = [f for f in range(first, last + 1) if f not in reference]
        first, last = (take[0], take[-1]) if take else (first, last)
    if last < first:
        raise RigError(f"inverted frame range {first}-{last}")
    if last < a0 or first > a1:  # (every frame would hold the clip's first or last pose: a still, not a retarget)
        raise RigError(f"frames {first}-{last} are all outside the source's action {action.name!r} (frames "
                       f"{a0}-{a1}): choose frames within it")
    return list(range(first, last + 1)), reference, why


@one_job_each_call  # (the feet are read for mapping, scaling and planting: once each armature)
def retarget(scene, source, target, options=None, progress=None):
    """Retarget ``source``'s action onto ``target`` (armature objects in ``scene``); returns a RetargetReport.
    The target gets a new action; nothing of the source changes."""
    options = options or RetargetOptions()
    started = time.perf_counter()
    _check_inputs(source, target, options)
    src_action = source.animation_data.action
    frames, reference, reference_why = take_frames(scene, source, options)
    first, last = frames[0], frames[-1]
    hs, ht = _mapped(source, target, options)
    driven = [ht.bone(f"{s} foot") for s in SIDES if driven_by_rig(target, ht.bone(f"{s} foot"))]
    controls = rigify_controls(target, ht) if driven else None
    if driven and controls is None:  # keys on them would be overridden: say so before anything is written
        raise RigError(f"the character's bones ({', '.join(driven)}) follow constraints (a generated rig's deform "
                       "bones) and its controls are not a Rigify rig's: keys on the bones would be overridden; "
                       "retarget onto the skeleton that is keyed, or bake the rig's constraints first")
    S, T = _Skeleton(source, hs), _Skeleton(target, ht)
    target_note = T.stand_up()
    pairs = _pairs(source, hs, target, ht)
    before_frame = scene.frame_current
    scene.frame_set(first)
    Rt_rest, t_rest_heads = T.rest_world()
    W_t = np.array(target.matrix_world)  # (at the first frame, before the passes below leave the target out)
    if options.hands:
        handless = [f"{h.armature!r} ({s})" for h in (hs, ht) for s in SIDES if not h.bone(f"{s} hand")]
        if handless:
            raise RigError(f"hands held where the source's are: {', '.join(handless)} has no hand bone (its arm ends "
                           "at the forearm); retarget without holding the hands")
    F = len(frames)
    lying = S.standing() < UPRIGHT  # a clip whose rest is no standing pose (Bandai Namco's lies along X)
    Rs, source_heads, source_hands, upright, motion = _read_source(scene, source, S, hs, frames, lying, progress)
    rest_note = ""
    if lying and upright[2] is not None:  # its reference: the frame where it stands most upright
        rest_note = (f"the source's rest pose does not stand (uprightness {S.standing():.2f} of 1): frame "
                     f"{upright[1]}, where it stands most upright ({upright[0]:.2f}), is the pose its bones are matched in "
                     f"(the frame stays in the job)")
        S.ref, S.ref_frame = upright[2], upright[1]
    constant, swinging = _constants(S, T, hs, pairs, Rs, motion)
    scale = 1.0 if options.root == "kept" else T.leg_length() / max(S.leg_length(), 1e-9)
    target_floor = min(float(t_rest_heads[T.index[ht.bone(f"{s} foot")]][2]) for s in SIDES)
    keyed = {tb for _, _, tb in pairs}
    keyed |= {p.name for tb in list(keyed) for p in target.data.bones[tb].parent_recursive}
    pname = ht.bone("pelvis")
    order = sorted(keyed, key=lambda n: (len(target.data.bones[n].parent_recursive), n != pname))
    Rw_t = W_t[:3, :3] / np.linalg.norm(W_t[:3, :3], axis=0, keepdims=True)
    W_t_inv = np.linalg.inv(W_t)
    # Thighs hanging from a root beside the pelvis (a game rig's legs on a root on the floor): their heads go where
    # the pelvis carries them.
    beside = {tb for tb in (ht.bone(f"{s} thigh") for s in SIDES)
              if target.data.bones[pname] not in target.data.bones[tb].parent_recursive}
    if target.data.bones[pname].use_connect:
        raise RigError(f"the target's pelvis {pname!r} is connected to its parent: it cannot travel")
    target_feet = humanoid_feet(target, ht)
    pitched = long_feet(S, T, motion.sampler.feet, target_feet, Rt_rest)
    world = {}  # each keyed bone's world rotation wanted (F, 3, 3)
    for name, (j, C) in constant.items():
        if name in swinging:
            C = swinging_turns(Rs[:, j], C, *swinging[name], motion.leg)  # (F, 3, 3)
        world[name] = foot_pitch_scaled(Rs[:, j] @ C, *pitched[name]) if name in pitched else Rs[:, j] @ C
    pose, X_of, basis = _bases(target, T, order, world, Rw_t, beside, pname, F)
    rest_t = T.rest
    # Feet parented to the root rather than their legs (game rigs): their heads follow their shins' tails.
    detached = {f.ankle: f.shin for f in target_feet if f.shin and f.ankle in keyed}
    t_feet = [ht.bone(f"{s} foot") for s in SIDES]
    def at_ankle(foot, shin):  # the foot's rest head carried in its shin's frame (a shin's tail may be a guess)
        local = np.linalg.inv(rest_t[T.index[shin]]) @ np.append(rest_t[T.index[foot]][:3, 3], 1.0)
        return (pose[shin] @ local)[:, :3]

    ankles = np.stack([at_ankle(n, detached[n]) if n in detached else pose[n][:, :3, 3] for n in t_feet], axis=1)
    pelvis_heads = pose[pname][:, :3, 3]  # armature space, the pelvis not moved yet
    to_world = lambda p: p @ W_t[:3, :3].T + W_t[:3, 3]  # noqa: E731
    pelvis_now = to_world(pelvis_heads)
    pelvis_world = _pelvis_path(options, motion, source_heads, pelvis_now, to_world(ankles)[..., 2].min(axis=1),
                                t_rest_heads[T.index[pname]], scale, target_floor)
    if options.root == "scaled" and not motion.treadmill:  # and besides, what keeps its standing feet from sliding
        pelvis_world[:, :2] += planted_travel(motion, target_feet, pose, ankles, to_world, pelvis_world - pelvis_now,
                                              SLIDE_SLACK * T.hip_height() / motion.fps)
    shift = (pelvis_world - pelvis_now) @ W_t_inv[:3, :3].T  # armature space: moves the pelvis and below
    locations = {}
    for name in [pname, *detached, *beside]:
        want = (pose[name][:, :3, 3] if name in beside else pelvis_heads if name == pname else
                ankles[:, t_feet.index(name)]) + shift
        X = X_of[name]
        locations[name] = np.linalg.solve(X[:, :3, :3], (want - X[:, :3, 3])[..., None])[..., 0]
    action, slot, bag = _new_action(target, src_action)
    if controls is not None:  # a generated Rigify rig: its controls keyed so that its deform bones take the poses
        wanted = {}
        for tb in constant:
            M = pose[tb].copy()
            M[:, :3, :3] /= np.linalg.norm(M[:, :3, :3], axis=1, keepdims=True)
            M[:, :3, 3] += shift
            wanted[tb] = M
        key_rigify(scene, target, controls, wanted, frames, progress)
        order = []  # nothing keyed on the deform bones
    _key_bones(bag, target, order, basis, locations, frames)
    report = RetargetReport(source.name, target.name, src_action.name, action.name, frames, pairs, float(scale), 0.0,
                            reference_frames=reference)
    if reference:
        report.warnings.append(f"left out of the range as not part of the take: {reference_why} "
                               "(--keep-reference-frames keeps them)")
    report.warnings += [note for note in (rest_note, target_note) if note]
    if pitched:
        ratio = max(r for _, _, r in pitched.values())
        report.warnings.append(f"the character's feet are {ratio:.1f} times as long for its legs as the source's: "
                               "their pitch is scaled down so that its heels rise, for its legs, as the source's "
                               "do")
    span = tuple(int(round(f)) for f in src_action.frame_range)
    outside = outside_warning(frames, span, f"the action {src_action.name!r} spans", "retarget")
    report.warnings += [outside] if outside else []
    if options.ik:
        held = {}
        if options.hands:  # each hand where the source's is from its pelvis, scaled, from the target's pelvis
            for k, s in enumerate(SIDES):
                held[ht.bone(f"{s} hand")] = pelvis_world + scale * (source_hands[:, k] - source_heads)
        report.feet = _plant(scene, motion, target, ht, action, slot, frames, options, pelvis_world, progress,
                             held, _swing_rises(motion, T.hip_height() / max(S.hip_height(), 1e-9)))
        report.hands_mm = report.feet.held_mm
        report.action = target.animation_data.action.name
    if controls is None:
        riders = find_riders(target, ht, keyed)
        key_riders(scene, target, riders, target.animation_data.action, target.animation_data.action_slot, frames)
        report.warnings += [f"carried with the bone they stand at, as they stand at rest: "
                            f"{', '.join(f'{r!r} ({a!r})' for r, a in sorted(riders.items()))}"] if riders else []
    scene.frame_set(before_frame)
    # The scene plays the whole new action: its range grows to cover it (a batch's saved file played in Blender
    # stopped at the scene's old end), never shrinks.
    scene.frame_start, scene.frame_end = min(scene.frame_start, first), max(scene.frame_end, last)
    report.seconds = time.perf_counter() - started
    return report


def _pelvis_path(options, motion, source_heads, pelvis_now, lowest, rest_head, scale, target_floor):
    """(F, 3) where the character's pelvis goes (world): it travels as the source's from its first frame, scaled
    (or not, or not at all: options.root; from_feet, an in-place clip given the travel its feet imply) from its
    rest head; its height puts its lower ankle (``lowest``, where the copy has it now, the pelvis at
    ``pelvis_now``) over its floor as high as the source's (scaled) is over the ground under it (its floor, or on
    uneven ground, a clip on rocks or stairs, where that foot stands, blended between its stances)."""
    over = (motion.ankles[..., 2] - motion.floors).min(axis=1)
    over -= float(np.percentile(over, 1)) if len(over) else 0.0
    travel = source_heads - source_heads[0]
    if options.root == "in_place":
        travel[:, :2] = 0.0
    elif options.root == "from_feet":
        travel[:, :2] = feet_travel(motion.pts, motion.sampler.cols, motion.contacts)
    pelvis_world = pelvis_now.copy()
    pelvis_world[:, :2] = rest_head[:2] + scale * travel[:, :2]
    pelvis_world[:, 2] += target_floor + scale * over - lowest
    return pelvis_world


def _new_action(target, src_action):
    """(action, slot, channel bag) of a new action of the character, named for the clip it takes (its old action
    kept, with a fake user)."""
    import bpy
    from bpy_extras import anim_utils

    tad = target.animation_data or target.animation_data_create()
    name, k = f"{src_action.name} on {target.name}", 2
    while bpy.data.actions.get(name) is not None:  # (Blender's own would count up a name's last number: "on root.001"
        name, k = f"{src_action.name} on {target.name} ({k})", k + 1  # read "on root.002", another armature)
    action = bpy.data.actions.new(name)
    slot = action.slots.new(id_type="OBJECT", name=target.name)
    if tad.action is not None:
        tad.action.use_fake_user = True
    tad.action = action
    tad.action_slot = slot
    return action, slot, anim_utils.action_ensure_channelbag_for_slot(action, slot)


def _key_bones(bag, target, order, basis, locations, frames):
    """Keys of the bones ``order`` on ``frames``: each one's rotation (its ``basis`` in its own rotation mode), and
    its pose whole: its location (``locations``: the pelvis's and root-parented feet's travel, else none) and a
    scale of 1 (a scale left on a bone from the character's old pose would lengthen its leg)."""
    fr = np.array(frames, dtype=float)
    for n in order:
        pb = target.pose.bones[n]
        path, mode = rotation_path(pb), pb.rotation_mode
        values = rotation_channels(mode, basis[n][:, :3, :3], tuple(getattr(pb, path)))
        for c in range(values.shape[1]):
            fc = bag.fcurves.new(f'pose.bones["{n}"].{path}', index=c, group_name=n)
            write_keys(fc, fr, values[:, c])
    for n in order:
        loc = locations.get(n)
        for c in range(3):
            if loc is not None or not target.data.bones[n].use_connect:
                fc = bag.fcurves.find(f'pose.bones["{n}"].location', index=c) or \
                    bag.fcurves.new(f'pose.bones["{n}"].location', index=c, group_name=n)
                write_keys(fc, fr, loc[:, c] if loc is not None else np.zeros(len(fr)))
            write_keys(bag.fcurves.new(f'pose.bones["{n}"].scale', index=c, group_name=n), fr, np.ones(len(fr)))


def _swing_rises(motion, ratio):
    """{side: (F,) how high that foot's ankle should rise over where it stands}: the source's over its stances,
    times ``ratio`` (the swing's height scales with the hips'), for the feet that touch."""
    rise = {}
    for k, (f, cols) in enumerate(zip(motion.sampler.feet, motion.sampler.cols)):
        touching = motion.contacts[:, cols].any(axis=1)
        if touching.any():
            rise[f.side] = ratio * rise_over_stances(motion.ankles[:, k, 2], touching)
    return rise


def _check_inputs(source, target, options):
    """A RigError for what no retarget can take: an unknown root mode, a source or target that is no armature or
    is linked from a library (read-only), a source with no action."""
    if options.root not in ROOT_MODES:
        raise RigError(f"root must be one of {', '.join(ROOT_MODES)}, not {options.root!r}")
    for obj, what in ((source, "source"), (target, "target")):
        if obj is None or obj.type != "ARMATURE":
            raise RigError(f"the {what} is not an armature")
        if obj.library is not None or obj.data.library is not None:
            raise RigError(f"the {what} {obj.name!r} is linked from a library (read-only): make it local first")
    ad = source.animation_data
    if ad is None or ad.action is None:
        raise RigError(f"the source {source.name!r} has no action to retarget")


def _mapped(source, target, options):
    """(source's, character's) humanoid maps: given (options), kept on the armature, else found; the character's
    feet given by hand (options.feet) replace its mapped ones."""
    hs = map_humanoid(source, options.source_roles or stored_roles(source))
    ht = map_humanoid(target, options.target_roles or stored_roles(target))
    if options.feet:
        for foot in find_feet(target, options.feet):
            ht.roles[f"{foot.side} foot"] = foot.ankle
            ht.roles.pop(f"{foot.side} toe", None)
            if foot.ball:
                ht.roles[f"{foot.side} toe"] = foot.ball
    return hs, ht


def _bases(target, T, order, world, Rw_t, beside, pname, F):
    """({bone: pose (F, 4, 4)}, {bone: X}, {bone: basis B}) of the character's keyed bones (``order``: parents
    first), from the root down, every frame at once: X is a bone's pose with no basis of its own (its parent's
    pose carried to it), B its basis turning it to the world rotation wanted (``world`` {bone: (F, 3, 3)}; a bone
    with none keeps its rest); the heads of thighs hanging from a root beside the pelvis (``beside``) where the
    pelvis carries them."""
    rest_t = T.rest
    pose, X_of, basis = {}, {}, {}
    for name in order:
        b = target.data.bones[name]
        k = T.index[name]
        X = pose[b.parent.name] @ (np.linalg.inv(rest_t[T.index[b.parent.name]]) @ rest_t[k]) if b.parent else \
            np.broadcast_to(rest_t[k], (F, 4, 4)).copy()
        B = np.broadcast_to(np.eye(4), (F, 4, 4)).copy()
        if name in world:
            Xr = X[:, :3, :3] / np.linalg.norm(X[:, :3, :3], axis=1, keepdims=True)
            B[:, :3, :3] = np.swapaxes(Xr, 1, 2) @ (Rw_t.T @ world[name])  # armature space
        basis[name], X_of[name], pose[name] = B, X, X @ B
        if name in beside:
            head = np.linalg.inv(rest_t[T.index[pname]]) @ np.append(rest_t[k][:3, 3], 1.0)  # in the pelvis's rest
            pose[name] = pose[name].copy()
            pose[name][:, :3, 3] = (pose[pname] @ head)[:, :3]
    return pose, X_of, basis


def _plant(scene, motion, target, ht, action, slot, frames, options, pelvis_world, progress, held=None,
           swing_rise=None):
    """The source's contacts (detected, or its contact channels) keyed on the target's new action, then planted
    by the foot placement on the terrain given, or on the target's floor (a plane made for it and removed);
    the rotation copy is replaced by the planted action, which takes its name."""
    import bpy

    from .contacts import write_contacts
    from .foot_report import FEET_REPORT_PROPERTY
    from .footplant import FootOptions, foot_placement
    from .soles import SoleSampler, untouched_feet

    src_feet, tgt_feet = motion.sampler.feet, humanoid_feet(target, ht)
    sampler = SoleSampler(target, tgt_feet)
    where = motion.sampler.column
    contacts = np.zeros((len(frames), len(sampler.specs)), dtype=bool)
    for j, (k, name, _, _) in enumerate(sampler.specs):
        contacts[:, j] = motion.contacts[:, where[(tgt_feet[k].side, name)]]
    missed = untouched_feet(motion)  # no channel: the target's run detects them again, and fails if it misses too
    write_contacts(target, action, slot, sampler, frames, contacts, missed)
    made = None
    names = list(options.terrain)
    if not names:  # the target's floor: its soles' rest height, under the whole travel and around it
        W = np.array(target.matrix_world) @ standing_turn(target)  # (a rest lying down: stood up)
        z = min(float((W @ np.append(p.rest, 1.0))[2]) for f in tgt_feet for p in f.points)
        heads = np.array([W @ np.append(np.array(b.head_local), 1.0) for b in target.data.bones])[:, 2]
        margin = 3.0 * max(float(np.ptp(heads)), 1e-3)  # three of the character's heights, in any unit
        lo, hi = pelvis_world[:, :2].min(axis=0) - margin, pelvis_world[:, :2].max(axis=0) + margin
        mesh = bpy.data.meshes.new("fbik floor")
        mesh.from_pydata([(lo[0], lo[1], z), (hi[0], lo[1], z), (hi[0], hi[1], z), (lo[0], hi[1], z)], [],
                         [(0, 1, 2, 3)])
        made = bpy.data.objects.new("fbik floor", mesh)
        scene.collection.objects.link(made)
        bpy.context.view_layer.update()
        names = [made.name]
    try:
        feet = foot_placement(scene, target, FootOptions(frames[0], frames[-1], names, feet=feet_spec(ht),
                                                         max_error=options.max_error,
                                                         time_limit=options.time_limit, held=held or {},
                                                         on_floor=True, independent=options.independent,
                                                         workers=options.workers,
                                                         swing_rise=swing_rise or {},
                                                         detected_contacts=tuple(
                                                             src_feet[k].side for k in motion.detected_feet)),
                             progress=(lambda p: progress(0.2 + 0.8 * p)) if progress else None)
    finally:
        if made is not None:
            mesh = made.data
            bpy.data.objects.remove(made)
            bpy.data.meshes.remove(mesh)
    planted = target.animation_data.action
    name, first_name = action.name, planted.name
    bpy.data.actions.remove(action)  # the rotation copy: its figures are the report's "before"
    planted.name = name
    # The reports kept on the action name it as it is now (they named the planted copy's first name, "... IK", and
    # the rotation copy as its kept source: it is gone, its name now the planted action's)
    feet.action, feet.source_action = planted.name, ""
    feet.bake.update(action=planted.name, source_action="")
    planted[FEET_REPORT_PROPERTY] = json.dumps(feet.to_dict())
    if REPORT_PROPERTY in planted:
        planted[REPORT_PROPERTY] = json.dumps(dict(json.loads(planted[REPORT_PROPERTY]), action=planted.name,
                                                   source_action=""))
    text = bpy.data.texts.get(REPORT_TEXT)  # (the bake's text, as BakeReport.text wrote it)
    if text is not None:
        text.from_string(text.as_string().replace(f"action: {first_name!r} (from {name!r}, kept)",
                                                  f"action: {planted.name!r}"))
    return feet
