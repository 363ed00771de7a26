# SPDX-License-Identifier: GPL-3.0-or-later
"""Armature -> solver tree, pose -> configuration, configuration -> pose bones.

Every bone is a link named like the bone; its joint is a :class:`BoneJoint` at the bone's head with
Blender's IK settings (locks, limits, stiffness), or a :class:`FreeJoint` for root bones when the free root
is on. The tree's root link is the armature object's space, so link matrices are armature-space pose
matrices (``pose_bone.matrix``).

Blender's pose, for bones that inherit rotation and scale (the default):
``pose.matrix = parent.pose.matrix @ parent.rest^-1 @ rest @ matrix_basis`` with
``matrix_basis = T(location) R S``; the tree's joint origin is ``parent.rest^-1 @ rest @ T(location)`` (the
pose location is kept; connected bones have none) and its motion is R.
"""

from dataclasses import dataclass, field

import numpy as np

from ..solvers import BoneJoint, FreeJoint, State, Tree
from ..solvers.joints import bone_rotation
from ..solvers.rotations import exp_so3

ROOT_LINK = "__armature__"


class RigError(ValueError):
    """An armature the bridge cannot turn into a tree, with the reason in words a user understands."""


@dataclass
class RigMapping:
    """What ties the tree to the armature: bones in tree order and each bone's variables."""

    armature: str
    bones: list
    joints: dict
    variables: dict  # bone name -> indices into q of its rotation (free root: location and rotation)
    free_root: frozenset = field(default_factory=frozenset)
    stretch: dict = field(default_factory=dict)  # bone name -> index into q of its IK stretch (scale)
    parent: dict = field(default_factory=dict)  # bone name -> parent bone in the tree (or None)
    inherits_scale: dict = field(default_factory=dict)  # bone name -> takes its parent's scale
    unmodeled: list = field(default_factory=list)  # "bone: what of it the solve does not model", for warnings
    # Per-frame input (what an action animates outside the solve), per bone in ``bones`` order: the pose-bone
    # row, the tree link, the joint origin without pose (parent.rest^-1 @ rest), whether the pose location
    # moves the joint (unconnected bones that are not a free root) and whether the pose rotation does (fully
    # locked bones: Blender's IK keeps their current rotation).
    rows: np.ndarray = None
    links: np.ndarray = None
    rest_origin: np.ndarray = None
    translated: np.ndarray = None
    locked: np.ndarray = None
    # Fully locked bones that constraints move (a control rig's mechanism above its controls: a hand control's
    # parent switch): their input is their pose as Blender shows it, not their own channels.
    follows: np.ndarray = None
    # Whether each bone's location is in its own rest frame (Blender's Local Location, the default); off (a
    # Rigify IK control's), it is in its parent's.
    local_location: np.ndarray = None

    def _parent_frame(self, name):
        """The rest turn from a bone's parent to it when its location is in its parent's frame, else None."""
        k = self.bones.index(name)
        if self.local_location is None or self.local_location[k]:
            return None
        return self.rest_origin[k][:3, :3]

    def location_channels(self, name, t):
        """A free bone's location channels (..., 3) for its translation variables ``t`` (..., 3; in its rest frame)."""
        R = self._parent_frame(name)
        return t if R is None else t @ R.T

    def location_variables(self, name, location):
        """A free bone's translation variables (..., 3) for its location channels (..., 3)."""
        R = self._parent_frame(name)
        return location if R is None else location @ R

    def all_variables(self, name):
        """Every variable of a bone: rotation (and location) and stretch."""
        idx = self.variables[name]
        return np.append(idx, self.stretch[name]).astype(int) if name in self.stretch else idx


def channelbags(id_block):
    """The channelbags animating an ID through its assigned action and slot."""
    ad = getattr(id_block, "animation_data", None)
    if ad is None or ad.action is None or ad.action_slot is None:
        return []
    return [s.channelbag(ad.action_slot) for layer in ad.action.layers for s in layer.strips
            if s.type == "KEYFRAME" and s.channelbag(ad.action_slot) is not None]


def _matrices(collection, prop, count):
    """foreach_get of a 4x4 matrix property -> (count, 4, 4) row-major (Blender stores columns)."""
    flat = np.zeros(count * 16, dtype=np.float32)
    collection.foreach_get(prop, flat)
    return flat.reshape(count, 4, 4).transpose(0, 2, 1).astype(float)


