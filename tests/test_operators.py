# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals, Solve and their errors, through the real operators in the real bpy 5.0.1, on Rigify's metarig."""

import math

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import fullbody_ik  # noqa: E402


@pytest.fixture()
def rig():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.preferences.addon_enable(module="rigify")
    fullbody_ik.register()
    bpy.ops.object.armature_human_metarig_add()
    obj = bpy.context.object
    bpy.ops.object.mode_set(mode="POSE")
    yield obj
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    fullbody_ik.unregister()


def select_bone(obj, name):
    obj.data.bones.active = obj.data.bones[name]


def tip(obj, bone):
    bpy.context.view_layer.update()
    return np.array(obj.matrix_world @ obj.pose.bones[bone].tail)


def test_goal_add_creates_a_target_at_the_tip_and_solve_reaches_it(rig):
    obj = rig
    select_bone(obj, "hand.L")
    assert bpy.ops.fullbody_ik.goal_add(kind="POSITION") == {"FINISHED"}
    goal = obj.fullbody_ik.goals[0]
    assert goal.bone == "hand.L" and goal.target is not None
    assert np.allclose(np.array(goal.target.matrix_world.translation), tip(obj, "hand.L"), atol=1e-5)
    target = np.array(goal.target.location) + np.array([0.05, -0.1, 0.15])
    goal.target.location = target
    obj.fullbody_ik.settings.time_limit = 0.5
    assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
    assert np.linalg.norm(tip(obj, "hand.L") - target) < 1e-3
    # One undo step restores the pose.
    bpy.ops.ed.undo_push(message="after solve")


def test_several_goals_and_keys_with_auto_keying(rig):
    obj = rig
    for bone, kind in (("hand.L", "POSE"), ("hand.R", "POSITION"), ("foot.L", "POSITION"), ("spine.006", "LOOK_AT")):
        select_bone(obj, bone)
        assert bpy.ops.fullbody_ik.goal_add(kind=kind) == {"FINISHED"}
    goals = obj.fullbody_ik.goals
    goals[1].target.location.z += 0.1
    goals[3].target.location = (0.0, -2.0, 1.8)
    bpy.context.scene.tool_settings.use_keyframe_insert_auto = True
    obj.fullbody_ik.settings.time_limit = 1.0
    assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
    assert np.linalg.norm(tip(obj, "hand.R") - np.array(goals[1].target.location)) < 1e-3
    action = obj.animation_data.action
    assert action is not None and len(action.layers) >= 1


@pytest.mark.parametrize("breakage,message", [
    ("rename", "not found"), ("nan", "not finite"), ("no goals", "no enabled goal"), ("object mode", None),
    ("delete target", "was deleted"),
    ("a bone of the rig", "targets 'hand.R', a bone of 'metarig' itself, which the solve moves"),
])
def test_bad_goals_change_nothing_and_say_why(rig, breakage, message):
    obj = rig
    select_bone(obj, "hand.L")
    bpy.ops.fullbody_ik.goal_add(kind="POSITION")
    goal = obj.fullbody_ik.goals[0]
    if breakage == "rename":
        goal.bone = "no such bone"
    elif breakage == "nan":
        goal.target.location = (float("nan"), 0.0, 0.0)
    elif breakage == "no goals":
        goal.enabled = False
    elif breakage == "object mode":
        bpy.ops.object.mode_set(mode="OBJECT")
    elif breakage == "delete target":
        bpy.data.objects.remove(goal.target)
    elif breakage == "a bone of the rig":  # (read before the solve moves it: met where it had been)
        goal.target, goal.subtarget = obj, "hand.R"
    before = {pb.name: tuple(pb.rotation_quaternion) for pb in obj.pose.bones}
    if message is None:  # Solve also works from Object Mode
        assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
        return
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.fullbody_ik.solve()
    assert before == {pb.name: tuple(pb.rotation_quaternion) for pb in obj.pose.bones}


