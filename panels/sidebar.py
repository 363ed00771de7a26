# SPDX-License-Identifier: GPL-3.0-or-later
"""The "Full-Body IK" tab of the 3D viewport's sidebar (Pose Mode): goals, solver settings, Solve, Drag, Bake."""

import os
import shutil

import bpy
from bl_operators.presets import AddPresetBase

from ..registration import register_classes, unregister_classes
from ..rig.bake_report import report_summary
from ..solvers import compiled

PRESET_SUBDIR = os.path.join("fullbody_ik", "solver")
BUNDLED_PRESETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "presets", "solver")


class FULLBODY_IK_UL_goals(bpy.types.UIList):
    def draw_item(self, context, layout, data, goal, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.prop(goal, "enabled", text="")
        label = f"{goal.bone or '?'}: {goal.kind.replace('_', ' ').title()}"
        if goal.target is not None:
            label += f" → {goal.target.name}" + (f" [{goal.subtarget}]" if goal.subtarget else "")
        row.label(text=label, icon="BONE_DATA")


class FULLBODY_IK_MT_solver_presets(bpy.types.Menu):
    bl_label = "Solver Presets"
    preset_subdir = PRESET_SUBDIR
    preset_operator = "script.execute_preset"
    draw = bpy.types.Menu.draw_preset


class FULLBODY_IK_OT_solver_preset_add(AddPresetBase, bpy.types.Operator):
    """Save or remove a solver preset"""

    bl_idname = "fullbody_ik.solver_preset_add"
    bl_label = "Add Solver Preset"
    preset_menu = "FULLBODY_IK_MT_solver_presets"
    preset_subdir = PRESET_SUBDIR
    preset_defines = ["settings = bpy.context.active_object.fullbody_ik.settings"]
    preset_values = ["settings.method", "settings.time_limit", "settings.population", "settings.elites",
                     "settings.exploit", "settings.seed", "settings.free_root", "settings.use_limit_rotation",
                     "settings.use_stretch"]


class FULLBODY_IK_PT_sidebar(bpy.types.Panel):
    bl_label = "Full-Body IK"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Full-Body IK"

    @classmethod
    def poll(cls, context):
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE" and context.mode == "POSE"

    def draw(self, context):
        layout = self.layout
        props = context.active_object.fullbody_ik
        row = layout.row()
        row.template_list("FULLBODY_IK_UL_goals", "", props, "goals", props, "active_goal", rows=4)
        col = row.column(align=True)
        col.operator_menu_enum("fullbody_ik.goal_add", "kind", text="", icon="ADD")
        col.operator("fullbody_ik.goal_remove", text="", icon="REMOVE")
        col.separator()
        col.operator("fullbody_ik.goal_move", text="", icon="TRIA_UP").direction = "UP"
        col.operator("fullbody_ik.goal_move", text="", icon="TRIA_DOWN").direction = "DOWN"
        if 0 <= props.active_goal < len(props.goals):
            goal = props.goals[props.active_goal]
            box = layout.box()
            box.prop(goal, "kind")
            box.prop_search(goal, "bone", context.active_object.data, "bones")
            if goal.kind not in {"DISPLACEMENT", "JOINT_VALUE"}:
                box.prop(goal, "target")
                if goal.target is not None and goal.target.type == "ARMATURE":
                    box.prop_search(goal, "subtarget", goal.target.data, "bones")
                if goal.target is None:
                    box.prop(goal, "point")
                if goal.kind in {"POSITION", "POSE", "DISTANCE"}:
                    box.prop(goal, "use_tail")
                box.prop(goal, "chain_length")
            if goal.kind == "LOOK_AT":
                box.prop(goal, "look_at_axis")
            if goal.kind == "DISTANCE":
                box.prop(goal, "min_distance")
            if goal.kind == "JOINT_VALUE":
                box.prop(goal, "joint_axis")
                box.prop(goal, "joint_value")
            row = box.row(align=True)
            row.prop(goal, "weight")
            row.prop(goal, "priority")
            box.prop(goal, "tolerance")
            if goal.kind == "POSE":
                box.prop(goal, "angle_tolerance")
        s = props.settings
        box = layout.box()
        row = box.row(align=True)
        row.menu("FULLBODY_IK_MT_solver_presets", text=FULLBODY_IK_MT_solver_presets.bl_label)
        row.operator("fullbody_ik.solver_preset_add", text="", icon="ADD")
        row.operator("fullbody_ik.solver_preset_add", text="", icon="REMOVE").remove_active = True
        box.prop(s, "method")
        box.prop(s, "time_limit")
        if s.method == "memetic":
            row = box.row(align=True)
            row.prop(s, "population")
            row.prop(s, "elites")
            box.prop(s, "exploit")
        row = box.row(align=True)
        row.prop(s, "seed")
        row.prop(s, "free_root")
        row = box.row(align=True)
        row.prop(s, "use_stretch")
        row.prop(s, "use_limit_rotation")
        box.prop_search(s, "movable", context.active_object.data, "collections_all")
        box.label(text=f"Core: {compiled.status()}", icon="INFO")
        row = layout.row(align=True)
        row.scale_y = 1.4
        row.operator("fullbody_ik.solve", icon="CON_KINEMATIC")
        row.operator("fullbody_ik.drag", icon="VIEW_PAN")
        row = layout.row(align=True)
        row.operator("fullbody_ik.bake", icon="ACTION")
        ad = context.active_object.animation_data
        lines = report_summary(ad.action if ad is not None else None)
        if lines:
            col = layout.column(align=True)
            for line in lines:
                col.label(text=line)


class _Subpanel:
    """Where the sidebar's folded sections live: under the Full-Body IK panel, closed at first."""

    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Full-Body IK"
    bl_parent_id = "FULLBODY_IK_PT_sidebar"
    bl_options = {"DEFAULT_CLOSED"}


class FULLBODY_IK_PT_feet(_Subpanel, bpy.types.Panel):
    """Foot placement: the feet found, the terrain, the last result."""

    bl_label = "Feet"

    def draw(self, context):
        from ..rig import RigError
        from ..rig.feet import find_feet
        from ..rig.foot_report import feet_report_summary

        layout = self.layout
        obj = context.active_object
        props = obj.fullbody_ik.feet
        col = layout.column(align=True)
        try:
            for foot in find_feet(obj, props.feet):
                col.label(text=f"{foot.side.title()}: {foot.ankle}" + (f" / {foot.ball}" if foot.ball else ""),
                          icon="BONE_DATA")
        except RigError as e:
            col.label(text=str(e)[:120], icon="ERROR")
        layout.prop(props, "feet")
        layout.prop(props, "terrain")
        layout.prop(props, "terrain_collection")
        layout.prop(props, "max_error")
        layout.prop(props, "independent")
        layout.operator("fullbody_ik.foot_placement", icon="MOD_DYNAMICPAINT")
        ad = obj.animation_data
        for line in feet_report_summary(ad.action if ad is not None else None):
            layout.label(text=line)


class FULLBODY_IK_UL_bone_map(bpy.types.UIList):
    """A role and the bone that plays it (picked from the armature's bones), unsure ones marked."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.label(text=item.role, icon="BONE_DATA" if item.confidence >= 1.0 else "QUESTION")
        row.prop_search(item, "bone", context.active_object.data, "bones", text="")


class FULLBODY_IK_PT_retarget(_Subpanel, bpy.types.Panel):
    """Retargeting onto the active armature: the source, the bones mapped (with how sure the mapping is), the
    settings, the last result."""

    bl_label = "Retarget"

    def draw(self, context):
        from ..rig import RigError
        from ..rig.foot_report import feet_report_summary
        from ..rig.humanoid import map_humanoid

        layout = self.layout
        obj = context.active_object
        props = obj.fullbody_ik.retarget
        layout.prop(props, "source")
        layout.prop(props, "root")
        layout.prop(props, "ik")
        if props.ik:
            layout.prop(props, "terrain")
            layout.prop(props, "hands")
            layout.prop(props, "independent")
        fb = obj.fullbody_ik
        if len(fb.bone_map):  # this character's map, edited by hand
            layout.label(text="Bone map (this armature):")
            layout.template_list("FULLBODY_IK_UL_bone_map", "", fb, "bone_map", fb, "active_role", rows=6)
            row = layout.row(align=True)
            row.operator("fullbody_ik.bone_map_save", icon="FILE_TICK")
            row.operator("fullbody_ik.bone_map_clear", icon="X")
        else:
            col = layout.column(align=True)
            try:
                ht = map_humanoid(obj)
                col.label(text=f"Mapped: {len(ht.roles)} roles ({ht.source})", icon="BONE_DATA")
                low = [r for r, c in ht.confidence.items() if c < 1.0]
                if low:
                    col.label(text=f"Unsure: {', '.join(sorted(low))[:80]}", icon="QUESTION")
            except RigError as e:
                col.label(text=str(e)[:120], icon="ERROR")
            layout.operator("fullbody_ik.bone_map_fill", icon="GROUP_BONE")
        layout.operator("fullbody_ik.retarget", icon="ARMATURE_DATA")
        ad = obj.animation_data
        for line in feet_report_summary(ad.action if ad is not None else None):
            layout.label(text=line)


def install_presets():
    """Copy the bundled presets into the user's preset folder once (Blender lists presets from there)."""
    target = bpy.utils.user_resource("SCRIPTS", path=os.path.join("presets", PRESET_SUBDIR), create=True)
    if not target or not os.path.isdir(BUNDLED_PRESETS):
        return
    for name in os.listdir(BUNDLED_PRESETS):
        if name.endswith(".py") and not os.path.exists(os.path.join(target, name)):
            shutil.copy2(os.path.join(BUNDLED_PRESETS, name), target)


CLASSES = (FULLBODY_IK_UL_goals, FULLBODY_IK_MT_solver_presets, FULLBODY_IK_OT_solver_preset_add,
           FULLBODY_IK_PT_sidebar, FULLBODY_IK_PT_feet, FULLBODY_IK_UL_bone_map, FULLBODY_IK_PT_retarget)


def register():
    register_classes(CLASSES)
    try:
        install_presets()
    except OSError as e:  # a read-only user folder must not stop the add-on from working
        print(f"Full-Body IK: solver presets not installed ({e})")


def unregister():
    unregister_classes(CLASSES)
