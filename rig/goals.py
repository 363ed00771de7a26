# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals kept on the armature -> solver objectives in armature space, and one solve of the current frame."""

import math

import numpy as np

from ..solvers import Displacement, Distance, JointValue, LookAt, Orientation, Pose, Position, Tracker
from ..solvers.objectives.base import MAX_COORDINATE
from .armature import (
    RigError, build_tree, channelbags, read_pose, scaled_bones, shown_matrices, shown_state, write_pose,
)
from .controls import (as_followed, carriers, control_freedom, control_notes, deform_followers, location_controls,
                       overridden, switch_notes)
from .hints import frame_anchors, limit_hints, reach_hints, root_bones
from .reading import one_job_each_call

AXIS_VECTORS = {"X": (1, 0, 0), "Y": (0, 1, 0), "Z": (0, 0, 1), "-X": (-1, 0, 0), "-Y": (0, -1, 0), "-Z": (0, 0, -1)}


class GoalKind:
    """One kind of goal: its name in files and the UI, its error unit ("m", "rad"; None: a preference that
    cannot be missed) and how it becomes an objective: ``make(goal, T, offset, tol, unit, common)`` with the
    target T (4x4, armature space; None for kinds without a target), the bone point, tolerance in the tree's
    units, world-to-armature length factor and the weight and priority."""

    def __init__(self, name, label, description, unit, make, target=True, retarget=None):
        self.name, self.label, self.description, self.unit = name, label, description, unit
        self.make, self.target = make, target
        # retarget(objective, T, R): a copy of an objective ``make`` made, aimed at a new target T (R: its rotation,
        # orthonormal), without checking again what ``make`` checked (GoalObjectives: a bake's later frames).
        self.retarget = retarget


def aimed(objective, **targets):
    """A copy of an objective with new values (its targets), nothing checked again (copy.copy costs five times as
    much)."""
    out = object.__new__(type(objective))
    out.__dict__ = {**objective.__dict__, **targets}
    return out


GOAL_KINDS = {k.name: k for k in (
    GoalKind("POSITION", "Position", "Bring the bone's head (or tip) to the target's position", "m",
             lambda g, T, offset, tol, unit, c: Position(g.bone, T[:3, 3], offset=offset, tolerance=tol, **c),
             retarget=lambda o, T, R: aimed(o, target=T[:3, 3].copy())),
    GoalKind("ORIENTATION", "Orientation", "Turn the bone to the target's orientation", "rad",
             lambda g, T, offset, tol, unit, c: Orientation(g.bone, T[:3, :3], tolerance=tol, **c),
             retarget=lambda o, T, R: aimed(o, target=R)),
    GoalKind("POSE", "Pose", "Position and orientation of the target", "m",
             lambda g, T, offset, tol, unit, c: Pose(g.bone, T, offset=offset, tolerance=tol,
                                                     angular_tolerance=g.angle_tolerance, **c),
             retarget=lambda o, T, R: aimed(o, position=aimed(o.position, target=T[:3, 3].copy()),
                                             orientation=aimed(o.orientation, target=R))),
    GoalKind("LOOK_AT", "Look At", "Point an axis of the bone at the target", "rad",
             lambda g, T, offset, tol, unit, c: LookAt(g.bone, T[:3, 3], axis=_look_axis(g), tolerance=tol, **c),
             retarget=lambda o, T, R: aimed(o, target=T[:3, 3].copy())),
    GoalKind("DISTANCE", "Distance", "Keep at least a minimum distance from the target (collision sphere)", "m",
             lambda g, T, offset, tol, unit, c: Distance(g.bone, g.min_distance * unit, point=offset,
                                                         other_point=T[:3, 3], tolerance=tol, **c),
             retarget=lambda o, T, R: aimed(o, other_point=T[:3, 3].copy())),
    GoalKind("DISPLACEMENT", "Displacement", "Stay near the pose the solve starts from", None, None, False),
    GoalKind("JOINT_VALUE", "Joint Value", "Hold one rotation axis of the bone at a value", "rad",
             lambda g, T, offset, tol, unit, c: JointValue(f"{g.bone}.{g.joint_axis.lower()}", g.joint_value,
                                                           tolerance=tol, **c), False),
)}
ANGULAR_KINDS = {k.name for k in GOAL_KINDS.values() if k.unit == "rad"}
CARRIED_KINDS = {"POSITION", "ORIENTATION", "POSE", "LOOK_AT", "DISTANCE"}  # (a goal the control's pose can meet)


