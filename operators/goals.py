# SPDX-License-Identifier: GPL-3.0-or-later
"""Add, remove and reorder goals on the active armature."""

import bpy
from bpy.props import EnumProperty

from ..properties import GOAL_KINDS
from ..registration import register_classes, unregister_classes
from .common import armature_problem


class FULLBODY_IK_OT_goal_add(bpy.types.Operator):
    """Add a goal for the active bone, with a target empty at the bone's tip"""

    bl_idname = "fullbody_ik.goal_add"
    bl_label = "Add Goal"
    bl_options = {"REGISTER", "UNDO"}

    kind: EnumProperty(name="Kind", items=GOAL_KINDS, default="POSITION")

    @classmethod
    def poll(cls, context):
        return armature_problem(context) is None and context.active_pose_bone is not None

    def execute(self, context):
        obj = context.active_object
        pb = context.active_pose_bone
        props = obj.fullbody_ik
        goal = props.goals.add()
        goal.kind, goal.bone = self.kind, pb.name
        if self.kind != "DISPLACEMENT":
            # A target the user can grab, at the bone's tip in its current pose, turned like the bone.
            empty = bpy.data.objects.new(f"IK {pb.name}", None)
            empty.empty_display_type = "SPHERE" if self.kind == "POSITION" else "ARROWS"
            empty.empty_display_size = max(0.05, 0.25 * pb.length)
            tip = obj.matrix_world @ pb.matrix
            tip.translation = obj.matrix_world @ pb.tail
            empty.matrix_world = tip.normalized() if self.kind != "POSITION" else tip
            (obj.users_collection[0] if obj.users_collection else context.scene.collection).objects.link(empty)
            goal.target = empty
        props.active_goal = len(props.goals) - 1
        self.report({"INFO"}, f"{self.kind.replace('_', ' ').title()} goal for {pb.name!r}")
        return {"FINISHED"}


class FULLBODY_IK_OT_goal_remove(bpy.types.Operator):
    """Remove the active goal (its target object stays in the scene)"""

    bl_idname = "fullbody_ik.goal_remove"
    bl_label = "Remove Goal"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = context.active_object
        return armature_problem(context) is None and len(obj.fullbody_ik.goals) > 0

    def execute(self, context):
        props = context.active_object.fullbody_ik
        index = min(max(props.active_goal, 0), len(props.goals) - 1)
        props.goals.remove(index)
        props.active_goal = min(index, len(props.goals) - 1)
        return {"FINISHED"}


class FULLBODY_IK_OT_goal_move(bpy.types.Operator):
    """Move the active goal up or down the list"""

    bl_idname = "fullbody_ik.goal_move"
    bl_label = "Move Goal"
    bl_options = {"REGISTER", "UNDO"}

    direction: EnumProperty(items=[("UP", "Up", ""), ("DOWN", "Down", "")])

    @classmethod
    def poll(cls, context):
        obj = context.active_object
        return armature_problem(context) is None and len(obj.fullbody_ik.goals) > 1

    def execute(self, context):
        props = context.active_object.fullbody_ik
        i = props.active_goal
        j = i - 1 if self.direction == "UP" else i + 1
        if 0 <= i < len(props.goals) and 0 <= j < len(props.goals):
            props.goals.move(i, j)
            props.active_goal = j
        return {"FINISHED"}


CLASSES = (FULLBODY_IK_OT_goal_add, FULLBODY_IK_OT_goal_remove, FULLBODY_IK_OT_goal_move)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