def test_remove_and_reorder_goals(rig):
    obj = rig
    for bone in ("hand.L", "hand.R", "foot.L"):
        select_bone(obj, bone)
        bpy.ops.fullbody_ik.goal_add(kind="POSITION")
    props = obj.fullbody_ik
    props.active_goal = 2
    bpy.ops.fullbody_ik.goal_move(direction="UP")
    assert [g.bone for g in props.goals] == ["hand.L", "foot.L", "hand.R"] and props.active_goal == 1
    bpy.ops.fullbody_ik.goal_remove()
    assert [g.bone for g in props.goals] == ["hand.L", "hand.R"]


def test_memetic_with_lm_exploitation_solves_a_rig(rig):
    obj = rig
    select_bone(obj, "hand.L")
    bpy.ops.fullbody_ik.goal_add(kind="POSITION")
    goal = obj.fullbody_ik.goals[0]
    goal.target.location.z += 0.1
    s = obj.fullbody_ik.settings
    s.method, s.exploit, s.time_limit = "memetic", "LM", 0.5
    from fullbody_ik.rig.goals import solver_options

    assert solver_options(s)["exploit"] == "lm"
    assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
    assert np.linalg.norm(tip(obj, "hand.L") - np.array(goal.target.location)) < 1e-3


def test_solver_presets_are_installed_and_apply(rig):
    import os

    from fullbody_ik.panels.sidebar import PRESET_SUBDIR

    paths = bpy.utils.preset_paths(PRESET_SUBDIR)
    files = [f for p in paths for f in os.listdir(p)]
    assert "Accurate.py" in files
    path = next(os.path.join(p, "Accurate.py") for p in paths if "Accurate.py" in os.listdir(p))
    bpy.ops.script.execute_preset(filepath=path, menu_idname="FULLBODY_IK_MT_solver_presets")
    assert rig.fullbody_ik.settings.method == "memetic"


def test_drag_session_follows_the_mouse_and_cancel_restores_exactly(rig):
    from fullbody_ik.rig.drag import DragSession, look_at_perspective, to_screen

    obj = rig
    select_bone(obj, "hand.L")
    bpy.ops.fullbody_ik.goal_add(kind="POSITION")
    goal = obj.fullbody_ik.goals[0]
    obj.fullbody_ik.settings.time_limit = 0.3
    P, size = look_at_perspective((0.0, -4.0, 1.2), (0.0, 0.0, 1.0)), (1200, 800)
    start = np.array(goal.target.matrix_world.translation)
    before = {pb.name: (tuple(pb.rotation_quaternion), tuple(pb.location)) for pb in obj.pose.bones}
    mouse = to_screen(P, size, start)[:2]
    session = DragSession(obj, P, size, mouse)
    assert session.goal == goal
    for step in range(1, 4):  # move right and up, in the view plane
        res = session.move(mouse + np.array([15.0, 10.0]) * step)
        target = np.array(goal.target.matrix_world.translation)
        assert np.allclose(to_screen(P, size, target)[:2], mouse + np.array([15.0, 10.0]) * step, atol=1e-3)
        assert res.success and np.linalg.norm(tip(obj, "hand.L") - target) < 1e-3
    session.cancel()
    assert before == {pb.name: (tuple(pb.rotation_quaternion), tuple(pb.location)) for pb in obj.pose.bones}
    assert np.allclose(np.array(goal.target.matrix_world.translation), start)


