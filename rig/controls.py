# SPDX-License-Identifier: GPL-3.0-or-later
"""A control rig's controls: the bones an animator poses (a generated Rigify rig's IK controls, its torso), how
goals on them move them, and the switches that decide whether its limbs follow them."""

import re

import numpy as np

from .armature import constrained, shown_matrices
from .reading import remembered
from .structure import side_of

ARM_WORDS, LEG_WORDS = ("hand", "forearm", "upper_arm", "arm"), ("foot", "toe", "shin", "thigh", "leg")
MECHANISM = ("MCH-", "ORG-", "DEF-")  # a control rig's bones no animator keys (Rigify's names)
# Constraints that set a bone's rotation, whatever its keys say (a Copy Location leaves it the bone's own).
OVERRIDING = {"COPY_ROTATION", "COPY_TRANSFORMS", "DAMPED_TRACK", "TRACK_TO", "LOCKED_TRACK", "STRETCH_TO",
              "ARMATURE", "CHILD_OF", "ACTION", "TRANSFORM", "IK", "SPLINE_IK"}
# Constraints that put a bone where their targets are, whatever its parent does (at full influence): a control
# rig's mechanism copying its controls.
REPLACING = {"COPY_TRANSFORMS", "ARMATURE", "CHILD_OF"}


def location_controls(obj, names):
    """The bones of ``names`` an animator poses by moving them: a control rig's controls (a generated Rigify rig's
    hand_ik, foot_ik, torso) that deform nothing, are not connected, have their location free and no constraint
    of their own, are not the rig's mechanism (MCH-, ORG-, DEF-), and that the rig follows (they or a bone they
    carry are the target of one of its constraints). A plain skeleton has none."""
    carrying = remembered(("carrying", obj.as_pointer()), lambda: _carrying(obj))
    bones = obj.data.bones
    out = set()
    for name in names or ():
        bone, pb = bones.get(name), obj.pose.bones.get(name)
        if bone is None or bone.use_deform or bone.use_connect or all(pb.lock_location) or \
                name.upper().startswith(MECHANISM) or constrained(pb):
            continue
        if name in carrying:
            out.add(name)
    return frozenset(out)


def _carrying(obj):
    """The bones the rig's constraints follow (their targets in the armature itself) and every bone they hang from."""
    followed = {c.subtarget for pb in obj.pose.bones for c in pb.constraints
                if getattr(c, "target", None) == obj and getattr(c, "subtarget", "")}
    carrying, bones = set(), obj.data.bones
    for name in followed:
        b = bones.get(name)
        while b is not None and b.name not in carrying:
            carrying.add(b.name)
            b = b.parent
    return frozenset(carrying)


def control_freedom(obj, bones):
    """(free, fixed) bone names for solving ``bones`` (the goals' and a dragged one): each control among them
    (location_controls) free to move and turn, as an animator moves it, and what hangs above it kept (the rig's
    mechanism and root), unless another of the bones needs it; on a control rig, the mechanism between a bone and
    the controls above it kept too (mechanism)."""
    free = location_controls(obj, bones)
    above = {a.name for name in free for a in obj.data.bones[name].parent_recursive}
    needed = set()
    kept, beyond = mechanism(obj, set(bones or ()) - free)
    for name in set(bones or ()) - free:
        if name in obj.data.bones:
            needed |= {name} | {a.name for a in obj.data.bones[name].parent_recursive}
    return free, (above - needed) | kept | beyond


def mechanism(obj, bones):
    """(kept, beyond) for the chains of ``bones`` on a control rig (one whose constraints pose bones): ``kept`` the
    mechanism bones on them (a bone of ``bones`` itself included: one no control carries), which keep the pose
    Blender gives them (a Rigify FK hand control's chain runs through MCH- bones no animator keys); ``beyond`` the
    bones above a mechanism bone that a constraint puts where its targets are whatever its parents do (Rigify's
    ORG-shoulder copies the shoulder control), or from which more than one chain hangs (where a limb's FK and IK
    chains meet, below the torso: an FK foot goal turns the leg, not the spine), unless another of ``bones``
    hangs from them below such a bone (a goal on the torso as well as the hand). A plain skeleton (no such
    constraint) has none."""
    bones_ = obj.data.bones
    pose = obj.pose.bones
    named = None  # whether its MCH-, ORG- and DEF- bones are mechanism, constrained or not: read when one is met
    kept, beyond, reach = set(), set(), set()
    for name in bones or ():
        if name not in bones_:
            continue
        for b in [bones_[name], *bones_[name].parent_recursive]:
            pb = pose[b.name]
            if not overridden(pb) and b.name.upper().startswith(MECHANISM) and named is None:
                named = control_rig(obj)
            if not (overridden(pb) or named and b.name.upper().startswith(MECHANISM)):
                reach.add(b.name)
                continue
            kept.add(b.name)
            if b.name != name and (len(b.children) > 1 or
                                   any(c.type in REPLACING and c.influence >= 1.0 for c in _acting(pb))):
                beyond |= {a.name for a in b.parent_recursive}
                break
    return kept, beyond - reach


