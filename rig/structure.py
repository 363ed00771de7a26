# SPDX-License-Identifier: GPL-3.0-or-later
"""A humanoid's limbs found from its skeleton's structure: the hierarchy and the rest pose's joints in world space
(the world's +Z up), names only as a hint. Works on any naming, names without a side marker included.

- The **pelvis** is the bone nearest the leaves from which two subtrees descend to the floor (the legs), each
  spanning most of the pelvis's height; a foot that hangs from the root, a control bone or the pelvis itself
  (its head at a leg's ankle) is that leg's foot.
- In a **leg** (its main path: toward the floor, the longest branch) the hip is where the path starts to descend
  steeply, the ankle the first joint after which the path reaches further forward than down (a foot), or its end;
  the knee the joint between them at mid-height. A leg whose path ends at the ankle takes the bone whose head is
  there as its foot, wherever it hangs.
- The character's **left** is up x forward, forward the way its toes point (names, then Blender's -Y, when the
  feet do not say); sides never come from names alone.
- The **chest** is where the two arms (the subtrees above the pelvis reaching furthest to each side) meet; the
  **spine** runs from the pelvis to it, the **neck and head** above it along the central path to the top.
- In an **arm** (its main path: the branch reaching furthest out) the hand is the bone its fingers branch from
  (or named so), the upper arm and forearm the two longest consecutive segments before it (a rig's twist
  segments, named ``.001`` or ``twist``, count with the bone they split); a bone before the upper arm is the
  shoulder. An arm with no hand (a robot's) ends at its forearm.

``find_structure(obj)`` returns ``(roles, spine, notes)`` or raises ``StructureError`` naming the bones looked at
and why each was not taken.
"""

import functools
import re

import numpy as np

SIDES = ("left", "right")
SEGMENT_SUFFIX = re.compile(r"([._\-]\d{2,3}|[._\-]?(twist|roll|share|part|tw)\w*)$", re.I)
NOT_LIMB = re.compile(r"(^|[^a-z])(ik|mch|vis|socket|helper|prop|weapon)([^a-z]|$)|(?-i:[a-z]IK(?![a-z]))|pole|target"
                      r"|ctrl|control", re.I)  # (footIK.L, handIK_R: camel case)
FACE = re.compile(r"face|jaw|eye|nose|lip|teeth|tongue|brow|cheek|ear|forehead|chin|temple|lid|hair", re.I)
END = re.compile(r"([_.\s\-](end|nub|tip)|(?-i:[a-z0-9](End|Nub))|end_?site)$", re.I)  # exporters' leaf markers (not lShldrBend)
TOE_NAME = re.compile(r"toe|ball", re.I)
FOOT_NAME = re.compile(r"foot|ankle", re.I)
HEEL_NAME = re.compile(r"heel", re.I)
HEAD_NAME = re.compile(r"head", re.I)
HEAD_NOT = re.compile(r"end|top|nub|tip|site|null", re.I)
HAND_NAME = re.compile(r"hand|wrist|palm", re.I)
FOREARM_NAME = re.compile(r"fore.?arm|lower.?arm|arm.?lower|elbow", re.I)
FINGER_NAME = re.compile(r"finger|thumb|index|middle|ring|pinky|little|f_|digit|carpal", re.I)


class StructureError(ValueError):
    """The skeleton is not a humanoid this can read; the message says what was looked at and why."""