def _look_axis(goal):
    """A Look At goal's axis in its bone's frame (a goal moved onto its control: turned into the control's)."""
    turned = getattr(goal, "axis_vector", None)
    return AXIS_VECTORS[goal.look_at_axis] if turned is None else turned


class _OnControl:
    """A goal seen on the control that carries its bone (goal_carriers): its bone the control's, the rest the
    goal's."""

    def __init__(self, goal, control, K):
        self._goal, self.bone = goal, control
        self.axis_vector = _unit_rotation(K) @ np.array(AXIS_VECTORS[goal.look_at_axis], dtype=float)

    def __getattr__(self, name):
        return getattr(self._goal, name)


def _unit_rotation(K):
    """The rotation of a 4x4 (its 3x3 without scale)."""
    R = np.array(K, dtype=float)[:3, :3]
    return R / np.linalg.norm(R, axis=0, keepdims=True)


_CARRIED = {}  # armature pointer -> ((goal bones, switches), goal_carriers)


def goal_carriers(obj):
    """{bone: (control, K)} for the enabled goals' bones that the rig's constraints pose and a control carries
    (controls.carriers: a goal on Rigify's DEF-hand is met by moving hand_ik, or hand_fk with the arm in FK),
    K the bone's matrix in the control's. Found again when the goals' bones or the rig's switches (its bones'
    number properties: Rigify's IK_FK) change."""
    asked = {g.bone for g in obj.fullbody_ik.goals if g.enabled and g.kind in CARRIED_KINDS and g.bone in obj.pose.bones}
    posed = frozenset(n for n in asked if overridden(obj.pose.bones[n]))
    if not posed:
        return {}
    key = (posed, tuple((pb.name, k, float(v)) for pb in obj.pose.bones for k, v in pb.items()
                        if isinstance(v, (int, float))))
    hit = _CARRIED.get(obj.as_pointer())
    if hit is None or hit[0] != key:
        hit = _CARRIED[obj.as_pointer()] = (key, carriers(obj, posed))
    return hit[1]


def _carried(goal, carried, T, offset):
    """(the goal as made on the bone that takes it, its target, its point in that bone): a goal whose bone a
    control carries (``carried``: goal_carriers) on that control, its point and target turned into the control's
    frame (bone = control @ K: the point K @ p, a target rotation R @ K_R^T)."""
    on = carried.get(goal.bone) if goal.kind in CARRIED_KINDS else None
    if on is None:
        return goal, T, offset
    control, K = on
    point = (np.asarray(K, dtype=float) @ np.append(np.asarray(offset, dtype=float), 1.0))[:3]
    if T is not None:
        T = np.array(T, dtype=float)
        T[:3, :3] = T[:3, :3] @ _unit_rotation(K).T
    return _OnControl(goal, control, K), T, tuple(point)


def target_matrices(obj, goals, to_armature=None, sources=None):
    """The goals' targets as 4x4s in the armature's space (scale removed), (G, 4, 4) in one computation (a bake
    reads six of them a frame: 74 us one by one, 15 at once); a RigError naming the first goal (its index in
    ``goals``, ``.goal``) that has none. ``to_armature``: the inverse of the armature's world matrix, when the caller
    has it; ``sources``: target_sources(goals), when the caller has them (a bake: once for every frame)."""
    objects, rows, fixed = target_sources(goals) if sources is None else sources
    world = fixed.copy()
    try:
        for target, bone_rows in zip(objects, rows):
            W = np.array(target.matrix_world)
            goals_at, bones = bone_rows
            world[goals_at] = W @ shown_matrices(target)[bones] if bones[0] >= 0 else W
    except ReferenceError:  # removed while a modal bake ran
        raise RigError("a goal's target object was deleted during the job") from None
    local = (_affine_inverse(obj.matrix_world) if to_armature is None else to_armature) @ world
    norms = np.sqrt((local[:, :3, :3] ** 2).sum(axis=1))  # (G, 3): each axis's length
    if not (np.isfinite(local.sum()) and norms.min(initial=np.inf) >= 1e-12):  # (the usual case: one test)
        finite = np.isfinite(local).all(axis=(1, 2))
        i = int(np.flatnonzero(~finite | (norms.min(axis=1) < 1e-12))[0])
        raise _goal_error(i, "the target's transform is not finite (NaN or infinity)" if not finite[i]
                          else "the target is scaled to zero")
    local[:, :3, :3] /= norms[:, None, :]
    return local