@pytest.mark.usefixtures("unregistered")
def test_dragging_a_hand_moves_the_arm_not_the_body():
    """CMU's run, one frame, the right hand's tip dragged 25 cm up (no goals: the bone under the mouse): the hand
    follows the mouse and every bone off the arm stays within 10 degrees of where the drag started."""
    import math

    from fullbody_ik.rig.drag import DragSession, from_screen, look_at_perspective, to_screen
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    obj, first, _ = scenes.import_cmu(bpy, "02_03")
    bpy.context.scene.frame_set(first + 20)
    obj.fullbody_ik.settings.time_limit = 0.05
    W = obj.matrix_world
    start = {pb.name: (W @ pb.matrix).to_quaternion() for pb in obj.pose.bones}
    hand = np.array(W @ obj.pose.bones["RightHand"].tail)
    hips = np.array(W @ obj.pose.bones["Hips"].head)
    P, size = look_at_perspective(hips + np.array([4.0, 0.0, 0.3]), hips), (1200, 800)
    mouse = to_screen(P, size, hand)[:2]
    session = DragSession(obj, P, size, mouse, pick_radius=2.0)
    assert session.bone == "RightHand", session.bone
    goal = hand + np.array([0.0, 0.0, 0.25])
    for k in range(1, 6):  # (in steps, as a mouse moves)
        res = session.move(to_screen(P, size, hand + (goal - hand) * k / 5)[:2] - session.grab_offset)
    under = from_screen(P, size, to_screen(P, size, goal)[:2], session.depth)  # (on the view plane it moves in)
    assert res.success and np.linalg.norm(tip(obj, "RightHand") - under) < 1e-3
    assert np.linalg.norm(under - goal) < 0.03
    arm = {b.name for b in obj.data.bones["RightShoulder"].children_recursive} | {"RightShoulder"}
    for pb in obj.pose.bones:
        if pb.name not in arm:
            turn = (W @ pb.matrix).to_quaternion().rotation_difference(start[pb.name])
            assert math.degrees(min(turn.angle, 2 * math.pi - turn.angle)) < 10.0, pb.name


def test_drag_a_bone_without_a_goal_and_nothing_to_pick(rig):
    from fullbody_ik.rig import RigError
    from fullbody_ik.rig.drag import DragSession, look_at_perspective, to_screen

    obj = rig
    obj.fullbody_ik.settings.time_limit = 0.3
    P, size = look_at_perspective((0.0, -4.0, 1.2), (0.0, 0.0, 1.0)), (1200, 800)
    bpy.context.view_layer.update()
    tip_world = tip(obj, "forearm.R")
    mouse = to_screen(P, size, tip_world)[:2]
    session = DragSession(obj, P, size, mouse, pick_radius=3.0)
    assert session.bone is not None
    session.move(mouse + np.array([0.0, 20.0]))
    assert tip(obj, session.bone)[2] > tip_world[2] - 1e-6 or session.bone != "forearm.R"
    with pytest.raises(RigError, match="nothing to drag"):
        DragSession(obj, P, size, (5.0, 5.0), pick_radius=3.0)


def test_drag_picks_the_bone_the_viewport_shows(rig):
    """A click at a hand where hidden bones end too (a control rig's mechanism and deform bones share the controls'
    places), the mouse right on their tips: the bone shown is picked, not one hidden nor one in a hidden bone
    collection; shown again, they are picked."""
    from fullbody_ik.rig.drag import DragSession, look_at_perspective, to_screen

    obj = rig
    bpy.ops.object.mode_set(mode="EDIT")
    hand = obj.data.edit_bones["hand.L"]
    for name in ("MCH-hand.L", "DEF-hand.L"):  # a millimetre from the hand's tip
        b = obj.data.edit_bones.new(name)
        b.head, b.tail, b.parent = hand.head, hand.tail + hand.z_axis * 0.001, hand.parent
    bpy.ops.object.mode_set(mode="POSE")
    mechanism = obj.data.collections.new("Mechanism")
    mechanism.assign(obj.data.bones["MCH-hand.L"])
    mechanism.is_visible = False
    obj.pose.bones["DEF-hand.L"].hide = True
    obj.fullbody_ik.settings.time_limit = 0.3
    P, size = look_at_perspective((0.0, -4.0, 1.2), (0.0, 0.0, 1.0)), (1200, 800)
    for name in ("MCH-hand.L", "DEF-hand.L"):
        mouse = to_screen(P, size, tip(obj, name))[:2]
        session = DragSession(obj, P, size, mouse, pick_radius=3.0)
        assert session.bone == "hand.L", session.bone
        session.cancel()
    mechanism.is_visible, obj.pose.bones["DEF-hand.L"].hide = True, False
    for name in ("MCH-hand.L", "DEF-hand.L"):
        mouse = to_screen(P, size, tip(obj, name))[:2]
        session = DragSession(obj, P, size, mouse, pick_radius=3.0)
        assert session.bone in {"MCH-hand.L", "DEF-hand.L"}, session.bone
        session.cancel()


