# SPDX-License-Identifier: GPL-3.0-or-later
"""Solve the active armature's goals at the current frame (one undo step; keys when auto-keying is on)."""

import bpy

from ..registration import register_classes, unregister_classes

from ..rig import RigError
from ..rig.goals import solve_pose
from .common import active_armature, armature_problem, insert_keys


class FULLBODY_IK_OT_solve(bpy.types.Operator):
    """Solve the goals of the active armature at the current frame"""

    bl_idname = "fullbody_ik.solve"
    bl_label = "Solve"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return active_armature(context)

    def execute(self, context):
        problem = armature_problem(context)
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        obj = context.active_object
        try:
            result = solve_pose(obj)
        except RigError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        insert_keys(context, obj, result.moved_bones)
        worst = max(result.shown_errors) if len(result.shown_errors) else 0.0  # as Blender shows the pose
        level = {"INFO"} if result.shown_success else {"WARNING"}
        what = "Solved" if result.shown_success else "Best effort" if not result.success else \
            "Solved, but the pose Blender shows misses a goal"
        self.report(level, f"{what}: {len(result.moved_bones)} bones, largest goal error {worst:.2g} as shown, "
                           f"{result.elapsed * 1e3:.1f} ms ({result.message})")
        for hint in result.hints:
            self.report({"WARNING"}, hint)
        if result.unmodeled:
            more = f" (and {len(result.unmodeled) - 2} more)" if len(result.unmodeled) > 2 else ""
            self.report({"WARNING"}, "The pose shown may differ from the solved one: "
                                     + "; ".join(result.unmodeled[:2]) + more)
        return {"FINISHED"}


CLASSES = (FULLBODY_IK_OT_solve,)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