def _affine_inverse(M):
    """The inverse of an affine 4x4 (an object's world matrix), in float64 from its 3x3 part's cofactors (scalar
    arithmetic: 3.6 us against np.linalg.inv's 19 a frame of a bake, which inverted Blender's float32 as float32);
    a RigError when the 3x3 part is singular."""
    (a, b, c, x), (d, e, f, y), (g, h, i, z), _ = np.array(M).tolist()
    A, B, C = e * i - f * h, f * g - d * i, d * h - e * g
    det = a * A + b * B + c * C
    if not det or not math.isfinite(det):
        raise RigError("the armature's world matrix cannot be inverted (scaled to zero, or not finite)")
    inv = [[A / det, (c * h - b * i) / det, (b * f - c * e) / det],
           [B / det, (a * i - c * g) / det, (c * d - a * f) / det],
           [C / det, (b * g - a * h) / det, (a * e - b * d) / det]]
    return np.array([row + [-(row[0] * x + row[1] * y + row[2] * z)] for row in inv] + [[0.0, 0.0, 0.0, 1.0]])


def target_sources(goals):
    """Where the goals' targets are read: (target objects, per object (its goals' indices, their bones' indices, all
    -1 for goals on the object itself), the world matrices of goals without a target object (their point)); a
    RigError naming the first goal whose target is gone."""
    objects, rows, index = [], [], {}  # (an object twice: its goals with a bone, then those without)
    fixed = np.zeros((len(goals), 4, 4))
    for i, goal in enumerate(goals):
        target = goal.target
        if target is None:
            if getattr(goal, "target_name", ""):
                raise _goal_error(i, f"target object {goal.target_name!r} was deleted: pick a new target or clear it")
            fixed[i] = np.eye(4)
            fixed[i, :3, 3] = goal.point
            continue
        bone = -1
        if goal.subtarget:
            bone = target.pose.bones.find(goal.subtarget) if target.type == "ARMATURE" else -1
            if bone < 0:
                raise _goal_error(i, f"target bone {goal.subtarget!r} not found in {target.name!r}")
        key = (target.name_full, bone >= 0)
        if key not in index:
            index[key] = len(objects)
            objects.append(target)
            rows.append(([], []))
        rows[index[key]][0].append(i)
        rows[index[key]][1].append(bone)
    return objects, rows, fixed


def _goal_error(index, message):
    e = RigError(message)
    e.goal = index
    return e


def _where(number, goal):
    """A goal as errors name it: its number in the list and its kind."""
    return f"goal {number} ({goal.kind.replace('_', ' ').lower()})"


def _named_targets(obj, numbered, sources=None):
    """target_matrices of ``numbered`` [(number, goal)], a RigError naming the goal that has none."""
    try:
        return target_matrices(obj, [goal for _, goal in numbered], sources=sources)
    except RigError as e:
        if not hasattr(e, "goal"):
            raise
        raise RigError(f"{_where(*numbered[e.goal])}: {e}") from None


def world_scale(obj):
    """The armature's uniform world scale (its own and its parents', as animated); a RigError when it is not
    uniform at this frame (the solve's lengths would then depend on direction)."""
    (a, b, c, _), (d, e, f, _), (g, h, i, _), _ = np.array(obj.matrix_world).tolist()  # (scalar arithmetic: per frame)
    norms = [math.sqrt(a * a + d * d + g * g), math.sqrt(b * b + e * e + h * h), math.sqrt(c * c + f * f + i * i)]
    if not all(math.isfinite(n) for n in norms) or min(norms) < 1e-12:
        raise RigError(f"armature {obj.name!r} is scaled to zero or not finite in the world")
    if _det3(((a, b, c), (d, e, f), (g, h, i))) < 0:
        raise RigError(f"armature {obj.name!r} is mirrored in the world (a negative scale, its own or a parent's): "
                       "Blender's pose and the solve's would disagree; apply the scale (Object > Apply > Scale)")
    if max(norms) - min(norms) > 1e-5 * max(norms):
        raise RigError(f"armature {obj.name!r} is scaled non-uniformly in the world "
                       f"{tuple(round(float(n), 4) for n in norms)} (by its own or a parent's scale): "
                       "apply the scale or scale uniformly")
    return float(sum(norms) / 3.0)