def bone_settings(pose_bone, use_limit_rotation=False):
    """(lock, limits, stiffness) from a pose bone's IK settings, with Blender's meaning.

    With ``use_limit_rotation``, enabled Limit Rotation constraints in local space also limit their axes
    (intersected with the IK limits). This is an approximation: the constraint limits Euler angles, the
    IK limits swing and twist; they agree for rotations about one axis.
    """
    lock = (pose_bone.lock_ik_x, pose_bone.lock_ik_y, pose_bone.lock_ik_z)
    limits = {}
    for axis in "xyz":
        if getattr(pose_bone, f"use_ik_limit_{axis}"):
            limits[axis] = (getattr(pose_bone, f"ik_min_{axis}"), getattr(pose_bone, f"ik_max_{axis}"))
    if use_limit_rotation:
        for c in pose_bone.constraints:
            if c.type != "LIMIT_ROTATION" or not c.enabled or c.influence <= 0.0 or c.owner_space != "LOCAL":
                continue
            for axis in "xyz":
                if getattr(c, f"use_limit_{axis}"):
                    lo, hi = getattr(c, f"min_{axis}"), getattr(c, f"max_{axis}")
                    old = limits.get(axis, (-np.pi, np.pi))
                    limits[axis] = (max(old[0], lo), min(old[1], hi))
    stiffness = (pose_bone.ik_stiffness_x, pose_bone.ik_stiffness_y, pose_bone.ik_stiffness_z)
    return lock, limits, stiffness