@pytest.mark.usefixtures("unregistered")
@pytest.mark.parametrize("free_root", [False, True])
def test_goals_on_a_generated_rigify_rigs_controls_move_the_controls(free_root):
    """A rig generated by Rigify, goals on the controls an animator poses (the left hand's IK control, the right
    foot's, the torso), their targets moved 7-18 cm: Solve meets every goal as Blender shows the pose, the deform
    hand on its control, by moving those controls alone (their location in their parent's frame, as Rigify sets
    them; their parents, mechanism bones that follow the torso, and the root untouched), Free Root on or off."""
    from mathutils import Vector

    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    rig, first, _ = scenes.rigify_walk(bpy, frames=4)
    bpy.context.scene.frame_set(first)
    for o in bpy.context.view_layer.objects:
        o.select_set(o is rig)
    bpy.ops.object.mode_set(mode="POSE")
    rig.fullbody_ik.settings.free_root = free_root
    moves = {"hand_ik.L": ("POSE", (0.05, -0.1, 0.12)), "foot_ik.R": ("POSITION", (0.0, -0.15, 0.05)),
             "torso": ("POSITION", (0.0, -0.05, -0.05))}
    for name, (kind, move) in moves.items():
        rig.data.bones.active = rig.data.bones[name]
        bpy.ops.fullbody_ik.goal_add(kind=kind)
        target = rig.fullbody_ik.goals[-1].target
        target.location = target.location + Vector(move)
    bpy.context.view_layer.update()
    before = {pb.name: pb.matrix_basis.copy() for pb in rig.pose.bones}
    assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
    bpy.context.view_layer.update()
    W = rig.matrix_world
    for goal in rig.fullbody_ik.goals:
        target = goal.target.matrix_world
        assert (W @ rig.pose.bones[goal.bone].tail - target.translation).length < 1e-3, goal.bone
        if goal.kind == "POSE":
            turn = (W @ rig.pose.bones[goal.bone].matrix).to_quaternion().rotation_difference(target.to_quaternion())
            assert min(turn.angle, 2 * np.pi - turn.angle) < np.radians(0.5), goal.bone
    assert (rig.pose.bones["DEF-hand.L"].head - rig.pose.bones["hand_ik.L"].head).length < 1e-3
    posed = {name for name, m in before.items() if not np.allclose(np.array(m), np.array(rig.pose.bones[name].matrix_basis),
                                                                   atol=1e-7)}
    assert posed == set(moves), posed


@pytest.mark.usefixtures("unregistered")
@pytest.mark.parametrize("grabbed", ["hand_ik.L", "DEF-hand.L"])
def test_dragging_a_generated_rigify_rigs_hand_moves_its_ik_control(grabbed):
    """Drag on a generated Rigify rig (no goals), the left hand grabbed by its tip: its IK control as the rig shows
    it, or the deform hand with only the deform bones shown (the IK control carries it, the arm in IK). That
    control follows the mouse and the grabbed tip with it; nothing but the control is posed (a temporary goal on
    the deform hand, which the rig's constraints pose, had nothing to move)."""
    from fullbody_ik.rig.drag import DragSession, from_screen, look_at_perspective, to_screen
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    rig, first, _ = scenes.rigify_walk(bpy, frames=4)
    bpy.context.scene.frame_set(first)
    rig.fullbody_ik.settings.time_limit = 0.05
    if grabbed.startswith("DEF-"):
        for collection in rig.data.collections_all:
            collection.is_visible = grabbed in {b.name for b in collection.bones}
    W = rig.matrix_world
    tip = np.array(W @ rig.pose.bones[grabbed].tail)
    P, size = look_at_perspective(tip + np.array([0.0, -3.0, 0.2]), tip), (1200, 800)
    mouse = to_screen(P, size, tip)[:2]
    before = {pb.name: pb.matrix_basis.copy() for pb in rig.pose.bones}
    session = DragSession(rig, P, size, mouse, pick_radius=3.0)
    assert session.bone == "hand_ik.L", session.bone
    for k in range(1, 4):
        res = session.move(mouse + np.array([20.0, 15.0]) * k - session.grab_offset)
    bpy.context.view_layer.update()
    under = from_screen(P, size, mouse + np.array([60.0, 45.0]), session.depth)
    assert res.success and np.linalg.norm(np.array(W @ rig.pose.bones[grabbed].tail) - under) < 1e-3
    assert (rig.pose.bones["DEF-hand.L"].head - rig.pose.bones["hand_ik.L"].head).length < 1e-3
    posed = {name for name, m in before.items() if not np.allclose(np.array(m), np.array(rig.pose.bones[name].matrix_basis),
                                                                   atol=1e-7)}
    assert posed == {"hand_ik.L"}, posed
    session.confirm()