def check_not_on_the_rig(obj, goal, number):
    """A goal's target must not move with the pose being solved: a bone of the armature itself, or an object hanging
    from one of its bones (the target is read before the solve, which then moves it: a bake met where the target
    had been, not where it went, 49 cm off on a user's hand held to the head, verdict OK)."""
    o, via = goal.target, ""
    if o == obj and goal.subtarget:
        raise RigError(f"{_where(number, goal)} targets {goal.subtarget!r}, a bone "
                       f"of {obj.name!r} itself, which the solve moves: target an empty (or another armature's bone), "
                       "or copy that bone's motion to an empty first")
    while o is not None:
        if o.parent == obj and o.parent_type == "BONE":
            raise RigError(f"{_where(number, goal)}: its target {goal.target.name!r}"
                           f"{via} hangs from bone {o.parent_bone!r} of {obj.name!r}, which the solve moves: unparent "
                           "the target (keeping its motion baked), or parent it to something else")
        via = f" (through {o.parent.name!r})" if o.parent is not None else via
        o = o.parent


def _goal_label(goal):
    kind = goal.kind.replace("_", " ").lower()
    if goal.kind == "DISPLACEMENT":
        return kind
    point = (" tail" if goal.use_tail else " head") if goal.kind in ("POSITION", "POSE", "DISTANCE") else ""
    return f"{kind} {goal.bone}{point}"


def goal_labels(goals, places):
    """_goal_label of each goal, told apart where two would read alike (two goals on one bone, say): by their
    targets ("to Empty.001", "to Rig:hand.R"), else by their ``places`` (1-based, in the sidebar's list: "goal 3")."""
    plain = [_goal_label(g) for g in goals]
    labels = list(plain)
    for label in set(plain):
        alike = [j for j, other in enumerate(plain) if other == label]
        if len(alike) < 2:
            continue
        targets = [_target_name(goals[j]) for j in alike]
        for j, target in zip(alike, targets):
            labels[j] = f"{label} to {target}" if target and targets.count(target) == 1 else \
                f"{label} (goal {places[j]})"
    return labels


def _target_name(goal):
    if goal.target is None:
        return ""
    return f"{goal.target.name}:{goal.subtarget}" if goal.subtarget else goal.target.name


def enabled_goals(obj):
    """(the enabled goals, the indices among them of those that are goals, not displacements, their labels)."""
    enabled = [g for g in obj.fullbody_ik.goals if g.enabled]
    places = [k + 1 for k, g in enumerate(obj.fullbody_ik.goals) if g.enabled]
    return enabled, [i for i, g in enumerate(enabled) if g.kind != "DISPLACEMENT"], goal_labels(enabled, places)


def goal_objectives(obj, goals, tree, mapping, q_start):
    """Objectives for the enabled goals; a RigError names the first goal that cannot be used."""
    # Tolerances and distances are world lengths; the tree lives in the armature's (uniformly scaled) space.
    unit = 1.0 / world_scale(obj)
    enabled = [(number, goal) for number, goal in enumerate(goals, start=1) if goal.enabled]
    targeted = [(number, goal) for number, goal in enabled if GOAL_KINDS[goal.kind].target]
    for number, goal in targeted:
        if goal.target is not None:
            check_not_on_the_rig(obj, goal, number)
    T = dict(zip((number for number, _ in targeted), _named_targets(obj, targeted)))
    carried = goal_carriers(obj)
    objectives = []
    for number, goal in enabled:
        if goal.kind == "DISPLACEMENT":
            objectives.append(Displacement(q_start, weight=goal.weight, priority=goal.priority))
            continue
        if carried.get(goal.bone, (goal.bone,))[0] not in mapping.joints:
            raise RigError(f"{_where(number, goal)}: bone {goal.bone!r} not found in {obj.name!r} (deleted or "
                           "renamed?)")
        offset = (0.0, obj.data.bones[goal.bone].length, 0.0) if goal.use_tail else (0.0, 0.0, 0.0)
        goal, T[number], offset = _carried(goal, carried, T.get(number), offset)
        kind = GOAL_KINDS[goal.kind]
        tol = goal.tolerance * unit if kind.unit == "m" else max(goal.tolerance, 1e-3)
        common = dict(weight=goal.weight, priority=goal.priority)
        if goal.kind == "JOINT_VALUE" and f"{goal.bone}.{goal.joint_axis.lower()}" not in tree.joint_names:
            raise RigError(f"{_where(number, goal)}: the {goal.joint_axis} axis of {goal.bone!r} is locked")
        try:
            objectives.append(kind.make(goal, T.get(number), offset, tol, unit, common))
        except ValueError as e:  # a target the objective refuses (a mirrored one: not a rotation)
            raise RigError(f"{_where(number, goal)}: {e}") from None
    if not any(not isinstance(o, Displacement) for o in objectives):
        raise RigError("no enabled goal: add one for a bone (Add Goal in the sidebar; --goal or --goals on the command "
                       "line) or enable one")
    return objectives