class _Skeleton:
    """Bones with their world-space rest joints (heads, tails), parents and children, and the body's size."""

    def __init__(self, obj, deform_only=False, posed=False):
        W = np.array(obj.matrix_world)
        keep = lambda b: not (END.search(b.name) and not b.children) and not NOT_LIMB.search(b.name) \
            and (b.use_deform or not deform_only)  # noqa: E731 (no exporter's end bones, no controls)
        self.bones = [b for b in obj.data.bones if keep(b)]
        self.index = {b.name: i for i, b in enumerate(self.bones)}
        to_world = lambda p: (W @ np.append(np.array(p), 1.0))[:3]  # noqa: E731
        if posed:  # the pose shown now (a clip whose rest pose lies down, Bandai Namco's, stands in its frames)
            pb = obj.pose.bones
            self.head = np.array([to_world(pb[b.name].head) for b in self.bones]).reshape(-1, 3)
            self.tail = np.array([to_world(pb[b.name].tail) for b in self.bones]).reshape(-1, 3)
        else:
            self.head = np.array([to_world(b.head_local) for b in self.bones]).reshape(-1, 3)
            self.tail = np.array([to_world(b.tail_local) for b in self.bones]).reshape(-1, 3)
        self._at = {}  # a kept bone by its place (head, tail): what a generated rig's ORG/MCH bone stands for
        for i, b in enumerate(self.bones):
            self._at.setdefault(self._place(b), i)
        self.parent = [self._kept_parent(b) for b in self.bones]
        # Heads only: they are the file's joints; tails are an importer's guess (glTF, FBX) where no child is.
        heads = self.head if self.bones else np.zeros((1, 3))
        self.floor, self.top = float(heads[:, 2].min()), float(heads[:, 2].max())
        self.height = max(self.top - self.floor, 1e-9)
        self._hang_feet()
        self.children = [[] for _ in self.bones]
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.children[p].append(i)
        self.deform = [b.use_deform for b in self.bones]
        n = len(self.bones)
        self.below = [[] for _ in range(n)]  # each bone's subtree (itself included)
        for i in self._post_order():
            self.below[i] = [i] + [j for c in self.children[i] for j in self.below[c]]
        leaf_ends = np.array([self.tail[i, 2] if not c else np.inf for i, c in enumerate(self.children)])
        self.low = [float(min(self.head[s, 2].min(), leaf_ends[s].min())) for s in self.below]  # (a leg with no
        # foot ends at its shin's tail)
        self.high = [float(self.head[s, 2].max()) for s in self.below]
        self.end = [self.head[max(c, key=lambda k: len(self.below[k]))] if c else self.tail[i]
                    for i, c in enumerate(self.children)]  # a bone's far joint: its main child's head

    def _hang_feet(self):
        """A foot hanging from the root or a control bone (a game rig's leg IK lost on export) is read as hanging
        from its leg: the leaf bone straight above it (a shin ending there), when there is one."""
        is_leaf = [True] * len(self.bones)
        for p in self.parent:
            if p >= 0:
                is_leaf[p] = False
        size = [0] * len(self.bones)
        drop, reach = np.zeros(len(self.bones)), np.zeros(len(self.bones))  # how far each bone's subtree goes
        for f in range(len(self.bones)):  # down and along the ground from its head
            b = f
            while b >= 0:
                size[b] += 1
                drop[b] = max(drop[b], self.head[b, 2] - self.head[f, 2])
                reach[b] = max(reach[b], float(np.linalg.norm(self.head[f, :2] - self.head[b, :2])))
                b = self.parent[b]
        for f, p in enumerate(self.parent):
            low = self.head[f, 2] - self.floor < 0.2 * self.height and size[f] <= 6 and \
                (drop[f] < 0.1 * self.height or drop[f] < reach[f])  # (a foot and its toes, not a whole leg)
            rootish = p < 0 or self.parent[p] < 0 or NOT_LIMB.search(self.name(p))
            if not (low and rootish) or NOT_LIMB.search(self.name(f)):
                continue
            up = self.head[:, 2] - self.head[f, 2]
            side = np.linalg.norm((self.head - self.head[f])[:, :2], axis=1)
            legs = [k for k in range(len(self.bones)) if is_leaf[k] and k != f and 0.02 * self.height < up[k]
                    < 0.5 * self.height and side[k] < 0.35 * up[k] and not NOT_LIMB.search(self.name(k))
                    and not self._above(f, k)]  # (a shin's head, its knee, is in the body's lower half; a shin may
            # take two such bones: a foot and its IK control both left on the root)
            if legs:
                self.parent[f] = min(legs, key=lambda k: up[k] + side[k])

    def _above(self, a, b):
        """Whether bone ``a`` is an ancestor of bone ``b``."""
        while b >= 0:
            b = self.parent[b]
            if b == a:
                return True
        return False

    @staticmethod
    def _place(bone):
        return tuple(np.round(np.r_[np.array(bone.head_local), np.array(bone.tail_local)], 4))

    def _kept_parent(self, bone):
        """The nearest ancestor that is kept, or that a kept bone stands in for (at its place: a generated rig's
        deform bones hang from the ORG bones they copy), or -1."""
        p = bone.parent
        while p is not None:
            if p.name in self.index:
                return self.index[p.name]
            twin = self._at.get(self._place(p))
            if twin is not None and self.bones[twin].name != bone.name:
                return twin
            p = p.parent
        return -1

    def _post_order(self):
        out, stack = [], [(i, False) for i, p in enumerate(self.parent) if p < 0]
        while stack:
            i, done = stack.pop()
            if done:
                out.append(i)
                continue
            stack.append((i, True))
            stack.extend((c, False) for c in self.children[i])
        return out

    def name(self, i):
        return self.bones[i].name

    def depth(self, i):
        d = 0
        while self.parent[i] >= 0:
            i, d = self.parent[i], d + 1
        return d


