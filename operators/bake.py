# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake the active armature's goals over a frame range into keyframes.

From the UI it runs modal: a progress bar, Esc cancels and leaves everything as it was, one undo step at the
end. From scripts (``bpy.ops.fullbody_ik.bake()``) it runs to the end at once."""

import math

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty

from ..registration import register_classes, unregister_classes
from ..rig import RigError
from ..rig.bake import BakeOptions, Baker
from ..rig.bake_report import REPORT_TEXT
from ..rig.hints import counted
from .common import active_armature, armature_problem, progress_bar


class FULLBODY_IK_OT_bake(bpy.types.Operator):
    """Solve the goals at every frame of a range and key the bones IK moves (into a new action by default)"""

    bl_idname = "fullbody_ik.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start", description="First frame (default: the scene's)")
    frame_end: IntProperty(name="End", description="Last frame (default: the scene's)")
    step: IntProperty(name="Step", default=1, min=1, description="Bake every n-th frame")
    replace: BoolProperty(name="Replace", default=False,
                          description="Write into the current action (a backup copy is kept) instead of a new one")
    thin: FloatProperty(name="Thin Keys", default=0.0, min=0.0, precision=5,
                        description="Drop keys the curve reproduces within this tolerance (0: keep every frame)")
    continuity: FloatProperty(name="Continuity", default=1e-4, min=0.0, soft_max=1.0, precision=4,
                              description="Weight of staying near the previous frame's pose")
    max_error: FloatProperty(name="Max Error", default=0.01, min=0.0, soft_max=0.1, precision=4, subtype="DISTANCE",
                             description="A frame whose goal misses by more than this (world units) makes the bake "
                                         "a failure; the result is kept for inspection")
    max_angle: FloatProperty(name="Max Angle", default=math.radians(1.0), min=0.0, soft_max=math.radians(10.0),
                             subtype="ANGLE", description="A frame whose orientation, pose or look-at goal misses "
                             "its angle by more than this makes the bake a failure (as Max Error for positions)")
    independent: BoolProperty(name="Independent Frames", default=False,
                              description="Solve each frame from the action's own pose there, not from the previous "
                                          "frame's answer: frames in parallel threads (for goals near the animated "
                                          "pose; measured less smooth than the default)")

    @classmethod
    def poll(cls, context):
        return active_armature(context)

    def _options(self, context):
        scene = context.scene
        start = self.frame_start if self.properties.is_property_set("frame_start") else scene.frame_start
        end = self.frame_end if self.properties.is_property_set("frame_end") else scene.frame_end
        self.frame_start, self.frame_end = start, end
        return BakeOptions(start, end, self.step, self.replace, self.thin, self.continuity,
                           max_error=self.max_error, max_angle=self.max_angle, independent=self.independent)

    def _start(self, context):
        problem = armature_problem(context)
        if problem:
            self.report({"ERROR"}, problem)
            return None
        if context.mode not in ("POSE", "OBJECT"):
            self.report({"ERROR"}, "switch to Pose Mode or Object Mode to bake")
            return None
        try:
            return Baker(context.scene, context.active_object, self._options(context))
        except RigError as e:
            self.report({"ERROR"}, str(e))
            return None

    def _done(self, report):
        s = report.summary()
        err = (f", largest position error {s['max_error_mm']:.3g} mm" if s["max_error_mm"] is not None else "") + (
            f", largest angle error {s['max_error_deg']:.3g} deg" if s["max_error_deg"] is not None else "")
        if not report.ok:  # not a success: an error (scripts get it as RuntimeError), the result kept
            self.report({"ERROR"}, f"Bake failed: {report.verdict()['text']}{err}; the result is kept in action "
                                   f"{report.action!r} for inspection (report: Text Editor, {REPORT_TEXT!r})")
            return
        short = report.short_frames()
        level = {"WARNING"} if short or report.notes else {"INFO"}
        self.report(level, f"Baked {counted(s['frames'], 'frame')} into {report.action!r}: {s['solved_frames']} with "
                           f"every goal met{err}, {report.keys} keys, {s['ms_per_frame']:.1f} ms per frame"
                           + (f"; {report.verdict()['text']}, but frames {report.short_text()} short of a goal's "
                              "own tolerance" if short else "")
                           + "".join(f"; {n}" for n in report.notes)
                           + f" (report: Text Editor, {REPORT_TEXT!r})")

    def execute(self, context):
        baker = self._start(context)
        if baker is None:
            return {"CANCELLED"}
        try:
            with progress_bar(context) as progress:
                report = baker.run(progress=progress)
        except RigError as e:
            self.report({"ERROR"}, f"nothing was baked: {e}")
            return {"CANCELLED"}
        self._done(report)
        return {"FINISHED"}

    def invoke(self, context, event):
        if context.window is None:  # no window to show progress in (scripts, background): run to the end
            return self.execute(context)
        self.baker = self._start(context)
        if self.baker is None:
            return {"CANCELLED"}
        wm = context.window_manager
        wm.progress_begin(0, 100)
        self.timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        context.workspace.status_text_set("Baking IK... Esc: cancel (nothing is changed)")
        return {"RUNNING_MODAL"}

    def _end(self, context):
        wm = context.window_manager
        wm.event_timer_remove(self.timer)
        wm.progress_end()
        context.workspace.status_text_set(None)

    def modal(self, context, event):
        if event.type == "ESC":
            self.baker.cancel()
            self._end(context)
            self.report({"WARNING"}, "bake cancelled: nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            done = self.baker.steps(0.1)  # frames for a tenth of a second, then the UI draws
        except RigError as e:
            self.baker.cancel()
            self._end(context)
            self.report({"ERROR"}, f"nothing was baked: {e}")
            return {"CANCELLED"}
        context.window_manager.progress_update(int(100 * self.baker.progress))
        if not done:
            return {"RUNNING_MODAL"}
        report = self.baker.finish()
        self._end(context)
        self._done(report)
        return {"FINISHED"}


CLASSES = (FULLBODY_IK_OT_bake,)


def register():
    register_classes(CLASSES)


def unregister():
    unregister_classes(CLASSES)