class GoalObjectives:
    """goal_objectives frame after frame (a bake): the goals' settings read and checked on the first frame, then
    only their targets each frame (target_matrices), set on copies of the first frame's objectives, the rotations
    orthonormalized at once (six goals: 140 -> ~88 us a frame). Every frame from scratch (goal_objectives) when
    the goals' own settings are keyed or driven (a point, a weight, a tolerance animated: read each frame), when
    the armature's world scale changes (tolerances are world lengths) and when a target is out of the ordinary (a
    mirror, beyond MAX_COORDINATE: refused as on the first frame)."""

    def __init__(self, obj, tree, mapping):
        self.obj, self.tree, self.mapping = obj, tree, mapping
        self.first, self.scale = None, None

    def __call__(self, q_start):
        obj = self.obj
        scale = world_scale(obj)
        if self.first is None:
            self.animated = _goals_animated(obj)
        if self.first is None or self.animated or abs(scale - self.scale) > 1e-6 * self.scale:
            goals = obj.fullbody_ik.goals
            self.first, self.scale = goal_objectives(obj, goals, self.tree, self.mapping, q_start), scale
            enabled = [(number, goal) for number, goal in enumerate(goals, start=1) if goal.enabled]
            self.at = [i for i, (_, goal) in enumerate(enabled) if GOAL_KINDS[goal.kind].target]
            self.targeted = [enabled[i] for i in self.at]
            self.displacements = [i for i, (_, goal) in enumerate(enabled) if goal.kind == "DISPLACEMENT"]
            self.turned = [k for k, (_, goal) in enumerate(self.targeted) if goal.kind in ("ORIENTATION", "POSE")]
            carried = goal_carriers(obj)  # (goals moved onto the controls that carry their bones: targets turned)
            self.onto = [(k, _unit_rotation(carried[goal.bone][1]).T) for k, (_, goal) in enumerate(self.targeted)
                         if goal.kind in CARRIED_KINDS and goal.bone in carried and k in self.turned]
            self.sources = target_sources([goal for _, goal in self.targeted])
            return self.first
        T = _named_targets(obj, self.targeted, self.sources)
        R = np.zeros((len(T), 3, 3))
        mirrored = False
        if self.turned:
            U, _, Vt = np.linalg.svd(T[self.turned, :3, :3])  # as as_rotation, at once
            R[self.turned] = U @ Vt
            mirrored = any(_det3(M) < 0.0 for M in R[self.turned].tolist())
            for k, turn in self.onto:
                R[k] = R[k] @ turn
        if mirrored or np.abs(T[:, :3, 3]).max(initial=0.0) > MAX_COORDINATE:
            return goal_objectives(obj, obj.fullbody_ik.goals, self.tree, self.mapping, q_start)  # (says why)
        out = list(self.first)
        for k, (i, (_, goal)) in enumerate(zip(self.at, self.targeted)):
            out[i] = GOAL_KINDS[goal.kind].retarget(self.first[i], T[k], R[k])
        for i in self.displacements:
            out[i] = aimed(self.first[i], reference=np.array(q_start, dtype=float).reshape(-1))
        return out


def _det3(M):
    """The determinant of a 3x3 given as nested lists (scalar arithmetic: a frame's one or two, 1 us against
    np.linalg.det's 5)."""
    (a, b, c), (d, e, f), (g, h, i) = M
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def _goals_animated(obj):
    """Whether a key or a driver animates one of the armature's goals' settings."""
    ad = obj.animation_data
    paths = [fc.data_path for bag in channelbags(obj) for fc in bag.fcurves]
    paths += [d.data_path for d in ad.drivers] if ad is not None else []
    return any(p.startswith("fullbody_ik.goals") for p in paths)


_CACHE = {}
_POSE_SETTINGS = (("lock_ik_x", bool), ("lock_ik_y", bool), ("lock_ik_z", bool), ("use_ik_limit_x", bool),
                  ("use_ik_limit_y", bool), ("use_ik_limit_z", bool), ("ik_min_x", np.float32),
                  ("ik_max_x", np.float32), ("ik_min_y", np.float32), ("ik_max_y", np.float32),
                  ("ik_min_z", np.float32), ("ik_max_z", np.float32), ("ik_stiffness_x", np.float32),
                  ("ik_stiffness_y", np.float32), ("ik_stiffness_z", np.float32), ("ik_stretch", np.float32))