def _pelvis(sk):
    """(pelvis, [two leg subtree roots]): the deepest bone with two child subtrees that each reach the floor and
    span most of its height; None when there is none."""
    best = None
    for i in range(len(sk.bones)):
        z = float(sk.head[i, 2]) - sk.floor
        if z < 0.08 * sk.height:  # (a chibi's legs may be a tenth of it)
            continue
        legs = [c for c in sk.children[i] if sk.low[c] - sk.floor <= 0.1 * sk.height and sk.high[c] - sk.low[c] >= 0.5 * z
                and not FACE.search(sk.name(c))]
        if len(legs) < 2:
            continue
        legs.sort(key=lambda c: -(sk.high[c] - sk.low[c]))  # the longest spans: legs, not feet hanging from it
        if best is None or sk.depth(i) > sk.depth(best[0]):
            best = (i, legs[:2])
    return best or _pelvis_beside_legs(sk)


def _pelvis_beside_legs(sk):
    """(pelvis, [two leg subtree roots]) of a rig whose legs hang from a root on the floor beside its hips (a game
    rig's, Quaternius' platformer characters'): that root's child carrying the body up from about the legs' tops.
    None when there is none."""
    for i in range(len(sk.bones)):
        kids = [c for c in sk.children[i] if not FACE.search(sk.name(c))]
        legs = [c for c in kids if sk.low[c] - sk.floor <= 0.1 * sk.height and sk.head[c, 2] - sk.floor >= 0.08 *
                sk.height and sk.high[c] - sk.low[c] >= 0.5 * (sk.head[c, 2] - sk.floor)]
        if len(legs) < 2:
            continue
        legs = sorted(legs, key=lambda c: -(sk.high[c] - sk.low[c]))[:2]
        top = float(np.mean(sk.head[legs, 2])) - sk.floor  # the legs' tops over the floor
        body = [c for c in kids if c not in legs and sk.high[c] - sk.floor > 1.5 * top
                and abs(sk.head[c, 2] - sk.floor - top) < 0.5 * top]
        if body:
            return max(body, key=lambda c: len(sk.below[c])), legs
    return None


def _main_path(sk, start, key):
    """Bones from ``start`` to a leaf, each step to the child of greatest ``key(child)``."""
    path = [start]
    while sk.children[path[-1]]:
        path.append(max(sk.children[path[-1]], key=key))
    return path


def _joints(sk, path):
    return np.vstack([sk.head[path], sk.end[path[-1]][None]])


