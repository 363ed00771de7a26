# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake (operator and bridge) in the real bpy 5.0.1: keys follow animated targets, nothing is lost, bad
input changes nothing, cancel leaves everything as it was."""

import json
import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import fullbody_ik  # noqa: E402
from mathutils import Matrix, Vector  # noqa: E402
from fullbody_ik.rig import RigError  # noqa: E402
from fullbody_ik.rig.bake import BakeOptions, Baker  # noqa: E402
from fullbody_ik.rig.bake_report import REPORT_PROPERTY, REPORT_TEXT, frame_ranges  # noqa: E402
from fullbody_ik.rig.keys import simplify  # noqa: E402

FRAMES = (1, 24)


def channelbag(obj):
    from bpy_extras import anim_utils

    ad = obj.animation_data
    return anim_utils.action_get_channelbag_for_slot(ad.action, ad.action_slot)


def build_scene(rotation_mode="QUATERNION"):
    """An arm of three bones (animated elbow bend in its own action) and a target empty moving on a circle
    within reach, keyed every 6 frames; a position goal on the tip."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    fullbody_ik.register()
    arm = bpy.data.armatures.new("Arm")
    obj = bpy.data.objects.new("Arm", arm)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i, (head, tail) in enumerate((((0, 0, 0), (0, 0, 1)), ((0, 0, 1), (0, 0.1, 2)), ((0, 0.1, 2), (0, 0, 2.8)))):
        b = arm.edit_bones.new(f"b{i}")
        b.head, b.tail = head, tail
        if parent is not None:
            b.parent, b.use_connect = parent, True
        parent = b
    bpy.ops.object.mode_set(mode="POSE")
    for pb in obj.pose.bones:
        pb.rotation_mode = rotation_mode
    for f, angle in ((1, 0.0), (24, 0.4)):
        pb = obj.pose.bones["b1"]
        pb.rotation_mode = "XYZ"
        pb.rotation_euler = (angle, 0.0, 0.0)
        pb.keyframe_insert("rotation_euler", frame=f)
        pb.rotation_mode = rotation_mode
    obj.pose.bones["b1"].rotation_mode = rotation_mode
    target = bpy.data.objects.new("Target", None)
    bpy.context.scene.collection.objects.link(target)
    for f in range(FRAMES[0], FRAMES[1] + 1, 6):
        a = 2 * math.pi * f / 24
        target.location = (0.8 * math.cos(a), 0.8 * math.sin(a), 1.9)
        target.keyframe_insert("location", frame=f)
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b2", target, True
    obj.fullbody_ik.settings.time_limit = 0.2
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = FRAMES
    bpy.context.scene.frame_set(5)
    return obj, target


@pytest.fixture()
def scene():
    obj, target = build_scene()
    yield obj, target
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    fullbody_ik.unregister()


def tip_error(obj, target, frame):
    bpy.context.scene.frame_set(frame)
    return float(np.linalg.norm(np.array(obj.matrix_world @ obj.pose.bones["b2"].tail)
                                - np.array(target.matrix_world.translation)))


def test_bake_keys_follow_an_animated_target_in_a_new_action(scene):
    obj, target = scene
    source = obj.animation_data.action
    source_keys = {(fc.data_path, fc.array_index): [tuple(k.co) for k in fc.keyframe_points]
                   for fc in channelbag(obj).fcurves}
    assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
    assert bpy.context.scene.frame_current == 5  # back where the user was
    new = obj.animation_data.action
    assert new is not source and source.name in bpy.data.actions and source.use_fake_user
    # The original action is untouched.
    ad = obj.animation_data
    ad.action = source
    assert {(fc.data_path, fc.array_index): [tuple(k.co) for k in fc.keyframe_points]
            for fc in channelbag(obj).fcurves} == source_keys
    ad.action = new
    for f in range(FRAMES[0], FRAMES[1] + 1):
        assert tip_error(obj, target, f) < 2e-4, f
    paths = {fc.data_path for fc in channelbag(obj).fcurves}
    assert {f'pose.bones["b{i}"].rotation_quaternion' for i in range(3)} <= paths
    keys = channelbag(obj).fcurves.find('pose.bones["b0"].rotation_quaternion', index=0).keyframe_points
    assert [k.co[0] for k in keys] == list(range(FRAMES[0], FRAMES[1] + 1))
    report = json.loads(new[REPORT_PROPERTY])
    assert report["summary"]["frames"] == 24 and report["summary"]["violations"] == 0
    assert len(report["per_frame"]["errors"]) == 24 and report["goals"][0]["label"] == "position b2 tail"
    assert "frames with every goal within its tolerance: 24/24" in bpy.data.texts[REPORT_TEXT].as_string()
    from fullbody_ik.rig.bake_report import report_summary

    assert report_summary(new)[0] == "Baked 24 frames, 24 with every goal met"  # what the sidebar shows
    assert report_summary(source) == []


def test_bake_is_continuous_in_euler_modes():
    obj, target = build_scene(rotation_mode="ZXY")
    try:
        assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
        for fc in channelbag(obj).fcurves:
            if "rotation_euler" in fc.data_path and fc.data_path.startswith('pose.bones["b0"'):
                values = [k.co[1] for k in fc.keyframe_points]
                assert np.max(np.abs(np.diff(values))) < 1.0  # no 2 pi jumps between neighbouring frames
        for f in (3, 11, 20):
            assert tip_error(obj, target, f) < 2e-4
    finally:
        fullbody_ik.unregister()


def test_replace_keeps_a_backup(scene):
    obj, _ = scene
    source = obj.animation_data.action
    name = source.name
    assert bpy.ops.fullbody_ik.bake(replace=True) == {"FINISHED"}
    assert obj.animation_data.action is source
    backup = bpy.data.actions[f"{name} backup"]
    assert backup.use_fake_user
    ad = obj.animation_data
    ad.action = backup
    fcs = channelbag(obj).fcurves
    assert len(fcs) == 3 and all(len(fc.keyframe_points) == 2 for fc in fcs)  # the original elbow keys