# Rest pose and hierarchy: head and matrix are relative to the parent, so a new parent changes them (Bone.parent
# itself cannot be read in bulk).
_BONE_SETTINGS = (("matrix_local", np.float32, 16), ("head", np.float32, 3), ("matrix", np.float32, 9),
                  ("length", np.float32, 1), ("use_connect", bool, 1), ("use_inherit_rotation", bool, 1),
                  ("inherit_scale", np.int32, 1))


def _bulk(collection, prop, dtype, size=1):
    out = np.zeros(len(collection) * size, dtype=dtype)
    collection.foreach_get(prop, out)
    return out.tobytes()


def _fingerprint(obj, free_root, use_limit_rotation=False, use_stretch=True):
    """What the tree's structure depends on, read in bulk (no Python loop over the bones): names, rest pose and
    hierarchy, bone flags, IK settings, free root. Not the pose: what an action animates is per-frame input
    (armature.read_pose)."""
    bones, pose_bones = obj.data.bones, obj.pose.bones
    parts = [tuple(bones.keys()), bool(free_root), bool(use_limit_rotation), bool(use_stretch)]
    parts += [_bulk(bones, prop, dtype, size) for prop, dtype, size in _BONE_SETTINGS]
    parts += [_bulk(pose_bones, prop, dtype) for prop, dtype in _POSE_SETTINGS]
    return hash(tuple(parts))


def _constraints(obj, bones):
    """The constraints on the tree's bones (warnings; limits with Limit Rotation): a loop over the tree's bones
    only, not the armature's."""
    out = []
    for name in bones:
        out.append(tuple((c.type, c.enabled, c.influence > 0.0) + (
            (c.influence, c.owner_space, c.use_limit_x, c.min_x, c.max_x, c.use_limit_y, c.min_y, c.max_y,
             c.use_limit_z, c.min_z, c.max_z) if c.type == "LIMIT_ROTATION" else ())
            for c in obj.pose.bones[name].constraints))
    return tuple(out)


def goal_bones(obj, carried=True):
    """The bones the enabled goals act on (that exist): with ``carried``, the control that carries a bone the
    rig's constraints pose (goal_carriers) in its place; None when a goal needs every bone (displacement)."""
    goals = [g for g in obj.fullbody_ik.goals if g.enabled]
    names = {g.bone for g in goals if g.kind != "DISPLACEMENT" and g.bone in obj.data.bones}
    if carried and names:
        on = goal_carriers(obj)
        names = {on[n][0] if n in on else n for n in names}
    return names or None


def goal_notes(obj):
    """Hints for goals on bones Blender does not show following them: IK controls of a limb switched to FK, and
    bones the rig's constraints pose that no control carries."""
    asked = goal_bones(obj, carried=False) or set()
    return switch_notes(obj, asked) + control_notes(obj, asked - set(goal_carriers(obj)))


# The pull of the action's own pose on a bone it animates, by how far up the chain from its nearest goal's bone
# it is: the goal's own bone the least, each bone above it four times more, at most STAY_MOST; bones no goal's
# chain holds the most. The smallest change that meets the goals wins: an arm reaching moves the arm, not the body.
# A bone the action does not animate has no pose of it to keep (a rig at rest tracking goals: its rest would pull
# against them).
STAY_LEAST, STAY_RATIO, STAY_MOST = 1e-4, 4.0, 0.1


def animated_bones(obj):
    """The names of the bones the armature's action keys."""
    out = set()
    for bag in channelbags(obj):
        for fc in bag.fcurves:
            if fc.data_path.startswith('pose.bones["'):
                out.add(fc.data_path[len('pose.bones["'):].split('"]', 1)[0])
    return out


def pointed_bones(obj):
    """The bones (their carriers) of the enabled goals that ask for a point of the bone: position and distance."""
    on = goal_carriers(obj)
    return {on[g.bone][0] if g.bone in on else g.bone for g in obj.fullbody_ik.goals
            if g.enabled and g.kind in ("POSITION", "DISTANCE") and g.bone in obj.data.bones}