@pytest.mark.usefixtures("unregistered")
@pytest.mark.parametrize("on", ["controls", "deform bones"])
def test_baking_pose_goals_on_a_generated_rigify_rigs_hands_and_feet_keys_their_ik_controls(on):
    """A walk on a generated Rigify rig, Pose goals on both hands and both feet (on their IK controls, or on the
    deform bones the character shows), their targets keyed within reach (the hands drawn toward the shoulders, the
    feet lifted), default settings: every frame met as Blender shows it within 1 mm and half a degree, the deform
    hands and feet on their controls, no limb stretched, and keys only on the IK controls (never a mechanism,
    deform or original bone)."""
    from fullbody_ik.rig.bake import Baker, BakeOptions
    from fullbody_ik.tools import scenes
    from test_real_scenes import action_snapshot

    scenes.fresh(bpy)
    rig, first, last = scenes.rigify_walk(bpy, frames=12)
    rig.animation_data.action = None  # (at rest: a walk whose hands stay behind stretches the arms, as Rigify does)
    for pb in rig.pose.bones:
        pb.location, pb.rotation_quaternion = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    bpy.context.view_layer.update()
    limbs = [f"ORG-{b}.{side}" for side in "LR" for b in ("upper_arm", "forearm", "thigh", "shin")]
    rest_length = {b: (rig.pose.bones[b].tail - rig.pose.bones[b].head).length for b in limbs}  # (as Rigify shows it)
    controls = ("hand_ik.L", "hand_ik.R", "foot_ik.L", "foot_ik.R")
    for k, control in enumerate(controls):
        name = control if on == "controls" else "DEF-" + control.replace("_ik", "")
        for collection in rig.data.bones[name].collections:  # (shown, to be picked as an animator would)
            collection.is_visible = True
        rig.data.bones.active = rig.data.bones[name]
        bpy.ops.fullbody_ik.goal_add(kind="POSE")
        scenes.key_within_reach(bpy, rig, rig.fullbody_ik.goals[-1], first, last, k)
    bpy.ops.object.mode_set(mode="OBJECT")
    report = Baker(bpy.context.scene, rig, BakeOptions(first, last)).run()
    assert report.ok and not report.verdict()["missed_frames"], report.text()
    keyed = {path.split('"')[1] for path, *_ in action_snapshot(rig.animation_data.action) if '"' in path}
    assert set(controls) <= keyed and not any(n.startswith(("MCH-", "DEF-", "ORG-")) or n == "root" for n in keyed), keyed
    W = rig.matrix_world
    pb = rig.pose.bones
    for f in range(first, last + 1):
        bpy.context.scene.frame_set(f)
        for goal in rig.fullbody_ik.goals:
            target = goal.target.matrix_world
            assert (W @ pb[goal.bone].tail - target.translation).length < 1e-3, (goal.bone, f)
            turn = (W @ pb[goal.bone].matrix).to_quaternion().rotation_difference(target.to_quaternion()).angle
            assert min(turn, 2 * np.pi - turn) < np.radians(0.5), (goal.bone, f)
        for side in "LR":
            assert (pb[f"DEF-hand.{side}"].head - pb[f"hand_ik.{side}"].head).length < 1e-3
        for bone in limbs:  # (no longer than Rigify shows it at rest, where its own IK already stretches 1-2 %)
            assert (pb[bone].tail - pb[bone].head).length / rest_length[bone] < 1.001, (bone, f)