def test_replace_is_refused_when_a_goal_target_plays_the_same_action(scene):
    """Keys written into the action and slot a goal's target armature plays (a duplicate of the mocap shares them)
    would move the target: the bake's verdict, judged on the targets read before, said OK with the saved rig 50 mm
    off. An empty playing it is not moved by bone keys: no refusal."""
    obj, target = scene
    ad = obj.animation_data
    copy = obj.copy()  # (its action, slot and bones: the rig's)
    copy.name = "Copy"
    bpy.context.scene.collection.objects.link(copy)
    empty = bpy.data.objects.new("Hook", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.parent = copy
    g = obj.fullbody_ik.goals[0]
    g.target, g.subtarget = copy, "b1"
    keys = {fc.data_path: [tuple(k.co) for k in fc.keyframe_points] for fc in channelbag(obj).fcurves}
    with pytest.raises(RuntimeError, match="would move goal target 'Copy': 'Copy' plays the same action and slot"):
        bpy.ops.fullbody_ik.bake(replace=True)
    g.target, g.subtarget = empty, ""  # hung from it
    with pytest.raises(RuntimeError, match="goal target 'Hook' \\(through 'Copy', which it hangs from\\)"):
        bpy.ops.fullbody_ik.bake(replace=True)
    assert {fc.data_path: [tuple(k.co) for k in fc.keyframe_points] for fc in channelbag(obj).fcurves} == keys
    g.target = target  # an empty playing the action itself: bone keys do not move it
    tad = target.animation_data
    tad.action, tad.action_slot = ad.action, ad.action_slot
    assert bpy.ops.fullbody_ik.bake(replace=True) == {"FINISHED"}


def test_a_missed_goal_out_of_reach_is_told_why(scene):
    """A target beyond what the bones can reach, the root fixed: the report says the goal was out of reach, by how
    much, and that the root stays put (Free Root off); reachable frames get no such hint."""
    obj, target = scene
    fc = target.animation_data.action.layers[0].strips[0].channelbag(target.animation_data.action_slot).fcurves.find(
        "location", index=2)
    for k in fc.keyframe_points:  # from frame 13 on, 1.5 m above the arm's reach (2.8 from the base: 4.3 m up)
        if k.co[0] >= 13:
            k.co[1] = 4.3
            k.handle_left[1] = k.handle_right[1] = 4.3
    fc.update()
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    missed = [int(f) for f, m in zip(report.frames, report.missed()) if m]
    assert missed and min(missed) >= 8  # (the curve rises from frame 7's key on)
    assert len(report.hints) == 2, report.hints
    reach, root = report.hints
    assert reach.startswith(f"position b2 tail: its target was out of reach on {len(missed)} of the {len(missed)} "
                            "frames it was not met")
    beyond = math.hypot(0.8, 4.3) - (1.0 + math.sqrt(1.01) + math.sqrt(0.65))  # from b0's head, minus the bones
    assert "further from 'b0'" in reach and abs(int(reach.split("up to ")[1].split(" mm")[0]) - beyond * 1e3) < 1
    assert "Free Root is off" in root
    assert "why goals were missed" in report.text() and report.to_dict()["hints"] == report.hints


def test_goals_short_of_their_tolerance_within_the_verdict_are_told_why(scene):
    """A target 4 mm beyond the arm's reach: within the verdict's 1 cm (the bake is OK), but short of the goal's
    own 0.1 mm tolerance; the report names those frames and says why (out of reach, the root fixed), as for a
    miss."""
    obj, target = scene
    reach = 1.0 + math.sqrt(1.01) + math.sqrt(0.65)  # the bones' lengths, from b0's head
    z = math.sqrt((reach + 0.004) ** 2 - 0.8 ** 2)
    fc = target.animation_data.action.layers[0].strips[0].channelbag(target.animation_data.action_slot).fcurves.find(
        "location", index=2)
    for k in fc.keyframe_points:
        if k.co[0] >= 13:
            k.co[1] = k.handle_left[1] = k.handle_right[1] = z
    fc.update()
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    short = report.short_frames()
    assert report.ok and not report.missed().any() and short and min(short) >= 8
    assert report.verdict()["short_frames"] == short == [int(f) for f, s in zip(report.frames, report.success)
                                                         if not s]
    assert len(report.hints) == 2, report.hints
    assert report.hints[0].startswith(f"position b2 tail: its target was out of reach on {len(short)} of the "
                                      f"{len(short)} frames it was not met"), report.hints
    assert 3.0 < float(report.hints[0].split("up to ")[1].split(" mm")[0]) <= 4.0 + 1e-6
    assert "Free Root is off" in report.hints[1]
    text = report.text()
    assert f"(the others: {frame_ranges(short)})" in text and "verdict: OK" in text
    assert "why goals fell short of their tolerance" in text and "why goals were missed" not in text
    from types import SimpleNamespace

    from fullbody_ik.operators.bake import FULLBODY_IK_OT_bake

    said = []
    FULLBODY_IK_OT_bake._done(SimpleNamespace(report=lambda level, text: said.append((level, text))), report)
    assert said == [({"WARNING"}, said[0][1])] and f"{report.verdict()['text']}, but frames " \
        f"{frame_ranges(short)} short of a goal's own tolerance" in said[0][1], said  # (what the operator tells)


def test_a_pose_goals_position_and_angle_are_short_apart():
    """A Pose is satisfied only when both its parts are: the report's two columns of it are each judged against
    their own tolerance (an angle short of its tolerance does not make the position a miss to explain); another
    goal's column is short when the goal is not satisfied."""
    from types import SimpleNamespace

    from fullbody_ik.solvers import Pose, Position

    pose, point = Pose("b2", np.eye(4)), Position("b1", (0.0, 0.0, 1.0))
    baker = SimpleNamespace(objectives=[[pose, point]], Q=[np.zeros(3)])
    angle_only = SimpleNamespace(satisfied=[False, False], details=[{"error": 0.5e-4, "angular_error": 0.01},
                                                                    {"error": 0.2}])
    assert [Baker._short(baker, angle_only, i, f) for i, f in ((0, "error"), (0, "angular_error"), (1, "error"))] \
        == [False, True, True]
    position_only = SimpleNamespace(satisfied=[False, True], details=[{"error": 2e-4, "angular_error": 0.5e-3},
                                                                      {"error": 0.0}])
    assert [Baker._short(baker, position_only, i, f) for i, f in ((0, "error"), (0, "angular_error"), (1, "error"))] \
        == [True, False, False]


def test_a_bake_held_back_by_ik_limits_names_the_bones(scene):
    """The arm's two upper bones limited to 0.1 rad of bend: the target's circle, in reach by length, cannot be
    followed, and the report names those bones' limits (no reach hint: the targets are in reach); with the limits
    off, the same bake meets every frame and tells nothing."""
    obj, target = scene
    for name in ("b1", "b2"):
        pb = obj.pose.bones[name]
        pb.use_ik_limit_x = pb.use_ik_limit_z = True
        pb.ik_min_x, pb.ik_max_x, pb.ik_min_z, pb.ik_max_z = -0.1, 0.1, -0.1, 0.1
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    missed = int(report.missed().sum())
    assert missed > len(report.frames) // 2
    assert report.hints == [f"joint limits: on {missed} of the {missed} frames with a goal not met looked at, the "
                            f"goals pull bones past their IK limits ('b1' on {missed}, 'b2' on {missed}): widen those "
                            "limits, or the targets ask for a pose they do not allow"], report.hints
    for name in ("b1", "b2"):
        obj.pose.bones[name].use_ik_limit_x = obj.pose.bones[name].use_ik_limit_z = False
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert not report.missed().any() and report.hints == []


def test_reach_hints_measure_the_chain_as_the_frame_has_it():
    """A chain's reach is its joint offsets as the frame has them (a keyed bone that is not solved moves its
    joint: the chain is longer), from where its first moving joint is that frame; a goal on that bone itself
    reaches its offset; a goal met gets no hint."""
    from fullbody_ik.rig.hints import chain_roots, fixed_positions, reach_hints
    from fullbody_ik.solvers import Position, Tree
    from fullbody_ik.solvers.joints import Joint

    up = np.eye(4)
    up[2, 3] = 1.0
    tree = Tree([Joint("a", "fixed", "base", "l0", np.eye(4)), Joint("j1", "revolute", "l0", "l1", up, (1, 0, 0)),
                 Joint("j2", "fixed", "l1", "l2", up), Joint("j3", "revolute", "l2", "l3", up, (1, 0, 0))])

    def hints(targets, longer=0.0, missed=True):
        frame = up.copy()
        frame[2, 3] += longer
        tree.set_origins([tree.link("l2")], [frame])  # (keyed: its joint 1 + longer above l1's)
        anchors = (fixed_positions(tree, chain_roots(tree)), np.linalg.norm(tree.origin[:, :3, 3], axis=1))
        goals = [Position("l3", t, offset=(0.0, 0.0, 0.5)) for t in targets]
        return reach_hints(tree, [[g] for g in goals], [(0, "error")], ["tip"], [1.0] * len(goals),
                           [anchors] * len(goals), np.full((len(goals), 1), missed))

    # l1's joint at z = 1 (nothing above moves it); reach 1 (l2) + 1 (l3) + 0.5 (the offset) = 2.5 from it
    out = hints([(0.0, 0.0, 4.0)])
    assert len(out) == 2 and "out of reach on 1 of the 1" in out[0] and "up to 500 mm further from 'l1'" in out[0]
    assert hints([(0.0, 0.0, 4.0)], longer=1.0) == []  # l2 keyed 1 further: 3.5 reached
    assert hints([(0.0, 0.0, 4.0)], longer=0.5 - 0.5e-4) == []  # beyond by less than the goal's tolerance (1e-4)
    assert "out of reach on 1 of the 1" in hints([(0.0, 0.0, 4.0)], longer=0.5 - 2e-4)[0]  # by twice it
    assert hints([(0.0, 0.0, 4.0)], missed=False) == []  # met: nothing to explain
    tree.set_origins([tree.link("l2")], [up])
    goal = [[Position("l1", (0.0, 0.0, 3.0), offset=(0.0, 0.0, 1.5))]]  # on the first moving bone: its offset
    anchors = [(fixed_positions(tree, chain_roots(tree)), np.linalg.norm(tree.origin[:, :3, 3], axis=1))]
    assert "up to 500 mm further from 'l1'" in reach_hints(tree, goal, [(0, "error")], ["on l1"], [1.0], anchors,
                                                            np.ones((1, 1), bool))[0]


def test_reach_hints_tell_two_goals_too_far_apart_below_a_free_root():
    """Under a free root a foot's chain has no fixed start, but the hips' goal holds the hips: a foot target further
    from the hips' target than the leg reaches (its joint offsets as the frame has them, and both goals' offsets)
    cannot be met with it, and the hint says so, by how much; within reach, or with a length between them that can
    change (a prismatic joint), the two are told of only as a pair missed together."""
    from fullbody_ik.rig.hints import chain_roots, fixed_positions, reach_hints
    from fullbody_ik.solvers import Position, Tree
    from fullbody_ik.solvers.joints import FreeJoint, Joint

    down = np.eye(4)
    down[2, 3] = -1.0

    def tree_with(kind):
        return Tree([FreeJoint("root", "world", "hips", np.eye(4)),
                     Joint("hip", "revolute", "hips", "thigh", np.eye(4), (1, 0, 0), -2.0, 2.0),
                     Joint("knee", kind, "thigh", "shin", down, (0, 0, 1), -1.0, 1.0),
                     Joint("ankle", "revolute", "shin", "foot", down, (1, 0, 0), -1.0, 1.0)])

    def hints(tree, foot_z, missed=True):
        anchors = (fixed_positions(tree, chain_roots(tree)), np.linalg.norm(tree.origin[:, :3, 3], axis=1))
        goals = [[Position("hips", (5.0, 0.0, 3.0)), Position("foot", (5.0, 0.0, foot_z), offset=(0.0, 0.2, 0.0))]]
        return reach_hints(tree, goals, [(0, "error"), (1, "error")], ["hips", "foot"], [1.0], [anchors],
                           np.array([[missed, missed]]))

    tree = tree_with("revolute")
    out = hints(tree, 0.5)  # 2.5 apart; the leg reaches 1 + 1 + 0.2 = 2.2
    assert len(out) == 1 and out[0].startswith("foot: its target and the target of 'hips'"), out
    assert "on 1 of the 1 frame it was not met, by up to 300 mm" in out[0]
    assert hints(tree, 0.5, missed=False) == []  # met
    # 2 apart, in reach; or the knee slides (no length to tell): both missed, only as a pair that shares the root
    pair = ["hips and 'foot': both not met on 1 frame, though neither target is beyond what its bones reach, and they "
            "share bones ('hips'): they may pull against each other there (their targets further apart, or nearer, "
            "than the bones between them allow: proportions that differ from the targets'?)"]
    assert hints(tree, 1.0) == pair and hints(tree_with("prismatic"), 0.5) == pair


def test_a_goal_is_said_pulled_off_only_by_a_target_out_of_reach_by_half_its_miss_or_more():
    """Two goals on one leg (thigh and shin turning at the hip and knee): the foot's target 0.3 beyond the leg's
    reach, the knee's within its own. The knee's miss is put down to the foot's pull when the foot was out of reach
    by half that miss or more; a knee missed by more than twice the foot's shortfall is told of only as a pair
    missed together (a goal out of reach by 9 mm does not pull another 112 mm off)."""
    from fullbody_ik.rig.hints import chain_roots, fixed_positions, reach_hints
    from fullbody_ik.solvers import Position, Tree
    from fullbody_ik.solvers.joints import Joint

    down = np.eye(4)
    down[2, 3] = -1.0
    tree = Tree([Joint("hip", "revolute", "hips", "thigh", np.eye(4), (1, 0, 0), -2.0, 2.0),
                 Joint("knee", "revolute", "thigh", "shin", down, (1, 0, 0), -2.0, 2.0)])
    anchors = (fixed_positions(tree, chain_roots(tree)), np.linalg.norm(tree.origin[:, :3, 3], axis=1))
    goals = [[Position("thigh", (0.0, 0.6, -0.8), offset=(0.0, 0.0, -1.0)),  # the knee: on its sphere
              Position("shin", (0.0, 0.0, -2.3), offset=(0.0, 0.0, -1.0))]]  # the foot: 2.3, the leg 2.0

    def hints(knee_miss):
        return reach_hints(tree, goals, [(0, "error"), (1, "error")], ["knee", "foot"], [1.0], [anchors],
                           np.ones((1, 2), bool), np.array([[knee_miss, 0.3]]))

    out = hints(0.5)
    assert out[0].startswith("foot: its target was out of reach on 1 of the 1 frame it was not met, up to 300 mm")
    assert out[1].startswith("knee: on 1 of the 1 frame it was not met, the target of 'foot' could not be reached"), out
    out = hints(0.7)
    assert out[1].startswith("knee and 'foot': both not met on 1 frame, and they share bones ('thigh')"), out
    assert len(out) == 3 and "Free Root is off" in out[2]


def test_limit_hints_name_the_joints_whose_limits_the_goals_pull_against():
    """A two-bone arm whose elbow may bend 0.5 rad at most, asked to reach a point that needs 1.5 rad: the solve
    stops with the elbow at its limit, the hand short of the point, and the hint names the elbow's link (not the
    shoulder, free to turn). With the limit wide the point is met (nothing to tell); out of reach by length, the
    arm stretched toward it, no limit is in the way and nothing is told either."""
    from fullbody_ik.rig.hints import limit_hints
    from fullbody_ik.solvers import Position, Tree, solve
    from fullbody_ik.solvers.joints import Joint

    along = np.eye(4)
    along[0, 3] = 1.0

    def arm(elbow_upper):
        return Tree([Joint("shoulder", "revolute", "base", "upper", np.eye(4), (0, 0, 1), -3.0, 3.0),
                     Joint("elbow", "revolute", "upper", "fore", along, (0, 0, 1), -0.1, elbow_upper),
                     Joint("wrist", "fixed", "fore", "hand", along)])

    def told(tree, point):
        goal = [Position("hand", point)]
        res = solve(tree, goal, np.zeros(tree.n), time_limit=0.2)
        return res, limit_hints(lambda k: tree, [goal], [res.q], np.array([not res.success]))

    bend = 1.5  # the point the hand reaches with the elbow bent 1.5 rad
    point = (1.0 + np.cos(bend), np.sin(bend), 0.0)
    res, hints = told(arm(0.5), point)
    assert not res.success and abs(res.q[1] - 0.5) < 1e-9
    assert hints == ["joint limits: on 1 of the 1 frame with a goal not met looked at, the goals pull bones past "
                     "their IK limits ('fore' on 1): widen those limits, or the targets ask for a pose they do not "
                     "allow"], hints
    res, hints = told(arm(3.0), point)
    assert res.success and hints == []
    res, hints = told(arm(3.0), (3.0, 0.5, 0.0))  # 3.04 away, the arm reaches 2
    assert not res.success and hints == []
    # A free root turned 1e-4 short of half a turn, its goal pulling it further: the projection wraps the rotation
    # (by a whole turn), which is no limit: nothing is told.
    from fullbody_ik.solvers.joints import FreeJoint

    tree = Tree([FreeJoint("root", "world", "hips", np.eye(4)), Joint("tip", "fixed", "hips", "arm", along)])
    q = np.zeros(tree.n)
    q[5] = np.pi - 1e-4
    goal = [Position("arm", (np.cos(np.pi + 0.5), np.sin(np.pi + 0.5), 0.0))]
    moved = q + 1e-3 * np.eye(tree.n)[5]
    assert np.abs(tree.project(moved) - moved).max() > 1.0  # (the wrap the old count took for a limit)
    assert limit_hints(lambda k: tree, [goal], [q], np.array([True])) == []


def test_thinning_keeps_the_curve_within_tolerance(scene):
    obj, target = scene
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES, thin=1e-3))
    while not baker.step():
        pass
    channels = baker._channels(baker._moved_bones())  # the bake's values before thinning
    baker.finish()
    report = json.loads(obj.animation_data.action[REPORT_PROPERTY])
    assert report["keys"] < report["keys_before_thinning"]
    bag = channelbag(obj)
    for (path, index, _), values in channels.items():
        fc = bag.fcurves.find(path, index=index)
        curve = np.array([fc.evaluate(f) for f in baker.frames])
        sign = np.sign(np.dot(curve, values)) or 1.0  # a quaternion may sit in the other hemisphere
        assert np.max(np.abs(curve - sign * values)) <= 1e-3 + 1e-9, path


