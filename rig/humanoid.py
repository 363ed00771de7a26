# SPDX-License-Identifier: GPL-3.0-or-later
"""Humanoid skeletons mapped to roles (pelvis, spine, chest, neck, head; per side thigh, shin, foot, toe,
shoulder, upper arm, forearm, hand): from a bone map (given, or a preset whose bones the armature has), else from
the skeleton's structure (rig.structure: hierarchy and rest geometry, any naming), else from names and hierarchy.
Required: the pelvis, the chest and per side the thigh, shin, foot, upper arm and forearm; the toes, shoulders,
hands, neck and head are mapped when the skeleton has them. Each role carries a confidence: 1 when structure and
name agree, 0.5 when only one of them tells.
"""

import json
import os
import re
from dataclasses import dataclass, field

import numpy as np

from .armature import RigError
from .feet import _rank, _side, best_per_side, find_feet
from .structure import StructureError, find_structure

HAND_WORDS = ("hand", "wrist", "palm")
SIDES = ("left", "right")
FACE = re.compile(r"face|jaw|eye|nose|lip|teeth|tongue|brow|cheek|ear|forehead|chin|temple|lid")
LIMB_ROLES = ("thigh", "shin", "foot", "toe", "shoulder", "upper_arm", "forearm", "hand")
NAME_HINTS = {  # words a role's bone name usually holds (for the confidence, and to pick among candidates)
    "thigh": ("thigh", "upleg", "upperleg", "hip", "upper_leg"), "shin": ("shin", "calf", "leg", "knee", "lowerleg"),
    "foot": ("foot", "ankle"), "toe": ("toe", "ball"), "shoulder": ("shoulder", "clavicle", "collar"),
    "upper_arm": ("upperarm", "upper_arm", "arm", "shoulder"), "forearm": ("forearm", "lowerarm", "elbow", "arm"),
    "hand": HAND_WORDS, "pelvis": ("pelvis", "hips", "hip", "root", "spine", "body"),
    "chest": ("chest", "spine", "torso"), "neck": ("neck",), "head": ("head",),
}


@dataclass
class Humanoid:
    armature: str
    roles: dict  # role -> bone name ("pelvis", "chest", "neck", "head", "left thigh", ...)
    spine: list  # bones from the pelvis (excluded) to the chest (included), in order
    confidence: dict = field(default_factory=dict)  # role -> 0..1
    source: str = "found"  # "found" (structure, names as a hint), "preset 'NAME'", or "given"
    notes: list = field(default_factory=list)  # how it was read (which way the character faces)

    def bone(self, role):
        return self.roles.get(role, "")

    def hip_height(self, obj):
        """Rest height of the pelvis over the lower foot's sole (world units): the character's leg length."""
        W = np.array(obj.matrix_world)
        up = lambda name, end="head_local": float((W @ np.append(np.array(getattr(obj.data.bones[name], end)), 1.0))[2])  # noqa: E731
        feet = [self.roles[f"{s} foot"] for s in SIDES]
        return up(self.roles["pelvis"]) - min(up(f) for f in feet)


def _name_score(name, role):
    n = re.sub(r"^(def|org|mch)[-_.]", "", name.lower().split(":")[-1])
    n = n.replace("_", "").replace(".", "").replace("-", "")
    return 1.0 if any(w.replace("_", "") in n for w in NAME_HINTS.get(role, ())) else 0.0


def _real_parent(bone, skip=()):
    """The parent, past zero-length bones and twist or helper bones a rig inserts."""
    p = bone.parent
    while p is not None and (p.length < 1e-6 or p.name in skip):
        p = p.parent
    return p


def _chain_up(bone, stop):
    """Bones from ``bone`` up to (excluded) ``stop``, nearest first."""
    out = []
    b = bone
    while b is not None and b.name != stop:
        out.append(b)
        b = b.parent
    return out


def _lca(bones):
    chains = [[b.name] + [p.name for p in b.parent_recursive] for b in bones]
    common = [n for n in chains[0] if all(n in c for c in chains[1:])]
    return common[0] if common else None


