# SPDX-License-Identifier: GPL-3.0-or-later
"""Feet of a skeleton, found from bone names and hierarchy, and their sole points from the rest pose.

A foot is an ankle bone (its head is the ankle), the bone after it toward the toes (the ball: its head is the
ball of the foot, its tail the toe tip; absent on some rigs) and three sole points fixed to those bones:
heel, ball and toe tip, on the sole: the underside of the skin that follows the foot in the rest pose, where the
character stands on its floor (the lowest of ball and toe tip on a skeleton without skin).

Names seen on common skeletons: CMU BVH ``LeftFoot``/``LeftToeBase``, Rigify ``foot.L``/``toe.L`` (and
``DEF-``/``ORG-`` copies), Unreal-like ``foot.l``/``ball.l``, ``Foot.L``, Mixamo
``mixamorig:LeftFoot``/``mixamorig:LeftToeBase``, the BVH ``LeftAnkle``/``LeftToes`` convention.
"""

import copy
import re
from dataclasses import dataclass

import numpy as np

from ..solvers.rotations import turn_between, unit
from .armature import RigError
from .reading import remembered
from .skin import skin_points
from .structure import StructureError, find_legs, find_structure
from .structure import side_of as _side

FOOT_WORDS = ("foot", "ankle")
BALL_WORDS = ("toe", "ball")
NOT_A_FOOT = ("ik", "pole", "target", "roll", "heel", "mch", "ctrl", "control", "twist", "end", "tweak", "vis",
              "socket", "ctr", "fk", "parent", "pivot", "spin", "rot")
PREFERRED_PREFIX = ("def-", "", "org-")  # deform bones first: they are what the mesh follows


@dataclass
class SolePoint:
    name: str  # "heel", "ball", "toe"
    bone: str
    offset: np.ndarray  # in the bone's frame (its head at 0, Y along the bone)
    rest: np.ndarray  # armature-space position in the rest pose


@dataclass
class Foot:
    side: str  # "left" / "right"
    ankle: str
    ball: str  # "" when the rig has no toe bone
    points: list  # SolePoint: heel, ball, toe
    shin: str = ""  # the leg's last bone when it is not the foot's parent (a foot parented to the root): it follows
    half_width: float = 0.0  # the sole's half width where widest, from the skin (0: guessed from its length)

    @property
    def label(self):
        return f"{self.side} foot ({self.ankle})"


def _words(name):
    n = name.lower()
    n = n.split(":")[-1]  # mixamorig:LeftFoot
    return n


def _is_candidate(name, words):
    n = _words(name)
    if not any(w in n for w in words):
        return False
    core = re.sub(r"^(def|org)[-_.]", "", n)
    return not any(re.search(rf"(^|[^a-z]){bad}([^a-z]|$)", core) or core.startswith(bad) for bad in NOT_A_FOOT) \
        and "_end" not in n and not n.endswith("end")


def _rank(name):
    n = name.lower()
    for k, p in enumerate(PREFERRED_PREFIX):
        if p and n.startswith(p):
            return k
    return 1


def candidates(obj):
    """Bones whose names look like feet, for messages."""
    return [b.name for b in obj.data.bones if _is_candidate(b.name, FOOT_WORDS)]


def _ball_of(bone):
    kids = [c for c in bone.children if _is_candidate(c.name, BALL_WORDS)]
    if not kids:
        kids = [c for c in bone.children if "toe" in c.name.lower() or "ball" in c.name.lower()]
        kids = [c for c in kids if "end" not in c.name.lower()]
    return min(kids, key=lambda c: _rank(c.name)) if kids else None


LYING = np.cos(np.radians(45.0))  # a rest pose whose legs rise less than this along the world's up lies down


def up_vector(obj):
    """The skeleton's up in the armature's space: the world's (+Z; BVH and FBX imports often turn the armature
    object), or where the rest pose lies down (a glTF whose rest lies along -Y and whose root's pose stands it up:
    Khronos' BrainStem), the way its legs rise, hips over ankles."""
    return remembered(("up", obj.as_pointer()), lambda: _up_vector(obj))


def _world_up(obj):
    """The world's up (+Z) in the armature's space, unit."""
    return unit(np.linalg.solve(np.array(obj.matrix_world)[:3, :3], np.array([0.0, 0.0, 1.0])))