def test_simplify_is_exact_on_lines_and_keeps_corners():
    x = np.arange(10.0)
    assert simplify(x, 2 * x + 1, 1e-9).sum() == 2
    y = np.abs(x - 4)
    keep = simplify(x, y, 1e-6)
    assert keep[[0, 4, 9]].all() and keep.sum() == 3


def test_cancel_writes_nothing(scene):
    obj, _ = scene
    actions = set(bpy.data.actions.keys())
    calls = []
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES))
    assert baker.run(should_cancel=lambda: calls.append(1) or len(calls) > 3) is None
    assert set(bpy.data.actions.keys()) == actions and REPORT_TEXT not in bpy.data.texts
    assert bpy.context.scene.frame_current == 5


@pytest.mark.parametrize("breakage,message", [
    ("inverted", "inverted frame range"),
    ("nan key", "NaN or infinite key"),
    ("target deleted", "was deleted"),
    ("bone renamed", "not found"),
    ("linked action", "linked"),
    ("target a bone of the rig", r"targets 'b0', a bone of 'Arm' itself, which the solve moves"),
    ("target hangs from the rig", r"its target 'Target' \(through 'Holder'\) hangs from bone 'b1' of 'Arm'"),
])
def test_bad_input_bakes_nothing_and_says_why(scene, breakage, message, tmp_path):
    obj, target = scene
    kwargs = {}
    if breakage == "inverted":
        kwargs = dict(frame_start=20, frame_end=10)
    elif breakage == "nan key":
        bag = channelbag(target)
        bag.fcurves[0].keyframe_points[2].co[1] = float("nan")
    elif breakage == "target deleted":
        bpy.data.objects.remove(target)
    elif breakage == "bone renamed":
        obj.fullbody_ik.goals[0].bone = "gone"
    elif breakage == "target a bone of the rig":  # (read before the solve moves it: met where it had been)
        obj.fullbody_ik.goals[0].target, obj.fullbody_ik.goals[0].subtarget = obj, "b0"
    elif breakage == "target hangs from the rig":
        holder = bpy.data.objects.new("Holder", None)
        bpy.context.scene.collection.objects.link(holder)
        holder.parent, holder.parent_type, holder.parent_bone = obj, "BONE", "b1"
        target.parent = holder
    elif breakage == "linked action":
        path = str(tmp_path / "lib.blend")
        bpy.data.libraries.write(path, {obj.animation_data.action})
        with bpy.data.libraries.load(path, link=True) as (src, dst):
            dst.actions = list(src.actions)
        obj.animation_data.action = dst.actions[0]
    action = obj.animation_data.action
    actions = set(bpy.data.actions.keys())
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.fullbody_ik.bake(**kwargs)
    assert set(bpy.data.actions.keys()) == actions and obj.animation_data.action == action
    assert REPORT_TEXT not in bpy.data.texts
    assert bpy.context.scene.frame_current == 5