@pytest.mark.usefixtures("unregistered")
def test_a_goal_on_the_ik_control_of_an_arm_switched_to_fk_is_a_miss_that_names_the_switch():
    """A generated Rigify rig whose left arm is switched to FK, a goal on its IK hand control moved 10 cm: Solve
    moves the control, but the arm Blender shows does not follow it: a miss as shown, and the hint names the
    switch (the limb's IK_FK); switched back to IK, the same goal is met as shown."""
    from fullbody_ik.rig.goals import solve_pose

    rig = _rigify_rig_posed()
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 1.0
    _goal_moved(rig, "hand_ik.L", (0.0, -0.1, 0.05))
    result = solve_pose(rig)
    assert result.success and not result.shown_success and max(result.shown_errors) > 0.05
    assert any("'upper_arm_parent.L' IK_FK = 1" in h for h in result.hints), result.hints
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 0.0
    bpy.context.view_layer.update()
    result = solve_pose(rig)
    assert result.shown_success and not result.hints, (result.shown_errors, result.hints)


@pytest.mark.usefixtures("unregistered")
def test_goals_on_a_generated_rigify_rigs_fk_controls_turn_those_controls_alone():
    """A generated Rigify rig with its left arm and leg in FK, Pose goals on their FK hand and foot controls moved
    5-12 cm: Solve meets both as Blender shows them by turning the limbs' FK controls alone (the mechanism their
    chains run through, MCH- and ORG- bones a constraint poses, untouched: it held the hand 66 mm off as shown,
    posing those bones; and nothing above where the leg's FK and IK chains meet: the foot turned the spine), and a
    bake of the same goals keys no mechanism bone."""
    from fullbody_ik.rig.bake import Baker, BakeOptions
    from fullbody_ik.rig.goals import solve_pose
    from test_real_scenes import action_snapshot

    rig = _rigify_rig_posed()
    for limb in ("upper_arm_parent.L", "thigh_parent.L"):
        rig.pose.bones[limb]["IK_FK"] = 1.0
    _goal_moved(rig, "hand_fk.L", (-0.06, -0.05, 0.03))  # (toward the body: the arm alone reaches it)
    _goal_moved(rig, "foot_fk.L", (0.0, -0.05, 0.04))
    before = {pb.name: np.array(pb.matrix_basis) for pb in rig.pose.bones}
    result = solve_pose(rig)
    assert result.shown_success, (result.shown_errors, result.hints)
    posed = {n for n, m in before.items() if not np.allclose(m, np.array(rig.pose.bones[n].matrix_basis), atol=1e-7)}
    assert {"hand_fk.L", "foot_fk.L"} <= posed <= {f"{b}_fk.L" for b in ("upper_arm", "forearm", "hand", "thigh", "shin",
                                                                       "foot")}, posed
    for name, m in before.items():
        rig.pose.bones[name].matrix_basis = m.tolist()
    bpy.ops.object.mode_set(mode="OBJECT")
    report = Baker(bpy.context.scene, rig, BakeOptions(1, 1)).run()
    assert report.ok, report.text()
    keyed = {path.split('"')[1] for path, *_ in action_snapshot(rig.animation_data.action) if '"' in path}
    assert not any(n.startswith(("MCH-", "DEF-", "ORG-")) for n in keyed), keyed


def test_an_fk_hand_goal_out_of_the_arms_reach_says_so_naming_where_its_chain_starts():
    """Solve with a generated Rigify rig's FK hand goal 40 cm beyond the arm's reach: a best effort whose hint says
    the target is out of reach from the arm's first FK control (no hint at all before), not to turn Free Root on
    (the root is not on that chain: the rig poses the bone above the arm)."""
    from fullbody_ik.rig.goals import solve_pose

    rig = _rigify_rig_posed()
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 1.0
    _goal_moved(rig, "hand_fk.L", (0.5, 0.0, 0.3))
    result = solve_pose(rig)
    assert not result.shown_success
    assert any("out of reach" in h and "'upper_arm_fk.L'" in h for h in result.hints), result.hints
    assert not any("Free Root" in h for h in result.hints), result.hints