def _leg(sk, top, pelvis):
    """{"thigh", "shin", "foot", "toe"} bone indices of the leg below ``top`` (foot and toe may be None), the
    ankle point, and why not when the path does not look like a leg."""
    reach_floor = lambda c: (sk.low[c] - sk.floor <= 0.1 * sk.height, len(sk.below[c]), -sk.low[c])  # noqa: E731
    path = _main_path(sk, top, reach_floor)
    J = _joints(sk, path)
    seg = J[1:] - J[:-1]
    unit = seg / np.maximum(np.linalg.norm(seg, axis=1, keepdims=True), 1e-12)

    def straight_length(i):  # the bone and those that continue it in a straight line (twist segments)
        n, k = float(np.linalg.norm(seg[i])), i
        while k + 1 < len(seg) and unit[k] @ unit[k + 1] > 0.98:
            k += 1
            n += float(np.linalg.norm(seg[k]))
        return n

    steep = [i for i in range(len(path)) if seg[i][2] < -0.5 * np.linalg.norm(seg[i])
             and straight_length(i) > 0.2 * (J[i, 2] - sk.floor)]  # (not a hip joint's short offset)
    if not steep:
        return None, f"{sk.name(top)!r}: no bone below it descends"
    hip = steep[0]
    ankle = len(path)  # the path's end (its last bone's tail) unless a foot follows
    leg_height = J[hip, 2] - sk.floor
    steepness = lambda d: float(-d[2] / max(np.linalg.norm(d), 1e-12))  # noqa: E731 (1: straight down)
    low = [a for a in range(hip + 2, len(path)) if J[a, 2] - sk.floor < 0.45 * leg_height]
    named = [a for a in low if FOOT_NAME.search(sk.name(path[a])) and not TOE_NAME.search(sk.name(path[a]))]
    for a in named[:1] or low:  # a bone named foot or ankle low in the leg (a digitigrade leg's too), else the
        # first joint where the leg turns forward: the foot's farthest joint is reached less steeply than the
        # joint was, or further forward than down (a heeled shoe drops more)
        rest = sk.head[sk.below[path[a]]]  # (the whole foot, whichever branch the path took: toe, heel)
        far = rest[np.argmax(np.linalg.norm((rest - J[a])[:, :2], axis=1))] - J[a]
        drop = float(J[a, 2] - rest[:, 2].min())
        turned = len(rest) > 1 and steepness(far) < steepness(J[a] - J[a - 1]) - 0.05
        if named or turned or (len(rest) > 1 and np.linalg.norm(far[:2]) >= 0.6 * drop) or \
                (len(rest) == 1 and J[a, 2] - sk.floor < 0.25 * leg_height):  # (a leaf foot: its head is all)
            ankle = a
            break
    between = list(range(hip + 1, ankle))
    if not between:
        return None, f"{sk.name(path[hip])!r}: one bone from hip to ankle (no knee)"
    mid = 0.5 * (J[hip, 2] + J[ankle, 2])
    knee = min(between, key=lambda k: abs(J[k, 2] - mid))
    leg = {"thigh": path[hip], "shin": path[knee], "foot": path[ankle] if ankle < len(path) else None, "toe": None}
    if leg["foot"] is not None:
        leg["toe"] = _toe(sk, leg["foot"])
    if leg["foot"] is None:  # the leg ends at the ankle: the foot is the bone whose head is there, wherever it hangs
        leg["foot"], leg["toe"] = _detached_foot(sk, J[ankle], set(path), J[hip, 2] - sk.floor)
    return (leg, J[ankle]), None


def _detached_foot(sk, ankle, taken, leg_height):
    near = [i for i in range(len(sk.bones)) if i not in taken
            and np.linalg.norm(sk.head[i] - ankle) < 0.08 * leg_height and sk.low[i] < ankle[2] + 1e-6
            and not NOT_LIMB.search(sk.name(i))]
    if not near:
        return None, None
    foot = min(near, key=lambda i: (not sk.deform[i], -len(sk.below[i]), np.linalg.norm(sk.head[i] - ankle)))
    return foot, _toe(sk, foot)


def _toe(sk, foot):
    """The foot's child reaching furthest from the ankle along the ground (the toes; never a heel bone: a foot with
    only a heel under it has no toe), or None."""
    kids = [c for c in sk.children[foot] if not NOT_LIMB.search(sk.name(c)) and not HEEL_NAME.search(sk.name(c))]
    reach = lambda c: float(np.linalg.norm((sk.head[c] - sk.head[foot])[:2]))  # noqa: E731
    return max(kids, key=lambda c: (bool(TOE_NAME.search(sk.name(c))), reach(c), len(sk.below[c]))) if kids else None


@functools.lru_cache(maxsize=4096)
def side_of(name):
    """'left', 'right' or None from a bone name's side marker: Left/Right, .L/_l/-L, l_, Bip01 L Foot,
    CC_Base_L_Foot, J_Bip_L_Foot, names without separators (FootL, lFoot)."""
    n = name.split(":")[-1]
    low = n.lower()
    if "left" in low:
        return "left"
    if "right" in low:
        return "right"
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", n)  # camel case: FootL -> Foot L
    tokens = [t for t in re.split(r"[._\-\s]+", spaced.lower()) if t]
    if "l" in tokens:
        return "left"
    if "r" in tokens:
        return "right"
    return None