def test_limit_violations_counts_bones_outside_their_limits(scene):
    from fullbody_ik.rig.armature import build_tree, limit_violations

    obj, _ = scene
    for name in ("b0", "b1"):
        pb = obj.pose.bones[name]
        pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -0.3, 0.3
    tree, mapping = build_tree(obj)
    q = np.zeros(tree.n)
    assert limit_violations(tree, mapping, q) == 0
    for name in ("b0", "b1"):
        q[mapping.variables[name][0]] = 0.8  # x swing beyond 0.3 rad
    assert limit_violations(tree, mapping, q) == 2


def test_a_target_nearer_than_the_chain_folds_is_told_of(scene):
    """A goal on b0's tail from b0's own head (one bone: its tail moves on a sphere about the head) with its
    target halfway up the bone cannot be met, from nearer as from further: the hint says by how much it was too
    near, and Free Root is off. A target on the sphere has no such hint."""
    obj, target = scene
    obj.fullbody_ik.goals[0].enabled = False
    empty = bpy.data.objects.new("Near", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.location = (0.0, 0.0, 0.5)
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b0", empty, True
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert not report.ok and len(report.hints) == 2, report.hints
    assert report.hints[0] == ("position b0 tail: its target was too near 'b0' on 24 of the 24 frames it was not "
                               "met, up to 500 mm nearer than the bones between them fold (one of them is longer "
                               "than the others together: a goal on a bone's tail from its own head, or a bone that "
                               "hangs from the root)"), report.hints
    assert "Free Root is off" in report.hints[1]
    empty.location = (0.6, 0.0, 0.8)  # on the sphere: met
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert report.ok and not report.hints, report.hints


def test_a_goal_pulled_off_by_another_out_of_reach_is_told_of(scene):
    """b1's tail has a target it reaches alone (1.90 from b0's head, its bones reach 2.00), b2's tail one far out of
    reach straight up: both miss, and the hint for b1's says on which frames the other's target was out of reach
    and which bones they share. With b2's target within reach again, both are met and nothing is said; with the
    two targets each within reach but further apart than b2 spans, the two are told of as a pair."""
    obj, target = scene
    far = bpy.data.objects.new("Far", None)
    beside = bpy.data.objects.new("Beside", None)
    for empty in (far, beside):
        bpy.context.scene.collection.objects.link(empty)
    far.location, beside.location = (0.0, 0.0, 6.0), (0.6, 0.0, 1.8)
    obj.fullbody_ik.goals[0].target = far
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b1", beside, True
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert not report.ok and report.errors[:, 1].min() > 0.1
    assert report.hints[1] == ("position b1 tail: on 24 of the 24 frames it was not met, the target of 'position b2 "
                               "tail' could not be reached (its hint above), and the two goals share bones ('b0', "
                               "'b1'): pulled toward that target, they take this goal with them"), report.hints
    far.location = (0.6, 0.0, 1.8 + math.sqrt(0.65))  # (b2 straight up from b1 on its target)
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert report.ok and not report.hints, report.hints
    # Each within reach alone, 1.22 apart where b2 spans 0.81: both missed, told as a pair, once
    far.location = (-0.6, 0.0, 2.0)
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert not report.ok and report.hints == [
        "position b2 tail and 'position b1 tail': both not met on 24 frames, though neither target is beyond what "
        "its bones reach, and they share bones ('b0', 'b1'): they may pull against each other there (their targets "
        "further apart, or nearer, than the bones between them allow: proportions that differ from the targets'?)"], \
        report.hints


def test_two_goals_on_one_bone_are_told_apart_in_the_report(scene):
    """Two position goals on b2's tail read alike: the report names them by their targets, and by their places in
    the goal list (disabled goals counted) where they share a target; a goal alone keeps its plain label."""
    obj, target = scene
    other = bpy.data.objects.new("Other", None)
    bpy.context.scene.collection.objects.link(other)
    other.location = (0.5, 0.5, 1.9)
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b2", other, True
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b1", other, True
    report = Baker(bpy.context.scene, obj, BakeOptions(1, 2)).run()
    assert report.goals == ["position b2 tail to Target", "position b2 tail to Other", "position b1 tail"]
    assert not report.ok and all(" to " in h.split(":")[0] for h in report.hints if h.startswith("position b2")), \
        report.hints
    obj.fullbody_ik.goals[2].enabled = False
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.use_tail = "POSITION", "b2", target, True
    report = Baker(bpy.context.scene, obj, BakeOptions(1, 2)).run()
    assert report.goals == ["position b2 tail (goal 1)", "position b2 tail to Other", "position b2 tail (goal 4)"]


def test_the_bake_operators_max_angle_decides_an_angular_goals_verdict(scene):
    """The operator's Max Angle is the angular goals' threshold (as the CLI's --max-angle): b2 held to the target
    empty's orientation while its tail follows the empty's circle, a turn its chain cannot make at the same time,
    misses by degrees; within 60 degrees the bake succeeds, within 0.01 it fails naming the frames, and both keep
    the result."""
    obj, target = scene
    target.rotation_euler = (0.0, 1.2, 0.0)
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.target, g.weight = "ORIENTATION", "b2", target, 0.01
    assert bpy.ops.fullbody_ik.bake(max_angle=math.radians(60.0)) == {"FINISHED"}
    report = bpy.data.texts[REPORT_TEXT].as_string()
    assert "verdict: OK" in report and "/ 60 deg" in report
    worst = max(float(line.split("max ")[1].split()[0]) for line in report.splitlines()
                if line.strip().startswith("orientation") and "max " in line)
    assert 0.5 < worst < 60.0, report  # (a miss of degrees: what makes the 0.01 degree bake fail below)
    with pytest.raises(RuntimeError, match=r"frames missed a goal by more than 10 mm / 0.01 deg \(frames "):
        bpy.ops.fullbody_ik.bake(max_angle=math.radians(0.01))
    assert "verdict: FAILED" in bpy.data.texts[REPORT_TEXT].as_string()


def test_frames_past_the_animation_are_named_in_the_report(scene):
    """A bake over frames past every action it follows (the armature's elbow keys end at 24, the target's at 19;
    the scene's range, the default, runs to 40) bakes them, the poses held there, and says so: in the report's
    notes, its text and the sidebar's summary; a range within the animation has no such note."""
    obj, target = scene
    bpy.context.scene.frame_end = 40
    assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
    report = json.loads(obj.animation_data.action[REPORT_PROPERTY])
    assert report["notes"] == ["16 frames (25-40) after it: outside the animation the bake follows (the armature's "
                               "and the targets' actions span frames 1-24), where everything holds its last pose. A "
                               "frame range longer than the clip?"], report["notes"]
    assert "  note: 16 frames (25-40) after it: outside" in bpy.data.texts[REPORT_TEXT].as_string()
    from fullbody_ik.rig.bake_report import report_summary

    assert any(line.startswith("Note: 16 frames (25-40)") for line in report_summary(obj.animation_data.action))
    obj.animation_data.action = bpy.data.actions[report["source_action"]]
    assert bpy.ops.fullbody_ik.bake(frame_start=FRAMES[0], frame_end=FRAMES[1]) == {"FINISHED"}
    assert json.loads(obj.animation_data.action[REPORT_PROPERTY])["notes"] == []
    # Before the first key, and a target given an action without keys (left out: it spans nothing)
    obj.animation_data.action = bpy.data.actions[report["source_action"]]
    target.animation_data.action = bpy.data.actions.new("no keys")
    assert bpy.ops.fullbody_ik.bake(frame_start=-2, frame_end=25) == {"FINISHED"}
    assert json.loads(obj.animation_data.action[REPORT_PROPERTY])["notes"] == [
        "3 frames (-2 to 0) before it and 1 frame (25) after it: outside the animation the bake follows (the "
        "armature's and the targets' actions span frames 1-24), where everything holds its first or last pose. A "
        "frame range longer than the clip?"]


def test_animation_through_nla_strips_and_constraints_counts_as_animated(scene):
    """The target follows a leader empty (Copy Location, its offset kept) whose motion plays from an NLA strip
    (frames 1-40, no active action): frames 25-40 are animated and the report has no note. The strip's track
    muted, or the constraint off, the animation the bake follows ends at 24 again and the note names 25-40."""
    obj, target = scene
    bpy.context.scene.frame_end = 40
    leader = bpy.data.objects.new("Leader", None)
    bpy.context.scene.collection.objects.link(leader)
    for f, z in ((1, 0.0), (40, -0.05)):
        leader.location = (0.0, 0.0, z)
        leader.keyframe_insert("location", frame=f)
    ad = leader.animation_data
    track = ad.nla_tracks.new()
    track.strips.new("lead", 1, ad.action)
    ad.action = None
    follow = target.constraints.new("COPY_LOCATION")
    follow.target, follow.use_offset = leader, True
    source = obj.animation_data.action
    assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
    report = json.loads(obj.animation_data.action[REPORT_PROPERTY])
    assert report["notes"] == [] and all(report["per_frame"]["success"]) and report["ok"], report
    note = ["16 frames (25-40) after it: outside the animation the bake follows (the armature's and the targets' "
            "actions span frames 1-24), where everything holds its last pose. A frame range longer than the clip?"]
    for off in (lambda: setattr(track, "mute", True), lambda: setattr(follow, "enabled", False)):
        track.mute, follow.enabled = False, True
        off()
        obj.animation_data.action = source
        assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
        assert json.loads(obj.animation_data.action[REPORT_PROPERTY])["notes"] == note


def test_a_stepped_bake_keys_the_ranges_last_frame_and_says_the_frames_between_are_not_judged(scene):
    """Every 5th frame of 1-24 is 1, 6, ..., 21: frame 24 is keyed too (before, the source's keys stayed past 21
    and its unsolved pose played there); no other key is left in the range, and the report says the frames between
    the keys are interpolated, not judged."""
    obj, target = scene
    assert bpy.ops.fullbody_ik.bake(step=5) == {"FINISHED"}
    report = json.loads(obj.animation_data.action[REPORT_PROPERTY])
    assert report["per_frame"]["frame"] == [1, 6, 11, 16, 21, 24]
    assert {k.co[0] for fc in channelbag(obj).fcurves for k in fc.keyframe_points} == {1, 6, 11, 16, 21, 24}
    assert tip_error(obj, target, 24) < 2e-4
    assert report["notes"] == ["keyed every 5 frames (and at 24, the last): the 18 frames between the keys are "
                               "Blender's interpolation of them, not solved and not judged"], report["notes"]


def test_invoking_without_a_window_bakes_at_once(scene):
    obj, target = scene
    assert bpy.ops.fullbody_ik.bake("INVOKE_DEFAULT") == {"FINISHED"}
    assert tip_error(obj, target, 12) < 2e-4


def test_the_operator_bakes_independent_frames_in_threads(scene, monkeypatch):
    """Independent Frames: each frame solved from the action's pose there, in two threads; the goal met on every
    frame as with tracking."""
    monkeypatch.setenv("FULLBODY_IK_THREADS", "2")
    obj, target = scene
    assert bpy.ops.fullbody_ik.bake(independent=True) == {"FINISHED"}
    report = json.loads(obj.animation_data.action[REPORT_PROPERTY])
    assert report["ok"] and all(report["per_frame"]["success"])
    assert max(tip_error(obj, target, f) for f in range(FRAMES[0], FRAMES[1] + 1, 5)) < 2e-4


def test_bake_keys_the_scale_of_stretching_bones(scene):
    """A target beyond reach on some frames: with IK Stretch the bones scale, and their scale is keyed."""
    obj, target = scene
    for pb in obj.pose.bones:
        pb.ik_stretch = 0.6
    for fc in channelbag(target).fcurves:
        for k in fc.keyframe_points:
            k.co[1] *= 3.0 if fc.array_index < 2 else 1.0  # radius 2.4: 3.06 from the base, the arm is 2.8
        fc.update()
    assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
    paths = {fc.data_path for fc in channelbag(obj).fcurves}
    assert 'pose.bones["b0"].scale' in paths
    assert max(tip_error(obj, target, f) for f in range(FRAMES[0], FRAMES[1] + 1)) < 2e-4


def test_tolerances_are_world_lengths_on_a_scaled_armature(scene):
    obj, target = scene
    obj.scale = (3.0, 3.0, 3.0)  # the target circle is now well inside the arm's reach
    obj.fullbody_ik.goals[0].tolerance = 1e-4
    assert bpy.ops.fullbody_ik.bake() == {"FINISHED"}
    assert max(tip_error(obj, target, f) for f in range(FRAMES[0], FRAMES[1] + 1)) <= 1.05e-4


def test_a_pose_goals_angle_tolerance_is_its_own_setting(scene):
    """A Pose goal's Angle Tolerance (default 1e-3 rad) is its orientation's tolerance: b2 held to the empty's
    orientation while its tail follows the circle, a turn the chain cannot make on most frames, leaves the angle
    short of 1e-3 rad there (by up to 0.2 rad); with an Angle Tolerance wider than that miss, the angle is short on
    none (the position, pulled off by the turn, stays short: its own tolerance)."""
    obj, target = scene
    target.rotation_euler = (0.0, 0.3, 0.0)
    g = obj.fullbody_ik.goals[0]
    g.kind = "POSE"
    assert g.angle_tolerance == pytest.approx(1e-3)

    def short_angles():
        baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES, max_error=float("inf")))
        report = baker.run()
        angle = report.goals.index("pose b2 tail (angle)")
        return np.array(baker.short).reshape(report.errors.shape)[:, angle], report.solved_errors[:, angle]

    short, angles = short_angles()
    assert short.sum() > len(short) // 2 and np.array_equal(short, angles > 1e-3) and angles.max() > 0.1, angles
    g.angle_tolerance = 2.0 * angles.max()
    short, angles = short_angles()
    assert not short.any() and angles.max() <= g.angle_tolerance