def find_hands(obj):
    """{side: hand bone} from names (deform bones first), the one lowest in its hierarchy."""
    # deform bones, then the one nearest the body
    return best_per_side(obj, HAND_WORDS, lambda bone: (_rank(bone.name), len(bone.parent_recursive)))


BUNDLED_MAPS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "presets", "bone_maps")
REQUIRED = ("pelvis", "chest") + tuple(f"{s} {r}" for s in SIDES for r in ("thigh", "shin", "foot", "upper_arm",
                                                                          "forearm"))


def user_bone_map_folder(create=False):
    """The user's own bone map folder (where the panel saves them), or None outside Blender."""
    try:
        import bpy

        return bpy.utils.user_resource("SCRIPTS", path=os.path.join("presets", "fullbody_ik", "bone_maps"),
                                       create=create) or None
    except (ImportError, AttributeError):
        return None


def bone_map_folders():
    """Where bone maps are read from: the user's own folder (saved from the panel) first, then the bundled ones."""
    user = user_bone_map_folder()
    return ([user] if user else []) + [BUNDLED_MAPS]


def bone_maps():
    """[(name, {role: bone})] of every bone map preset (JSON: {"name": ..., "roles": {role: bone}})."""
    out, seen = [], set()
    for folder in bone_map_folders():
        if not os.path.isdir(folder):
            continue
        for file in sorted(os.listdir(folder)):
            if not file.endswith(".json"):
                continue
            try:
                with open(os.path.join(folder, file), encoding="utf-8") as f:
                    data = json.load(f)
                name, roles = str(data["name"]), dict(data["roles"])
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a broken preset is skipped, not fatal
            if name not in seen:
                seen.add(name)
                out.append((name, roles))
    return out


def from_roles(obj, roles, source="given"):
    """A Humanoid from a {role: bone} map (a preset, or the user's edited one); RigError naming what is missing
    or not a bone of the armature."""
    bones = obj.data.bones
    missing = [r for r in REQUIRED if not roles.get(r)]
    if missing:
        raise RigError(f"the bone map for {obj.name!r} lacks {', '.join(missing)}")
    absent = [f"{r}: {b!r}" for r, b in roles.items() if b and b not in bones]
    if absent:
        raise RigError(f"the bone map names bones {obj.name!r} does not have ({', '.join(absent[:6])})")
    pelvis, chest = roles["pelvis"], roles["chest"]
    if pelvis not in {p.name for p in bones[chest].parent_recursive}:
        raise RigError(f"the bone map's chest {chest!r} is not above its pelvis {pelvis!r}")
    spine = [b.name for b in reversed(_chain_up(bones[chest], pelvis))]
    roles = {r: b for r, b in roles.items() if b}
    return Humanoid(obj.name, roles, spine, {r: 1.0 for r in roles}, source)


def map_humanoid(obj, roles=None):
    """The Humanoid of an armature: from ``roles`` when given (the user's map), else from the first bone map
    preset whose bones it has, else found from hierarchy and names; RigError saying what is missing."""
    if roles:
        return from_roles(obj, roles)
    for name, preset in bone_maps():
        if all(b in obj.data.bones for b in preset.values() if b) and all(preset.get(r) for r in REQUIRED):
            try:
                return from_roles(obj, preset, f"preset {name!r}")
            except RigError:
                continue
    return find_humanoid(obj)


def find_humanoid(obj):
    """The Humanoid of an armature found from its structure (rig.structure), else from hierarchy and names; a
    RigError saying what was looked at and why it was not taken."""
    try:
        roles, spine, notes = find_structure(obj)
        missing = [r for r in REQUIRED if r not in roles]
        if missing:  # (a leg that ends at its shin, no foot bone at its ankle)
            raise StructureError(f"{obj.name!r}: no {', '.join(missing)} ({'; '.join(notes)})")
    except StructureError as e:
        try:
            return _by_names(obj)
        except RigError as by_names:
            raise RigError(f"{obj.name!r} is not a humanoid this can map: {e} (by names: {by_names})") from None
    conf = {role: 0.5 + 0.5 * _name_score(name, role.split()[-1]) for role, name in roles.items()}
    return Humanoid(obj.name, roles, spine, conf, "found", notes)