def _acting(pose_bone):
    """The constraints acting on ``pose_bone`` (enabled, with influence)."""
    return [c for c in pose_bone.constraints if c.enabled and c.influence > 0.0]


def overridden(pose_bone):
    """Whether a constraint sets ``pose_bone``'s rotation (its keys do not)."""
    return any(c.type in OVERRIDING for c in _acting(pose_bone))


def control_rig(obj):
    """Whether ``obj`` is a control rig: some of its bones copy others whole (a generated Rigify rig's ORG- and
    DEF- bones copy its controls and mechanism)."""
    return any(c.type in REPLACING and c.influence >= 1.0 for pb in obj.pose.bones for c in _acting(pb))


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


class Followers(dict):
    """{control: (deform bone, the control's rest matrix in the deform bone's)} (deform_followers), with what
    as_followed reads of the rig at each frame found once: the two bones' rows among the pose bones, the armature's
    size."""

    def __init__(self, obj, pairs, size):
        super().__init__(pairs)
        pose = obj.pose.bones
        self.rows = [(pose.find(control), pose.find(deform), rest) for control, (deform, rest) in pairs.items()]
        self.size = size


def deform_followers(obj, controls):
    """Followers: for each of ``controls``, the deforming bone it moves, the one whose rest head is nearest its own
    (within 2 % of the armature's size, on its side): what the character shows of it (a Rigify hand control's
    DEF-hand)."""
    bones = obj.data.bones
    if not controls:
        return Followers(obj, {}, 1.0)
    size = armature_size(obj)
    deform = [b for b in bones if b.use_deform]
    heads = np.array([b.head_local for b in deform]).reshape(-1, 3)
    sides = np.array([side_of(b.name) or "" for b in deform])
    out = {}
    for name in controls:
        c = bones[name]
        d = np.linalg.norm(heads - np.array(c.head_local), axis=1)
        d[sides != (side_of(name) or "")] = np.inf
        if len(d) and d.min() <= 0.02 * size:
            nearest = deform[int(np.argmin(d))].name
            out[name] = (nearest, np.linalg.solve(np.array(bones[nearest].matrix_local), np.array(c.matrix_local)))
    return Followers(obj, out, size)


def as_followed(matrices, followers):
    """``matrices`` (bones, 4, 4: armature space, as Blender shows them) with each control of ``followers``
    (deform_followers) where its deform bone puts it when that is off the control by more than the rig's own IK
    leaves it (a thousandth of the armature's size, 0.3 degrees): a goal on a control is met as the character
    shows it, not where the control alone stands (a limb switched to FK leaves its IK control behind)."""
    if not followers:
        return matrices
    M = np.array(matrices, dtype=float, copy=True)
    for i, j, rest in followers.rows:
        shown = M[j] @ rest
        A, B = (m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0) for m in (shown, M[i]))
        turn = np.degrees(np.arccos(np.clip((np.trace(A.T @ B) - 1.0) / 2.0, -1.0, 1.0)))
        if np.linalg.norm(shown[:3, 3] - M[i, :3, 3]) > 1e-3 * followers.size or turn > 0.3:
            M[i] = shown
    return M


def armature_size(obj):
    """The armature's size: the largest extent of its bones' rest heads (its units)."""
    bones = obj.data.bones
    heads = np.zeros(3 * len(bones), dtype=np.float32)
    bones.foreach_get("head_local", heads)
    return float(np.ptp(heads.reshape(-1, 3), axis=0).max()) if len(bones) else 1.0


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