def test_a_joint_value_goal_is_judged_on_the_rotation_blender_shows(scene):
    """The report judges a joint-value goal on the bone's rotation as Blender evaluates it (read back from the
    pose after the keys are written), not on the solved value: a driver that overrides the keyed rotation shows as
    a miss. The position goal beside it is judged on the evaluated bone matrices."""
    obj, target = scene
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.joint_axis, g.joint_value = "JOINT_VALUE", "b0", "X", 0.2
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    column = report.goals.index("joint value b0")
    assert report.ok and np.abs(report.errors[:, column]).max() < 2e-3  # (its tolerance: 1e-3 rad at least)
    # The same bake, with a driver holding b0's quaternion w at 0.5 after the keys: no longer what was solved.
    obj.animation_data.action = bpy.data.actions[report.source_action]
    driver = obj.driver_add('pose.bones["b0"].rotation_quaternion', 0).driver
    driver.type, driver.expression = "SCRIPTED", "0.5"
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert not report.ok and report.solved_errors[:, column].max() < 2e-3
    # judged on the driven rotation: a miss on every frame by twice its tolerance at least (solved: below 2e-3; the
    # driven w turns it 0.004-0.09 rad away, as the solve left the bone's other turns)
    assert report.errors[:, column].min() > 2e-3