def _up_vector(obj):
    up = _world_up(obj)
    heads = np.array([b.head_local for b in obj.data.bones]).reshape(-1, 3)
    if np.ptp(heads @ up) >= 0.5 * np.ptp(heads, axis=0).max():  # as tall as it is wide or long: it stands
        return up
    try:  # the whole body's structure (its rest's, else its pose's), which a lying rest cannot fool as legs alone
        roles, _, _ = find_structure(obj)
    except StructureError:
        return up
    bones = obj.data.bones
    ankle = lambda s: np.array(bones[roles[f"{s} foot"]].head_local) if f"{s} foot" in roles else \
        np.array(bones[roles[f"{s} shin"]].tail_local)  # noqa: E731 (a tail is a guess: the foot's head first)
    rise = [np.array(bones[roles[f"{s} thigh"]].head_local) - ankle(s)
            for s in ("left", "right") if f"{s} thigh" in roles and f"{s} shin" in roles]
    if not rise:
        return up
    legs_up = unit(np.mean([unit(r) for r in rise], axis=0))
    if legs_up @ up >= LYING:
        return up
    return on_an_axis(legs_up)


def on_an_axis(v, within=np.cos(np.radians(10.0))):
    """Unit ``v``, or the axis (+-X, Y, Z) it is within 10 degrees of: a rest that lies down lies along an axis
    (an exporter's Y-up turned), while legs lean a few degrees in a rest that stands (their rise taken for up
    would tilt the soles)."""
    k = int(np.argmax(np.abs(v)))
    if abs(v[k]) < within:
        return v
    out = np.zeros(3)
    out[k] = np.sign(v[k])
    return out


def standing_turn(obj):
    """(4, 4) armature-space turn about the armature's origin that stands its rest pose up: its up (up_vector)
    onto the world's, the least turn (the identity for a rest that stands)."""
    out = np.eye(4)
    out[:3, :3] = turn_between(up_vector(obj), _world_up(obj))
    return out


def _foot(obj, side, ankle_name, ball_name=None):
    bones = obj.data.bones
    if ankle_name not in bones:
        raise RigError(f"no bone named {ankle_name!r} in {obj.name!r} for the {side} foot")
    ankle = bones[ankle_name]
    if ball_name:
        if ball_name not in bones:
            raise RigError(f"no bone named {ball_name!r} in {obj.name!r} for the {side} foot's toes")
        ball = bones[ball_name]
    else:
        ball = _ball_of(ankle)
    up = up_vector(obj)
    flat = lambda v: v - (v @ up) * up  # noqa: E731 (the horizontal part of a vector)
    head = np.array(ankle.head_local)
    ball_pt = np.array(ball.head_local) if ball is not None else np.array(ankle.tail_local)
    forward = flat(ball_pt - head)
    length = np.linalg.norm(forward)
    short = 0.06 * _height(obj, up)  # a foot bone shorter than this has no length of its own
    skin = _foot_skin(obj, ankle, ball, max(length, short))
    if ball is None and length < short:  # a foot bone with no toe and no length of its own (a
        # game rig's): its sole is read from the skin that follows it
        sole_pts = _skin_sole(skin, ankle, up)
        if sole_pts is not None:
            return _sole_foot(obj, side, ankle, *sole_pts)
    if length < 1e-9:
        raise RigError(f"the {side} foot {ankle_name!r}: its ball is straight below the ankle (no forward direction)")
    forward /= length
    toe_pt = None
    if ball is not None:  # the tip: the toe's farthest joint after it (an exporter's end bone), else its tail when
        # that points forward and is not far longer than the foot (glTF leaf bones point anywhere, metres away)
        ends = [np.array(c.head_local) for c in ball.children_recursive]
        d = max((e - ball_pt for e in ends), key=np.linalg.norm) if ends else np.array(ball.tail_local) - ball_pt
        if d @ forward > 0.7 * np.linalg.norm(d) and 0.1 * length < np.linalg.norm(d) < 2.0 * length:
            toe_pt = ball_pt + d
    if toe_pt is None:
        toe_pt = ball_pt + forward * length * 0.35
    sole = min(ball_pt @ up, toe_pt @ up)  # the sole's height: the lowest of ball and toe tip in the rest pose,
    heel_pt, half_width = head - 0.2 * length * forward, 0.0  # the heel a fifth of the foot behind the ankle
    if skin is not None:  # or, where the character has skin, the underside of the skin that follows the foot
        # (bones run inside it, 1-4 cm up) and its reach: a skinned foot may be twice its bones' length
        low, sole = _sole_band(skin, head, up)
        back, front, half_width = _footprint(low, head, forward, up)
        if ball is None:  # the ball where a foot bends, 72 % of the way to the toe tip (the bone may overreach)
            ball_pt = head + (back + 0.72 * (front - back)) * forward
        if back < 0.0:
            heel_pt = head + back * forward
        ball_at = float((ball_pt - head) @ forward)
        toe_pt = head + max(front, ball_at + 0.1 * (ball_at - back)) * forward
    on_sole = lambda p: p + (sole - p @ up) * up  # noqa: E731
    heel_pt = on_sole(heel_pt)
    points = []
    # Heel and ball on the foot bone (the ball's sides too: the metatarsal heads are the foot's, not the toes'):
    # the foot bone is then held whole by its sole points, its roll included; the toe tip on the toe bone.
    for name, p, bone in (("heel", heel_pt, ankle), ("ball", on_sole(ball_pt), ankle),
                          ("toe", on_sole(toe_pt), ball or ankle)):
        M = np.array(bone.matrix_local)
        points.append(SolePoint(name, bone.name, (np.linalg.inv(M) @ np.append(p, 1.0))[:3], p))
    return Foot(side, ankle.name, ball.name if ball is not None else "", points, _detached_leg(obj, ankle, length),
                half_width)