def check_armature(obj):
    """Raise RigError for what the bridge cannot represent; returns the armature data."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError("select an armature object")
    arm = obj.data
    if len(arm.bones) == 0:
        raise RigError(f"armature {obj.name!r} has no bones")
    short = [b.name for b in arm.bones if b.length < 1e-6]
    if short:
        raise RigError(f"zero-length bones cannot be posed by IK: {', '.join(short[:5])}")
    scale = np.array(obj.scale)
    if np.any(scale < 0):
        raise RigError(f"armature {obj.name!r} has a negative scale {tuple(round(float(s), 4) for s in scale)} "
                       "(mirrored): apply its scale first (Object > Apply > Scale)")
    if np.max(np.abs(scale - scale.mean())) > 1e-6 * max(1.0, abs(scale.mean())):
        raise RigError(f"armature {obj.name!r} is scaled non-uniformly {tuple(round(float(s), 4) for s in scale)}: "
                       "apply its scale first (Object > Apply > Scale)")
    return arm


def chains_to(obj, names):
    """The given bones and all their ancestors: the only bones that can move them."""
    keep = set()
    for name in names:
        bone = obj.data.bones.get(name)
        while bone is not None and bone.name not in keep:
            keep.add(bone.name)
            bone = bone.parent
    return keep


INHERIT_SCALE = {"FULL", "ALIGNED", "AVERAGE", "FIX_SHEAR"}  # modes that pass a uniform parent scale on


def build_tree(obj, free_root=False, use_limit_rotation=False, bones=None, use_stretch=True, free_bones=(),
               fixed_bones=(), hinges=None):
    """Armature object -> (solver tree, mapping). Links are the bones, in armature space.

    ``free_root``: parentless bones move freely (location and rotation solved); ``free_bones``: these bones too,
    whatever their parent (a foot control parented to the root, not to its leg); ``fixed_bones``: these keep
    their pose (as if fully IK-locked: a rig's mechanism above the controls that are solved).

    ``bones``: only these bones and their ancestors become links (the rest of the armature follows them in
    Blender and does not need solving); default: every bone. ``use_stretch``: bones with IK Stretch may
    scale (Blender's IK constraint option "Stretch"). ``hinges``: {bone: {axis: (min, max)}}, IK limits for
    bones that have no limits or locks of their own (a knee that folds one way: rig.knees)."""
    arm = check_armature(obj)
    all_bones = list(arm.bones)
    rest = _matrices(arm.bones, "matrix_local", len(all_bones))
    index = {b.name: i for i, b in enumerate(all_bones)}
    keep = None if bones is None else chains_to(obj, bones)
    if keep is not None and not keep:
        raise RigError("none of the goals' bones is in the armature")
    bones = [b for b in all_bones if keep is None or b.name in keep]
    joints = []
    free = set()
    rest_origin, translated, locked, follows = [], [], [], []
    local_location = [bone.use_local_location for bone in bones]
    for bone in bones:
        i = index[bone.name]
        pb = obj.pose.bones[bone.name]
        if bone.parent is None:
            parent, origin = ROOT_LINK, rest[i].copy()
        else:
            parent, origin = bone.parent.name, np.linalg.inv(rest[index[bone.parent.name]]) @ rest[i]
        rest_origin.append(origin)
        is_free = (bone.parent is None and free_root) or bone.name in free_bones
        translated.append(not is_free and not bone.use_connect)
        if is_free:
            joints.append(FreeJoint(bone.name, parent, bone.name, origin))
            free.add(bone.name)
            locked.append(False)
            follows.append(False)
            continue
        lock, limits, stiffness = bone_settings(pb, use_limit_rotation)
        if hinges and bone.name in hinges and not limits and not any(lock):
            limits = dict(hinges[bone.name])
        if bone.name in fixed_bones:
            lock = (True, True, True)
        locked.append(all(lock))  # fully locked: IK keeps the bone's current rotation (Blender's null segment)
        follows.append(all(lock) and constrained(pb))
        stretch = float(pb.ik_stretch) if use_stretch else 0.0
        joints.append(BoneJoint(bone.name, parent, bone.name, origin, lock, limits, stiffness, stretch,
                                float(bone.length)))
    tree = Tree(joints, root=ROOT_LINK)
    if free:
        # A free bone's location is weighed against rotations by the armature's size: a turn of 1 rad moves the
        # far bones by about that length, whatever the units (an FBX rig in centimetres is 100x a metre one).
        ends = rest[:, :3, 3]
        tails = np.array([b.tail_local for b in all_bones]).reshape(-1, 3)
        size = 0.5 * float(np.ptp(np.vstack([ends, tails]), axis=0).max()) or 1.0
        for name in free:
            tree.weights[tree.joint_vars[name][:3]] = size
    by_name = {j.name: j for j in joints}
    variables, stretching = {}, {}
    for name, joint in by_name.items():
        idx = tree.joint_vars[name]
        if getattr(joint, "stretch", 0.0) > 0.0:
            variables[name], stretching[name] = idx[:-1], int(idx[-1])
        else:
            variables[name] = idx
    mapping = RigMapping(obj.name, [b.name for b in bones], by_name, variables, frozenset(free), stretching,
                         {b.name: b.parent.name if b.parent is not None else None for b in bones},
                         {b.name: b.inherit_scale in INHERIT_SCALE for b in bones},
                         unmodeled_settings(obj, [b for b, f in zip(bones, follows) if not f], use_limit_rotation),
                         rows=np.array([obj.pose.bones.find(b.name) for b in bones], dtype=int),
                         links=np.array([tree.link_index[b.name] for b in bones], dtype=int),
                         rest_origin=np.array(rest_origin), translated=np.array(translated, dtype=bool),
                         locked=np.array(locked, dtype=bool), follows=np.array(follows, dtype=bool),
                         local_location=np.array(local_location, dtype=bool))
    read_pose(obj, tree, mapping)  # the current frame's input
    return tree, mapping


def constrained(pose_bone):
    """Whether constraints act on ``pose_bone`` (one enabled, with influence): Blender poses it, not its keys."""
    return any(c.enabled and c.influence > 0.0 for c in pose_bone.constraints)


def unmodeled_settings(obj, bones, use_limit_rotation=False):
    """What moves these bones in Blender but is not part of the solve (so the pose Blender shows can differ
    from the solved one): constraints, and bones that do not inherit their parent's rotation."""
    out = []
    for bone in bones:
        pb = obj.pose.bones[bone.name]
        if bone.parent is not None and not bone.use_inherit_rotation:
            out.append(f"{bone.name}: does not inherit its parent's rotation")
        active = [c for c in pb.constraints if c.enabled and c.influence > 0.0
                  and not (use_limit_rotation and c.type == "LIMIT_ROTATION")]
        if active:
            out.append(f"{bone.name}: {', '.join(c.type.replace('_', ' ').lower() for c in active[:3])} "
                       "constraint(s) act after the solve")
    return out


def frame_origins(mapping, B):
    """The joint origins of the mapping's bones for their bases ``B`` (bones, 4, 4; read_frame_input's): the rest
    origin, moved by the pose location of unconnected bones and turned by the pose rotation of fully locked
    ones."""
    origin = mapping.rest_origin.copy()
    t = mapping.translated
    moved = np.einsum("kij,kj->ki", origin[t, :3, :3], B[t, :3, 3])  # (a location in the bone's rest frame)
    if mapping.local_location is not None:  # (else in its parent's: as it is)
        moved = np.where(mapping.local_location[t][:, None], moved, B[t, :3, 3])
    origin[t, :3, 3] += moved
    lk = mapping.locked
    if lk.any():
        R = B[lk, :3, :3]
        origin[lk, :3, :3] = origin[lk, :3, :3] @ (R / np.linalg.norm(R, axis=1, keepdims=True))
    return origin


def read_pose(obj, tree, mapping):
    """The configuration of the armature's current pose (rotations read the way Blender's IK reads them).

    It also sets the tree's per-frame input from the same pose (``Tree.set_origins``): the location of
    unconnected bones that are not solved (a root walking across the floor) and the rotation of fully locked
    bones. Every solve reads the pose first, so the tree always stands where the action puts it; nothing of
    that is a reason to rebuild the tree."""
    return poses_from_basis(tree, mapping, read_frame_input(obj, tree, mapping)[None])[0]


def read_frame_input(obj, tree, mapping):
    """The bases (bones, 4, 4) of the mapping's bones as they are now, the tree's per-frame input set from them
    (read_pose without the configuration: a bake turns every frame's into one at once, poses_from_basis)."""
    basis = _matrices(obj.pose.bones, "matrix_basis", len(obj.pose.bones))[mapping.rows]
    if mapping.follows is not None and mapping.follows.any():
        basis = shown_bases(obj, mapping, basis)
    tree.set_origins(mapping.links, frame_origins(mapping, basis))
    return basis


def shown_bases(obj, mapping, basis):
    """``basis`` (bones, 4, 4) with each following bone's (mapping.follows) replaced by the one that puts it where
    Blender shows it, under its parent as shown: (parent's matrix @ rest origin)^-1 @ its matrix."""
    M = shown_matrices(obj)[mapping.rows]
    basis = basis.copy()
    index = {name: k for k, name in enumerate(mapping.bones)}
    for k in np.flatnonzero(mapping.follows):
        parent = mapping.parent.get(mapping.bones[k])
        above = M[index[parent]] if parent is not None else np.eye(4)
        basis[k] = np.linalg.solve(above @ mapping.rest_origin[k], M[k])
    return basis


def poses_from_basis(tree, mapping, M):
    """(F, n) configurations of the mapping's bones' bases (F, bones, 4, 4: read_frame_input's), read as Blender's
    IK reads them."""
    scale = np.linalg.norm(M[:, :, :3, :3], axis=2, keepdims=True)  # (F, bones, 1, 3): pose scale per axis
    q = np.zeros((len(M), tree.n))
    if mapping.stretch:  # a stretching bone's variable is its scale in armature space: own x inherited
        world_scale = {}
        for k, name in enumerate(mapping.bones):  # parents first
            parent = mapping.parent.get(name)
            inherited = world_scale.get(parent, 1.0) if mapping.inherits_scale.get(name, True) else 1.0
            world_scale[name] = scale[:, k, 0, 1] * inherited
            if name in mapping.stretch:
                q[:, mapping.stretch[name]] = world_scale[name]
    R = np.zeros((len(M), len(tree.link_names), 3, 3))
    R[..., 0, 0] = R[..., 1, 1] = R[..., 2, 2] = 1.0
    R[:, mapping.links] = M[:, :, :3, :3] / scale  # without pose scale
    q = tree.values_from_rotations(R, q)  # every bone at once, read as Blender's IK reads them
    for name in mapping.free_root:  # a free root's location is a variable, not an input
        q[:, mapping.variables[name][:3]] = mapping.location_variables(name, M[:, mapping.bones.index(name), :3, 3])
    return tree.project(q) if len(q) != 1 else tree.project(q[0])[None]


class ShownState(State):
    """The pose Blender shows (its evaluated pose matrices: constraints, pose scale, drivers and all) as a solver
    state, so goals are judged on what the user sees, not only on what was solved."""

    def rigid_world(self):
        w = self.cache.get("rigid_world")
        if w is None:
            w = self.world.copy()
            w[..., :3, :3] /= np.linalg.norm(w[..., :3, :3], axis=-2, keepdims=True)
            self.cache["rigid_world"] = w
        return w


def shown_state(obj, tree, mapping, q, matrices=None):
    """ShownState of the armature as evaluated now (call after the depsgraph is evaluated); ``q``: the
    configuration joint-value goals are judged on (read_pose's, to judge the pose shown). ``matrices``: the mapping's
    bones' matrices (shown_matrices()[mapping.rows]; (F, bones, 4, 4) with ``q`` (F, n): a batch of frames) instead
    of now's."""
    M = shown_matrices(obj)[mapping.rows] if matrices is None else matrices
    world = np.zeros(M.shape[:-3] + (len(tree.link_names), 4, 4))
    world[..., 0, 0] = world[..., 1, 1] = world[..., 2, 2] = world[..., 3, 3] = 1.0
    world[..., mapping.links, :, :] = M
    return ShownState(tree, np.asarray(q, dtype=float), world)


def shown_matrices(obj):
    """(bones, 4, 4) the pose bones' evaluated matrices (armature space) as Blender shows them now."""
    return _matrices(obj.pose.bones, "matrix", len(obj.pose.bones))


def scaled_bones(obj, mapping, tol=1e-4):
    """{bone: largest |pose scale - 1| over its axes} for the tree's bones whose pose scale (not set by IK
    stretch) is not 1 at this frame: the solve does not model it (their children and tips are where Blender
    puts them, not where the solve does). Read from the scale property, not the bases: a scale of (-1, -1, 1)
    looks like a half turn there, and the keys would turn the bone without it."""
    scale = np.zeros(len(obj.pose.bones) * 3, dtype=np.float32)
    obj.pose.bones.foreach_get("scale", scale)
    scale = scale.reshape(-1, 3)[mapping.rows].astype(float)
    off = np.abs(scale - 1.0).max(axis=1)
    if not (off > tol).any():  # (every frame of most bakes: nothing scaled, nothing more to look at)
        return {}
    ik_scaled = set(mapping.stretch) | {n for n in mapping.bones if mapping.parent.get(n) in mapping.stretch}
    return {n: float(o) for n, o in zip(mapping.bones, off) if o > tol and n not in ik_scaled}


def bone_rotations(tree, mapping, q):
    """{bone: (3x3 rotation, location or None)} of a configuration, in each bone's basis."""
    out = {}
    for name, joint in mapping.joints.items():
        values = q[mapping.variables[name]]
        if name in mapping.free_root:
            out[name] = (exp_so3(values[3:]), mapping.location_channels(name, values[:3]))
        else:
            out[name] = (bone_rotation(joint, values), None)
    return out


def rotation_channel(mode, R, previous):
    """A 3x3 rotation as the values of a bone's rotation property in ``mode``, continuous with ``previous``
    (same quaternion hemisphere, axis on the same side, Euler angles compatible)."""
    from mathutils import Euler, Matrix, Quaternion

    m = Matrix(R.tolist())
    if mode == "QUATERNION":
        quat = m.to_quaternion()
        if quat.dot(Quaternion(previous)) < 0.0:
            quat.negate()
        return tuple(quat)
    if mode == "AXIS_ANGLE":
        axis, angle = m.to_quaternion().to_axis_angle()
        if axis.dot(previous[1:]) < 0.0:  # the same rotation with the axis on the side of the old one
            axis, angle = -axis, -angle
        return (angle, *axis)
    return tuple(m.to_euler(mode, Euler(previous, mode)))


# Blender's Euler orders (RotOrderInfo): the axes i, j, k in turn and the parity.
_EULER_ORDERS = {"XYZ": ((0, 1, 2), False), "XZY": ((0, 2, 1), True), "YXZ": ((1, 0, 2), True),
                 "YZX": ((1, 2, 0), False), "ZXY": ((2, 0, 1), False), "ZYX": ((2, 1, 0), True)}


def rotation_channels(mode, R, previous):
    """rotation_channel for the rotations of every frame (F, 3, 3) at once, each continuous with the one before and
    the first with ``previous``: (F, 3 or 4). Blender's conversions (mathutils': 4 us a call, a bake makes one per
    bone and frame) in numpy: the quaternion and its hemisphere, the axis-angle turned toward the previous axis, the
    two Euler solutions of Blender's mat3_normalized_to_eulo2 made compatible (compatible_eul: each angle by whole
    turns to the nearest of the previous one) and the nearer of the two kept."""
    R = np.asarray(R, dtype=float)
    if mode in ("QUATERNION", "AXIS_ANGLE"):
        q = _quaternions(R)
        if mode == "QUATERNION":
            return _continuous_sign(q, np.asarray(previous, dtype=float), q)
        half = np.arccos(np.clip(q[:, 0], -1.0, 1.0))
        s = np.sin(half)
        axis = q[:, 1:] / np.where(np.abs(s) < 0.0005, 1.0, s)[:, None]  # (as quat_to_axis_angle: the identity's
        axis[~axis.any(axis=1)] = (0.0, 1.0, 0.0)  # axis is Y)
        out = np.column_stack([2.0 * half, axis])
        return _continuous_sign(axis, np.asarray(previous[1:], dtype=float), out)
    (i, j, k), parity = _EULER_ORDERS[mode]
    m = lambda a, b: R[:, b, a]  # noqa: E731  (Blender's mat[a][b]: column a, row b)
    cy = np.hypot(m(i, i), m(i, j))
    regular = cy > 16.0 * np.finfo(np.float32).eps
    e1, e2 = np.zeros((len(R), 3)), np.zeros((len(R), 3))
    e1[:, i] = np.where(regular, np.arctan2(m(j, k), m(k, k)), np.arctan2(-m(k, j), m(j, j)))
    e1[:, j] = np.arctan2(-m(i, k), cy)
    e1[:, k] = np.where(regular, np.arctan2(m(i, j), m(i, i)), 0.0)
    e2[:, i] = np.where(regular, np.arctan2(-m(j, k), -m(k, k)), e1[:, i])
    e2[:, j] = np.where(regular, np.arctan2(-m(i, k), -cy), e1[:, j])
    e2[:, k] = np.where(regular, np.arctan2(-m(i, j), -m(i, i)), 0.0)
    cand = np.stack([e1, e2], axis=1) * (-1.0 if parity else 1.0)  # (F, 2, 3)
    old = np.asarray(previous, dtype=float)
    # Each frame's solution is the nearer (L1, whole turns apart counted as one) to the last frame's, kept:
    # distances depend on angles modulo a turn only, so every (last, next) pair's is known at once and the chain
    # of choices is a loop over two-way flags; the angles are then the first one and the steps' cumulative sum.
    first = np.abs(_wrap(cand[0] - old)).sum(axis=1)
    pair = np.abs(_wrap(cand[1:, None, :, :] - cand[:-1, :, None, :])).sum(axis=-1)  # (F - 1, last, next)
    second = (pair[:, :, 0] > pair[:, :, 1]).tolist()  # the second solution is nearer, after each last choice
    choice = [int(first[0] > first[1])]
    for row in second:
        choice.append(int(row[choice[-1]]))
    raw = cand[np.arange(len(R)), choice]
    out = np.empty_like(raw)
    out[0] = old + _wrap(raw[0] - old)
    out[1:] = out[0] + np.cumsum(_wrap(np.diff(raw, axis=0)), axis=0)
    return out


def _wrap(x):
    """Angles by whole turns into [-pi, pi) (compatible_eul's nearest turn)."""
    return x - np.floor(x / (2.0 * np.pi) + 0.5) * (2.0 * np.pi)


def _quaternions(R):
    """(F, 4) unit quaternions (w, x, y, z) of rotations (F, 3, 3), from the largest of the four candidates."""
    t = np.stack([1.0 + R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2], 1.0 + R[:, 0, 0] - R[:, 1, 1] - R[:, 2, 2],
                  1.0 - R[:, 0, 0] + R[:, 1, 1] - R[:, 2, 2], 1.0 - R[:, 0, 0] - R[:, 1, 1] + R[:, 2, 2]], axis=1)
    best = np.argmax(t, axis=1)
    q = np.empty((len(R), 4))
    for c in range(4):
        at = best == c
        if not at.any():
            continue
        r, s = R[at], 2.0 * np.sqrt(np.maximum(t[at, c], 1e-300))
        if c == 0:
            q[at] = np.column_stack([s / 4, (r[:, 2, 1] - r[:, 1, 2]) / s, (r[:, 0, 2] - r[:, 2, 0]) / s,
                                     (r[:, 1, 0] - r[:, 0, 1]) / s])
        elif c == 1:
            q[at] = np.column_stack([(r[:, 2, 1] - r[:, 1, 2]) / s, s / 4, (r[:, 0, 1] + r[:, 1, 0]) / s,
                                     (r[:, 0, 2] + r[:, 2, 0]) / s])
        elif c == 2:
            q[at] = np.column_stack([(r[:, 0, 2] - r[:, 2, 0]) / s, (r[:, 0, 1] + r[:, 1, 0]) / s, s / 4,
                                     (r[:, 1, 2] + r[:, 2, 1]) / s])
        else:
            q[at] = np.column_stack([(r[:, 1, 0] - r[:, 0, 1]) / s, (r[:, 0, 2] + r[:, 2, 0]) / s,
                                     (r[:, 1, 2] + r[:, 2, 1]) / s, s / 4])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.where(q[:, :1] < 0, -q, q)  # w >= 0, as Blender's


def _continuous_sign(v, previous, out):
    """``out`` with each row negated where its ``v`` points away (a negative dot) from the row before's, as kept
    (the first row from ``previous``): a frame's sign is the product of the turns before it."""
    dots = np.einsum("fi,fi->f", v[1:], v[:-1])
    first = -1.0 if v[0] @ previous < 0.0 else 1.0
    signs = np.cumprod(np.concatenate([[first], np.where(dots < 0.0, -1.0, 1.0)]))
    return out * signs[:, None]


ROTATION_PATHS = {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}


def rotation_path(pose_bone):
    """The name of the property holding a pose bone's rotation in its own rotation mode."""
    return ROTATION_PATHS.get(pose_bone.rotation_mode, "rotation_euler")


def limit_violations(tree, mapping, q, tol=1e-3):
    """How many bones of configuration q (or per row of a batch (F, n)), read back from their rotations the
    way Blender's IK reads them, fall outside their limits by more than ``tol`` (our projection is Blender's
    clamp, tested)."""
    Q = np.atleast_2d(np.asarray(q, dtype=float))
    counts = rotation_violations(tree, mapping, tree.joint_rotations(Q), Q, tol)
    return int(counts[0]) if np.ndim(q) == 1 else counts


def rotation_violations(tree, mapping, R, Q=None, tol=1e-3):
    """Per row of R (F, L, 3, 3), bone rotations in each link's rest frame (from any solver, Blender's
    included): how many bones are outside their limits by more than ``tol``."""
    values = tree.values_from_rotations(R, Q)
    moved = np.abs(tree.project(values) - values)
    bones = [mapping.variables[name] for name in mapping.bones
             if name not in mapping.free_root and len(mapping.variables[name])]
    if not bones:
        return np.zeros(len(R), dtype=int)
    return sum((moved[:, idx].max(axis=1) > tol).astype(int) for idx in bones)


def bone_scales(mapping, q):
    """{bone: uniform pose scale} for the bones whose scale IK sets: stretching bones (their scale relative
    to what they inherit) and the children of stretching bones in the tree (which must not inherit it:
    Blender's IK keeps their frames unscaled)."""
    out = {}
    for name in mapping.bones:
        parent = mapping.parent.get(name)
        own = float(q[mapping.stretch[name]]) if name in mapping.stretch else 1.0
        if name not in mapping.stretch and parent not in mapping.stretch:
            continue
        inherited = float(q[mapping.stretch[parent]]) if parent in mapping.stretch and \
            mapping.inherits_scale.get(name, True) else 1.0
        out[name] = own / inherited
    return out


def write_pose(obj, tree, mapping, q):
    """Set the pose bones to configuration q, each in its own rotation mode, continuous with the current
    values (no quaternion sign flips, Euler angles compatible with the previous ones)."""
    for name, scale in bone_scales(mapping, q).items():
        obj.pose.bones[name].scale = (scale, scale, scale)
    q = np.asarray(q, dtype=float)
    rotations = tree.joint_rotations(q[None])[0]  # every bone at once (bone_rotations, batched)
    bones = obj.pose.bones
    for name, link, row in zip(mapping.bones, mapping.links, mapping.rows):
        if len(mapping.variables[name]) == 0:
            continue  # fully locked: its rotation is part of the tree's fixed origin, left as it is
        pb = bones[int(row)]
        path = rotation_path(pb)
        setattr(pb, path, rotation_channel(pb.rotation_mode, rotations[link], tuple(getattr(pb, path))))
        if name in mapping.free_root:
            pb.location = mapping.location_channels(name, q[mapping.variables[name][:3]])