def test_the_shown_pose_is_judged_for_every_frame_at_once_as_frame_by_frame(scene):
    """The report's errors (the pose Blender shows) are judged for every frame at once where a goal's kind allows
    it (position, orientation, pose) and frame by frame for the others (look-at): each equal to the goal's own
    error on that frame's shown pose."""
    from fullbody_ik.rig.armature import read_pose, shown_state

    obj, target = scene
    target.rotation_euler = (0.3, 0.2, 0.1)
    target.keyframe_insert("rotation_euler", frame=FRAMES[0])
    target.rotation_euler = (-0.4, 0.5, 1.0)
    target.keyframe_insert("rotation_euler", frame=FRAMES[1])
    for kind, bone in (("POSE", "b1"), ("ORIENTATION", "b0"), ("LOOK_AT", "b1")):
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target, g.weight = kind, bone, target, 0.1
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES, max_error=float("inf")))
    report = baker.run()
    assert [g.split()[0] for g in report.goals] == ["position", "pose", "pose", "orientation", "look"]
    assert report.goals[2].endswith("(angle)")
    expected = []
    for f, objectives in zip(baker.frames, baker.objectives):
        bpy.context.scene.frame_set(f)
        state = shown_state(obj, baker.tree, baker.mapping, read_pose(obj, baker.tree, baker.mapping))
        pose = objectives[1].details(state)
        expected.append([objectives[0].error(state), pose["error"], pose["angular_error"],
                         objectives[2].error(state), objectives[3].error(state)])
    expected = np.array(expected)
    assert np.all(np.ptp(expected, axis=0) > 1e-3)  # every goal moves: one frame's target for all would fail
    assert np.allclose(report.errors, expected, rtol=0, atol=1e-12)


def _same_objective(a, b):
    assert type(a) is type(b) and a.__dict__.keys() == b.__dict__.keys()
    for key, value in b.__dict__.items():
        other = a.__dict__[key]
        if hasattr(value, "__dict__") and not isinstance(value, np.ndarray):
            _same_objective(other, value)
        elif isinstance(value, np.ndarray):
            assert np.allclose(other, value, rtol=0, atol=1e-12), key
        else:
            assert other == value, key


def test_a_bakes_later_frames_have_the_goals_the_first_frames_make_aimed_at_their_targets(scene):
    """A bake reads its goals' settings on the first frame and only their targets on later ones: every kind of goal
    gets the objective goal_objectives makes from scratch on that frame."""
    from fullbody_ik.rig.goals import GoalObjectives, goal_objectives, settings_tree

    obj, target = scene
    target.rotation_euler = (0.3, 0.2, 0.1)
    target.keyframe_insert("rotation_euler", frame=FRAMES[0])
    target.rotation_euler = (-0.4, 0.5, 1.0)
    target.keyframe_insert("rotation_euler", frame=FRAMES[1])
    for kind, bone in (("POSE", "b1"), ("ORIENTATION", "b0"), ("LOOK_AT", "b1"), ("DISTANCE", "b0"),
                       ("JOINT_VALUE", "b0"), ("DISPLACEMENT", "b0")):
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target = kind, bone, target
    obj.fullbody_ik.goals[-3].min_distance = 0.3
    tree, mapping = settings_tree(obj)
    later = GoalObjectives(obj, tree, mapping)
    rng = np.random.default_rng(0)
    for f in (FRAMES[0], 7, 13, FRAMES[1]):
        bpy.context.scene.frame_set(f)
        q = rng.normal(size=tree.n)
        made, fresh = later(q), goal_objectives(obj, obj.fullbody_ik.goals, tree, mapping, q)
        assert len(made) == len(fresh) == 7
        for a, b in zip(made, fresh):
            _same_objective(a, b)
    target.scale = (-1.0, 1.0, 1.0)  # a mirrored target: refused as on a first frame
    bpy.context.scene.frame_set(9)
    with pytest.raises(RigError, match=r"goal 2 \(pose\): Orientation target is a reflection"):
        later(q)


def test_a_target_deleted_during_a_bake_stops_it_with_the_reason(scene):
    """The modal bake keeps the UI live: a goal's target deleted between two frames stops the bake with a reason
    (its later frames read the targets it found on the first), and nothing is written."""
    obj, target = scene
    actions = len(bpy.data.actions)
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES))
    baker.step()
    baker.step()
    bpy.data.objects.remove(target)
    with pytest.raises(RigError, match="target object was deleted"):
        baker.step()
    baker.cancel()
    assert len(bpy.data.actions) == actions


def test_a_goals_keyed_settings_are_read_on_every_frame(scene):
    """A goal's own settings may be keyed (its point, weight, tolerance...): the bake reads them on every frame,
    not only on the first, and the report judges each frame on its own."""
    obj, target = scene
    obj.fullbody_ik.goals[0].enabled = False
    g = obj.fullbody_ik.goals.add()
    g.kind, g.bone, g.use_tail = "POSITION", "b2", True
    for f, point in ((FRAMES[0], (0.8, 0.0, 1.9)), (FRAMES[1], (0.0, 0.8, 1.9))):
        g.point = point
        g.keyframe_insert("point", frame=f)
    obj.update_tag()  # (the UI's depsgraph would see the new goal; a script tags it)
    bpy.context.view_layer.update()
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    assert report.ok, report.text()
    for f in (FRAMES[0], 13, FRAMES[1]):
        bpy.context.scene.frame_set(f)
        tip = np.array(obj.matrix_world @ obj.pose.bones["b2"].tail)
        assert np.linalg.norm(tip - np.array(g.point)) < 2e-4, f
    bpy.context.scene.frame_set(FRAMES[1])
    assert np.linalg.norm(tip - (0.0, 0.8, 1.9)) < 2e-4