def test_a_position_goal_on_an_animated_fk_hand_is_reached_by_the_arm_not_the_wrist():
    """A position goal at the tip of a generated Rigify rig's FK hand control, its arm keyed: Solve reaches it by
    the elbow and the shoulder, the hand turning a little on its forearm (it bent 73 degrees at the wrist: the hand's
    own turn cost the least, and the mechanism bone between the hand and the forearm made the forearm stiffer)."""
    from fullbody_ik.rig.goals import solve_pose

    rig = _rigify_rig_posed()
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 1.0
    for name in ("upper_arm_fk.L", "forearm_fk.L", "hand_fk.L"):
        pb = rig.pose.bones[name]
        pb.keyframe_insert("rotation_quaternion" if pb.rotation_mode == "QUATERNION" else "rotation_euler")
    _goal_moved(rig, "hand_fk.L", (-0.06, -0.05, 0.03))

    def turns():
        pb = rig.pose.bones
        on = [pb["hand_fk.L"].matrix, pb["forearm_fk.L"].matrix, pb["upper_arm_fk.L"].matrix]
        return [(on[1].to_quaternion().inverted() @ on[0].to_quaternion()),
                (on[2].to_quaternion().inverted() @ on[1].to_quaternion())]

    before = turns()
    result = solve_pose(rig)
    assert result.shown_success, (result.shown_errors, result.hints)
    wrist, elbow = (math.degrees(a.rotation_difference(b).angle) for a, b in zip(before, turns()))
    wrist, elbow = (min(x, 360.0 - x) for x in (wrist, elbow))
    assert wrist < 25.0 and elbow > 20.0, (wrist, elbow)


@pytest.mark.usefixtures("unregistered")
def test_goals_on_a_generated_rigify_rigs_deform_bones_move_the_controls_that_carry_them():
    """Goals on bones a generated Rigify rig's constraints pose, as an animator picks what the character shows
    (the deform hand, foot and head): Solve meets each as Blender shows it by moving the control that carries
    it (the hand's IK control with the arm in IK, its FK controls in FK), and poses nothing else (it posed the
    deform bones, which the rig overrides, and missed by 13-27 cm as shown); a bake keys only those controls. A
    deform bone no control carries alone (the forearm, in IK) is refused, saying what poses it (it was solved on,
    keys on it that the rig overrides)."""
    from mathutils import Vector

    from fullbody_ik.rig import RigError
    from fullbody_ik.rig.bake import Baker, BakeOptions
    from fullbody_ik.rig.goals import solve_pose
    from test_real_scenes import action_snapshot

    rig = _rigify_rig_posed()
    for name in ("DEF-hand.L", "DEF-foot.L", "DEF-spine.006", "DEF-forearm.L"):
        for collection in rig.data.bones[name].collections:  # (shown, to be picked as an animator would)
            collection.is_visible = True
    _goal_moved(rig, "DEF-hand.L", (0.05, -0.1, 0.08))
    _goal_moved(rig, "DEF-foot.L", (0.0, -0.12, 0.05))
    _goal_moved(rig, "DEF-spine.006", (0.0, -0.04, -0.02))
    before = {pb.name: np.array(pb.matrix_basis) for pb in rig.pose.bones}

    def posed():
        return {n for n, m in before.items() if not np.allclose(m, np.array(rig.pose.bones[n].matrix_basis), atol=1e-7)}

    result = solve_pose(rig)
    assert result.shown_success and max(result.shown_errors) < 1e-3, (result.shown_errors, result.hints)
    assert posed() == {"hand_ik.L", "foot_ik.L", "head"}, posed()
    W = rig.matrix_world
    for goal in rig.fullbody_ik.goals:
        assert (W @ rig.pose.bones[goal.bone].tail - goal.target.matrix_world.translation).length < 1e-3, goal.bone
    bpy.ops.object.mode_set(mode="OBJECT")
    for name, m in before.items():
        rig.pose.bones[name].matrix_basis = m.tolist()
    report = Baker(bpy.context.scene, rig, BakeOptions(1, 1)).run()
    assert report.ok, report.text()
    keyed = {path.split('"')[1] for path, *_ in action_snapshot(rig.animation_data.action) if '"' in path}
    assert not any(n.startswith(("MCH-", "DEF-", "ORG-")) for n in keyed), keyed

    rig.animation_data.action = bpy.data.actions["rigAction"]
    bpy.context.scene.frame_set(1)
    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 1.0  # (the arm in FK: its FK controls carry the hand)
    rig.update_tag()
    bpy.context.view_layer.update()
    for goal in rig.fullbody_ik.goals:
        goal.enabled = goal.bone == "DEF-hand.L"
        if goal.enabled:  # (5-6 cm from where the FK arm holds the hand)
            goal.target.location = rig.matrix_world @ rig.pose.bones["DEF-hand.L"].tail + Vector((0.0, -0.05, 0.03))
    bpy.context.view_layer.update()
    before = {pb.name: np.array(pb.matrix_basis) for pb in rig.pose.bones}
    result = solve_pose(rig)
    assert result.shown_success, (result.shown_errors, result.hints)
    assert "hand_fk.L" in posed() and posed() <= {"upper_arm_fk.L", "forearm_fk.L", "hand_fk.L"}, posed()

    rig.pose.bones["upper_arm_parent.L"]["IK_FK"] = 0.0
    for goal in rig.fullbody_ik.goals:
        goal.enabled = False
    bpy.ops.object.mode_set(mode="POSE")
    _goal_moved(rig, "DEF-forearm.L", (0.0, -0.1, 0.05))
    with pytest.raises(RigError, match="no bone the goals may move: DEF-forearm.L is posed by the rig's constraints"):
        solve_pose(rig)