def carriers(obj, bones):
    """{bone: (control, K)} for each of ``bones`` that a control rig's constraints pose (a Rigify DEF-hand): the
    control that carries it as Blender shows it now, and the bone's matrix in that control's (bone = control @ K,
    armature space). Found by turning each control near it (its head within 2 % of the armature's size of the
    bone's, on its side; not a mechanism or deform bone) a little, and moving it where it may move, and keeping
    those the bone follows rigidly as they turn (and as they move, for a control an animator moves: an IK
    control): the hand's IK control with the arm in IK, its FK one in FK, and its tweak control in either. Of
    those, the ones named as the bone first (a toe's toe control before the foot's spin control at its head),
    then those whose move stretches no deforming bone by more than 2 % (a tweak control drags the hand and
    squashes the forearm), then the one that stretches them least. A bone no control carries is left out (a goal
    on it is judged as shown, and control_notes names what moves it). The pose is left as it was."""
    import bpy

    pose, data = obj.pose.bones, obj.data.bones
    driven = [n for n in sorted(bones or ()) if n in pose and overridden(pose[n])]
    if not driven:
        return {}
    size = armature_size(obj)
    controls = [b for b in data if not b.use_deform and not b.name.upper().startswith(MECHANISM)
                and not overridden(pose[b.name])]
    movable = location_controls(obj, [b.name for b in controls])
    layer = bpy.context.view_layer
    obj.update_tag()  # (a switch set from Python, Rigify's IK_FK, tags nothing)
    layer.update()
    M0 = shown_matrices(obj)
    deform = np.array([b.use_deform for b in data])
    length = np.linalg.norm(M0[deform, :3, :3], axis=1)
    out = {}
    for name in driven:
        head, words, i = np.array(data[name].head_local), _words(name), pose.find(name)
        found = []
        for c in controls:
            if side_of(c.name) != side_of(name) or np.linalg.norm(np.array(c.head_local) - head) > 0.02 * size:
                continue
            j = pose.find(c.name)
            M1 = _nudged(layer, pose[c.name], M0, 0.0)
            if not _carried(M0, M1, i, j, size):
                continue
            if not all(pose[c.name].lock_location):
                M1 = _nudged(layer, pose[c.name], M0, 0.01 * size)
                if c.name in movable and not _carried(M0, M1, i, j, size):
                    continue
            stretch = float(np.abs(np.linalg.norm(M1[deform, :3, :3], axis=1) - length).max(initial=0.0))
            found.append((not words & _words(c.name), stretch > 0.02, stretch, c.name))
        if found:
            control = min(found)[-1]
            out[name] = (control, np.linalg.solve(M0[pose.find(control)], M0[i]))
    layer.update()  # (every control put back)
    return out


def _words(name):
    """The words of a bone's name without its mechanism prefix, side and numbers (DEF-toe.R: {'toe'})."""
    low = name.lower()
    low = low[4:] if low.upper().startswith(MECHANISM) else low
    return {w for w in re.split(r"[^a-z]+", low) if len(w) > 1 and w not in ("left", "right")}


def _carried(M0, M1, i, j, size):
    """Whether bone ``i`` moved from ``M0`` to ``M1`` (the rig's matrices) as if fixed to bone ``j`` (within a tenth of
    the nudge's move, a third of a degree: a foot Rigify's IK leaves as it follows)."""
    carried = M1[j] @ np.linalg.solve(M0[j], M0[i])
    return bool(np.abs(M1[i] - M0[i]).max() > 1e-4 * size and np.abs(carried[:3, 3] - M1[i, :3, 3]).max() <= 1e-3 * size
                and np.abs(carried[:3, :3] - M1[i, :3, :3]).max() <= 5e-3)


def _nudged(layer, pb, shown, move):
    """The rig's matrices (``shown``: as they are now) with the control ``pb`` turned 3 degrees about its head, or
    with ``move``, moved that far toward the middle of the armature (a limb's IK control shortens the limb, which
    its IK's stretch leaves alone); the control is put back (the rig updated with it back at the next nudge, or by
    the caller)."""
    from mathutils import Matrix

    M = shown[pb.id_data.pose.bones.find(pb.name)]
    head = M[:3, 3]
    N = np.eye(4)
    if move:
        inward = np.mean(shown[:, :3, 3], axis=0) - head
        N[:3, 3] = move * inward / max(float(np.linalg.norm(inward)), 1e-12)
    else:
        N[:3, :3] = np.array(Matrix.Rotation(np.radians(3.0), 3, (0.577, 0.577, 0.577)))
        N[:3, 3] = head - N[:3, :3] @ head
    basis = pb.matrix_basis.copy()
    pb.matrix_basis = basis @ Matrix((np.linalg.solve(M, N @ M)).tolist())  # (N in the pose's space, as a basis)
    layer.update()
    out = shown_matrices(pb.id_data)
    pb.matrix_basis = basis
    return out