def test_a_hand_goal_the_arm_can_reach_moves_the_arm_not_the_body():
    """CMU's run with one position goal raising the right hand 25 cm over the clip's (the arm alone reaches it):
    every goal met, and every bone off that arm within 10 degrees of the clip on every frame (a solve free to turn
    the whole chain from the hips up turns the body some 60 degrees), in a bake and in Solve on one frame. The arm
    reaches it, not the wrist: the hand turns on its forearm within a few degrees of the clip's (13 degrees, its
    own turn the cheapest of the chain's)."""
    from fullbody_ik.rig.goals import solve_pose
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    try:
        obj, first, _ = scenes.import_cmu(bpy, "02_03")
        last = first + 40
        sc = bpy.context.scene
        target = bpy.data.objects.new("Target", None)
        sc.collection.objects.link(target)
        clip = {}
        for f in range(first, last + 1):
            sc.frame_set(f)
            target.location = obj.matrix_world @ obj.pose.bones["RightHand"].head + Vector((0.0, 0.0, 0.25))
            target.keyframe_insert("location", frame=f)
            clip[f] = {pb.name: (obj.matrix_world @ pb.matrix).to_quaternion() for pb in obj.pose.bones}
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target = "POSITION", "RightHand", target
        report = Baker(sc, obj, BakeOptions(first, last)).run()
        assert report.ok, report.verdict()
        arm = {b.name for b in obj.data.bones["RightShoulder"].children_recursive} | {"RightShoulder"}
        worst = {}
        wrist = 0.0
        for f in range(first, last + 1):
            sc.frame_set(f)
            on_forearm = [clip[f]["RightForeArm"].inverted() @ clip[f]["RightHand"],
                          (obj.matrix_world @ obj.pose.bones["RightForeArm"].matrix).to_quaternion().inverted()
                          @ (obj.matrix_world @ obj.pose.bones["RightHand"].matrix).to_quaternion()]
            turn = on_forearm[0].rotation_difference(on_forearm[1])
            wrist = max(wrist, math.degrees(min(turn.angle, 2 * math.pi - turn.angle)))
            for pb in obj.pose.bones:
                if pb.name not in arm:
                    turn = (obj.matrix_world @ pb.matrix).to_quaternion().rotation_difference(clip[f][pb.name])
                    angle = math.degrees(min(turn.angle, 2 * math.pi - turn.angle))  # (either sign of it)
                    worst[pb.name] = max(worst.get(pb.name, 0.0), angle)
        assert max(worst.values()) < 10.0, sorted(worst.items(), key=lambda x: -x[1])[:5]
        assert wrist < 7.0, wrist
        turns = {b: d for b, d, _ in report.turns}  # (the report's largest turns from the action, per bone)
        assert turns.get("Hips", 0.0) < 10.0 and max(d for b, d in turns.items() if b in arm) > 20.0, report.turns
        assert abs(turns.get("Spine1", 0.0) - worst["Spine1"]) < 0.5, (turns.get("Spine1"), worst["Spine1"])
        assert "largest turns from the action: " + report.turns[0][0] in report.text()
        # the bones off the arm's chain (the other arm, the legs, the head) turn with the chain bones they hang
        # from: within the warning's 15 degrees here; past --max-change the bake fails
        assert report.off_chain[1] < 15.0 and not any("off the goals' chains" in n for n in report.notes)
        assert abs(report.off_chain[1] - max(worst.values())) < 0.5, (report.off_chain, max(worst.values()))
        obj.animation_data.action = bpy.data.actions[report.source_action]
        strict_report = Baker(sc, obj, BakeOptions(first, last, max_change=1.0)).run()
        assert not strict_report.ok and "off the goals' chains turned" in strict_report.verdict()["text"]
        far = bpy.data.objects.new("Far", None)  # out of the arm's reach: the body bends, and the report says so
        sc.collection.objects.link(far)
        sc.frame_set(first)
        far.location = obj.matrix_world @ obj.pose.bones["Spine1"].head + Vector((0.0, -0.6, 0.9))
        g.target = far
        obj.animation_data.action = bpy.data.actions[report.source_action]
        bent = Baker(sc, obj, BakeOptions(first, first + 4)).run()
        assert bent.off_chain[1] > 15.0 and any("off the goals' chains" in n for n in bent.notes), bent.off_chain
        g.target = target
        # Solve on one frame of the clip does the same
        obj.animation_data.action = bpy.data.actions[report.source_action]
        f = first + 20
        sc.frame_set(f)
        result = solve_pose(obj)
        assert result.shown_success and len(result.shown_errors) == 1
        for pb in obj.pose.bones:
            if pb.name not in arm:
                turn = (obj.matrix_world @ pb.matrix).to_quaternion().rotation_difference(clip[f][pb.name])
                assert math.degrees(min(turn.angle, 2 * math.pi - turn.angle)) < 10.0, pb.name
    finally:
        fullbody_ik.unregister()


def test_a_goal_moves_only_the_bones_of_its_chain_length():
    """Chain Length as Blender's IK constraint's: a hand goal 25 cm over a CMU frame's hand with a chain of four
    bones (hand to shoulder) is met by those four alone, every other bone keeping its pose exactly; with a chain of
    one (the hand alone) it cannot be met and nothing above the hand turns; Bake honours it too. Bones That May Move
    (a bone collection) keeps every other bone as posed."""
    from fullbody_ik.rig.goals import solve_pose
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    try:
        obj, first, _ = scenes.import_cmu(bpy, "02_03")
        sc = bpy.context.scene
        sc.frame_set(first + 20)
        target = bpy.data.objects.new("Target", None)
        sc.collection.objects.link(target)
        target.location = obj.matrix_world @ obj.pose.bones["RightHand"].tail + Vector((0.0, 0.0, 0.25))
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target = "POSITION", "RightHand", target
        chain = ["RightHand", "RightForeArm", "RightArm", "RightShoulder"]
        before = {pb.name: np.array(pb.matrix_basis) for pb in obj.pose.bones}
        for length, met in ((4, True), (1, False)):
            g.chain_length = length
            for pb in obj.pose.bones:
                pb.matrix_basis = Matrix(before[pb.name].tolist())
            bpy.context.view_layer.update()
            result = solve_pose(obj)
            assert bool(result.shown_success) == met, (length, result.shown_errors)
            moved = {pb.name for pb in obj.pose.bones if np.abs(np.array(pb.matrix_basis) - before[pb.name]).max() > 1e-6}
            assert moved and moved <= set(chain[:length]), (length, moved)
        obj.fullbody_ik.settings.time_limit = 0.01
        report = Baker(sc, obj, BakeOptions(first, first + 10)).run()
        assert set(report.bones) <= {"RightHand"}, report.bones
        # Bones That May Move: a bone collection; the others keep their pose whatever the chain
        g.chain_length = 0
        obj.animation_data.action = bpy.data.actions[report.source_action]
        sc.frame_set(first + 20)
        arm = obj.data.collections.new("Right arm")
        for name in chain[:3]:
            arm.assign(obj.data.bones[name])
        obj.fullbody_ik.settings.movable = "Right arm"
        result = solve_pose(obj)
        moved = {pb.name for pb in obj.pose.bones if np.abs(np.array(pb.matrix_basis) - before[pb.name]).max() > 1e-6}
        assert moved and moved <= set(chain[:3]), moved
        obj.fullbody_ik.settings.movable = "Left arm"
        with pytest.raises(RigError, match="has no bone collection 'Left arm'"):
            solve_pose(obj)
    finally:
        fullbody_ik.unregister()


def test_a_bake_leaves_what_the_goals_do_not_ask_for_as_the_action_has_it():
    """A rig that keeps its own action, its goal already met by that action on every frame (the target is the
    same bone of a copy playing the same action): the bake leaves every bone as the action poses it, the goal
    bone's own turn too. The tracker used to start each frame from the last answer alone: the goal bone kept the
    first frame's turn and the chain drifted from the action (a walk's knees 80 mm off the clip's)."""
    obj, _ = build_scene(rotation_mode="XYZ")
    try:
        for pb in obj.pose.bones:
            pb.rotation_mode = "XYZ"
        for f, angles in ((1, (0.0, 0.3, 0.0)), (12, (0.5, -0.4, 0.8)), (24, (-0.3, 0.6, -0.5))):
            for name, scale in (("b0", 0.6), ("b1", 1.0), ("b2", 1.5)):
                pb = obj.pose.bones[name]
                pb.rotation_euler = tuple(scale * a for a in angles)
                pb.keyframe_insert("rotation_euler", frame=f)
        source = bpy.data.objects.new("Source", obj.data)
        bpy.context.scene.collection.objects.link(source)
        source.animation_data_create()
        source.animation_data.action = obj.animation_data.action
        source.animation_data.action_slot = obj.animation_data.action_slot
        bpy.context.view_layer.update()  # (its pose made)
        for pb in source.pose.bones:
            pb.rotation_mode = "XYZ"
        obj.fullbody_ik.goals.clear()
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target, g.subtarget, g.use_tail = "POSITION", "b2", source, "b2", False
        obj.fullbody_ik.settings.time_limit = 0.05
        report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
        assert report.summary()["solved_frames"] == FRAMES[1] - FRAMES[0] + 1
        worst = 0.0
        for f in range(FRAMES[0], FRAMES[1] + 1):
            bpy.context.scene.frame_set(f)
            for name in ("b0", "b1", "b2"):
                worst = max(worst, float(np.abs(np.array(obj.pose.bones[name].matrix)
                                                - np.array(source.pose.bones[name].matrix)).max()))
        assert worst < 1e-4, worst
    finally:
        if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        fullbody_ik.unregister()


def _skinned_mesh(obj):
    """A mesh deformed by the armature (an Armature modifier, every vertex on b2), parented to it."""
    mesh = bpy.data.meshes.new("Skin")
    mesh.from_pydata([(0.0, 0.0, 2.0), (0.1, 0.0, 2.4), (0.0, 0.1, 2.8)], [], [(0, 1, 2)])
    skin = bpy.data.objects.new("Skin", mesh)
    bpy.context.scene.collection.objects.link(skin)
    skin.parent = obj
    skin.vertex_groups.new(name="b2").add([0, 1, 2], 1.0, "REPLACE")
    skin.modifiers.new("Armature", "ARMATURE").object = obj
    return skin


def _evaluated_vertices(obj):
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return np.array([tuple(evaluated.matrix_world @ v.co) for v in evaluated.data.vertices])


