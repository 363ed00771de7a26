# SPDX-License-Identifier: GPL-3.0-or-later
"""Plant the active armature's feet on the terrain over a frame range, baked into a new action (one undo step;
the source action is kept). The work is rig.footplant.foot_placement; this gathers the settings and reports."""

import bpy
from bpy.props import IntProperty

from ..registration import register_classes, unregister_classes
from ..rig.footplant import FootOptions, foot_placement
from .common import ArmatureOperator, armature_problem, run_job


def terrain_names(props):
    """The terrain objects of the armature's foot settings: the object and the meshes of the collection."""
    names = [props.terrain.name] if props.terrain is not None else []
    if props.terrain_collection is not None:
        names += [o.name for o in props.terrain_collection.all_objects if o.type == "MESH" and o.name not in names]
    return names


class FULLBODY_IK_OT_foot_placement(ArmatureOperator, bpy.types.Operator):
    """Plant the feet of the active armature's action on the terrain, baked into a new action"""

    bl_idname = "fullbody_ik.foot_placement"
    bl_label = "Place Feet"

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's)")
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's)")

    def execute(self, context):
        problem = armature_problem(context)
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        obj, scene = context.active_object, context.scene
        props = obj.fullbody_ik.feet
        names = terrain_names(props)
        if not names:
            self.report({"ERROR"}, "pick a terrain object (or a collection of them) in the Feet panel")
            return {"CANCELLED"}
        start = self.frame_start if self.properties.is_property_set("frame_start") else scene.frame_start
        end = self.frame_end if self.properties.is_property_set("frame_end") else scene.frame_end
        options = FootOptions(start, end, names, props.feet, max_error=props.max_error, independent=props.independent)
        return run_job(self, context, lambda progress: foot_placement(scene, obj, options, progress=progress),
                       lambda r: f"Foot placement failed: {r.verdict}",
                       lambda r: f"Feet placed in {r.action!r}: {r.verdict}")


CLASSES = (FULLBODY_IK_OT_foot_placement,)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
