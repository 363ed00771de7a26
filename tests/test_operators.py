# SPDX-License-Identifier: GPL-3.0-or-later
"""Goals, Solve and their errors, through the real operators in the real bpy 5.0.1, on Rigify's metarig."""

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