def _height(obj, up):
    """The skeleton's height along ``up`` (its joints), armature space."""
    h = [np.array(b.head_local) @ up for b in obj.data.bones]
    return max(h) - min(h) if h else 0.0


def _foot_skin(obj, ankle, ball, foot_length):
    """The rest points (armature space) of the skin that follows a foot: its bones' (the ankle, the toes and what
    hangs from them), else, on a character whose shoes follow the shin, the shin's; None without skin."""
    skin = skin_points(obj, [ankle, *([ball, *ball.children_recursive] if ball is not None else [])])
    if skin is None:
        shin = _detached_leg(obj, ankle, foot_length) or (ankle.parent.name if ankle.parent else "")
        skin = skin_points(obj, obj.data.bones[shin]) if shin else None
    return skin


def _sole_band(pts, head, up):
    """The lowest part of a foot's skin ``pts``: within a quarter of the ankle's height over its underside."""
    h = pts @ up
    sole = float(h.min())
    return pts[h <= sole + 0.25 * max(float(head @ up) - sole, 1e-9)], sole


def _footprint(low, head, forward, up):
    """(back, front, half width) of a sole band ``low`` (_sole_band): how far it reaches behind (negative) and
    ahead of the ankle ``head`` along ``forward``, and half its width across (where the foot is widest: the
    ball's)."""
    along, across = (low - head) @ forward, (low - head) @ np.cross(forward, up)
    return float(along.min()), float(along.max()), float(np.ptp(across) / 2)


def _skin_sole(pts, ankle, up):
    """((heel, ball, toe) armature-space points, half width) of a foot read from its skin ``pts``: its lowest part,
    along its longest horizontal extent, forward where it reaches furthest from the ankle; or None without such
    skin."""
    if pts is None:
        return None
    head = np.array(ankle.head_local)
    low, sole = _sole_band(pts, head, up)
    flat = (low - head) - np.outer((low - head) @ up, up)
    _, _, vt = np.linalg.svd(flat - flat.mean(axis=0), full_matrices=False)
    axis = vt[0] - (vt[0] @ up) * up
    axis /= max(np.linalg.norm(axis), 1e-12)
    along = flat @ axis
    if -along.min() > along.max():
        axis = -axis
    back, front, half_width = _footprint(low, head, axis, up)
    if front - back < 1e-9:
        return None
    on_sole = lambda p: p + (sole - p @ up) * up  # noqa: E731
    heel, toe = on_sole(head + back * axis), on_sole(head + front * axis)
    return (heel, heel + 0.72 * (toe - heel), toe), half_width


def _sole_foot(obj, side, ankle, points, half_width):
    out = []
    for name, p in zip(("heel", "ball", "toe"), points):
        M = np.array(ankle.matrix_local)
        out.append(SolePoint(name, ankle.name, (np.linalg.inv(M) @ np.append(p, 1.0))[:3], p))
    return Foot(side, ankle.name, "", out, _detached_leg(obj, ankle, float(np.linalg.norm(points[2] - points[0]))),
                half_width)


