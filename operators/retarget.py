# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget the Retarget panel's source armature's action onto the active armature, its contacts planted, baked
into a new action (one undo step; nothing of the source changes). The work is rig.retarget.retarget."""

import bpy
from bpy.props import IntProperty

from ..registration import register_classes, unregister_classes
from ..rig import RigError
from ..rig.retarget import RetargetOptions, retarget
from .common import ArmatureOperator, run_job


class FULLBODY_IK_OT_retarget(ArmatureOperator, bpy.types.Operator):
    """Retarget the source armature's action onto the active armature, baked into a new action"""

    bl_idname = "fullbody_ik.retarget"
    bl_label = "Retarget"

    frame_start: IntProperty(name="Start", description="First frame of the source (default: its action's)")
    frame_end: IntProperty(name="End", description="Last frame of the source (default: its action's)")

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
            props.root, props.ik, [props.terrain.name] if props.terrain is not None else [], hands=props.hands,
            independent=props.independent)
        return run_job(self, context, lambda progress: retarget(context.scene, source, target, options, progress),
                       lambda r: f"Retargeting missed its contacts: {r.feet.verdict}",
                       lambda r: f"Retargeted into {r.action!r} ({len(r.mapping)} bones mapped, scale {r.scale:.3f})")


ROLE_ORDER = ("pelvis", "chest", "neck", "head") + tuple(
    f"{s} {r}" for s in ("left", "right") for r in ("thigh", "shin", "foot", "toe", "shoulder", "upper_arm", "forearm",
                                                   "hand"))


def fill_bone_map(obj, humanoid):
    """The armature's editable bone map set to a Humanoid's roles (every role listed, empty when none)."""
    rows = obj.fullbody_ik.bone_map
    rows.clear()
    for role in ROLE_ORDER:
        row = rows.add()
        row.role, row.bone = role, humanoid.roles.get(role, "")
        row.confidence = humanoid.confidence.get(role, 0.0 if not row.bone else 1.0)


class FULLBODY_IK_OT_bone_map_fill(ArmatureOperator, bpy.types.Operator):
    """List the active armature's bone map for editing: from a preset whose bones it has, else found from its
    hierarchy and names"""

    bl_idname = "fullbody_ik.bone_map_fill"
    bl_label = "Map Bones"

    def execute(self, context):
        from ..rig.humanoid import map_humanoid

        obj = context.active_object
        try:
            h = map_humanoid(obj)
        except RigError as e:
            self.report({"ERROR"}, f"nothing was changed: {e}")
            return {"CANCELLED"}
        fill_bone_map(obj, h)
        self.report({"INFO"}, f"{len(h.roles)} roles mapped ({h.source})")
        return {"FINISHED"}


class FULLBODY_IK_OT_bone_map_clear(ArmatureOperator, bpy.types.Operator):
    """Forget the active armature's edited bone map (retargeting then maps it again by itself)"""

    bl_idname = "fullbody_ik.bone_map_clear"
    bl_label = "Clear Bone Map"

    def execute(self, context):
        context.active_object.fullbody_ik.bone_map.clear()
        return {"FINISHED"}


class FULLBODY_IK_OT_bone_map_save(bpy.types.Operator):
    """Save the active armature's bone map as a preset: skeletons with the same bones use it from then on"""

    bl_idname = "fullbody_ik.bone_map_save"
    bl_label = "Save Bone Map"

    name: bpy.props.StringProperty(name="Name", description="The preset's name")

    @classmethod
    def poll(cls, context):
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE" and len(obj.fullbody_ik.bone_map) > 0

    def invoke(self, context, event):
        self.name = self.name or context.active_object.name
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        import json
        import os
        import re

        from ..rig.humanoid import from_roles, user_bone_map_folder

        obj = context.active_object
        roles = {r.role: r.bone for r in obj.fullbody_ik.bone_map if r.bone}
        try:
            from_roles(obj, roles)  # a map that cannot work is not saved
        except RigError as e:
            self.report({"ERROR"}, f"not saved: {e}")
            return {"CANCELLED"}
        name = self.name.strip() or obj.name
        folder = user_bone_map_folder(create=True)
        path = os.path.join(folder, re.sub(r"[^\w.-]+", "_", name) + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"name": name, "roles": roles}, f, indent=1)
        self.report({"INFO"}, f"bone map {name!r} saved to {path}")
        return {"FINISHED"}


CLASSES = (FULLBODY_IK_OT_retarget, FULLBODY_IK_OT_bone_map_fill, FULLBODY_IK_OT_bone_map_clear,
           FULLBODY_IK_OT_bone_map_save)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
