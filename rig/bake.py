# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake the armature's goals over a frame range into keyframes. The operator, the command line and batch
jobs all run this.

Per frame: evaluate the scene (animated targets, animated bones as targets), solve seeded from the previous
frame's solution with a displacement goal toward it (continuity), keep the result in memory. Only when every
frame is solved are keys written, in bulk, for the bones IK moved: into a copy of the armature's action
(the original keeps its name and a fake user, so nothing is lost), or, with ``replace``, into the action
itself after a backup copy is made. A cancelled or failed bake writes nothing.
"""

import time
from dataclasses import dataclass

import numpy as np

from ..solvers import Orientation, Pose, Position
from ..solvers.blas import single_thread_blas
from ..solvers.tracking import FAR, JUMP, Frames
from .armature import (
    RigError, ShownState, bone_scales, channelbags, frame_origins, limit_violations, poses_from_basis,
    read_frame_input, read_pose, rotation_channels, rotation_path, scaled_bones, shown_matrices, shown_state,
)
from .bake_report import BakeReport, frame_ranges, keep_report
from .controls import as_followed, deform_followers, location_controls
from .evaluation import evaluating_only
from .goals import (ANGULAR_KINDS, GOAL_KINDS, GoalObjectives, aimed, enabled_goals, goal_bones, goal_notes,
                    pointed_bones, settings_tracker, settings_tree, stay_near, stay_weights, world_scale)
from .hints import counted, frame_anchors, limit_hints, reach_hints, root_bones
from .keys import write_keys
from .reading import one_job_each_call


@dataclass
class BakeOptions:
    frame_start: int
    frame_end: int
    step: int = 1
    replace: bool = False  # write into the current action (after a backup copy) instead of a new one
    thin: float = 0.0  # > 0: drop keys the curve reproduces within this tolerance (channel units)
    continuity: float = 1e-4  # weight of the goal to stay near the previous frame's solution (0: off)
    method: str = ""  # empty: the armature's settings
    time_limit: float = 0.0  # seconds per frame; 0: the armature's settings
    max_error: float = 0.01  # world units: a frame whose goal misses by more fails the bake (inf: accept any)
    max_angle: float = None  # radians, for angular goals; None: 1 degree, or any angle when max_error is inf
    # Degrees the bones off every goal's chain may turn with the chain bones they hang from (a body turned for a
    # hand): None warns past CHANGE_WARNING, a number fails the bake past it.
    max_change: float = None
    rescue: float = 0.0  # a frame still short of its goals after its budget gets one more solve of this many
    # Each frame solved from the action's own pose there (its seed and continuity goal), not from the previous
    # frame's answer: the frames do not depend on each other and are solved in parallel threads (solvers.Frames)
    # while the next ones are read. ``workers``: threads (0: automatic, tracking.default_workers).
    independent: bool = False
    workers: int = 0

    def angle_threshold(self):
        if self.max_angle is not None:
            return self.max_angle
        return np.inf if np.isinf(self.max_error) else np.radians(1.0)


def _check_curves(id_block):
    """RigError when an animation curve of the ID holds a NaN or infinite key."""
    for bag in channelbags(id_block):
        for fc in bag.fcurves:
            n = len(fc.keyframe_points)
            if not n:
                continue
            co = np.zeros(2 * n, dtype=np.float32)  # (Blender's own type: a float64 buffer reads 3x slower)
            fc.keyframe_points.foreach_get("co", co)
            handles = np.zeros(4 * n, dtype=np.float32)
            fc.keyframe_points.foreach_get("handle_left", handles[: 2 * n])
            fc.keyframe_points.foreach_get("handle_right", handles[2 * n:])
            if not (np.all(np.isfinite(co)) and np.all(np.isfinite(handles))):
                bad = co.reshape(-1, 2)
                frames = bad[~np.all(np.isfinite(bad), axis=1), 0]
                where = f" at frame {frames[0]:g}" if len(frames) and np.isfinite(frames[0]) else ""
                raise RigError(f"the animation of {id_block.name!r} has a NaN or infinite key in "
                               f"{fc.data_path}[{fc.array_index}]{where}: fix or delete that key first")


def check_bake(obj, options):
    """Everything that can be refused before a frame is solved, with the reason (RigError)."""
    if obj is None or getattr(obj, "type", None) != "ARMATURE":
        raise RigError("select an armature to bake")
    if obj.library is not None or obj.data.library is not None:
        raise RigError(f"{obj.name!r} is linked from a library (read-only): make it local first")
    if options.step < 1:
        raise RigError(f"frame step must be 1 or more, got {options.step}")
    if options.frame_end < options.frame_start:
        raise RigError(f"inverted frame range {options.frame_start}-{options.frame_end}: the first frame must "
                       "not come after the last")
    ad = obj.animation_data
    action = ad.action if ad is not None else None
    if action is not None and action.library is not None:
        raise RigError(f"action {action.name!r} is linked from {action.library.filepath!r} (read-only): make it "
                       "local first (Object > Relations > Make Local)")
    if options.replace and action is not None and ad.action_slot is not None:
        _check_replace(obj, action, ad.action_slot)
    if options.thin < 0 or options.continuity < 0 or options.time_limit < 0:
        raise RigError("thinning tolerance, continuity weight and time limit must not be negative")
    if not options.max_error >= 0 or not options.angle_threshold() >= 0:
        raise RigError(f"the largest accepted error must be 0 or more (inf accepts any), got {options.max_error}")
    checked = {obj.name_full}
    _check_curves(obj)
    for g in obj.fullbody_ik.goals:  # each target once (goals on one mocap's bones share it: 70 ms each time)
        if g.enabled and g.target is not None and g.target.name_full not in checked:
            checked.add(g.target.name_full)
            _check_curves(g.target)


def _check_replace(obj, action, slot):
    """Replace writes the rig's bone keys into its action and slot: an armature with bones of those names that plays
    them too, a goal's target or what the target hangs from, would move with the keys (a duplicate of the mocap
    shares its action), and the goals met on the targets read before would not be met on the targets after."""
    bones = set(obj.data.bones.keys())
    for g in obj.fullbody_ik.goals:
        if not (g.enabled and GOAL_KINDS[g.kind].target) or g.target is None:
            continue
        o = g.target
        while o is not None:
            tad = o.animation_data if o != obj and o.type == "ARMATURE" else None
            if tad is not None and tad.action == action and tad.action_slot == slot and \
                    bones.intersection(o.data.bones.keys()):
                via = "" if o == g.target else f" (through {o.name!r}, which it hangs from)"
                raise RigError(f"replacing the keys of action {action.name!r} would move goal target "
                               f"{g.target.name!r}{via}: {o.name!r} plays the same action and slot. Bake into a new "
                               f"action (without Replace), or give {o.name!r} a copy of its own")
            o = o.parent


def animated_range(obj):
    """(first, last) frame of the animation the bake of ``obj`` follows: the armature's and its goals' targets',
    and of what each of them hangs from or is constrained to (an object constraint's target, and the armature's
    bone constraints'): each action's manual frame range where it has one, else its keys' (an action without keys
    is left out), and the strips of the NLA tracks that play (not muted; the solo track alone where there is
    one); None when nothing is animated."""
    ranges, seen = [], set()
    todo = [obj] + [g.target for g in obj.fullbody_ik.goals if g.enabled and g.target is not None]
    while todo:
        o = todo.pop()
        if o is None or o.name_full in seen:
            continue
        seen.add(o.name_full)
        ad = o.animation_data
        if ad is not None and ad.action is not None and ad.action.use_frame_range:
            ranges.append(tuple(ad.action.frame_range))
        else:
            keys = [fc.range() for bag in channelbags(o) for fc in bag.fcurves if len(fc.keyframe_points)]
            if keys:
                ranges.append((min(a for a, _ in keys), max(b for _, b in keys)))
        if ad is not None:
            tracks = [t for t in ad.nla_tracks if not t.mute]
            solo = [t for t in tracks if t.is_solo]
            ranges += [(s.frame_start, s.frame_end) for t in (solo or tracks) for s in t.strips if not s.mute]
        constraints = list(o.constraints)
        if o == obj and o.pose is not None:
            constraints += [c for b in o.pose.bones for c in b.constraints]
        todo += [c.target for c in constraints if getattr(c, "target", None) is not None and c.enabled
                 and c.influence > 0.0]
        todo.append(o.parent)
    if not ranges:
        return None
    return min(a for a, _ in ranges), max(b for _, b in ranges)


def outside_warning(frames, span, what="the armature's and the targets' actions span", job="bake"):
    """A note on the frames outside what is animated (animated_range's span; ``what`` spans it): there the
    armature and the targets hold their first or last pose; '' when every frame is within it."""
    if span is None:
        return ""
    before = [f for f in frames if f < span[0]]
    after = [f for f in frames if f > span[1]]
    if not before and not after:
        return ""
    parts = [f"{counted(len(fs), 'frame')} ({frame_ranges(fs, most=12)}) {where}"
             for fs, where in ((before, "before it"), (after, "after it")) if fs]
    return (f"{' and '.join(parts)}: outside the animation the {job} follows ({what} frames "
            f"{span[0]:g}-{span[1]:g}), where everything holds its "
            + ("first or last pose" if before and after else "first pose" if before else "last pose")
            + ". A frame range longer than the clip?")


STEP_LIMIT = 1.0  # seconds a step of the modal bake (Baker.steps) lasts at most
CHANGE_WARNING = 15.0  # degrees the bones off every goal's chain turn before the report says so


class ArmatureGoals:
    """What a bake solves by default: the armature's own goals (the sidebar's list), in report columns. Other
    jobs (foot placement) give the Baker their own object with the same attributes: ``tree``, ``mapping``,
    ``columns`` ((objective index, "error" or a details key)), ``labels``, ``units``, ``goal_index`` and
    ``objectives(frame, q_anim, seed)``; ``needs_pose`` False when ``objectives`` does not read ``q_anim`` (it is
    None then, but for a first frame); ``read_objects()``, when known, the objects besides the armature whose
    evaluated state ``objectives`` reads (a bake run to its end has Blender evaluate only those, the armature and
    what they depend on: evaluating_only)."""

    needs_pose = False

    def __init__(self, obj):
        self.obj = obj
        self.tree, self.mapping = settings_tree(obj)
        self._objectives = GoalObjectives(obj, self.tree, self.mapping)
        self._stay = stay_weights(obj, self.mapping, goal_bones(obj), pointed=pointed_bones(obj))
        enabled, self.goal_index, names = enabled_goals(obj)
        # One column per error: a pose goal has two (position, and its angle from its details).
        self.columns = [(i, "error") for i in self.goal_index]
        self.columns += [(i, "angular_error") for i in self.goal_index if enabled[i].kind == "POSE"]
        self.columns.sort(key=lambda c: (c[0], c[1] != "error"))
        self.labels = [names[i] + (" (angle)" if field == "angular_error" else "") for i, field in self.columns]
        self.units = ["rad" if enabled[i].kind in ANGULAR_KINDS or field == "angular_error" else "m"
                      for i, field in self.columns]

    def read_objects(self):
        return [g.target for g in self.obj.fullbody_ik.goals if g.target is not None]  # (enabled may be keyed)

    def objectives(self, frame, q_anim, seed):
        try:
            # (what the goals do not need stays at the action's pose, the bones nearest the goals moving first)
            return self._objectives(seed) + ([] if q_anim is None else stay_near(self.tree, self._stay, q_anim))
        except RigError as e:
            raise RigError(f"frame {frame}: {e}") from None


class Baker:
    """A bake in progress: ``step()`` solves one frame, ``finish()`` writes the keys, ``cancel()`` leaves
    everything as it was. ``run()`` does it all. ``goals``: what to solve (default: the armature's goals).
    ``watch(frame)``: called at each frame while Blender shows the written result there (as the goals are judged
    on it), for a job that reads more of it."""

    def __init__(self, scene, obj, options, goals=None, watch=None):
        check_bake(obj, options)
        self.scene, self.obj, self.options, self.watch = scene, obj, options, watch
        self.goals = goals or ArmatureGoals(obj)
        self.tree, self.mapping = self.goals.tree, self.goals.mapping
        self.columns, self.labels, self.units = self.goals.columns, self.goals.labels, self.goals.units
        self.goal_index = self.goals.goal_index
        try:
            # A rescue (more time, once) only for a frame about to fail the job: a goal off by more than max_error.
            self.tracker = settings_tracker(obj, self.tree, options.method, options.time_limit, options.continuity,
                                            rescue=options.rescue, rescue_error=options.max_error / world_scale(obj))
            self.pool = Frames(self.tracker, options.workers or None) if options.independent else None
        except ValueError as e:  # an unknown method or option, a bad FULLBODY_IK_THREADS
            raise RigError(str(e)) from None
        self.method = self.tracker.method
        self.frames = list(range(options.frame_start, options.frame_end + 1, options.step))
        if self.frames[-1] != options.frame_end:  # (the range's last frame too: past the last step the source's own
            # keys stayed, and its pose played there unbaked)
            self.frames.append(options.frame_end)
        self.outside = outside_warning(self.frames, animated_range(obj))
        between = options.frame_end - options.frame_start + 1 - len(self.frames)
        self.between = "" if not between else (
            f"keyed every {options.step} frames (and at {options.frame_end}, the last): the {counted(between, 'frame')} "
            "between the keys are Blender's interpolation of them, not solved and not judged")
        self.frame_before = (scene.frame_current, scene.frame_subframe)
        self.Q, self.errors, self.success, self.violations = [], [], [], []
        self.short = []  # per frame, per report column: its goal left beyond its own tolerance by the solve
        self.objectives, self.scales = [], []  # per frame, to judge the baked result as Blender shows it
        self.bases = []  # per frame read, the solved bones' bases as the action poses them (a missed bake's hints
        # rebuild each frame's tree from them: _frame_tree)
        self._trees = {}  # frame index -> its tree, made by _frame_tree for the hints (reach, then limits)
        self._animated = None  # (the last changed basis read, its configuration): _follow
        self.solve_ms, self.frame_ms, self.read_ms = [], [], []
        self.start_values = {}
        self.scaled = {}  # bone -> (first frame its pose scale is not 1, largest difference): not modeled, warned
        self.started = time.perf_counter()
        self._switching = 0.0  # seconds the last of steps() spent leaving objects out and showing them again

    @property
    def progress(self):
        return len(self.Q) / len(self.frames)

    def step(self):
        """Solve the next frame (independent frames: read it and queue its solve, or wait a moment for the solves
        queued); True when every frame is solved. A RigError stops the bake (call cancel)."""
        if self.pool is not None:
            return self._step_independent()
        if len(self.Q) == len(self.frames):
            return True
        t0 = time.perf_counter()
        objectives, q_anim = self._read(self.frames[len(self.Q)])
        t1 = time.perf_counter()
        res = self.tracker.step(objectives, q_anim)
        self._record(res, (time.perf_counter() - t1) * 1e3, (t1 - t0) * 1e3)
        return len(self.Q) == len(self.frames)

    def _step_independent(self):
        pool, read = self.pool, len(self.bases)
        if read < len(self.frames):
            t0 = time.perf_counter()
            objectives, q_anim = self._read(self.frames[read])
            self.read_ms.append((time.perf_counter() - t0) * 1e3)
            pool.submit(self.tree.frame_copy(), objectives, q_anim)  # its origins: this frame's, kept
        elif len(self.Q) < len(self.frames):  # every frame read: wait a moment for the next solve
            try:
                pool.result(len(self.Q), timeout=0.05)
            except TimeoutError:
                pass
        while len(self.Q) < len(pool) and pool.done(len(self.Q)):
            res = pool.result(len(self.Q))
            self._record(res, res.elapsed * 1e3, self.read_ms[len(self.Q)])
        return len(self.Q) == len(self.frames)

    def _read(self, f):
        """Frame f as the action poses it: (its objectives, the pose's configuration); the tree takes its origins."""
        self.scene.frame_set(f)
        obj, tree, mapping = self.obj, self.tree, self.mapping
        basis = read_frame_input(obj, tree, mapping)
        # The pose as a configuration: where the frame's solve starts or its goals need it, else for every frame
        # at once when the keys are written (_moved_bones): 0.15 ms a frame.
        if self.pool is None and not getattr(self.goals, "needs_pose", True):
            q_anim = self._follow(basis)
        else:
            q_anim = poses_from_basis(tree, mapping, basis[None])[0] if self._pose_needed() else None
        self.bases.append(basis)
        for name, off in scaled_bones(obj, mapping).items():
            first, largest = self.scaled.get(name, (f, 0.0))
            self.scaled[name] = (first, max(largest, off))
        if len(self.bases) == 1:
            for name in mapping.bones:
                pb = obj.pose.bones[name]
                self.start_values[name] = tuple(getattr(pb, rotation_path(pb)))
        seed = q_anim if self.pool is not None or self.tracker.previous is None else self.tracker.previous
        objectives = self.goals.objectives(f, q_anim, seed)
        self.scales.append(world_scale(obj))  # errors in world units, as the tolerances and --max-error
        self.objectives.append(objectives)
        return objectives, q_anim

    def _follow(self, basis):
        """Tracking an animated rig: the correction the last frame's answer made to its animated pose carries over
        to this frame's animated pose (the tracker starts there and its continuity goal holds it there), so what
        the goals do not need stays as the action animates it: a hand's own turn under a goal at its head, a knee's
        bend where the goals were met. From the last answer alone, a bake kept such bones as the first frame left
        them and drifted from the action (a walk's knees 80 mm off with every goal met by the action itself).
        Goals that read the pose themselves (foot placement, retargeting: a preference for it) are left to do so.
        Returns the animated pose (the last one again while the solved bones' bases do not change)."""
        known = self._animated
        if known is not None and np.array_equal(basis, known[0]):
            return known[1]
        q_anim = poses_from_basis(self.tree, self.mapping, basis[None])[0]
        if known is not None and self.tracker.previous is not None:
            self.tracker.previous = self.tree.project(q_anim + (self.tracker.previous - known[1]))
        self._animated = (basis, q_anim)
        return q_anim

    def _pose_needed(self):
        return self.pool is not None or self.tracker.previous is None or getattr(self.goals, "needs_pose", True)

    def _record(self, res, solve_ms, read_ms):
        """The next frame's answer, in order."""
        self.Q.append(res.q)
        self.errors.append(self._row(res.errors, res.details, self.scales[len(self.Q) - 1]))
        self.success.append(all(res.satisfied[i] for i in self.goal_index))
        self.short.append([self._short(res, i, field) for i, field in self.columns])
        self.solve_ms.append(solve_ms)
        self.frame_ms.append(read_ms + solve_ms)

    def _short(self, res, i, field):
        """Whether the answer left report column (i, field) beyond its tolerance: a Pose's position and angle apart
        (its ``satisfied`` is both), any other goal as it is satisfied."""
        goal = self.objectives[len(self.Q) - 1][i]
        if type(goal) is not Pose:
            return not res.satisfied[i]
        part = goal.position if field == "error" else goal.orientation
        return not res.details[i][field] <= part.tolerance

    def _row(self, errors, details, scale):
        """One frame's report columns from per-objective errors and details (lengths to world units)."""
        return [(errors[i] if field == "error" else details[i][field]) * (scale if u == "m" else 1.0)
                for (i, field), u in zip(self.columns, self.units)]

    def _shown_errors(self):
        """(frames, columns): every frame's goals judged on the pose Blender shows once the keys are written
        (the keys as Blender evaluates them, and what the solve does not model: constraints, pose scale). Only the
        report's goals are judged, and the pose is read back (rotations as values) only when one of them is a
        joint value: the others are judged on the evaluated bone matrices alone, read frame by frame and judged
        for every frame at once where the goal's kind allows (_stacked)."""
        from ..solvers import JointValue

        judged = sorted({i for i, _ in self.columns})
        angular = {i for i, field in self.columns if field != "error"}
        values = any(isinstance(objectives[i], JointValue) for objectives in self.objectives for i in judged)
        matrices, Q = [], []
        followers = deform_followers(self.obj, location_controls(self.obj, goal_bones(self.obj)))
        with evaluating_only(self.scene, [self.obj]):  # (the armature and what it depends on, in one go)
            for f, q in zip(self.frames, self.Q):
                self.scene.frame_set(f)
                if self.watch is not None:
                    self.watch(f)
                matrices.append(as_followed(shown_matrices(self.obj), followers)[self.mapping.rows])  # (the
                # solved bones': memory per frame; a control where its deform bone shows it)
                Q.append(read_pose(self.obj, self.tree, self.mapping) if values else q)
        state = shown_state(self.obj, self.tree, self.mapping, np.array(Q), np.array(matrices))
        errors = np.zeros((len(self.frames), max(judged, default=-1) + 1))
        angles = np.zeros_like(errors)
        for i in judged:
            together = _stacked([objectives[i] for objectives in self.objectives])
            if together is not None:
                errors[:, i] = together.error(state)
                if i in angular:
                    angles[:, i] = together.orientation.error(state)
                continue
            for k, objectives in enumerate(self.objectives):  # other kinds: frame by frame
                one = ShownState(self.tree, state.q[k], state.world[k])
                if i in angular:
                    d = objectives[i].details(one)
                    errors[k, i], angles[k, i] = d["error"], d["angular_error"]
                else:
                    errors[k, i] = float(objectives[i].error(one))
        rows = [[(errors[k, i] if field == "error" else angles[k, i]) * (scale if u == "m" else 1.0)
                 for (i, field), u in zip(self.columns, self.units)] for k, scale in enumerate(self.scales)]
        return np.array(rows, dtype=float).reshape(len(self.frames), len(self.labels))

    def _restore_frame(self):
        self.scene.frame_set(self.frame_before[0], subframe=self.frame_before[1])

    def cancel(self):
        """Stop: nothing was written; the scene returns to the frame it was on."""
        if self.pool is not None:
            self.pool.close(cancel=True)
        self._restore_frame()

    @one_job_each_call
    def run(self, progress=None, should_cancel=None):
        """Bake every frame and write the keys; None when ``should_cancel()`` said stop (nothing written)."""
        with single_thread_blas():  # tiny linear algebra all along: threads cost more than they bring
            return self._run(progress, should_cancel)

    def steps(self, seconds):
        """Frames for about ``seconds`` (at least one): the UI's modal bake between two redraws. True when every
        frame is solved. Meanwhile Blender evaluates only what the goals read (as run does); the scene is whole
        again afterwards (also after an error), evaluated at the frame reached, for the viewport to draw. Leaving
        objects out and showing them again costs in proportion to the scene's animated objects (thousands: a
        second): a step lasts at least four times what that took in the last one, so that it stays a fifth of the
        time, and at most STEP_LIMIT seconds (Esc answers within it). A RigError stops the bake (call cancel)."""
        reading = len(self.bases) < len(self.frames)  # (independent frames, every one read: waits for solves only)
        disabled, t0 = 0, time.perf_counter()
        t2 = t1 = t0
        try:
            with single_thread_blas(), evaluating_only(self.scene, self._read_needed() if reading else None) \
                    as disabled:
                t1 = time.perf_counter()
                until = t1 + min(max(seconds, 4.0 * self._switching), STEP_LIMIT)
                while True:
                    done = self.step()
                    t2 = time.perf_counter()
                    if done or t2 >= until:
                        break
        finally:
            if disabled:  # (what was left out shows the frame it was disabled on until evaluated again)
                self.scene.frame_set(self.scene.frame_current, subframe=self.scene.frame_subframe)
        self._switching = (t1 - t0) + (time.perf_counter() - t2)
        return done

    def _read_needed(self):
        """What reading a frame needs evaluated (evaluating_only): the armature and the objects the goals read;
        None (the whole scene) when the goals do not say."""
        read = getattr(self.goals, "read_objects", None)
        return None if read is None else [self.obj, *read()]

    def _run(self, progress, should_cancel):
        cancelled = False
        try:
            # (run to its end: nothing draws the objects left out meanwhile)
            with evaluating_only(self.scene, self._read_needed()):
                while not self.step():
                    if progress is not None:
                        progress(self.progress)
                    if should_cancel is not None and should_cancel():
                        cancelled = True
                        break
        except BaseException:
            self.cancel()
            raise
        if cancelled:
            self.cancel()
            return None
        return self.finish()

    # ------------------------------------------------------------------------------------------
    def _moved_bones(self):
        A = poses_from_basis(self.tree, self.mapping, np.array(self.bases))
        Q = np.array(self.Q)
        moved = []
        for name in self.mapping.bones:
            idx = self.mapping.all_variables(name)
            if len(idx) and np.max(np.abs(Q[:, idx] - A[:, idx])) > 1e-7:
                moved.append(name)
        if self.mapping.stretch:  # children of stretching bones get a compensating scale: key them too
            scaled = set().union(*(bone_scales(self.mapping, q) for q in (self.Q[0], self.Q[-1])))
            moved += [name for name in self.mapping.bones if name in scaled and name not in moved]
        return moved

    def _channels(self, bones):
        """{(data path, index, group): values per frame} for the moved bones, continuous over frames."""
        out = {}
        Q = np.array(self.Q)
        rotations = self.tree.joint_rotations(Q)  # (frames, links, 3, 3), every bone at once
        scales = [bone_scales(self.mapping, q) for q in self.Q] if self.mapping.stretch else None
        for name in bones:
            pb = self.obj.pose.bones[name]
            path, mode = rotation_path(pb), pb.rotation_mode
            rot = rotation_channels(mode, rotations[:, self.tree.link_index[name]], self.start_values[name])
            loc = self.mapping.location_channels(name, Q[:, self.mapping.variables[name][:3]]) \
                if name in self.mapping.free_root else []
            base = f'pose.bones["{name}"].'
            for i in range(rot.shape[1]):
                out[(base + path, i, name)] = rot[:, i]
            if len(loc):
                for i in range(3):
                    out[(base + "location", i, name)] = loc[:, i]
            if scales is not None and name in scales[0]:
                values = np.array([sc[name] for sc in scales])
                for i in range(3):
                    out[(base + "scale", i, name)] = values
        return out

    def _destination(self):
        """(action, slot, source name, backup name): where the keys go, made non-destructively."""
        import bpy

        obj = self.obj
        ad = obj.animation_data or obj.animation_data_create()
        source, slot = ad.action, ad.action_slot
        if source is not None and self.options.replace:
            backup = source.copy()
            backup.name = f"{source.name} backup"
            backup.use_fake_user = True
            if slot is None:
                slot = source.slots.new(id_type="OBJECT", name=obj.name)
                ad.action_slot = slot
            return source, slot, source.name, backup.name
        if source is not None:
            action = source.copy()
            action.name = f"{source.name} IK"
            source.use_fake_user = True  # the original stays in the file even with no user
            identifier = slot.identifier if slot is not None else None
            ad.action = action
            slot = next((s for s in action.slots if s.identifier == identifier), None)
            if slot is None:
                slot = action.slots.new(id_type="OBJECT", name=obj.name)
            ad.action_slot = slot
            return action, slot, source.name, ""
        action = bpy.data.actions.new(f"{obj.name} IK")
        slot = action.slots.new(id_type="OBJECT", name=obj.name)
        ad.action = action
        ad.action_slot = slot
        return action, slot, "", ""

    def finish(self):
        """Write the keys of every solved frame in bulk and keep the report with the action."""
        from bpy_extras import anim_utils

        if self.pool is not None:
            self.pool.close()
        self.violations = list(limit_violations(self.tree, self.mapping, np.array(self.Q)))  # all frames at once
        bones = self._moved_bones()
        channels = self._channels(bones)
        action, slot, source, backup = self._destination()
        bag = anim_utils.action_ensure_channelbag_for_slot(action, slot)
        frames = np.array(self.frames, dtype=float)
        keys = before = 0
        for (path, index, group), values in channels.items():
            fc = bag.fcurves.find(path, index=index) or bag.fcurves.new(path, index=index, group_name=group)
            before += len(frames)
            keys += write_keys(fc, frames, values, self.options.thin)
        shown = self._shown_errors()
        self._restore_frame()
        report = BakeReport(self.obj.name, self.method, self.frames, self.labels, self.units, shown,
                            np.array(self.success, dtype=bool), np.array(self.violations, dtype=int),
                            np.array(self.solve_ms), np.array(self.frame_ms), source, action.name, backup, bones,
                            keys, before, time.perf_counter() - self.started,
                            list(self.mapping.unmodeled) + [
                                f"{name}: its pose scale (off 1 by up to {off:.3g}, from frame {f}) is not modeled"
                                for name, (f, off) in self.scaled.items()],
                            self.options.max_error, self.options.angle_threshold(),
                            np.array(self.errors, dtype=float).reshape(len(self.frames), len(self.labels)))
        report.notes = [n for n in (self.outside, self.between) if n]
        if self.pool is not None and self.pool.mended:
            report.notes.append(f"{counted(self.pool.mended, 'frame')} solved again from the frame before: solved from "
                                f"the action's own pose, a bone turned more than {np.degrees(FAR):.0f} degrees from it, "
                                f"or {np.degrees(JUMP):.0f} degrees more from the frame before than the action does")
        report.turns = self._turns()
        report.max_change = self.options.max_change
        solved = set(self.mapping.bones)  # (those the chains pass through: a goal's own bone turns what hangs
        # from it as the goal asks, fingers under a hand)
        carriers = {b.name for b in self.obj.data.bones if b.name in solved and
                    any(c.name in solved for c in b.children) and any(c.name not in solved for c in b.children)}
        report.off_chain = next(([b, d, f] for b, d, f in report.turns if b in carriers), None)
        if report.off_chain and report.off_chain[1] > CHANGE_WARNING and report.max_change is None:
            report.notes.append(f"the bones off the goals' chains turned up to {report.off_chain[1]:.1f} deg from the "
                                f"action with {report.off_chain[0]} (frame {report.off_chain[2]}): a goal moved more "
                                "of the body than it needed? (Chain Length limits what it moves; --max-change "
                                "fails such a bake)")
        short = np.array(self.short, dtype=bool).reshape(report.errors.shape)
        if report.missed().any() or short.any():  # (why, also for goals short of their own tolerance only)
            limit = np.array([report.max_error if u == "m" else report.max_angle for u in report.units])
            missed = ~(report.errors <= limit) | short
            report.hints = reach_hints(self.tree, self.objectives, self.columns, self.labels, self.scales,
                                       [self._anchors(k) for k in range(len(self.frames))], missed, report.errors,
                                       root_bones(self.obj))
            # (the frames the solve itself left short: not those only Blender's pose misses, for what the solve
            # does not model)
            report.hints += limit_hints(self._frame_tree, self.objectives, self.Q,
                                        missed.any(axis=1) & ~np.array(self.success, dtype=bool), self.goal_index)
            report.hints = goal_notes(self.obj) + report.hints
        keep_report(action, report)
        return report

    def _turns(self):
        """[bone, degrees, frame] of each solved bone's largest turn, in the armature's space, from the action's
        pose at that frame to the solved one, largest first; those that turned by less than 0.05 degrees left out (a
        control rig's mechanism the solve keeps)."""
        if not self.Q:
            return []
        tree, mapping = self.tree, self.mapping
        animated = poses_from_basis(tree, mapping, np.array(self.bases[:len(self.Q)]))
        worst = np.zeros(len(mapping.bones))
        at = np.zeros(len(mapping.bones), dtype=int)
        for k, q in enumerate(self.Q):
            tree.set_origins(mapping.links, frame_origins(mapping, self.bases[k]))
            R = tree.fk_batch(np.stack([q, animated[k]]))[:, mapping.links, :3, :3]
            R = R / np.linalg.norm(R, axis=2, keepdims=True)  # (without a stretching bone's scale)
            cos = (np.einsum("bij,bij->b", R[0], R[1]) - 1.0) / 2.0
            angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
            more = angle > worst
            worst[more], at[more] = angle[more], k
        order = [i for i in np.argsort(-worst) if worst[i] >= 0.05]  # (bones that turned: not a kept mechanism's)
        return [[mapping.bones[i], float(worst[i]), int(self.frames[at[i]])] for i in order]

    def _anchors(self, k):
        """Frame k's reach_hints anchors (frame_anchors), made only for a bake that missed."""
        return frame_anchors(self._frame_tree(k))

    def _frame_tree(self, k):
        """The tree as frame k had it (its origins: the action's root motion, locked bones' turns), made once."""
        tree = self._trees.get(k)
        if tree is None:
            tree = self._trees[k] = self.tree.frame_copy()
            tree.set_origins(self.mapping.links, frame_origins(self.mapping, self.bases[k]))
        return tree


def _stacked(objectives):
    """One goal over every frame as one objective whose targets have a leading frame axis, judged on a batch of
    states at once (Position, Orientation and Pose: their residuals broadcast over it); None for other kinds, or
    when the frames' objectives differ in kind, link or offset."""
    first = objectives[0]
    kind = type(first)
    if kind not in (Position, Orientation, Pose) or any(type(o) is not kind or o.link != first.link
                                                         for o in objectives):
        return None
    if kind is Pose:
        position = _stacked([o.position for o in objectives])
        return None if position is None else aimed(first, position=position,
                                                   orientation=_stacked([o.orientation for o in objectives]))
    if kind is Position and not (np.array([o.offset for o in objectives]) == first.offset).all():
        return None
    return aimed(first, target=np.array([o.target for o in objectives]))


def bake(scene, obj, options, progress=None, should_cancel=None):
    """Bake ``obj``'s goals over the options' frame range; returns the BakeReport (None if cancelled)."""
    return Baker(scene, obj, options).run(progress, should_cancel)
