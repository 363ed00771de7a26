# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals and solver settings, kept on the armature object (saved in the .blend): ``object.fullbody_ik``."""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from .registration import register_classes, unregister_classes
from .rig.goals import GOAL_KINDS as _GOAL_KINDS
from .solvers.methods import METHODS as _METHODS

# Read from the tables of the solver core and the rig bridge: one definition of each method and goal kind.
GOAL_KINDS = [(k.name, k.label, k.description) for k in _GOAL_KINDS.values()]
METHODS = [(m.name, m.label, m.description) for m in _METHODS.values()]
AXES = [("X", "X", ""), ("Y", "Y", ""), ("Z", "Z", ""), ("-X", "-X", ""), ("-Y", "-Y", ""), ("-Z", "-Z", "")]


def _remember_target(goal, _context):
    goal.target_name = goal.target.name if goal.target is not None else ""


class FBIK_Goal(bpy.types.PropertyGroup):
    kind: EnumProperty(name="Kind", items=GOAL_KINDS, default="POSITION")
    bone: StringProperty(name="Bone", description="The bone this goal moves")
    target: PointerProperty(name="Target", type=bpy.types.Object, update=_remember_target,
                            description="Object giving the goal; empty: the fixed point below")
    target_name: StringProperty(options={"HIDDEN"}, description="The target's name when it was set: a target "
                                "that is gone without being cleared was deleted")
    subtarget: StringProperty(name="Bone", description="A bone of the target armature")
    point: FloatVectorProperty(name="Point", size=3, subtype="TRANSLATION",
                               description="Fixed goal position (world space) when there is no target")
    use_tail: BoolProperty(name="Tail", default=True, description="Use the bone's tail, not its head")
    chain_length: IntProperty(name="Chain Length", default=0, min=0, soft_max=20,
                              description="How many bones the goal may move, from its own bone up its chain (0: up "
                                          "to the root), as Blender's IK constraint's Chain Length")
    weight: FloatProperty(name="Weight", default=1.0, min=0.0, soft_max=10.0)
    priority: IntProperty(name="Priority", default=0, description="Higher first (prioritized solver)")
    enabled: BoolProperty(name="Enabled", default=True)
    tolerance: FloatProperty(name="Tolerance", default=1e-4, min=0.0, precision=5,
                             description="Position tolerance (m); angular goals use radians")
    angle_tolerance: FloatProperty(name="Angle Tolerance", default=1e-3, min=1e-6, soft_max=0.1, precision=4,
                                   subtype="ANGLE", description="A Pose goal's tolerance on its orientation")
    look_at_axis: EnumProperty(name="Axis", items=AXES, default="Y")
    min_distance: FloatProperty(name="Minimum Distance", default=0.1, min=0.0, subtype="DISTANCE")
    joint_axis: EnumProperty(name="Axis", items=AXES[:3], default="X")
    joint_value: FloatProperty(name="Value", subtype="ANGLE")


class FBIK_Settings(bpy.types.PropertyGroup):
    method: EnumProperty(name="Method", items=METHODS, default="lm")
    time_limit: FloatProperty(name="Time Budget", default=0.05, min=0.001, soft_max=1.0, unit="TIME_ABSOLUTE",
                              description="Seconds per solve")
    population: IntProperty(name="Population", default=0, min=0, soft_max=300,
                            description="Memetic population (0: automatic from the number of joints)")
    elites: IntProperty(name="Elites", default=0, min=0, soft_max=10, description="Memetic elites (0: automatic)")
    exploit: EnumProperty(name="Exploitation", default="AUTO", description="How the memetic solver refines its elites",
                          items=[("AUTO", "Automatic", "Levenberg-Marquardt on the compiled core, L-BFGS-B on numpy: "
                                  "each the faster there (measured in the benchmarks)", "", 2),
                                 ("LBFGSB", "L-BFGS-B", "Paper 000's exploitation: scipy's L-BFGS-B on the fitness",
                                  "", 0),
                                 ("LM", "Levenberg-Marquardt", "A few LM iterations per elite: faster compiled, and "
                                  "slides along swing limits (measured in the benchmarks)", "", 1)])
    seed: IntProperty(name="Seed", default=0, min=0, description="Random seed: the same seed, the same answer")
    free_root: BoolProperty(name="Free Root", default=False, description="Let the root bone move and turn")
    use_stretch: BoolProperty(name="Stretch", default=True,
                              description="Let bones with IK Stretch scale to reach their goals (as the IK "
                                          "constraint's Stretch option)")
    use_limit_rotation: BoolProperty(name="Limit Rotation Constraints", default=False,
                                     description="Also limit bones by their Limit Rotation constraints (local "
                                                 "space; their Euler limits are used as swing/twist limits)")
    movable: StringProperty(name="Bones That May Move",
                            description="A bone collection of the armature: only its bones move in Solve, Drag and "
                                        "Bake, the others keep their pose (empty: any bone)")