def _left_axis(sk, legs, ankles):
    """The character's left (unit, horizontal): from its legs' names when they name a left and a right leg;
    else up x forward, forward where its toes point; else Blender's front view (facing -Y, its left +X)."""
    up = np.array([0.0, 0.0, 1.0])
    hips = sk.head[legs[0]["thigh"]] - sk.head[legs[1]["thigh"]]
    hips[2] = 0.0
    across = hips / max(np.linalg.norm(hips), 1e-12)
    hinted = [side_of(sk.name(leg["thigh"])) or side_of(sk.name(leg["shin"])) for leg in legs]
    if set(hinted) == {"left", "right"}:
        return (across if hinted[0] == "left" else -across), "the names"
    forward = np.zeros(3)
    for leg, ankle in zip(legs, ankles):
        tips = [sk.head[leg["toe"]]] if leg.get("toe") is not None else \
            [sk.end[leg["foot"]]] if leg.get("foot") is not None else []
        for tip in tips:
            d = tip - ankle
            d[2] = 0.0
            forward += d
    forward -= (forward @ across) * across  # (only its part across the hips says which way the body faces)
    if np.linalg.norm(forward) > 0.02 * sk.height:
        left = np.cross(up, forward)
        return left / np.linalg.norm(left), "the toes"
    return np.array([1.0, 0.0, 0.0]), "Blender's front view"


def _arm_tops(sk, spine_path, left, centre, taken):
    """{side: bone}: the subtree hanging from the spine path that reaches furthest to each side."""
    best = {}
    on_path = set(spine_path)
    for b in spine_path:
        for c in sk.children[b]:
            if c in on_path or c in taken:
                continue
            pts = sk.head[sk.below[c]]
            lateral = (pts - centre) @ left
            for side, reach in (("left", float(lateral.max())), ("right", float(-lateral.min()))):
                if reach > 0.15 * sk.height and (side not in best or reach > best[side][0]):
                    best[side] = (reach, c)
    return {s: c for s, (_, c) in best.items()}


def _segments(sk, path):
    """Runs of bones that make one limb segment (a bone and its ``.001``/twist continuations): [[bones]]."""
    runs = []
    for b in path:
        base = SEGMENT_SUFFIX.sub("", sk.name(b))
        if runs and base and sk.name(runs[-1][0]) == base != sk.name(b) and not HAND_NAME.search(base):
            runs[-1].append(b)  # (thigh.L, thigh.L.001; not Bone.009, .010; a hand has no twist segments: hand.L,
            # hand.L.001 are bones named as duplicated)
        else:
            runs.append([b])
    return runs


def _fingers_from(sk, bone):
    """Whether fingers branch from ``bone``: two or more branches of several bones, or three of any size, or two
    with a finger's name (a twist bone or an exporter's leaf is no branch)."""
    kids = [c for c in sk.children[bone] if not (SEGMENT_SUFFIX.search(sk.name(c)) and not sk.children[c])
            and not NOT_LIMB.search(sk.name(c))]
    return len(kids) >= 3 or (len(kids) == 2 and (all(len(sk.below[c]) >= 2 for c in kids)
                                                  or any(FINGER_NAME.search(sk.name(c)) for c in kids)))


def _arm(sk, top, left, centre, sign):
    """{"shoulder", "upper_arm", "forearm", "hand"} of the arm below ``top`` (shoulder and hand may be None)."""
    out = lambda c: float((sign * ((sk.head[sk.below[c]] if sk.children[c] else sk.end[c][None]) - centre) @ left).max())  # noqa: E731
    path = _main_path(sk, top, lambda c: (not FINGER_NAME.search(sk.name(c)) or len(sk.children[c]) > 1, out(c)))
    hand = next((k for k, b in enumerate(path) if HAND_NAME.search(sk.name(b)) and not FINGER_NAME.search(sk.name(b))
                 and not NOT_LIMB.search(sk.name(b)) and len(_segments(sk, path[:k])) >= 2), None)
    while hand is not None and hand + 1 < len(path) and \
            SEGMENT_SUFFIX.sub("", sk.name(path[hand + 1])) == SEGMENT_SUFFIX.sub("", sk.name(path[hand])):
        hand += 1  # (an arm of hand.L, hand.L.001, hand.L.002: the hand is the last of them)
    length = lambda run: float(np.linalg.norm(sk.end[run[-1]] - sk.head[run[0]]))  # noqa: E731
    before, ends_at_forearm = path, False
    if hand is None:
        hand = next((k for k, b in enumerate(path) if k >= 2 and _fingers_from(sk, b)), None)
        if hand is not None and (length([path[hand]]) > 0.75 * length(_segments(sk, path[:hand])[-1])
                                 or FOREARM_NAME.search(sk.name(path[hand]))):
            before, hand, ends_at_forearm = path[:hand + 1], None, True  # (fingers from a bone as long as the one
            # before it, or named a forearm: a forearm, no hand; Astronaut Finn's LowerArm, 0.63 of its UpperArm)
    if hand is not None:
        before = path[:hand]
    runs = _segments(sk, before)
    if len(runs) < 2:
        return None, f"{sk.name(top)!r}: fewer than two bones before the hand"
    if hand is not None or ends_at_forearm:  # the forearm ends at the hand, or is the last
        k = len(runs) - 2
    else:
        k = max((length(runs[k]) + length(runs[k + 1]), k) for k in range(len(runs) - 1))[1]
        if k + 2 < len(runs):  # a bone after the forearm: the hand (no fingers, no name)
            hand = path.index(runs[k + 2][0])
    arm = {"upper_arm": runs[k][0], "forearm": runs[k + 1][0], "hand": path[hand] if hand is not None else None,
           "shoulder": runs[k - 1][0] if k >= 1 else None}
    return arm, None