def stay_weights(obj, mapping, bones, keyed_only=True, pointed=()):
    """{weight: [q indices]}: the preference's weight for each solved bone's variables (stay_near), from how many
    solved bones up the chain it is from the nearest of the goal bones ``bones`` (a bone in ``pointed``, asked for
    a point of it, as stiff as its parent: the hand under a hand's position goal turns no more than the forearm); with ``keyed_only``, only the bones the
    action animates (a pose to keep that is the action's; a drag keeps the pose it started from, whatever keys it)."""
    keyed = animated_bones(obj) if keyed_only else set(mapping.bones)
    solved = {name for name in mapping.bones if len(mapping.variables[name])}
    level = {}  # bone -> solved bones up its chain from the nearest goal's bone
    for goal in bones or ():
        b, steps = obj.data.bones.get(goal), 0
        while b is not None:
            at = max(steps, 1) if goal in pointed else steps
            level[b.name] = min(level.get(b.name, at), at)
            # (a bone the solve keeps, a control rig's mechanism between an FK hand and its forearm, is no level:
            # counted, it made the forearm four times stiffer and the wrist took the reach)
            b, steps = b.parent, steps + (b.name in solved)
    out = {}
    for name in mapping.bones:
        if name not in keyed:
            continue
        w = min(STAY_LEAST * STAY_RATIO ** level[name], STAY_MOST) if name in level else STAY_MOST
        out.setdefault(w, []).extend(int(i) for i in mapping.variables[name])
    return out


def stay_near(tree, weights, q_anim):
    """Preferences (no tolerance) to stay at the action's pose ``q_anim``, one per weight of ``stay_weights``."""
    return [Displacement(q_anim, weight=w, joints=[tree.joint_names[i] for i in idx]) for w, idx in weights.items()]


def cached_tree(obj, free_root=False, use_limit_rotation=False, bones=None, use_stretch=True, free_bones=(),
                fixed_bones=(), hinges=None):
    """build_tree, rebuilt only when the structure changed: rest pose, hierarchy, IK settings, the constraints
    of the tree's bones, the goal bones. The pose is not structure: ``read_pose`` sets each frame's input."""
    key = obj.as_pointer()
    subset = None if bones is None else frozenset(bones)
    fp = (_fingerprint(obj, free_root, use_limit_rotation, use_stretch), subset, frozenset(free_bones),
          frozenset(fixed_bones), repr(sorted((hinges or {}).items())))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == fp and hit[3] == _constraints(obj, hit[2].bones):
        return hit[1], hit[2]
    tree, mapping = build_tree(obj, free_root=free_root, use_limit_rotation=use_limit_rotation, bones=bones,
                               use_stretch=use_stretch, free_bones=frozenset(free_bones),
                               fixed_bones=frozenset(fixed_bones), hinges=hinges)
    _CACHE[key] = (fp, tree, mapping, _constraints(obj, mapping.bones))
    BUILDS[0] += 1
    return tree, mapping


BUILDS = [0]  # trees built by cached_tree since the start (tests check that frames do not rebuild)


def settings_tree(obj, bones=None):
    """The cached tree for the armature's own settings and goals (bones above every goal's Chain Length kept), and
    ``bones`` besides the goals' (a dragged one): a control among them moves as an animator moves it
    (control_freedom)."""
    s = obj.fullbody_ik.settings
    bones = (goal_bones(obj) or set()) | set(bones or ()) or None
    free, fixed = control_freedom(obj, bones)
    fixed |= chain_fixed(obj)
    free_root = s.free_root and not any(obj.data.bones[name].parent is None for name in fixed)
    tree, mapping = cached_tree(obj, free_root, s.use_limit_rotation, bones, s.use_stretch, free_bones=free,
                                fixed_bones=frozenset(fixed))
    if not tree.n:  # (every bone on the goals' chains kept: a deform bone no control carries, Chain Lengths)
        raise RigError("no bone the goals may move: " + ("; ".join(goal_notes(obj)) or
                                                          "every bone of their chains is locked or kept"))
    return tree, mapping


def chain_fixed(obj):
    """The bones no enabled goal may move: above each goal's Chain Length (none up a chain of length 0), and those
    outside the Bones That May Move collection when one is set (a RigError when the armature has none of that
    name)."""
    above, may, outside = set(), set(), set()
    name = obj.fullbody_ik.settings.movable
    if name:
        collection = obj.data.collections_all.get(name)
        if collection is None:
            listed = ", ".join(repr(c.name) for c in obj.data.collections_all) or "none"
            raise RigError(f"Bones That May Move: {obj.name!r} has no bone collection {name!r} (its collections: "
                           f"{listed})")
        inside = {b.name for b in collection.bones}
        outside = {b.name for b in obj.data.bones if b.name not in inside}
    for g in obj.fullbody_ik.goals:
        if not g.enabled or g.kind == "DISPLACEMENT" or g.bone not in obj.data.bones:
            continue
        b, n = obj.data.bones[goal_carriers(obj).get(g.bone, (g.bone,))[0] if g.kind in CARRIED_KINDS else g.bone], 0
        while b is not None:
            (may if g.chain_length == 0 or n < g.chain_length else above).add(b.name)
            b, n = b.parent, n + 1
    return frozenset((above - may) | outside)