def _is_mesh(_self, obj):
    return obj.type == "MESH"


class FBIK_Feet(bpy.types.PropertyGroup):
    """Foot placement settings, kept on the armature."""

    feet: StringProperty(name="Feet", description="The feet by hand, ANKLE:BALL,ANKLE:BALL (empty: found from bone "
                                                  "names)")
    terrain: PointerProperty(name="Terrain", type=bpy.types.Object, poll=_is_mesh,
                             description="A mesh to stand on (modifiers evaluated)")
    terrain_collection: PointerProperty(name="Terrain Collection", type=bpy.types.Collection,
                                        description="Every mesh in this collection is terrain too")
    max_error: FloatProperty(name="Max Error", default=0.01, min=0.0, soft_max=0.1, precision=4, subtype="DISTANCE",
                             description="A contact further off the terrain than this makes the result a failure "
                                         "(kept for inspection)")
    independent: BoolProperty(name="Independent Frames", default=False,
                              description="Solve each frame from the action's own pose there, not from the previous "
                                          "frame's answer: frames in parallel threads (measured less smooth than "
                                          "the default, and not faster on two cores)")


class FBIK_BoneRole(bpy.types.PropertyGroup):
    """One row of an armature's bone map: a humanoid role and the bone that plays it."""

    role: StringProperty(name="Role")
    bone: StringProperty(name="Bone", description="The bone that plays this role (empty: none)")
    confidence: FloatProperty(name="Confidence", min=0.0, max=1.0, default=1.0,
                              description="How sure the automatic mapping was (1 when a preset or you set it)")


def _is_armature(_self, obj):
    return obj.type == "ARMATURE"


class FBIK_Retarget(bpy.types.PropertyGroup):
    """Retargeting settings, kept on the character (the target armature)."""

    source: PointerProperty(name="Source", type=bpy.types.Object, poll=_is_armature,
                            description="The armature whose action is retargeted onto this one")
    root: EnumProperty(name="Root", default="scaled", items=[
        ("scaled", "Scaled", "The pelvis travels as the source's, scaled by the ratio of hip heights"),
        ("kept", "Kept", "The pelvis travels as the source's, in world units"),
        ("in_place", "In Place", "The pelvis stays over its rest place (its height follows the motion)"),
        ("from_feet", "From Feet", "An in-place clip (the hips on a treadmill) travels as its standing feet imply: "
                                   "they do not slide")],
        description="How the pelvis travels")
    ik: BoolProperty(name="Plant Contacts", default=True,
                     description="Plant the source's contacts on the floor (or the terrain) with the foot placement")
    terrain: PointerProperty(name="Terrain", type=bpy.types.Object, poll=_is_mesh,
                             description="Plant the contacts on this mesh (default: the character's floor)")
    hands: BoolProperty(name="Hold Hands", default=False,
                        description="Hold the hands where the source's are from its pelvis (scaled): hands that touch "
                                    "the body or each other keep touching")
    independent: BoolProperty(name="Independent Frames", default=True,
                              description="Plant each frame's contacts from the copied pose there, not from the "
                                          "previous frame's answer (which can carry a bad pose through jumps and "
                                          "turns); frames in parallel threads")


class FBIK_Props(bpy.types.PropertyGroup):
    goals: CollectionProperty(type=FBIK_Goal)
    feet: PointerProperty(type=FBIK_Feet)
    retarget: PointerProperty(type=FBIK_Retarget)
    bone_map: CollectionProperty(type=FBIK_BoneRole)
    active_role: IntProperty(name="Active Role", default=0)
    active_goal: IntProperty(name="Active Goal", default=0)
    settings: PointerProperty(type=FBIK_Settings)


CLASSES = (FBIK_Goal, FBIK_Settings, FBIK_Feet, FBIK_BoneRole, FBIK_Retarget, FBIK_Props)


def register():
    register_classes(CLASSES)
    bpy.types.Object.fullbody_ik = PointerProperty(type=FBIK_Props)


def unregister():
    del bpy.types.Object.fullbody_ik
    unregister_classes(CLASSES)
