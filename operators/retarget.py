# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget the Retarget panel's source armature's action onto the active armature, its contacts planted, baked
into a new action (one undo step; nothing of the source changes). The work is rig.retarget.retarget."""

import bpy
from bpy.props import IntProperty

from ..registration import register_classes, unregister_classes
from ..rig import RigError
from ..rig.retarget import RetargetOptions, retarget
from .common import progress_bar


class FULLBODY_IK_OT_retarget(bpy.types.Operator):
    """Retarget the source armature's action onto the active armature, baked into a new action"""

    bl_idname = "fullbody_ik.retarget"
    bl_label = "Retarget"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start", description="First frame of the source (default: its action's)")
    frame_end: IntProperty(name="End", description="Last frame of the source (default: its action's)")

    @classmethod
    def poll(cls, context):
        return context.active_object is not None and context.active_object.type == "ARMATURE"

    def execute(self, context):
        target = context.active_object
        props = target.fullbody_ik.retarget
        source = props.source
        if source is None:
            self.report({"ERROR"}, "pick the source armature in the Retarget panel")
            return {"CANCELLED"}
        if source == target:
            self.report({"ERROR"}, "the source is the character itself: pick another armature")
            return {"CANCELLED"}
        options = RetargetOptions(
            self.frame_start if self.properties.is_property_set("frame_start") else None,
            self.frame_end if self.properties.is_property_set("frame_end") else None,
            props.root, props.ik, [props.terrain.name] if props.terrain is not None else [])
        try:
            with progress_bar(context) as progress:
                report = retarget(context.scene, source, target, options, progress=progress)
        except RigError as e:
            self.report({"ERROR"}, f"nothing was changed: {e}")
            return {"CANCELLED"}
        if not report.ok:
            self.report({"ERROR"}, f"Retargeting missed its contacts: {report.feet.verdict}; the result is kept in "
                                   f"action {report.action!r} for inspection")
        else:
            self.report({"INFO"}, f"Retargeted into {report.action!r} ({len(report.mapping)} bones mapped, scale "
                                  f"{report.scale:.3f})")
        return {"FINISHED"}


CLASSES = (FULLBODY_IK_OT_retarget,)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