def _detached_leg(obj, ankle, foot_length):
    """The leg's last bone when it is not one of the ankle's ancestors: the leg of a foot that is parented to the
    root (game rigs exported with IK, their constraints lost), which must follow the foot; "" when the foot hangs
    from its leg. Read from the skeleton's structure (its legs' joints), else the bone whose tail is at the ankle."""
    ancestors = {b.name for b in ankle.parent_recursive}
    try:  # the skeleton's own legs (joints, not tails: an importer's bones may be specks, the Knight's glTF)
        legs = find_legs(obj).values()
    except StructureError:
        legs = ()
    for leg in legs:
        if leg.get("foot") == ankle.name and leg.get("shin"):
            return "" if leg["shin"] in ancestors else leg["shin"]
    head = np.array(ankle.head_local)
    near = lambda b: np.linalg.norm(np.array(b.tail_local) - head) < 0.25 * foot_length  # noqa: E731
    if any(near(b) for b in ankle.parent_recursive):
        return ""
    skip = {ankle.name} | {b.name for b in ankle.children_recursive}
    legs = [b for b in obj.data.bones if b.name not in skip and near(b) and b.parent is not None]
    if not legs:
        return ""
    return min(legs, key=lambda b: np.linalg.norm(np.array(b.tail_local) - head)).name


def _split_foot(obj, part):
    """(ankle, ball or None) from "ANKLE:BALL" or "ANKLE", where names may hold colons themselves (Mixamo's
    ``mixamorig:LeftFoot``): the split whose two sides are bones of the armature."""
    bones = obj.data.bones
    if part in bones:
        return part, None
    splits = [i for i, ch in enumerate(part) if ch == ":"]
    for i in splits:
        if part[:i].strip() in bones and part[i + 1:].strip() in bones:
            return part[:i].strip(), part[i + 1:].strip()
    for i in splits:  # an ankle that is a bone, a ball that is not: the message names the ball
        if part[:i].strip() in bones:
            return part[:i].strip(), part[i + 1:].strip() or None
    return part, None  # the message names the whole


def best_per_side(obj, words, key):
    """{side: bone} of the bones named with one of ``words`` and a side, the one of least ``key(bone)`` per side."""
    found = {}
    for bone in obj.data.bones:
        side = _side(bone.name) if _is_candidate(bone.name, words) else None
        if side is None:
            continue
        k = key(bone)
        if side not in found or k < found[side][0]:
            found[side] = (k, bone)
    return {side: bone for side, (_, bone) in found.items()}


def find_feet(obj, spec=None):
    """[left Foot, right Foot] of an armature. ``spec``: "ANKLE:BALL,ANKLE:BALL" (or ANKLE alone) given by
    hand; otherwise found from names and hierarchy. A RigError lists the candidates when they cannot be found.
    Read once a job (reading.one_job); each call returns feet of its own (a caller may change them)."""
    return copy.deepcopy(remembered(("feet", obj.as_pointer(), spec), lambda: _find_feet(obj, spec)))


def _find_feet(obj, spec):
    if spec:
        feet = []
        for k, part in enumerate(p.strip() for p in spec.split(",") if p.strip()):
            ankle, ball = _split_foot(obj, part)
            feet.append(_foot(obj, _side(ankle) or ("left", "right")[k % 2], ankle, ball))
        if len(feet) != 2 or {f.side for f in feet} != {"left", "right"} or feet[0].ankle == feet[1].ankle:
            raise RigError(f"--feet {spec!r}: give the two feet, a left and a right one, as ANKLE:BALL,ANKLE:BALL "
                           "(sides are read from the names, else the first is the left)")
        return feet
    try:  # the skeleton's structure first: any naming, feet hanging from the root included
        legs = find_legs(obj)
    except StructureError:
        legs = None
    if legs and all(legs[s]["foot"] for s in ("left", "right")):
        return [_foot(obj, s, legs[s]["foot"], legs[s]["toe"]) for s in ("left", "right")]
    # Names: deform bones first, then bones with a toe child, then the ones lower in the hierarchy (the leg's).
    found = best_per_side(obj, FOOT_WORDS,
                          lambda bone: (_rank(bone.name), _ball_of(bone) is None, -len(bone.parent_recursive)))
    if set(found) != {"left", "right"}:
        listed = ", ".join(repr(n) for n in candidates(obj)[:12]) or "none"
        missing = " and ".join(s for s in ("left", "right") if s not in found)
        raise RigError(f"the {missing} foot of {obj.name!r} could not be found from bone names (candidates: "
                       f"{listed}): give them by hand, e.g. --feet LeftFoot:LeftToeBase,RightFoot:RightToeBase")
    return [_foot(obj, side, found[side].name) for side in ("left", "right")]