def test_a_bake_has_blender_evaluate_only_what_it_reads_and_leaves_the_scene_as_it_was(scene):
    """While it reads the goals' targets a bake run to its end has Blender evaluate only the armature and the
    targets (the skinned mesh, another animated object are disabled in viewports; a static one, which a new frame
    does not evaluate again, is left alone), while it judges the baked pose only the armature; afterwards every
    object is shown and selected as before and evaluated at the frame the user was on (nothing left stale)."""
    obj, target = scene
    skin = _skinned_mesh(obj)
    other = bpy.data.objects.new("Other", None)
    off = bpy.data.objects.new("Off", None)
    static = bpy.data.objects.new("Set", bpy.data.meshes.new("Set"))  # (not evaluated again at a new frame: kept)
    for o in (other, off, static):
        bpy.context.scene.collection.objects.link(o)
    other.keyframe_insert("location", frame=1)
    off.hide_viewport = True
    skin.select_set(True)
    seen = []

    def record(scene, depsgraph=None):
        seen.append(frozenset(o.name for o in scene.objects if o.hide_viewport))

    bpy.app.handlers.frame_change_post.append(record)
    try:
        report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run()
    finally:
        bpy.app.handlers.frame_change_post.remove(record)
    assert report.ok, report.text()
    frames = FRAMES[1] - FRAMES[0] + 1
    assert seen[:frames] == [frozenset({"Skin", "Other", "Off"})] * frames  # reading: the armature, the target
    assert seen[frames:2 * frames] == [frozenset({"Skin", "Other", "Off", "Target"})] * frames  # judging
    assert seen[2 * frames:] == [frozenset({"Off"})]  # back on the user's frame, everything shown
    assert [o.hide_viewport for o in (obj, target, skin, other, off, static)] == [False] * 4 + [True, False]
    assert skin.select_get() and not other.select_get()
    assert bpy.context.scene.frame_current == 5
    shown = _evaluated_vertices(skin)
    bpy.context.scene.frame_set(6)
    bpy.context.scene.frame_set(5)
    assert np.allclose(shown, _evaluated_vertices(skin), rtol=0, atol=1e-6)


def test_the_modal_bakes_steps_evaluate_only_what_they_read_and_leave_the_scene_whole_between_them(scene):
    """The UI's bake solves frames a tenth of a second at a time and the viewport draws in between (Baker.steps):
    while a step reads, Blender evaluates the armature and the target alone; after each step every object is
    shown and selected again and evaluated at the frame reached (an animated object where its keys put it there,
    not where it was left), and the bake meets its goals."""
    obj, target = scene
    skin = _skinned_mesh(obj)
    other = bpy.data.objects.new("Other", None)
    bpy.context.scene.collection.objects.link(other)
    for f, x in ((FRAMES[0], 0.0), (FRAMES[1], 2.3)):
        other.location = (x, 0.0, 0.0)
        other.keyframe_insert("location", frame=f)
    skin.select_set(True)
    seen = []

    def record(scene, depsgraph=None):
        seen.append(frozenset(o.name for o in scene.objects if o.hide_viewport))

    frames = FRAMES[1] - FRAMES[0] + 1
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES))
    bpy.app.handlers.frame_change_post.append(record)
    steps = 0
    try:
        done = False
        while not done:
            done = baker.steps(0.0)  # (at least one frame a step)
            steps += 1
            assert not skin.hide_viewport and not other.hide_viewport and skin.select_get()
            f = bpy.context.scene.frame_current
            assert f == FRAMES[0] + len(baker.Q) - 1  # the frame reached
            shown = other.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation.x
            assert abs(shown - other.animation_data.action.layers[0].strips[0].channelbags[0].fcurves[0]
                       .evaluate(f)) < 1e-6, (f, shown)
        report = baker.finish()
    finally:
        bpy.app.handlers.frame_change_post.remove(record)
    assert report.ok, report.text()
    assert 1 < steps <= frames
    reading, rest = seen[:frames + steps], seen[frames + steps:]
    # each step: its frames read with the skin and the other object left out, then the scene whole at the last
    assert reading.count(frozenset({"Skin", "Other"})) == frames and reading.count(frozenset()) == steps
    assert reading[-1] == frozenset() and all(a != b for a, b in zip(reading, reading[1:]) if not b)
    assert rest[:frames] == [frozenset({"Skin", "Other", "Target"})] * frames  # judging
    assert rest[frames:] == [frozenset()] and bpy.context.scene.frame_current == 5
    # A step lasts at least four times what leaving objects out and showing them again took in the last one (in a
    # scene of thousands of animated objects, about a second each way): here the whole bake in one step.
    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES))
    baker._switching = 10.0
    assert baker.steps(0.0) and len(baker.Q) == frames
    baker.cancel()


def test_a_bake_is_judged_on_what_the_armature_depends_on_though_it_is_left_out(scene):
    """An object disabled while the bake judges is still evaluated when the armature depends on it: the arm's root
    follows an animated empty (a Copy Location constraint, which the solve does not model), and the report's
    errors are the distances Blender shows on every frame, the constraint's moves included."""
    obj, target = scene
    carrier = bpy.data.objects.new("Carrier", None)
    bpy.context.scene.collection.objects.link(carrier)
    for f, x in ((FRAMES[0], 0.0), (FRAMES[1], 0.3)):
        carrier.location = (x, 0.0, 0.0)
        carrier.keyframe_insert("location", frame=f)
    c = obj.pose.bones["b0"].constraints.new("COPY_LOCATION")
    c.target, c.use_offset = carrier, True
    report = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES, max_error=float("inf"))).run()
    truth = np.array([tip_error(obj, target, f) for f in range(FRAMES[0], FRAMES[1] + 1)])
    assert np.ptp(truth) > 0.1  # the carrier moves the arm further off the target frame after frame
    assert np.allclose(report.errors[:, 0], truth, rtol=0, atol=1e-6)  # (float32 matrices both ways)


def test_a_cancelled_or_failed_bake_shows_everything_again(scene):
    obj, target = scene
    skin = _skinned_mesh(obj)
    skin.select_set(True)
    calls = []
    assert Baker(bpy.context.scene, obj, BakeOptions(*FRAMES)).run(
        should_cancel=lambda: calls.append(1) or len(calls) > 3) is None
    assert not skin.hide_viewport and skin.select_get()

    def fail(*_):
        raise RuntimeError("a goal provider's error")

    baker = Baker(bpy.context.scene, obj, BakeOptions(*FRAMES))
    baker.goals.objectives = fail
    with pytest.raises(RuntimeError, match="provider"):
        baker.run()
    assert not skin.hide_viewport and skin.select_get() and bpy.context.scene.frame_current == 5


def test_a_scene_that_simulates_is_evaluated_whole(scene):
    """Objects left out of a simulation's frames would change its cache (a collider, a field): a scene with a
    simulation (a cloth, a rigid body world, a simulation zone in geometry nodes) keeps every object evaluated."""
    from fullbody_ik.rig.evaluation import evaluating_only, simulation

    obj, target = scene
    skin = _skinned_mesh(obj)
    sc = bpy.context.scene
    with evaluating_only(sc, [obj]) as disabled:
        assert disabled == 2 and skin.hide_viewport and target.hide_viewport
    assert simulation(sc) is None and not skin.hide_viewport and not target.hide_viewport
    tree = bpy.data.node_groups.new("Sim", "GeometryNodeTree")
    skin.modifiers.new("Nodes", "NODES").node_group = tree
    assert simulation(sc) is None  # geometry nodes without a simulation
    group = bpy.data.node_groups.new("Inner", "GeometryNodeTree")
    group.nodes.new("GeometryNodeSimulationOutput")
    tree.nodes.new("GeometryNodeGroup").node_tree = group
    assert simulation(sc) == "Skin"
    with evaluating_only(sc, [obj]) as disabled:
        assert disabled == 0 and not skin.hide_viewport and not target.hide_viewport
    skin.modifiers.remove(skin.modifiers["Nodes"])
    skin.modifiers.new("Cloth", "CLOTH")
    assert simulation(sc) == "Skin"
    skin.modifiers.remove(skin.modifiers["Cloth"])
    assert simulation(sc) is None
    # a cloth in a collection that an empty instances (a linked character's, as often): not in scene.objects
    props = bpy.data.collections.new("Props")
    cape = bpy.data.objects.new("Cape", bpy.data.meshes.new("Cape"))
    props.objects.link(cape)
    cape.modifiers.new("Cloth", "CLOTH")
    instance = bpy.data.objects.new("Props instance", None)
    instance.instance_type, instance.instance_collection = "COLLECTION", props
    sc.collection.objects.link(instance)
    assert simulation(sc) == "Cape"
    sc.collection.objects.unlink(instance)
    sc.rigidbody_world_add() if hasattr(sc, "rigidbody_world_add") else bpy.ops.rigidbody.world_add()
    assert simulation(sc) == "the rigid body world"