def _neck_head(sk, chest, taken, left, centre):
    """(neck, head) above the chest: the central path to the top (no face bones), the head named so, else the
    path's bone whose head is highest with a length of its own."""
    central = lambda c: (c not in taken and not FACE.search(sk.name(c))  # noqa: E731
                         and abs(float((sk.head[c] - centre) @ left)) < 0.1 * sk.height)
    kids = [c for c in sk.children[chest] if central(c)]
    if not kids:
        return None, None
    path = _main_path(sk, max(kids, key=lambda c: sk.high[c]), lambda c: (central(c), sk.high[c]))
    path = [b for b in path if central(b)]
    named = [b for b in path if HEAD_NAME.search(sk.name(b)) and not HEAD_NOT.search(sk.name(b))]
    if named:
        head = named[0]
    else:
        solid = [b for b in path if np.linalg.norm(sk.end[b] - sk.head[b]) > 0.03 * sk.height]
        if not solid:
            return None, None
        head = solid[-1] if len(solid) > 1 or len(path) == 1 else solid[0]
    neck = path[0] if path[0] != head else None
    return neck, head


def _skeletons(obj):
    """The skeletons to read, in turn: the deform bones alone (what the mesh follows; a generated rig's
    mechanism bones left out) when there are enough of them, then all bones; in the rest pose, then, for an
    animated armature, in the pose it shows now."""
    deform = sum(b.use_deform for b in obj.data.bones)
    animated = obj.animation_data is not None and obj.animation_data.action is not None
    for posed in (False, True) if animated else (False,):
        if 12 <= deform < len(obj.data.bones):
            yield _Skeleton(obj, deform_only=True, posed=posed)
        yield _Skeleton(obj, posed=posed)


def _first(obj, read):
    error = None
    for sk in _skeletons(obj):
        try:
            return read(obj, sk)
        except StructureError as e:
            error = error or e
    raise error


def find_structure(obj):
    """({role: bone name}, spine [pelvis excluded .. chest], notes) of an armature from its structure; raises
    StructureError saying what was looked at."""
    return _first(obj, _find)


def find_legs(obj):
    """{side: {"thigh", "shin", "foot", "toe": bone name or None}} of a biped's legs from its structure (no arms
    needed); raises StructureError."""
    def read(obj, sk):
        _, _, legs, _, _, _ = _legs(obj, sk)
        return {s: {r: (sk.name(b) if b is not None else None) for r, b in leg.items()} for s, leg in zip(SIDES, legs)}
    return _first(obj, read)


