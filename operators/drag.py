# SPDX-License-Identifier: GPL-3.0-or-later
"""Drag: pick a goal target or a bone under the mouse, move it in the view plane, re-solve on every move.
Left mouse or Enter confirms (one undo step, keys when auto-keying is on); right mouse or Esc restores."""

import bpy

from ..registration import register_classes, unregister_classes

from ..rig import RigError
from ..rig.drag import DragSession
from .common import armature_problem, insert_keys


class FULLBODY_IK_OT_drag(bpy.types.Operator):
    """Drag a goal target or a bone; the body follows"""

    bl_idname = "fullbody_ik.drag"
    bl_label = "Drag"
    bl_options = {"REGISTER", "UNDO", "BLOCKING", "GRAB_CURSOR"}

    @classmethod
    def poll(cls, context):
        return (context.area is not None and context.area.type == "VIEW_3D"
                and armature_problem(context, need_pose_mode=True) is None)

    def invoke(self, context, event):
        problem = armature_problem(context, need_pose_mode=True)
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        region, rv3d = context.region, context.region_data
        try:
            self.session = DragSession(context.active_object, rv3d.perspective_matrix,
                                       (region.width, region.height), (event.mouse_region_x, event.mouse_region_y))
        except RigError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        context.window_manager.modal_handler_add(self)
        context.workspace.status_text_set("Drag: move the mouse · LMB/Enter confirm · RMB/Esc cancel")
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        if event.type == "MOUSEMOVE":
            try:
                result = self.session.move((event.mouse_region_x, event.mouse_region_y))
            except RigError as e:
                self.session.cancel()
                return self._finish(context, {"CANCELLED"}, ({"ERROR"}, str(e)))
            context.area.header_text_set(f"Full-Body IK: {'solved' if result.success else 'best effort'}, "
                                         f"{result.elapsed * 1e3:.1f} ms")
            return {"RUNNING_MODAL"}
        if event.type in {"LEFTMOUSE", "RET", "NUMPAD_ENTER"} and event.value == "PRESS":
            self._key(context)
            return self._finish(context, {"FINISHED"})
        if event.type in {"RIGHTMOUSE", "ESC"} and event.value == "PRESS":
            self.session.cancel()
            return self._finish(context, {"CANCELLED"})
        return {"RUNNING_MODAL"}

    def _key(self, context):
        if self.session.last is not None:
            insert_keys(context, context.active_object, self.session.mapping.bones)

    def _finish(self, context, status, report=None):
        context.area.header_text_set(None)
        context.workspace.status_text_set(None)
        if report:
            self.report(*report)
        return status


CLASSES = (FULLBODY_IK_OT_drag,)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