@pytest.mark.usefixtures("unregistered")
@pytest.mark.parametrize("metarig", ["human", "basic_human"])
def test_the_control_that_carries_a_rigify_deform_bone_is_its_ik_or_fk_control_not_its_tweak(metarig):
    """On rigs Rigify generates from its human and basic human metarigs, the deform hand and foot are carried by
    their IK controls with the limbs in IK and by their FK controls in FK, never by the tweak controls that also
    drag them (and squash the forearm: the basic rig's hands, and the human rig's right hand in FK, were moved by
    their tweaks)."""
    from fullbody_ik.rig.controls import carriers
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    bpy.context.view_layer.objects.active = scenes.metarig(bpy, metarig)
    bpy.ops.pose.rigify_generate()
    rig = next(o for o in bpy.data.objects if o.type == "ARMATURE" and "rig_id" in o.data)
    bones = ["DEF-hand.L", "DEF-hand.R", "DEF-foot.L", "DEF-foot.R"]
    for mode, kind in ((0.0, "ik"), (1.0, "fk")):
        for limb in ("upper_arm_parent", "thigh_parent"):
            for side in "LR":
                rig.pose.bones[f"{limb}.{side}"]["IK_FK"] = mode
        found = {bone: control for bone, (control, _) in carriers(rig, bones).items()}
        assert found == {b: f"{b[4:-2]}_{kind}{b[-2:]}" for b in bones}, (kind, found)


def _rigify_rig_posed():
    """A rig Rigify generated (its walk's first frame), active, in Pose Mode."""
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    rig, first, _ = scenes.rigify_walk(bpy, frames=2)
    bpy.context.scene.frame_set(first)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    return rig


def _goal_moved(rig, bone, move):
    """A position goal (Add Goal) on ``bone``, its target moved by ``move``."""
    from mathutils import Vector

    rig.data.bones.active = rig.data.bones[bone]
    bpy.ops.fullbody_ik.goal_add(kind="POSITION")
    target = rig.fullbody_ik.goals[-1].target
    target.location = Vector(target.location) + Vector(move)
    bpy.context.view_layer.update()
