# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks every operator makes before touching an armature, with messages a user can act on."""


def armature_problem(context, need_pose_mode=False):
    """None when the active object is an armature we may edit, else the reason in words."""
    obj = context.active_object
    if obj is None or obj.type != "ARMATURE":
        return "select an armature"
    if obj.library is not None or obj.data.library is not None:
        return f"{obj.name!r} is linked from a library (read-only): make it local or use a library override"
    if len(obj.data.bones) == 0:
        return f"armature {obj.name!r} has no bones"
    if need_pose_mode and context.mode != "POSE":
        return "switch to Pose Mode"
    return None