def solver_options(settings):
    """Method-specific options from the armature's solver settings."""
    if settings.method != "memetic":
        return {}
    options = {k: v for k, v in (("population", settings.population), ("elites", settings.elites)) if v}
    if settings.exploit != "AUTO":  # else the solver's default: LM compiled, L-BFGS-B on numpy
        options["exploit"] = "lm" if settings.exploit == "LM" else "lbfgsb"
    return options


def settings_tracker(obj, tree, method="", time_limit=0.0, continuity=1e-4, previous=None, rescue=0.0,
                     rescue_error=0.0, jumps=True):
    """The tracker (solvers.Tracker: one policy for bake, drag and Solve) with the armature's solver settings;
    ``method`` and ``time_limit`` override them when given."""
    s = obj.fullbody_ik.settings
    method = method or s.method
    options = solver_options(s) if method == s.method else {}
    return Tracker(tree, method, time_limit or s.time_limit, continuity, s.seed, previous, rescue, rescue_error,
                   jumps, **options)


def _miss_hints(obj, tree, objectives, result, met):
    """Why a Solve left goals not met as shown (``met``: per objective): targets out of their chains' reach, goals
    pulling against each other, joint limits (reach_hints, limit_hints: the bake's, for its one frame)."""
    _, index, labels = enabled_goals(obj)
    scale = world_scale(obj)
    missed = np.array([[not met[i] for i in index]])
    hints = reach_hints(tree, [objectives], [(i, "error") for i in index], [labels[i] for i in index], [scale],
                        [frame_anchors(tree)], missed, result.shown_errors[index][None] * scale,
                        root_bones(obj))
    return hints + limit_hints(lambda k: tree, [objectives], [result.q], np.array([not result.success]), index)


FOLLOW_PASSES = 4  # solves at most, where a control rig's mechanism follows the solved controls


@one_job_each_call  # (the rig's controls are read to free and to judge them: once)
def solve_pose(obj):
    """Solve the armature's goals from its current pose and write the result into the pose bones (a first
    frame of tracking: a local solve from the pose, a full one when that falls short).

    Returns the solver's Result. Raises RigError for bad input, before anything is changed."""
    import bpy

    tree, mapping = settings_tree(obj)
    q0 = read_pose(obj, tree, mapping)
    bones = goal_bones(obj)
    # (what the goals do not need stays as posed, the bones nearest the goals moving first)
    stay = stay_near(tree, stay_weights(obj, mapping, bones, pointed=pointed_bones(obj)), q0)
    tracker, q = settings_tracker(obj, tree), q0
    followers = deform_followers(obj, location_controls(obj, bones))  # (judged as the character shows)
    # A control rig's mechanism follows what the solve moves (a hand control's parent follows the torso): solved
    # again from the pose shown, until the goals are met as shown (a few passes).
    for _ in range(FOLLOW_PASSES if mapping.follows.any() else 1):
        objectives = goal_objectives(obj, obj.fullbody_ik.goals, tree, mapping, q)
        result = tracker.step(list(objectives) + stay, q)
        result.errors = result.errors[:len(objectives)]
        write_pose(obj, tree, mapping, result.q)
        # Judged again on the pose Blender shows (what the solve does not model: constraints, pose scale).
        bpy.context.view_layer.update()
        q = read_pose(obj, tree, mapping)
        state = shown_state(obj, tree, mapping, q, as_followed(shown_matrices(obj), followers)[mapping.rows])
        result.shown_errors = np.array([float(o.error(state)) for o in objectives])
        met = [bool(o.satisfied(state)) for o in objectives]
        result.shown_success = all(met)
        if result.shown_success:
            break
    result.unmodeled = mapping.unmodeled + [f"{name}: its pose scale (off 1 by {off:.3g}) is not modeled"
                                            for name, off in scaled_bones(obj, mapping).items()]
    result.hints = [] if result.shown_success else goal_notes(obj) + _miss_hints(obj, tree, objectives, result, met)
    result.moved_bones = [name for name in mapping.bones
                          if np.max(np.abs(result.q[mapping.all_variables(name)] - q0[mapping.all_variables(name)]),
                                    initial=0.0) > 1e-9]
    return result
