# SPDX-License-Identifier: GPL-3.0-or-later
"""The interactive drag, as a plain class: pick a goal target (or a bone) near the mouse, move it in the view
plane, re-solve on every move; confirm keeps the result, cancel restores the pose and the target exactly.

The view is given as plain data (the region's 4x4 perspective matrix and its size in pixels), so tests
drive a session with synthetic mouse positions and view matrices; the modal operator only forwards events.
"""

import numpy as np

from ..solvers import Position
from .armature import RigError, read_pose, write_pose
from .controls import carriers, overridden
from .goals import goal_bones, goal_objectives, pointed_bones, settings_tracker, settings_tree, stay_near, stay_weights


def look_at_perspective(eye, target, fov=0.8, aspect=1.5, near=0.1, far=100.0):
    """A 3D-viewport-like perspective matrix (projection @ view) looking from eye at target, Z up."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    f = (target - eye) / np.linalg.norm(target - eye)
    r = np.cross(f, [0.0, 0.0, 1.0])
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    view = np.eye(4)
    view[0, :3], view[1, :3], view[2, :3] = r, u, -f
    view[:3, 3] = -view[:3, :3] @ eye
    t = 1.0 / np.tan(fov / 2)
    proj = np.zeros((4, 4))
    proj[0, 0], proj[1, 1] = t / aspect, t
    proj[2, 2], proj[2, 3], proj[3, 2] = (far + near) / (near - far), 2 * far * near / (near - far), -1.0
    return proj @ view


def to_screen(perspective, size, world):
    """World point -> (pixel x, pixel y, clip depth z/w, w); None behind the viewer."""
    clip = perspective @ np.append(np.asarray(world, dtype=float), 1.0)
    if clip[3] <= 1e-9:
        return None
    ndc = clip[:3] / clip[3]
    return np.array([(ndc[0] + 1.0) * 0.5 * size[0], (ndc[1] + 1.0) * 0.5 * size[1], ndc[2], clip[3]])


def from_screen(perspective, size, pixel, depth):
    """Pixel + clip depth (z/w) -> world point on the plane parallel to the view through that depth."""
    ndc = np.array([2.0 * pixel[0] / size[0] - 1.0, 2.0 * pixel[1] / size[1] - 1.0, depth, 1.0])
    world = np.linalg.inv(perspective) @ ndc
    return world[:3] / world[3]


def shown(pose_bone):
    """Whether the viewport shows ``pose_bone``: not hidden, and in a visible bone collection (or in none)."""
    bone = pose_bone.bone
    if pose_bone.hide or bone.hide:
        return False
    return not bone.collections or any(c.is_visible_effectively for c in bone.collections)


class DragSession:
    """One drag, from pick to confirm or cancel."""

    def __init__(self, obj, perspective, size, mouse, pick_radius=40.0):
        self.obj = obj
        self.perspective = np.asarray(perspective, dtype=float)
        self.size = (float(size[0]), float(size[1]))
        props = obj.fullbody_ik
        self.settings = props.settings
        self.goal, self.bone, self.anchor = self._pick(np.asarray(mouse, dtype=float), pick_radius)
        if self.goal is None and self.bone is None:
            raise RigError("nothing to drag here: click near a goal target or a bone")
        self.tip = None
        if self.bone is not None:
            self.tip = (0.0, obj.data.bones[self.bone].length, 0.0)
            # A bone the rig's constraints pose (a deform bone shown) is moved by the control that carries it, its
            # tip held in that control's frame (bone = control @ K); one no control carries stays as grabbed.
            on = carriers(obj, {self.bone}).get(self.bone) if overridden(obj.pose.bones[self.bone]) else None
            if on is not None:
                self.bone, K = on[0], np.asarray(on[1], dtype=float)
                self.tip = tuple((K @ np.append(self.tip, 1.0))[:3])
        bones = goal_bones(obj)
        if self.bone is not None:
            bones = (bones or set()) | {self.bone}
        self.tree, self.mapping = settings_tree(obj, bones)
        self.start_q = read_pose(obj, self.tree, self.mapping)
        # Each step starts from the pose of the last one (the tracker's continuity and nearby restarts): the
        # pose under the mouse moves on, it does not jump to another solution (jumps=False: a bake's frame may).
        self.tracker = settings_tracker(obj, self.tree, previous=self.start_q, jumps=False)
        # What the drag does not need keeps the pose it started from, the bones nearest the grabbed one moving first.
        pointed = pointed_bones(obj) | ({self.bone} if self.bone is not None else set())  # (a drag moves a point)
        self.stay = stay_near(self.tree, stay_weights(obj, self.mapping, bones, keyed_only=False, pointed=pointed),
                              self.start_q)
        self.saved_pose = {pb.name: (tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                                     tuple(pb.rotation_axis_angle), tuple(pb.scale)) for pb in obj.pose.bones}
        self.saved_target = self.saved_matrix = None
        if self.goal is not None:
            t = self.goal.target
            self.saved_target = tuple(t.location) if t is not None else tuple(self.goal.point)
            self.saved_matrix = t.matrix_world.copy() if t is not None else None
        screen = to_screen(self.perspective, self.size, self.anchor)
        self.depth = screen[2]
        self.grab_offset = screen[:2] - np.asarray(mouse, dtype=float)
        self.last = None

    def _pick(self, mouse, radius):
        """The goal target nearest the mouse within ``radius`` pixels, else the nearest tip of a bone the viewport
        shows."""
        obj, best = self.obj, (radius, None, None, None)
        for goal in obj.fullbody_ik.goals:
            if not goal.enabled or goal.kind in {"DISPLACEMENT", "JOINT_VALUE"}:
                continue
            world = np.array(goal.target.matrix_world.translation) if goal.target is not None else np.array(goal.point)
            s = to_screen(self.perspective, self.size, world)
            if s is not None and np.hypot(*(s[:2] - mouse)) < best[0]:
                best = (np.hypot(*(s[:2] - mouse)), goal, None, world)
        if best[1] is not None:
            return best[1], None, best[3]
        M = np.array(obj.matrix_world)
        for pb in obj.pose.bones:
            if not shown(pb):  # (a control rig's mechanism and deform bones, hidden, share the controls' places)
                continue
            world = (M @ np.append(np.array(pb.tail), 1.0))[:3]
            s = to_screen(self.perspective, self.size, world)
            if s is not None and np.hypot(*(s[:2] - mouse)) < best[0]:
                best = (np.hypot(*(s[:2] - mouse)), None, pb.name, world)
        return None, best[2], best[3]

    def _objectives(self, world):
        obj = self.obj
        if self.goal is not None:
            if self.goal.target is not None:
                m = self.goal.target.matrix_world.copy()  # through matrix_world: parented targets move right
                m.translation = world
                self.goal.target.matrix_world = m
            else:
                self.goal.point = world
            return goal_objectives(obj, obj.fullbody_ik.goals, self.tree, self.mapping, self.start_q)
        # A bone without a goal: a temporary position goal for its tip, the armature's goals pinning the rest.
        local = (np.linalg.inv(np.array(obj.matrix_world)) @ np.append(world, 1.0))[:3]
        tip = Position(self.bone, local, offset=self.tip)
        try:
            others = goal_objectives(obj, obj.fullbody_ik.goals, self.tree, self.mapping, self.start_q)
        except RigError:
            others = []
        return others + [tip]

    def move(self, mouse):
        """Move the grabbed point under the mouse (view plane), solve within the time budget, write the pose."""
        world = from_screen(self.perspective, self.size, np.asarray(mouse, dtype=float) + self.grab_offset,
                            self.depth)
        objectives = self._objectives(world)
        read_pose(self.obj, self.tree, self.mapping)  # this frame's input (the pose is the tracker's last answer)
        self.last = self.tracker.step(list(objectives) + self.stay)
        self.last.errors = self.last.errors[:len(objectives)]
        write_pose(self.obj, self.tree, self.mapping, self.last.q)
        return self.last

    def confirm(self):
        return self.last

    def cancel(self):
        """Put the pose and the target back exactly as they were."""
        for pb in self.obj.pose.bones:
            loc, quat, euler, axis_angle, scale = self.saved_pose[pb.name]
            pb.location, pb.rotation_quaternion, pb.rotation_euler = loc, quat, euler
            pb.rotation_axis_angle, pb.scale = axis_angle, scale
        if self.goal is not None:
            if self.goal.target is not None:
                self.goal.target.location = self.saved_target
                self.goal.target.matrix_world = self.saved_matrix  # also the evaluated matrix, at once
            else:
                self.goal.point = self.saved_target