def _by_names(obj):
    """The Humanoid of an armature found from names and hierarchy, or a RigError saying what is missing."""
    bones = obj.data.bones
    missing = []
    try:
        feet = find_feet(obj)
    except RigError as e:
        found = str(e).split(": give them by hand")[0]  # (the command's own hint follows, for its own side)
        raise RigError(f"{obj.name!r} is not a humanoid this can map: {found}") from None
    hands = find_hands(obj)
    for s in SIDES:
        if s not in hands:
            missing.append(f"{s} hand")
    if missing:
        raise RigError(f"{obj.name!r} is not a humanoid this can map: no {' or '.join(missing)} found from names "
                       f"(bones named like 'hand', 'wrist' or 'palm' with a side)")
    roles, conf = {}, {}
    legs = {}
    for foot in feet:
        s = foot.side
        ankle = bones[foot.ankle]
        shin = bones[foot.shin] if foot.shin else _real_parent(ankle)
        thigh = _real_parent(shin) if shin is not None else None
        if shin is None or thigh is None:
            raise RigError(f"{obj.name!r}: the {s} leg above {foot.ankle!r} has no shin and thigh")
        roles[f"{s} foot"], roles[f"{s} shin"], roles[f"{s} thigh"] = ankle.name, shin.name, thigh.name
        if foot.ball:
            roles[f"{s} toe"] = foot.ball
        legs[s] = thigh
    pelvis = _lca([legs["left"], legs["right"]])
    if pelvis is None:
        raise RigError(f"{obj.name!r}: the legs do not meet in one bone (no pelvis)")
    roles["pelvis"] = pelvis
    for s in SIDES:
        hand = hands[s]
        forearm = _real_parent(hand)
        upper = _real_parent(forearm) if forearm is not None else None
        if forearm is None or upper is None:
            raise RigError(f"{obj.name!r}: the {s} arm above {hand.name!r} has no forearm and upper arm")
        roles[f"{s} hand"], roles[f"{s} forearm"], roles[f"{s} upper_arm"] = hand.name, forearm.name, upper.name
        shoulder = _real_parent(upper)
        if shoulder is not None and shoulder.name != pelvis and _side(shoulder.name) == s:
            roles[f"{s} shoulder"] = shoulder.name
    arm_tops = [bones[roles.get(f"{s} shoulder", roles[f"{s} upper_arm"])] for s in SIDES]
    chest = _lca(arm_tops)
    if chest is None or pelvis not in {p.name for p in bones[chest].parent_recursive}:
        raise RigError(f"{obj.name!r}: the arms do not meet in a chest above the pelvis")
    spine = [b.name for b in reversed(_chain_up(bones[chest], pelvis))]  # pelvis excluded, chest included
    roles["chest"] = chest
    # Neck and head: the chest's central child chain (no side, not an arm, not a face's bones), the longest; the
    # head is its bone named so, else its last; the neck its first.
    arm_names = {roles.get(f"{s} shoulder", roles[f"{s} upper_arm"]) for s in SIDES}
    central = lambda c: c.length > 0 and _side(c.name) is None and not FACE.search(c.name.lower())  # noqa: E731
    best = []
    for child in bones[chest].children:
        if child.name in arm_names or not central(child):
            continue
        chain, b = [], child
        while b is not None:
            chain.append(b.name)
            kids = [c for c in b.children if central(c)]
            b = max(kids, key=lambda c: len(c.children_recursive)) if kids else None
        if len(chain) > len(best):
            best = chain
    if best:
        heads = [n for n in best if _name_score(n, "head")]
        head = heads[0] if heads else best[-1]
        roles["head"] = head
        if best.index(head) > 0:
            roles["neck"] = best[0]
    for role, name in roles.items():
        base = role.split()[-1]
        conf[role] = 0.5 + 0.5 * _name_score(name, base)
    return Humanoid(obj.name, roles, spine, conf)
