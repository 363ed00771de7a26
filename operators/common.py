# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks every operator makes before touching an armature, with messages a user can act on."""

import contextlib

from ..rig import RigError
from ..rig.armature import rotation_path


def active_armature(context):
    """Poll of the operators that work on the active armature."""
    return context.active_object is not None and context.active_object.type == "ARMATURE"


class ArmatureOperator:
    """Base of the operators that change the active armature: one undo step, available on any armature."""

    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return active_armature(context)


def run_job(op, context, job, failed, done):
    """Run ``job(progress)`` (a foot placement, a retargeting) under the progress bar and report on it: a RigError
    cancels (nothing was changed); a report that is not ok is an error whose result is kept for inspection.
    ``failed(report)`` and ``done(report)`` say what happened."""
    try:
        with progress_bar(context) as progress:
            report = job(progress)
    except RigError as e:
        op.report({"ERROR"}, f"nothing was changed: {e}")
        return {"CANCELLED"}
    if not report.ok:
        op.report({"ERROR"}, f"{failed(report)}; the result is kept in action {report.action!r} for inspection")
    else:
        op.report({"INFO"}, done(report))
    return {"FINISHED"}


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


def insert_keys(context, obj, bone_names):
    """Key the rotation (and a free root's location) of these bones at the current frame, when the user has
    auto-keying on."""
    if not context.scene.tool_settings.use_keyframe_insert_auto:
        return
    frame = context.scene.frame_current
    free_root = obj.fullbody_ik.settings.free_root
    for name in bone_names:
        pb = obj.pose.bones[name]
        pb.keyframe_insert(rotation_path(pb), frame=frame, group=name)
        if free_root and pb.parent is None:
            pb.keyframe_insert("location", frame=frame, group=name)


@contextlib.contextmanager
def progress_bar(context):
    """The window manager's progress bar for a job run to the end at once; yields ``update(fraction)``."""
    wm = context.window_manager
    wm.progress_begin(0, 100)
    try:
        yield lambda p: wm.progress_update(int(100 * p))
    finally:
        wm.progress_end()
