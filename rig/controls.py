# SPDX-License-Identifier: GPL-3.0-or-later
"""A control rig's controls: the bones an animator poses (a generated Rigify rig's IK controls, its torso), how
goals on them move them, and the switches that decide whether its limbs follow them."""

import numpy as np

from .armature import constrained
from .structure import side_of

ARM_WORDS, LEG_WORDS = ("hand", "forearm", "upper_arm", "arm"), ("foot", "toe", "shin", "thigh", "leg")


def location_controls(obj, names):
    """The bones of ``names`` an animator poses by moving them: a control rig's controls (a generated Rigify rig's
    hand_ik, foot_ik, torso) that deform nothing, are not connected, have their location free and no constraint
    of their own, are not the rig's mechanism (MCH-, ORG-, DEF-), and that the rig follows (they or a bone they
    carry are the target of one of its constraints). A plain skeleton has none."""
    followed = {c.subtarget for pb in obj.pose.bones for c in pb.constraints
                if getattr(c, "target", None) == obj and getattr(c, "subtarget", "")}
    out = set()
    for name in names or ():
        bone, pb = obj.data.bones.get(name), obj.pose.bones.get(name)
        if bone is None or bone.use_deform or bone.use_connect or all(pb.lock_location) or \
                name.upper().startswith(("MCH-", "ORG-", "DEF-")) or constrained(pb):
            continue
        if name in followed or any(c.name in followed for c in bone.children_recursive):
            out.add(name)
    return frozenset(out)


def control_freedom(obj, bones):
    """(free, fixed) bone names for solving ``bones`` (the goals' and a dragged one): each control among them
    (location_controls) free to move and turn, as an animator moves it, and what hangs above it kept (the rig's
    mechanism and root), unless another of the bones needs it."""
    free = location_controls(obj, bones)
    above = {a.name for name in free for a in obj.data.bones[name].parent_recursive}
    needed = set()
    for name in set(bones or ()) - free:
        if name in obj.data.bones:
            needed |= {name} | {a.name for a in obj.data.bones[name].parent_recursive}
    return free, above - needed


def switch_notes(obj, bones):
    """Notes for the ``bones`` (goals' bones) that are IK controls of a limb switched to FK (Rigify's IK_FK
    property on the limb's properties bone, 1 for FK): the limb Blender shows does not follow them."""
    notes = []
    switches = [pb for pb in obj.pose.bones if "IK_FK" in pb.keys()]
    for name in sorted(bones or ()):
        if "_ik" not in name.lower():
            continue
        words = ARM_WORDS if any(w in name.lower() for w in ARM_WORDS) else \
            LEG_WORDS if any(w in name.lower() for w in LEG_WORDS) else ()
        for pb in switches:
            try:
                value = float(pb["IK_FK"])
            except (TypeError, ValueError):
                continue
            if value > 0.5 and side_of(pb.name) == side_of(name) and any(w in pb.name.lower() for w in words):
                notes.append(f"{name} is the IK control of a limb switched to FK ({pb.name!r} IK_FK = {value:g}): the "
                             f"limb does not follow it; set that IK_FK to 0, or put the goal on the limb's FK "
                             f"control")
    return notes


def deform_followers(obj, controls):
    """{control: (deform bone, the control's rest matrix in the deform bone's)}: for each of ``controls``, the
    deforming bone it moves, the one whose rest head is nearest its own (within 2 % of the armature's size, on its
    side): what the character shows of it (a Rigify hand control's DEF-hand)."""
    bones = obj.data.bones
    size = _size(obj)
    deform = [b for b in bones if b.use_deform]
    out = {}
    for name in controls:
        c = bones[name]
        near = [(float(np.linalg.norm(np.array(b.head_local) - np.array(c.head_local))), b.name) for b in deform
                if side_of(b.name) == side_of(name)]
        if near and min(near)[0] <= 0.02 * size:
            d = min(near)[1]
            out[name] = (d, np.linalg.solve(np.array(bones[d].matrix_local), np.array(c.matrix_local)))
    return out


def as_followed(obj, matrices, followers):
    """``matrices`` (bones, 4, 4: armature space, as Blender shows them) with each control of ``followers``
    (deform_followers) where its deform bone puts it when that is off the control by more than the rig's own IK
    leaves it (a thousandth of the armature's size, 0.3 degrees): a goal on a control is met as the character
    shows it, not where the control alone stands (a limb switched to FK leaves its IK control behind)."""
    if not followers:
        return matrices
    M = np.array(matrices, dtype=float, copy=True)
    pose, size = obj.pose.bones, _size(obj)
    for control, (deform, rest) in followers.items():
        i = pose.find(control)
        shown = M[pose.find(deform)] @ rest
        A, B = (m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0) for m in (shown, M[i]))
        turn = np.degrees(np.arccos(np.clip((np.trace(A.T @ B) - 1.0) / 2.0, -1.0, 1.0)))
        if np.linalg.norm(shown[:3, 3] - M[i, :3, 3]) > 1e-3 * size or turn > 0.3:
            M[i] = shown
    return M


def _size(obj):
    """The armature's size: the largest extent of its bones' rest heads (its units)."""
    heads = np.array([b.head_local for b in obj.data.bones]).reshape(-1, 3)
    return float(np.ptp(heads, axis=0).max()) if len(heads) else 1.0


def control_notes(obj, bones):
    """Notes for the ``bones`` (goals' bones) that the rig's constraints pose (a Rigify deform or mechanism bone):
    keys on them are overridden; each names the control that moves it, where one does (deform_followers)."""
    driven = [name for name in sorted(bones or ()) if name in obj.pose.bones and constrained(obj.pose.bones[name])]
    if not driven:
        return []
    moving = {}
    for control, (deform, _) in deform_followers(obj, location_controls(obj, [b.name for b in obj.data.bones])).items():
        moving.setdefault(deform, []).append(control)
    notes = []
    for name in driven:
        controls = sorted(moving.get(name, []), key=lambda c: ("_ik" not in c.lower(), c))  # (IK controls first)
        notes.append(f"{name} is posed by the rig's constraints (keys on it are overridden): put the goal on "
                     + (f"the control that moves it ({', '.join(repr(c) for c in controls)})" if controls else
                        "the control that moves it"))
    return notes