def _legs(obj, sk):
    """(pelvis, the legs' subtree tops, [left leg, right leg], the character's left, the hips' centre, notes)."""
    if len(sk.bones) < 4:
        raise StructureError(f"{obj.name!r} has {len(sk.bones)} bones: too few for two legs and a body")
    found = _pelvis(sk)
    if found is None:
        low = sorted(range(len(sk.bones)), key=lambda i: sk.low[i])[:6]
        raise StructureError(
            f"{obj.name!r}: no bone has two subtrees that reach the floor (legs); looked at the bones reaching "
            f"lowest: {', '.join(repr(sk.name(i)) for i in low)}")
    pelvis, tops = found
    legs, ankles, why = [], [], []
    for t in tops:
        got, reason = _leg(sk, t, pelvis)
        if got is None:
            why.append(reason)
            continue
        legs.append(got[0])
        ankles.append(got[1])
    if len(legs) < 2:
        raise StructureError(f"{obj.name!r}: below {sk.name(pelvis)!r} two legs were looked for: {'; '.join(why)}")
    left, facing = _left_axis(sk, legs, ankles)
    notes = [f"left and right from {facing}"]
    notes += [f"no foot bone at the ankle below {sk.name(leg['shin'])!r}" for leg in legs if leg["foot"] is None]
    centre = 0.5 * (sk.head[legs[0]["thigh"]] + sk.head[legs[1]["thigh"]])
    if (sk.head[legs[0]["thigh"]] - sk.head[legs[1]["thigh"]]) @ left < 0:
        legs.reverse()
    return pelvis, tops, legs, left, centre, notes


def _find(obj, sk):
    if len(sk.bones) < 6:
        raise StructureError(f"{obj.name!r} has {len(sk.bones)} bones: too few for two legs, two arms and a spine")
    pelvis, tops, legs, left, centre, notes = _legs(obj, sk)
    taken = set()
    for leg in legs:
        taken |= {b for b in leg.values() if b is not None}
    taken |= {j for t in tops for j in sk.below[t]}
    up_kids = [c for c in sk.children[pelvis] if c not in taken]
    if not up_kids:
        raise StructureError(f"{obj.name!r}: nothing above the pelvis {sk.name(pelvis)!r} (no spine)")
    spine_top = max(up_kids, key=lambda c: sk.high[c])
    spine_path = [pelvis] + _main_path(sk, spine_top, lambda c: (c not in taken, sk.high[c]))
    arm_tops = _arm_tops(sk, spine_path, left, centre, taken)
    missing = [s for s in SIDES if s not in arm_tops]
    if missing:
        raise StructureError(f"{obj.name!r}: no {' or '.join(missing)} arm: nothing above the pelvis "
                             f"{sk.name(pelvis)!r} reaches that far to the side (looked along "
                             f"{', '.join(repr(sk.name(b)) for b in spine_path[:8])})")
    arms, why = {}, []
    for s, sign in (("left", 1.0), ("right", -1.0)):
        arm, reason = _arm(sk, arm_tops[s], left, centre, sign)
        if arm is None:
            why.append(reason)
        arms[s] = arm
    if why:
        raise StructureError(f"{obj.name!r}: the arms could not be read: {'; '.join(why)}")
    ancestors = lambda i: [i] + ([] if sk.parent[i] < 0 else ancestors(sk.parent[i]))  # noqa: E731
    tops_up = [arms[s]["shoulder"] if arms[s]["shoulder"] is not None else arms[s]["upper_arm"] for s in SIDES]
    a0, a1 = ancestors(tops_up[0]), set(ancestors(tops_up[1]))
    chest = next((i for i in a0 if i in a1), None)
    if chest is None or pelvis not in ancestors(chest):
        raise StructureError(f"{obj.name!r}: the arms do not meet in a bone above the pelvis {sk.name(pelvis)!r}")
    if chest == pelvis:
        raise StructureError(f"{obj.name!r}: the arms hang from the pelvis {sk.name(pelvis)!r} itself (no spine)")
    spine = list(reversed(ancestors(chest)[:ancestors(chest).index(pelvis)]))
    roles = {"pelvis": pelvis, "chest": chest}
    for s, leg in zip(SIDES, legs):
        for r in ("thigh", "shin", "foot", "toe"):
            if leg[r] is not None:
                roles[f"{s} {r}"] = leg[r]
    for s in SIDES:
        for r, b in arms[s].items():
            if b is not None:
                roles[f"{s} {r}"] = b
    taken_arms = {j for s in SIDES for j in sk.below[arm_tops[s]]}
    neck, head = _neck_head(sk, chest, taken | taken_arms, left, centre)
    if head is not None:
        roles["head"] = head
    if neck is not None:
        roles["neck"] = neck
    names = {r: sk.name(i) for r, i in roles.items()}
    return names, [sk.name(i) for i in spine], notes
