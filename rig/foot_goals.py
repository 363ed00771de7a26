# SPDX-License-Identifier: GPL-3.0-or-later
"""The goals of foot placement on the rig: a position goal per sole point, the pelvis, the source pose; on a rig
whose feet follow constraints (Rigify's generated rigs), put on the controls that carry them (rig_controls)."""

import numpy as np

from ..solvers import Displacement, Orientation, Position
from .armature import _matrices, chains_to, constrained
from .structure import side_of
from .goals import cached_tree, world_scale


def driven_by_rig(obj, name):
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
    todo = [b for b in bones if driven_by_rig(obj, b)]
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
        side = side_of(name)
        # A foot's control is named a foot's (a steady relation alone proves nothing when the foot stands still).
        found = [(side_of(free[c]) != side, not any(w in free[c].lower() for w in words), "ik" not in free[c].lower(),
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
            return None if driven_by_rig(obj, bone) else (bone, np.asarray(offset, dtype=float))

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
                                              bones=bones, use_stretch=False, free_bones=free, fixed_bones=fixed,
                                              hinges=plan_.knee_limits)
        P = len(self.points) + len(self.detached)
        self.columns = [(j, "error") for j in range(P)]
        self.labels = [f"{sampler.feet[sampler.specs[j][0]].side} {sampler.specs[j][1]}" for j, _ in self.points]
        self.labels += [f"{sampler.feet[k].side} leg ({shin}) at its ankle" for k, shin, _ in self.detached]
        self.units = ["m"] * P
        self.goal_index = list(range(P))
        self.index = {f: i for i, f in enumerate(plan_.frames)}
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
