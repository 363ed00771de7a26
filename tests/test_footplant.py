# SPDX-License-Identifier: GPL-3.0-or-later
"""Foot placement as a user runs it: a CMU walk (root moving, not free) over terrains built from meshes, the
command line in a real process, the result opened and measured as Blender shows it; feet found on common
skeletons; bad input refused with nothing written."""

import json

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import fullbody_ik  # noqa: E402
from fullbody_ik.rig import RigError  # noqa: E402
from fullbody_ik.rig.feet import find_feet  # noqa: E402
from fullbody_ik.rig.foot_report import FEET_REPORT_PROPERTY  # noqa: E402
from fullbody_ik.rig.footplant import FootOptions, foot_placement  # noqa: E402
from fullbody_ik.tools import scenes  # noqa: E402
from test_cli import run  # noqa: E402
from test_real_scenes import action_snapshot  # noqa: E402

FRAMES = (2, 101)


pytestmark = pytest.mark.usefixtures("unregistered")


def walk_on(height, name="ground"):
    """The CMU walk 02_01 (it walks along -Y) and a terrain mesh; returns (armature, terrain)."""
    scenes.fresh(bpy)
    obj, first, last = scenes.import_cmu(bpy, "02_01")
    obj.fullbody_ik.settings.time_limit = 0.01
    terrain = scenes.terrain_mesh(bpy, name, height, size=(8, 8), resolution=0.1)
    bpy.context.view_layer.update()
    return obj, terrain


def test_a_skinned_foot_stands_on_its_skin_and_reaches_as_far_as_it():
    """A boot longer than the foot's bones (its heel 10 cm behind the ankle, its tip 6 cm past the toe bone's tip,
    its sole 1.5 cm under the bones, 11 cm wide), skinned to the foot bone: the foot's sole points are at its
    heel, tip and underside and its width is the boot's; the bare foot keeps the points its bones give."""
    from fullbody_ik.tools import characters
    from helpers import skinned_box

    scenes.fresh(bpy)
    obj = characters.build(bpy, "plain")[0]
    feet = {f.side: f for f in find_feet(obj)}
    bare = {p.name: np.array(p.rest) for p in feet["left"].points}
    ankle = np.array(obj.data.bones[feet["left"].ankle].head_local)
    back, front = ankle[1] + 0.10, bare["toe"][1] - 0.06  # (the character faces -Y)
    lo, hi = np.array([ankle[0] - 0.055, front, bare["toe"][2] - 0.015]), np.array([ankle[0] + 0.055, back,
                                                                                     ankle[2]])
    skinned_box(bpy, obj, feet["left"].ankle, lo, hi, "boot")
    bpy.context.view_layer.update()
    shod = {f.side: f for f in find_feet(obj)}
    at = {p.name: np.array(p.rest) for p in shod["left"].points}
    assert abs(at["heel"][1] - back) < 1e-3 and abs(at["toe"][1] - front) < 1e-3, (at, back, front)
    assert all(abs(p[2] - lo[2]) < 1e-4 for p in at.values()), at
    assert abs(shod["left"].half_width - 0.055) < 1e-3, shod["left"].half_width
    assert all(np.allclose(p.rest, q.rest) for p, q in zip(shod["right"].points, feet["right"].points))
    assert feet["right"].half_width == shod["right"].half_width == 0.0


def test_feet_given_by_hand_must_be_a_left_and_a_right_one():
    scenes.fresh(bpy)
    obj, _, _ = scenes.import_cmu(bpy, "02_01")
    for spec in ("LeftFoot:LeftToeBase", "LeftFoot:LeftToeBase,LeftFoot:LeftToeBase"):
        with pytest.raises(RigError, match="give the two feet, a left and a right one"):
            find_feet(obj, spec)


def test_feet_given_by_hand_may_have_colons_in_their_names():
    """Mixamo's names hold a colon, the separator of ANKLE:BALL: the split whose sides are bones is taken."""
    scenes.fresh(bpy)
    obj, _, _ = scenes.import_cmu(bpy, "02_01")
    for b in obj.data.bones:
        b.name = "mixamorig:" + b.name
    spec = "mixamorig:LeftFoot:mixamorig:LeftToeBase,mixamorig:RightFoot"
    feet = find_feet(obj, spec)
    assert [(f.side, f.ankle, f.ball) for f in feet] == [("left", "mixamorig:LeftFoot", "mixamorig:LeftToeBase"),
                                                         ("right", "mixamorig:RightFoot", "mixamorig:RightToeBase")]
    assert [(f.ankle, f.ball) for f in find_feet(obj)] == [(f.ankle, f.ball) for f in feet]
    with pytest.raises(RigError, match="no bone named 'mixamorig:LeftHeel'"):
        find_feet(obj, "mixamorig:LeftHeel,mixamorig:RightFoot")


def test_feet_are_found_on_common_skeletons():
    scenes.fresh(bpy)
    obj, _, _ = scenes.import_cmu(bpy, "02_01")
    assert [(f.ankle, f.ball) for f in find_feet(obj)] == [("LeftFoot", "LeftToeBase"), ("RightFoot", "RightToeBase")]
    meta = scenes.metarig(bpy)
    assert [(f.ankle, f.ball) for f in find_feet(meta)] == [("foot.L", "toe.L"), ("foot.R", "toe.R")]
    feet = find_feet(meta, "foot.R:toe.R,foot.L")  # by hand, sides from the names
    assert [(f.side, f.ankle, f.ball) for f in feet] == [("right", "foot.R", "toe.R"), ("left", "foot.L", "toe.L")]
    for foot in find_feet(meta):  # the sole points lie on the rest pose's sole, heel behind the ball
        heel, ball, toe = (p.rest for p in foot.points)
        assert abs(heel[2] - toe[2]) < 1e-6 and abs(ball[2] - toe[2]) < 1e-6 and heel[1] > ball[1] > toe[1]
    arm = bpy.data.armatures.new("blob")
    blob = bpy.data.objects.new("blob", arm)
    bpy.context.scene.collection.objects.link(blob)
    bpy.context.view_layer.objects.active = blob
    bpy.ops.object.mode_set(mode="EDIT")
    b = arm.edit_bones.new("thing")
    b.head, b.tail = (0, 0, 0), (0, 0, 1)
    bpy.ops.object.mode_set(mode="OBJECT")
    with pytest.raises(RigError, match="could not be found from bone names.*--feet"):
        find_feet(blob)


def test_footplant_on_a_slope_through_the_command_line(tmp_path):
    obj, terrain = walk_on(scenes.slope(8.0, along=(0.0, -1.0)))  # it rises where the walk goes
    source, name = obj.animation_data.action.name, obj.name
    before = action_snapshot(obj.animation_data.action)
    path = tmp_path / "walk.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    out = tmp_path / "planted.blend"
    proc = run("footplant", path, "--armature", name, "--terrain", "ground", "--frames", f"{FRAMES[0]}-{FRAMES[1]}",
               "--output", out, "--json", "--report", tmp_path / "feet.png")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    rep = result["report"]
    assert result["ok"] and rep["contacts_from"] == "detected" and (tmp_path / "feet.png").exists()
    for side in ("left", "right"):
        b, a = rep["before"][side], rep["after"][side]
        assert b["float_mm_max"] > 100  # on the source's flat floor the feet hang over the rising slope
        # Within the verdict's 1 cm everywhere, and close on average (the aims, 1 and 5 mm, are the benchmark's).
        # The benchmark's aims, met here: penetration within 1 mm, the foot within 5 mm of its place, the sole
        # within 3 degrees of the slope (the ankle bone itself, not only its sole points).
        assert a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5 and a["contact_frames"] > 20
        assert a["point_float_mm_max"] < 20 and a["point_float_mm_mean"] < 3
        assert a["sole_normal_deg_max"] < 3 < b["sole_normal_deg_max"]
        assert a["skate_mm_per_frame"] < b["skate_mm_per_frame"]
    # The saved file: the result assigned, the source action untouched, contacts keyed for editing.
    fullbody_ik.unregister()
    bpy.ops.wm.open_mainfile(filepath=str(out))
    obj = bpy.data.objects[name]
    action = obj.animation_data.action
    assert action.name == f"{source} IK" and FEET_REPORT_PROPERTY in action
    assert all(np.array_equal(action_snapshot(bpy.data.actions[source])[k], v) for k, v in before.items())
    contact_paths = {k[0] for k in action_snapshot(action) if k[0].startswith('["fbik_contact_')}
    assert contact_paths == {f'["fbik_contact_{s}_{p}"]' for s in ("left", "right") for p in ("heel", "ball", "toe")}
    # Measured again here, as Blender shows the saved result: the heels stand on the slope at their contacts.
    terrain = bpy.data.objects["ground"]
    height = scenes.slope(8.0, along=(0.0, -1.0))
    heel_gap = []
    for f in range(FRAMES[0], FRAMES[1] + 1, 4):
        bpy.context.scene.frame_set(f)
        if action.layers[0].strips[0].channelbag(obj.animation_data.action_slot).fcurves.find(
                '["fbik_contact_left_heel"]').evaluate(f) > 0.5:
            p = np.array(obj.matrix_world @ obj.pose.bones["LeftFoot"].head)
            heel_gap.append(p[2] - float(height(p[0], p[1])))
    assert heel_gap and np.ptp(heel_gap) < 0.03  # the ankle keeps one height over the slope while it stands
    assert terrain.type == "MESH"


@pytest.mark.parametrize("ground", ["slope", "stairs"])
def test_the_next_run_uses_the_contact_channels_and_keeps_the_feet_on_the_terrain(ground):
    """Run again on its own result (the contact channels kept, maybe edited): the source now stands on the
    terrain, so the terrain is not added twice, on a slope or on stairs whose first contacts are on the flat
    floor before the steps (there it was: feet 36-67 cm over the treads, and the report said OK)."""
    height = scenes.slope(8.0, along=(0.0, -1.0)) if ground == "slope" else \
        scenes.stairs(0.15, 0.3, along=(0.0, -1.0), start=-1.05)  # most of the walk on the floor, then 2 steps
    obj, _ = walk_on(height)
    from fullbody_ik.rig.soles import sole_sampler

    sampler = sole_sampler(bpy.context.scene, obj, find_feet(obj), list(range(FRAMES[0], FRAMES[1] + 1)))

    def heights():  # every sole point over the terrain under it, every third frame
        out = []
        for f in range(FRAMES[0], FRAMES[1] + 1, 3):
            bpy.context.scene.frame_set(f)
            p = sampler.sample()
            out.append(p[:, 2] - height(p[:, 0], p[:, 1]))
        return np.array(out)

    first = foot_placement(bpy.context.scene, obj, FootOptions(*FRAMES, ["ground"]))
    assert first.contacts_from == "detected"
    after_first = heights()
    second = foot_placement(bpy.context.scene, obj, FootOptions(*FRAMES, ["ground"]))
    assert second.contacts_from == "the action's contact channels"
    assert second.ok, second.text()
    # The first run's result kept, standing and swinging feet alike (swings were lifted again by up to 10 cm).
    assert np.abs(heights() - after_first).max() < 0.02


@pytest.mark.parametrize("breakage, message", [
    ("empty", "is an empty, not a mesh"), ("no faces", "has no faces"), ("missing", "no terrain object named"),
    ("no action", "has no action"), ("far away", "no terrain under the feet .* at any contact"),
    ("no contact", "no contact found"),
])
def test_bad_input_is_refused_and_nothing_changes(breakage, message):
    obj, terrain = walk_on(lambda X, Y: 0.0 * X)
    name = "ground"
    if breakage == "empty":
        e = bpy.data.objects.new("pole", None)
        bpy.context.scene.collection.objects.link(e)
        name = "pole"
    elif breakage == "no faces":
        mesh = bpy.data.meshes.new("points")
        mesh.from_pydata([(0, 0, 0), (1, 0, 0)], [], [])
        flat = bpy.data.objects.new("points", mesh)
        bpy.context.scene.collection.objects.link(flat)
        name = "points"
    elif breakage == "missing":
        name = "nowhere"
    elif breakage == "no action":
        obj.animation_data.action = None
    elif breakage == "far away":
        terrain.location.x += 50.0
        bpy.context.view_layer.update()
    elif breakage == "no contact":  # contact channels keyed to 0 everywhere (a user's edit)
        for side in ("left", "right"):
            for point in ("heel", "ball", "toe"):
                obj[f"fbik_contact_{side}_{point}"] = 0.0
                obj.keyframe_insert(f'["fbik_contact_{side}_{point}"]', frame=FRAMES[0])
    actions = {a.name for a in bpy.data.actions}
    with pytest.raises(RigError, match=message):
        foot_placement(bpy.context.scene, obj, FootOptions(FRAMES[0], 30, [name]))
    assert {a.name for a in bpy.data.actions} == actions


def test_the_operator_places_the_feet_with_the_panels_settings():
    obj, terrain = walk_on(scenes.slope(8.0, along=(0.0, -1.0)))
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.fullbody_ik.foot_placement.poll()
    with pytest.raises(RuntimeError, match="pick a terrain object"):
        bpy.ops.fullbody_ik.foot_placement(frame_start=FRAMES[0], frame_end=40)
    obj.fullbody_ik.feet.terrain = terrain
    assert bpy.ops.fullbody_ik.foot_placement(frame_start=FRAMES[0], frame_end=40) == {"FINISHED"}
    from fullbody_ik.rig.foot_report import feet_report_summary

    lines = feet_report_summary(obj.animation_data.action)
    assert lines[0].startswith("OK: contacts within 10 mm") and lines[1].startswith("Left: penetration")


def test_feet_walking_off_the_terrain_are_left_as_the_source_and_reported():
    """The terrain ends before the walk does (a plateau 20 cm above the source's floor): a foot with no terrain
    under it is left as the source's there, reported, eased out of its placement (no pop); a foot partly over
    the edge stands on the plateau."""
    obj, terrain = walk_on(lambda X, Y: 0.2 + 0.0 * X)
    bpy.ops.object.select_all(action="DESELECT")  # only the part where the walk starts (y > 1.0) stays
    import bmesh

    bm = bmesh.new()
    bm.from_mesh(terrain.data)
    bmesh.ops.delete(bm, geom=[f for f in bm.faces if f.calc_center_median().y < 1.0], context="FACES")
    bm.to_mesh(terrain.data)
    bm.free()
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, obj, FootOptions(FRAMES[0], FRAMES[1], ["ground"]))
    assert report.off_terrain and report.off_terrain[-1] == FRAMES[1]
    assert "no terrain under any of its points (left as the source's)" in report.text()
    heels = []
    for f in range(FRAMES[0], FRAMES[1] + 1):
        bpy.context.scene.frame_set(f)
        heels.append([obj.pose.bones[b].head.z for b in ("LeftFoot", "RightFoot", "Hips")])
    steps = np.abs(np.diff(np.array(heels), axis=0)).max(axis=0)
    assert steps.max() < 0.06, steps  # 20 cm down the edge, over the blend frames


def test_stairs_feet_land_on_one_tread_and_toes_stay_above_the_steps():
    """15 cm steps under the walk: a foot landing across an edge is slid onto one tread (it would rest on the
    edge with its heel in the air), swinging feet clear the steps."""
    steps = scenes.stairs(0.15, 0.6, along=(0.0, -1.0), start=-1.5)  # the walk goes from y 1.7 to 0.6
    obj, terrain = walk_on(steps)
    report = foot_placement(bpy.context.scene, obj, FootOptions(FRAMES[0], FRAMES[1], ["ground"]))
    for side in ("left", "right"):
        b, a = report.before[side], report.after[side]
        assert b["penetration_mm_max"] > 100  # the source walks through the steps
        assert a["penetration_mm_max"] < 1 and a["float_mm_max"] < 20, a
    # Swinging: every sole point at least as high over the step under it as the source over its floor, 1 cm slack.
    from fullbody_ik.rig.soles import sole_sampler

    sampler = sole_sampler(bpy.context.scene, obj, find_feet(obj), list(range(FRAMES[0], FRAMES[1] + 1)))
    lowest = []
    for f in range(FRAMES[0], FRAMES[1] + 1, 2):
        bpy.context.scene.frame_set(f)
        pts = sampler.sample()
        lowest.append(np.min(pts[:, 2] - steps(pts[:, 0], pts[:, 1])))
    assert min(lowest) > -0.01


def test_on_bumpy_stairs_a_foot_across_an_edge_is_slid_onto_one_tread_too():
    """The stairs with bumps of 3-4 cm on them (a user's ground): no spot under a foot is level within 1 cm, which
    the slide onto one tread looked for, so it gave up, and the left foot stood a whole stance across an edge (53
    foot-frames with sole points on two treads; verdict OK). An edge is now told from the bumps by how far the
    heights under the foot depart from a curve along it."""
    from fullbody_ik.rig.soles import sole_sampler

    steps = scenes.stairs(0.15, 0.6, along=(0.0, -1.0), start=-1.35)
    height = lambda x, y: steps(x, y) + 0.04 * np.sin(3.0 * x) * np.cos(2.5 * y) + 0.03 * np.sin(5.0 * y)  # noqa
    obj, terrain = walk_on(height)
    report = foot_placement(bpy.context.scene, obj, FootOptions(FRAMES[0], FRAMES[1], ["ground"]))
    assert report.ok, report.text()
    sampler = sole_sampler(bpy.context.scene, obj, find_feet(obj), list(range(FRAMES[0], FRAMES[1] + 1)))
    across = []  # (frame, foot): a sole point within 15 mm of the ground, and the foot's points on two treads
    for f in range(FRAMES[0], FRAMES[1] + 1):
        bpy.context.scene.frame_set(f)
        pts = sampler.sample()
        for k, cols in enumerate(sampler.cols):
            p = pts[cols]
            if (p[:, 2] - height(p[:, 0], p[:, 1])).min() < 0.015 and np.ptp(steps(p[:, 0], p[:, 1])) > 0.01:
                across.append((f, k))
    assert not across, across


def test_feet_under_a_terrain_that_starts_above_them_are_set_on_its_top():
    """The source's floor 60 cm under a plateau (a character placed under the ground): the surface nearest
    the feet is the plateau's top, from the first frame on; the feet stand on it."""
    obj, terrain = walk_on(lambda x, y: 0.6 + 0.0 * x)
    report = foot_placement(bpy.context.scene, obj, FootOptions(2, 61, [terrain.name]))
    assert report.ok, report.text()
    for side, a in report.after.items():
        assert a["contact_frames"] > 10 and a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5, (side, a)
        assert a["sole_normal_deg_max"] < 3 and a["frames_off_terrain"] == 0


def test_a_game_rig_whose_feet_hang_from_the_root_keeps_its_legs_on_its_feet():
    """Quaternius' FBX: the feet are parented to the root and the legs end at them (the IK was lost on export).
    The feet are moved whole and the legs follow; the walk is in place, so the feet keep their treadmill slide."""
    scenes.fresh(bpy)
    obj, first, last = scenes.import_quaternius(bpy, "Man_Walk")
    feet = find_feet(obj)
    assert [(f.ankle, f.shin) for f in feet] == [("Foot.L", "LowerLeg.L"), ("Foot.R", "LowerLeg.R")]
    terrain = scenes.terrain_mesh(bpy, "hill", scenes.slope(10.0, along=(0.0, -1.0)), size=(8, 8), resolution=0.1)
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, obj, FootOptions(first, last, [terrain.name]))
    assert report.ok, report.text()
    assert any("in place" in w for w in report.warnings)
    for side, a in report.after.items():
        b = report.before[side]
        assert a["contact_frames"] > 5 and a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5, (side, a)
        assert b["penetration_mm_max"] > 50 and a["sole_normal_deg_max"] < 3 < b["sole_normal_deg_max"]
    gaps = []
    for f in range(first, last + 1):
        bpy.context.scene.frame_set(f)
        for s in "LR":  # the leg's end at the foot's head, as Blender shows the result
            gaps.append((obj.pose.bones[f"LowerLeg.{s}"].tail - obj.pose.bones[f"Foot.{s}"].head).length)
    assert max(gaps) < 0.005


def test_no_part_of_a_sole_goes_through_a_box_on_the_floor():
    """Two terrain objects, as users build them: a floor and a box 12 cm high and 30 cm deep across the walk. Every frame, the
    soles (their points and along them) of the result stay above the floor and the box, swinging or not."""
    obj, ground = walk_on(lambda x, y: 0.0 * x)
    bpy.context.scene.frame_set(40)
    at = obj.matrix_world @ obj.pose.bones["Hips"].head
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(at.x, at.y - 0.6, 0.06), scale=(2.0, 0.3, 0.12))
    box = bpy.context.object
    box.name = "box"
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, obj, FootOptions(2, 101, [ground.name, box.name]))
    assert report.ok, report.text()
    from fullbody_ik.rig.soles import sole_probes, sole_sampler
    from fullbody_ik.rig.terrain import Terrain

    terrain = Terrain([ground, box], bpy.context.evaluated_depsgraph_get())
    sampler = sole_sampler(bpy.context.scene, obj, find_feet(obj), list(range(FRAMES[0], FRAMES[1] + 1)))
    lowest = np.inf
    for f in range(2, 102):
        bpy.context.scene.frame_set(f)
        pts = sampler.sample()
        for cols in sampler.cols:
            probes = sole_probes([sampler.specs[j][1] for j in cols]) @ pts[cols]
            h, _, ok = terrain.below(probes, probes[:, 2] + 0.3)
            lowest = min(lowest, float(np.min(probes[ok, 2] - h[ok])))
    assert lowest > -0.002, f"a sole is {-lowest * 1e3:.1f} mm inside the floor or the box"


def test_an_armature_in_centimetres_is_placed_as_well_as_one_in_metres():
    """FBX characters often come in centimetres under an object scale of 0.01: the same walk, the same slope,
    the same result (a free root's location is weighed by the armature's size, not its units)."""
    scenes.fresh(bpy)
    import os

    bpy.ops.import_anim.bvh(filepath=os.path.join(scenes.BVH, "cmu_02_01.bvh"), global_scale=scenes.CMU_UNIT * 100,
                            rotate_mode="NATIVE")
    obj = bpy.context.object
    obj.scale = (0.01, 0.01, 0.01)
    obj.fullbody_ik.settings.time_limit = 0.01
    terrain = scenes.terrain_mesh(bpy, "ground", scenes.slope(8.0, along=(0.0, -1.0)), size=(8, 8), resolution=0.1)
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, obj, FootOptions(*FRAMES, [terrain.name]))
    assert report.ok, report.text()
    for side, a in report.after.items():
        assert a["contact_frames"] > 20 and a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5, (side, a)
        assert a["sole_normal_deg_max"] < 3


def test_a_linked_armature_is_refused_with_what_to_do(tmp_path):
    """An armature linked from a library file (read-only): refused, saying to make it local; nothing written."""
    obj, terrain = walk_on(lambda X, Y: 0.0 * X)
    names = (obj.name, terrain.name)
    library = tmp_path / "character.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(library))
    scenes.fresh(bpy)
    with bpy.data.libraries.load(str(library), link=True) as (src, dst):
        dst.objects = [n for n in src.objects if n in names]
    for o in dst.objects:
        bpy.context.scene.collection.objects.link(o)
    linked = bpy.data.objects[names[0]]
    assert linked.library is not None
    actions = {a.name for a in bpy.data.actions}
    with pytest.raises(RigError, match="linked from a library.*make it local"):
        foot_placement(bpy.context.scene, linked, FootOptions(FRAMES[0], 30, [names[1]]))
    assert {a.name for a in bpy.data.actions} == actions


def test_blender_command_handler_places_the_feet_in_the_open_file(tmp_path):
    """What `blender -b walk.blend -c fullbody_ik footplant ...` calls, with the file already open."""
    from fullbody_ik import cli

    obj, terrain = walk_on(scenes.slope(8.0, along=(0.0, -1.0)))
    path = tmp_path / "walk.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    out = tmp_path / "planted.blend"
    assert cli.blender_command(["footplant", "--terrain", "ground", "--frames", "2-31", "--output", str(out)]) == 0
    assert out.exists()
    # Bad arguments (2): a terrain the file does not hold (as bake with a missing armature), an inverted range.
    assert cli.blender_command(["footplant", "--terrain", "nowhere", "--frames", "2-31"]) == 2
    assert cli.blender_command(["footplant", "--terrain", "ground", "--frames", "31-2"]) == 2


def test_a_generated_rigify_rig_is_placed_through_its_controls():
    """A rig generated by Rigify, walked by its IK foot and torso controls (its deform bones follow through
    constraints, so keys on them would be overridden): the controls that carry the feet and the body are found
    and keyed; the deform feet, as Blender shows them, stand on the slope."""
    scenes.fresh(bpy)
    rig, first, last = scenes.rigify_walk(bpy)
    source = rig.animation_data.action.name
    terrain = scenes.terrain_mesh(bpy, "ground", scenes.slope(10.0, along=(0.0, -1.0)), size=(6, 6), resolution=0.1)
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, rig, FootOptions(first, last, [terrain.name]))
    assert report.ok, report.text()
    assert [f.split()[1] for f in report.feet] == ["DEF-foot.L/DEF-toe.L", "DEF-foot.R/DEF-toe.R"]
    for side, a in report.after.items():
        b = report.before[side]
        assert b["penetration_mm_max"] > 100 and a["contact_frames"] > 15, (side, b, a)
        assert a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5 and a["sole_normal_deg_max"] < 3, (side, a)
    action = rig.animation_data.action
    assert action.name != source and source in bpy.data.actions
    keyed = {k[0] for k in action_snapshot(action)}
    assert {f'pose.bones["{n}"].location' for n in ("foot_ik.L", "foot_ik.R", "torso")} <= keyed
    assert not any('"DEF-' in path or '"MCH-' in path or '"ORG-' in path for path in keyed), keyed  # controls only


def test_the_legs_keep_their_ik_locks_and_limits():
    """Knees made hinges (IK locks on Y and Z) and limited to -60..0 degrees about X (the walk's knees bend to
    -73: more than allowed): the placed legs, as Blender shows them, bend about X only and within the limit,
    frame after frame."""
    obj, terrain = walk_on(scenes.slope(8.0, along=(0.0, -1.0)))
    for name in ("LeftLeg", "RightLeg"):
        pb = obj.pose.bones[name]
        pb.lock_ik_y = pb.lock_ik_z = True
        pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, np.radians(-60.0), 0.0
    report = foot_placement(bpy.context.scene, obj, FootOptions(FRAMES[0], 61, [terrain.name]))
    from mathutils import Matrix

    worst_off_axis, angles = 0.0, []
    for f in range(FRAMES[0], 62):
        bpy.context.scene.frame_set(f)
        for name in ("LeftLeg", "RightLeg"):
            R = np.array(obj.pose.bones[name].matrix_basis)[:3, :3]
            worst_off_axis = max(worst_off_axis, abs(R[0, 1]), abs(R[0, 2]), abs(R[1, 0]), abs(R[2, 0]))
            angles.append(Matrix(R.tolist()).to_euler("XYZ").x)
    assert worst_off_axis < 1e-3  # a rotation about X alone
    assert min(angles) > np.radians(-60.0) - 1e-3 and max(angles) < 1e-3
    assert report.ok, report.text()


def _stair_walk(fps, strides=4, rise=0.15, hold=False):
    """A biped (hip height 1) climbing stairs, sampled at ``fps``: (pts (F, 4, 3) heel and toe of the left, then
    the right foot; pelvis (F, 3); stance (F, 2) bool, the frames each foot stands; heel_up (F, 2) bool, its
    heel raised by more than 5 % of the hip height; held (F,) bool, the frames the right foot is held raised
    while the left stands (with ``hold``)). A second per step, 60 % of it standing; the heel rises 0.1 over the
    last fifth of a stance while the toe stays."""
    n = int(round(fps))
    step, stand = 0.35, int(round(0.6 * n))
    frames = []
    for t in range((strides * 2 + 1) * n // 2):
        row, st = [], []
        for k in range(2):  # the left lands on treads 0, 2, ...; the right, half a step later, on 1, 3, ...
            phase = t - k * n / 2
            m = max(int(np.floor(phase / n)) * 2 + k, k)
            u = phase - np.floor(phase / n) * n if phase >= 0 else stand - 1
            x, z = m * step, m * rise
            lift = 0.0
            if u < stand:
                st.append(True)
                lift = 0.1 * max(0.0, (u - 0.8 * stand) / (0.2 * stand))
            else:
                st.append(False)
                s = (u - stand) / (n - stand)
                x, z = x + 2 * step * s, z + 2 * rise * s + 0.2 * np.sin(np.pi * s)
            row += [(x, 0.1 * (1 - 2 * k), z + lift), (x + 0.2, 0.1 * (1 - 2 * k), z)]
        frames.append((row, st))
    pts = np.array([r for r, _ in frames])
    stance = np.array([s for _, s in frames])
    held = np.zeros(len(pts), dtype=bool)
    if hold:  # then both stand on the left's last tread; the right foot rises 0.3, stays a second, comes down
        last = pts[-1].copy()
        last[:, 2] = last[1, 2]  # standing flat
        last[2:, :2] = last[:2, :2] - [0.0, 0.2]
        up = np.concatenate([np.zeros(n), np.linspace(0, 0.3, n // 4), np.full(n, 0.3), np.linspace(0.3, 0, n // 4),
                             np.zeros(n)])
        extra = np.repeat(last[None], len(up), axis=0)
        extra[:, 2:, 2] += up[:, None]
        pts = np.concatenate([pts, extra])
        stance = np.concatenate([stance, np.column_stack([np.ones(len(up), bool), up == 0])])
        held = np.concatenate([held, up > 0.29])
    pelvis = np.column_stack([pts[..., :2].mean(axis=1),  # between the feet, over their middle
                              pts[..., 2].reshape(len(pts), 2, 2).min(axis=2).mean(axis=1) + 0.95])
    heel_up = pts[:, [0, 2], 2] - pts[:, [1, 3], 2] > 0.05
    return pts, pelvis, stance, heel_up, held


@pytest.mark.parametrize("rate, fps", [(24, 24), (120, 120), (120, 24)])
def test_contacts_are_found_on_every_tread_of_stairs_whatever_the_frame_rate(rate, fps):
    """Uneven source ground (a clip recorded on stairs or rocks): each stance is judged against the floor the
    foot rests on there, not the clip's lowest; the same for a clip sampled at 24 or 120 Hz, and for one at
    120 Hz played in a 24 fps scene (a BVH imported without its frame rate: five times slower); a raised heel or
    a foot held in the air is not a contact. The floor under each foot is the tread it stands on."""
    from fullbody_ik.rig.contacts import detect_sole_contacts, runs

    pts, _, stance, heel_up, held = _stair_walk(rate, hold=True)
    speed = np.linalg.norm(np.gradient(pts, axis=0), axis=-1) * fps
    contacts, floors, stood = detect_sole_contacts(pts, speed, [[0, 1], [2, 3]], 1.0, fps, in_place=False)
    assert stood.all()
    for k in range(2):
        standing = contacts[:, 2 * k + 1]  # the floor under a standing foot is the tread it stands on
        assert np.abs(floors[standing, k] - pts[standing, 2 * k + 1, 2]).max() < 0.01
        toe, heel = contacts[:, 2 * k + 1], contacts[:, 2 * k]
        assert not (toe & ~stance[:, k]).any() and not (heel & ~stance[:, k]).any()
        stances = [(a, b) for a, b in runs(stance[:, k]) if b - a > rate // 4]
        assert len(stances) >= 4
        for a, b in stances:  # every stance (on every tread) is found, near its whole length
            assert toe[a:b + 1].mean() > 0.8, (k, a, b, toe[a:b + 1].astype(int))
        assert heel_up[:, k].sum() >= 4 and not (heel & heel_up[:, k]).any()  # the heel off, the toe down
    assert held.sum() > rate // 2 and not contacts[held, 2:].any()


def test_contacts_are_found_on_a_floor_that_drifts():
    """A mocap floor drifts (CMU 131's soles stand 6 cm higher at the end of a take than at its start): a walk at
    120 Hz on flat ground rising 8 % of the hip height over the take, a toe poked 8 cm through the floor as one
    stance ends: every stance is found near its whole length, on the floor under it there (not the take's lowest,
    nor the poke's; in a long stance, where the floor is at each time); the right foot held 0.3 up a second while the left stands is still no contact."""
    from fullbody_ik.rig.contacts import detect_sole_contacts, runs

    rate = 120
    pts, _, stance, _, held = _stair_walk(rate, strides=6, rise=0.0, hold=True)
    pts[..., 2] += np.linspace(0.0, 0.08, len(pts))[:, None]
    stances = [[(a, b) for a, b in runs(stance[:, k]) if b - a > rate // 4] for k in range(2)]
    a, b = stances[0][2]
    poke = slice(b - (b - a) // 10, b + 1)
    pts[poke, 1, 2] -= 0.08
    speed = np.linalg.norm(np.gradient(pts, axis=0), axis=-1) * rate
    contacts, floors, _ = detect_sole_contacts(pts, speed, [[0, 1], [2, 3]], 1.0, rate, in_place=False)
    for k in range(2):
        toe = contacts[:, 2 * k + 1]
        assert len(stances[k]) >= 6
        for a, b in stances[k]:
            assert toe[a:b + 1].mean() > 0.8, (k, a, b, toe[a:b + 1].astype(int))
            stood_on = pts[:, 2 * k + 1, 2].copy()
            stood_on[poke] = np.inf if k == 0 else stood_on[poke]
            m, half = (a + b) // 2, rate // 4
            lowest = stood_on[max(a, m - half):min(b, m + half) + 1].min()  # (where it stands there, not the poke)
            assert abs(floors[m, k] - lowest) < 0.01, (k, a, b, floors[m, k], lowest)
    assert held.sum() > rate // 2 and not contacts[held, 2:].any()


def test_a_foot_sliding_between_two_stances_is_two_contacts_not_one():
    """Flat ground, 60 fps: after a walk, the left foot slides 8 cm (0.6 hip heights a second, 2 % of it up)
    between two stances: two contacts with the slide between, not one pinned across it."""
    from fullbody_ik.rig.contacts import detect_sole_contacts

    pts, _, _, _, _ = _stair_walk(60, rise=0.0)
    last = pts[-1].copy()
    last[:, 2] = 0.0
    last[2:, :2] = last[:2, :2] - [0.0, 0.2]
    slide = np.repeat(last[None], 68, axis=0)
    step = np.clip(np.arange(68) - 29, 0, 8)  # frames 30-37 slide, 0.01 a frame
    slide[:, :2, 0] += 0.01 * step[:, None]
    slide[30:38, :2, 2] += 0.02
    pts = np.concatenate([pts, slide])
    speed = np.linalg.norm(np.gradient(pts, axis=0), axis=-1) * 60
    contacts = detect_sole_contacts(pts, speed, [[0, 1], [2, 3]], 1.0, 60, in_place=False)[0]
    left = contacts[-68:, :2].all(axis=1)
    assert left[:28].all() and left[-28:].all() and not left[31:37].any(), left.astype(int)


def test_a_foot_that_never_stands_is_not_missed():
    """A hop on the left foot, the right held up and carried along: the right never stands (it moves with the
    body), so it has no contact and is not reported as one the detector missed."""
    from fullbody_ik.rig.contacts import detect_sole_contacts

    rate, frames = 30, []
    for t in range(80):  # 10 frames on the ground, 10 in the air, 0.3 forward a hop
        hop, u = divmod(t, 20)
        s = max(u - 10, 0) / 10
        x, z = 0.3 * (hop + s), 0.1 * np.sin(np.pi * s)
        frames.append([(x, 0.1, z), (x + 0.2, 0.1, z), (0.3 * t / 20, -0.1, 0.3), (0.3 * t / 20 + 0.2, -0.1, 0.3)])
    pts = np.array(frames)
    speed = np.linalg.norm(np.gradient(pts, axis=0), axis=-1) * rate
    contacts, _, stood = detect_sole_contacts(pts, speed, [[0, 1], [2, 3]], 1.0, rate, in_place=False)
    assert contacts[:, :2].any(axis=1).sum() > 30 and not contacts[:, 2:].any()
    assert stood.tolist() == [True, False]


def test_the_feet_at_the_top_of_a_jump_are_not_standing():
    """Jumps up (CMU 02_04 has one), 5 % of the hip height forward: both feet slow down together at the top,
    0.45 hip heights up; a second stands before and between: the feet touch only on the floor."""
    from fullbody_ik.rig.contacts import detect_sole_contacts

    rate, frames, x = 24, [], 0.0
    for jump in range(3):
        for t in range(84):  # 24 frames standing, 60 in the air (the top slow: a sine's; a slowed clip)
            s = max(t - 24, 0) / 60
            z = 0.45 * np.sin(np.pi * s)
            x = 0.05 * (jump + s)
            frames.append([(x, 0.1, z), (x + 0.2, 0.1, z), (x, -0.1, z), (x + 0.2, -0.1, z)])
    pts = np.array(frames)
    speed = np.linalg.norm(np.gradient(pts, axis=0), axis=-1) * rate
    contacts = detect_sole_contacts(pts, speed, [[0, 1], [2, 3]], 1.0, rate, in_place=False)[0]
    airborne = pts[:, 0, 2] > 0.05
    assert not contacts[airborne].any() and contacts[~airborne].mean() > 0.8


@pytest.mark.parametrize("job", ["foot placement", "retarget"])
def test_a_foot_the_detector_misses_on_a_walk_fails_the_job(job, monkeypatch):
    """The detector made to miss the right foot of the CMU walk (its contacts cleared, as a clip whose foot it
    cannot read would): the foot placement, and the retargeting whose contacts are keyed by it, do not say OK,
    and say which foot and what to do; the result keys no contact channel for that foot, so a second run on it
    detects it again and fails again (it does not read "never touches" from the first run's keys). A stretch
    where the right foot only swings says nothing."""
    import fullbody_ik.rig.soles as soles
    from fullbody_ik.rig.retarget import RetargetOptions, retarget

    detect = soles.detect_sole_contacts

    def blind(pts, speed, cols, *args):
        contacts, floors, stood = detect(pts, speed, cols, *args)
        contacts[:, cols[1]] = False  # the feet are found left, then right
        return contacts, floors, stood

    monkeypatch.setattr(soles, "detect_sole_contacts", blind)
    frames = (2, 170)
    obj, terrain = walk_on(lambda x, y: 0.0 * x)
    message = "right foot stands while another swings but no contact of it was detected"
    if job == "retarget":
        target = scenes.metarig(bpy)
        bpy.context.view_layer.update()
        reports = [retarget(bpy.context.scene, obj, target, RetargetOptions(*frames)).feet]
        stored = json.loads(target.animation_data.action[FEET_REPORT_PROPERTY])
        channels = [k for k in target.keys() if k.startswith("fbik_contact")]
        short = retarget(bpy.context.scene, obj, target, RetargetOptions(20, 60)).feet
        assert "the source's fbik_contact_right_* channels" in reports[0].verdict
    else:
        reports = [foot_placement(bpy.context.scene, obj, FootOptions(*frames, [terrain.name]))]
        stored = json.loads(obj.animation_data.action[FEET_REPORT_PROPERTY])
        channels = [k for k in obj.keys() if k.startswith("fbik_contact")]
        reports.append(foot_placement(bpy.context.scene, obj, FootOptions(*frames, [terrain.name])))  # on the result
        assert "detected: no channel" in reports[1].contacts_from
        short = foot_placement(bpy.context.scene, obj, FootOptions(20, 60, [terrain.name]))
    for report in reports:
        assert not report.ok and message in report.verdict, report.text()
        assert report.after["right"]["contact_frames"] == 0 and report.after["left"]["contact_frames"] > 20
    assert stored["ok"] is False and message in stored["verdict"]  # the panel shows it
    assert channels and not any("right" in k for k in channels), channels
    assert "no contact of it" not in short.verdict, short.text()  # the right foot swings all along there


def test_a_clip_recorded_on_rocks_placed_on_stairs_stands_on_the_treads():
    """CMU 03_01 (a walk over rocks, stances a third of the hip height apart) on the benchmark's 15 cm stairs:
    its contacts are held over the ground under each foot, not over the clip's lowest point (they stood at the
    rocks' height over the treads, the soles turned 44 degrees off them); the source is not taken for one
    already on the stairs."""
    from fullbody_ik.benchmarks.footplant import make_terrain

    scenes.fresh(bpy)
    obj, first, _ = scenes.import_cmu(bpy, "03_01")
    obj.fullbody_ik.settings.time_limit = 0.01
    frames = (first, first + 239)
    path = []
    for f in (frames[0], first + 120, frames[1]):  # laid out as the benchmark does
        bpy.context.scene.frame_set(f)
        path.append(np.array(obj.matrix_world @ obj.pose.bones[0].head))
    direction = path[2][:2] - path[0][:2]
    terrain = make_terrain(bpy, "stairs", path[1][:2], direction, float(np.linalg.norm(direction)) + 6.0)
    bpy.context.view_layer.update()
    report = foot_placement(bpy.context.scene, obj, FootOptions(*frames, [terrain.name]))
    assert report.ok, report.text()
    for side, a in report.after.items():
        assert a["contact_frames"] > 40 and a["sole_normal_deg_max"] < 3 and a["point_float_mm_max"] < 40, (side, a)


def test_independent_frames_are_placed_in_parallel_threads_as_one_by_one(tmp_path):
    """--independent-frames: each frame solved from the source's pose there, in threads (the bake reads the next
    frames meanwhile). The feet are placed as well as the default's, through the command line, and in one process
    two threads give each frame the answer one thread gives (a frame's inputs kept while the next is read)."""
    obj, _ = walk_on(scenes.slope(8.0, along=(0.0, -1.0)))
    name = obj.name
    path = tmp_path / "walk.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    proc = run("footplant", path, "--armature", name, "--terrain", "ground", "--frames", f"{FRAMES[0]}-{FRAMES[1]}",
               "--output", tmp_path / "planted.blend", "--json", "--independent-frames", "--threads", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(proc.stdout)["report"]
    for side in ("left", "right"):
        a = rep["after"][side]
        assert a["penetration_mm_max"] < 1 and a["float_mm_max"] < 5 and a["sole_normal_deg_max"] < 3
    source = obj.animation_data.action
    solved = []
    for workers in (1, 2):
        obj.animation_data.action = source
        report = foot_placement(bpy.context.scene, obj, FootOptions(*FRAMES, ["ground"], independent=True,
                                                                    workers=workers, time_limit=1.0))
        assert report.ok, report.text()
        solved.append(np.array(report.bake["per_frame"]["solved_errors"]))
    assert np.allclose(solved[0], solved[1], rtol=0, atol=1e-9)
    run_bad = run("footplant", path, "--terrain", "ground", "--threads", "0")
    assert run_bad.returncode == 2 and "expected 1 or more" in run_bad.stderr
    run_bad = run("footplant", path, "--terrain", "ground", "--threads", "2")
    assert run_bad.returncode == 2 and "--threads applies to --independent-frames" in run_bad.stderr
    run_bad = run("footplant", path, "--terrain", "grund", "--output", tmp_path / "out.blend")  # (a name mistyped)
    assert run_bad.returncode == 2 and "--terrain: no object named 'grund'" in run_bad.stderr
    assert "'ground'" in run_bad.stderr and not (tmp_path / "out.blend").exists()


def test_a_foot_on_raised_flat_ground_keeps_its_shape_and_its_clearance():
    """The CMU walk on flat ground 20 cm up: while a foot stands, each of its sole points goes up by as much as
    every other, within 3 mm (the foot rigid, as the source's: its ball, higher than its toe tip on a mocap
    skeleton, keeps that height as the heel rises, not lowered onto the ground at toe-off; nor the foot raised
    where its toe tip stood under the level of its points), and its lowest point stands on the ground."""
    from fullbody_ik.rig.contacts import read_contacts, runs
    from fullbody_ik.rig.soles import sole_sampler

    obj, _ = walk_on(lambda X, Y: np.full_like(X, 0.2))
    frames = list(range(FRAMES[0], FRAMES[1] + 1))
    sampler = sole_sampler(bpy.context.scene, obj, find_feet(obj), frames)

    def points():
        out = []
        for f in frames:
            bpy.context.scene.frame_set(f)
            out.append(sampler.sample())
        return np.array(out)

    before = points()
    report = foot_placement(bpy.context.scene, obj, FootOptions(*FRAMES, ["ground"]))
    assert report.ok, report.text()
    after = points()
    touching = read_contacts(obj, sampler, frames)[0] > 0.5  # (the contact channels the job keyed)
    rise = (after - before)[..., 2]
    checked = 0
    for k, cols in enumerate(sampler.cols):
        for a, b in runs(touching[:, cols].all(axis=1)):  # (the foot standing: every point of it touches)
            if b - a < 8:
                continue
            shift = rise[a:b + 1][:, cols]
            assert np.ptp(shift) < 0.003, (k, frames[a], frames[b], np.round(1e3 * (shift - np.median(shift))).T)
            lowest = after[a:b + 1][:, cols, 2].min(axis=1) - 0.2  # (over the ground)
            assert abs(np.percentile(lowest, 5)) < 0.003, (k, frames[a], frames[b], np.round(1e3 * lowest))
            checked += 1
    assert checked >= 3


def test_an_ankles_rise_is_measured_over_the_stances_beside_it_on_stairs_and_not_over_a_toe_tip():
    """The swing's height (what a retargeted swing is raised to) over the stances on either side: on stairs each
    swing rises 0.15 over a climb of 0.18 a step, not over the lowest step; a run of contacts on the toe tip alone,
    the ankle high, is no stance; a step's level is reached where the stance starts, not halfway into it."""
    from fullbody_ik.rig.contacts import rise_over_stances

    z, touching = [], []
    for k in range(8):  # stances of 15 frames, 0.18 up each, swings of 15 frames rising 0.15 over the path
        z += [0.1 + 0.18 * k] * 15
        touching += [True] * 15
        s = np.linspace(0.0, 1.0, 17)[1:-1]
        z += list(0.1 + 0.18 * (k + s) + 0.15 * np.sin(np.pi * s))
        touching += [False] * 15
    z, touching = np.array(z[:-15]), np.array(touching[:-15])
    rise = rise_over_stances(z, touching)
    assert abs(rise.max() - 0.15) < 0.01 and abs(rise.min()) < 1e-9, (rise.max(), rise.min())
    flat = np.r_[np.full(20, 0.05), np.linspace(0.05, 0.3, 10), np.full(5, 0.25), np.linspace(0.3, 0.05, 10),
                 np.full(20, 0.05)]
    on = np.r_[np.ones(20, bool), np.zeros(10, bool), np.ones(5, bool), np.zeros(10, bool), np.ones(20, bool)]
    assert abs(rise_over_stances(flat, on)[32] - 0.2) < 1e-9


def test_frames_to_the_nearest_contact_count_both_ways_and_none_is_infinitely_far():
    """What a swing's height and a foot's return from off the terrain are eased over: each frame's distance, in
    frames, to the nearest marked frame before or after it."""
    from fullbody_ik.rig.contacts import frames_to

    mask = np.array([False, True, False, False, False, False, True, False, False])
    assert frames_to(mask).tolist() == [1, 0, 1, 2, 2, 1, 0, 1, 2]
    assert np.isinf(frames_to(np.zeros(4, bool))).all()


def test_on_a_treadmill_a_toe_skimming_the_floor_as_its_foot_swings_forward_is_no_contact():
    """An in-place clip's contacts are found from vertical speeds (its standing feet slide back with the belt): a
    toe that stays low and level while its foot swings forward reads as touching. It moves against the belt, and
    is dropped; the standing foot, sliding back with it, is kept."""
    from fullbody_ik.rig.soles import _on_the_belt

    fps, leg = 30.0, 1.0
    v = np.zeros((30, 2, 3))
    v[:, 0, 1] = 0.9  # the standing heel: back with the belt at 0.9 leg/s
    v[:, 1, 1] = np.r_[np.full(10, 0.9), np.full(20, -1.8)]  # the toe: standing, then swinging forward, low and level
    contacts = np.ones((30, 2), dtype=bool)
    kept = _on_the_belt(contacts, v, leg, fps)
    assert kept[:, 0].all() and kept[:10, 1].all() and not kept[10:, 1].any()
    v[:, :, 1] = 0.0  # in place and standing still (an idle): no belt, nothing dropped
    v[10:, 1, 1] = -0.5
    assert _on_the_belt(contacts, v, leg, fps).all()


def test_a_knee_held_straight_by_the_motion_does_not_fold_backward_to_reach_a_step():
    """A motion whose knees are straight (many captures straighten them at each stance) planted with one foot on
    a step: the solver, from a straight knee, may fold it either way and folded the left one backward (16
    degrees); held at straight, it reached the step with the hip and a straight knee. A knee its motion never
    bends back is held folded forward a little (rig.knees), so the left one folds forward onto the step."""
    import math

    from fullbody_ik.rig.knees import find_knees, posed_bend

    scenes.fresh(bpy)
    obj = scenes.metarig(bpy)
    knees = find_knees(obj, find_feet(obj))
    assert [(k.shin, k.axis, k.sign) for k in knees] == [("shin.L", "x", 1.0), ("shin.R", "x", 1.0)]
    for f in (1, 20):  # the knees keyed straight
        for k in knees:
            pb = obj.pose.bones[k.shin]
            pb.rotation_mode = "XYZ"
            pb.rotation_euler = (-k.rest, 0.0, 0.0)
            pb.keyframe_insert("rotation_euler", frame=f)
    terrain = scenes.terrain_mesh(bpy, "step", lambda x, y: np.where(x > 0.0, 0.06, 0.0) + 0.0 * y, size=(4, 4),
                                  resolution=0.02)  # 6 cm up under the left foot
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(1)
    assert all(abs(posed_bend(obj, k)) < 1e-4 for k in knees)
    report = foot_placement(bpy.context.scene, obj, FootOptions(1, 20, [terrain.name]))
    assert report.ok, report.text()
    for f in (1, 10, 20):
        bpy.context.scene.frame_set(f)
        bends = [math.degrees(posed_bend(obj, k)) for k in knees]
        assert min(bends) > -0.5 and bends[0] > 15.0, (f, bends)


def _stiff_foot_sampler():
    """A SoleSampler-like stand-in for one foot with no toe bone: heel, ball and its sides, toe tip on 'foot'."""
    from types import SimpleNamespace

    specs = [(0, n, "foot", None) for n in ("heel", "ball", "ball_in", "ball_out", "toe")]
    foot = SimpleNamespace(ankle="foot", ball="", side="left")
    return SimpleNamespace(specs=specs, cols=[[0, 1, 2, 3, 4]], feet=[foot]), [foot]


def test_a_foot_whose_toes_cannot_bend_turns_on_its_tip_as_the_heel_rises():
    """A source's toes bend, so its ball stays down as its heel rises: a foot with no toe bone cannot, its tip is
    its lowest point. With the heel off the ground and the foot pitched toe down, its ball's contacts are its
    tip's (held on its ball, it was turned flat about it: the heel dropped a twentieth of the character's height
    in a frame as the contacts changed); a flat foot keeps them."""
    from fullbody_ik.rig.toes import rolled_onto_toes

    sampler, feet = _stiff_foot_sampler()
    pts = np.zeros((3, 5, 3))
    pts[:, :, 1] = [0.2, 0.05, 0.05, 0.05, 0.0]  # heel behind, toe tip in front (facing -Y)
    pts[1, :, 2] = [0.04, 0.004, 0.004, 0.004, 0.0]  # pitched 5 degrees, toe down
    pts[2, :, 2] = [0.0, 0.0, 0.0, 0.0, 0.0]  # flat
    contacts = np.zeros((3, 5), dtype=bool)
    contacts[:, 1:4] = True  # the source's ball on the ground, its heel up
    out = rolled_onto_toes(contacts, pts, sampler, feet, frozenset())
    assert out[1].tolist() == [False, False, False, False, True]
    assert out[2].tolist() == contacts[2].tolist() and out[0].tolist() == contacts[0].tolist()
    contacts[1, 0] = True  # the heel down too: a flat stance, kept
    assert rolled_onto_toes(contacts, pts, sampler, feet, frozenset())[1].tolist() == contacts[1].tolist()


def test_a_stiff_foot_on_its_tip_keeps_its_ankle_where_the_sources_is():
    """Set on its tip by lifting it whole, a foot with no toe bone stood its ankle higher than the source's by as
    far as the copied tip had gone under the ground; it is turned about its tip, toward level, until its ankle is
    as high as the source's, never past level nor with a point under the ground."""
    from fullbody_ik.rig.toes import on_its_tip

    a = np.radians(40.0)  # heel over the tip, a foot 0.25 long: the ankle 0.06 over the heel's line
    heel = np.array([0.0, 0.25 * np.cos(a), 0.25 * np.sin(a)])
    points = np.array([heel, 0.3 * heel, 0.3 * heel, 0.3 * heel, np.zeros(3)])
    ankle = heel * 0.8 + np.array([0.0, 0.0, 0.06])
    is_tip = np.array([False, False, False, False, True])
    ground, ok = np.zeros(5), np.ones(5, dtype=bool)
    turned, R = on_its_tip(points, np.eye(3), is_tip, ground, ok, 0.12, ankle)
    moved_ankle = R @ ankle  # (the turn is about the tip, at the origin)
    assert np.allclose(turned[4], 0.0) and abs(moved_ankle[2] - 0.12) < 0.01, moved_ankle
    assert (turned[:, 2] > -1e-9).all() and np.allclose(turned, points @ R.T)
    flat, _ = on_its_tip(points, np.eye(3), is_tip, ground, ok, -1.0, ankle)  # the ankle asked under the ground
    assert np.all(flat[:, 2] > -1e-9) and flat[0, 2] < 0.02  # turned down to level at most
    same, _ = on_its_tip(points, np.eye(3), is_tip, ground, ok, 1.0, ankle)  # lower already: left as it is
    assert np.allclose(same, points)


def test_a_knees_hinge_is_read_across_the_hips_not_from_sole_points_an_importer_guessed():
    """Which way a knee folds is read across the hips (right thigh to left), as the legs are named: a foot's sole
    points come from bone tails an importer may have guessed (Babylon's dummy's toes pointed backward), and read
    from them every knee of the clip was bent backward, so no limit held it."""
    from fullbody_ik.rig.knees import find_knees

    scenes.fresh(bpy)
    obj = scenes.metarig(bpy)
    feet = find_feet(obj)
    ahead = [(k.axis, k.sign, round(np.degrees(k.rest), 1)) for k in find_knees(obj, feet)]
    for foot in feet:  # the sole turned back to front, heel for toe
        at = {p.name: p.rest.copy() for p in foot.points}
        for p in foot.points:
            p.rest = at["toe"] if p.name == "heel" else at["heel"] if p.name == "toe" else p.rest
    assert [(k.axis, k.sign, round(np.degrees(k.rest), 1)) for k in find_knees(obj, feet)] == ahead
    assert all(sign > 0 and rest > 0 for _, sign, rest in ahead), ahead  # (the metarig's knees fold a little)


def test_a_foot_with_keyed_contacts_stands_on_the_floor_where_they_are_not_where_its_toe_dips():
    """A foot whose contacts are keyed (a retarget writes the source's) stands on the floor where those contacts
    are: found from its own motion, a copied toe curled under the floor as the foot swings was taken for a stance,
    the floor fell 24 cm under the contacts and the swing, kept that far over it, was lifted 18 cm in a frame."""
    from fullbody_ik.rig.soles import _contacts

    sampler, _ = _stiff_foot_sampler()
    F = 60
    pts = np.zeros((F, 5, 3))
    pts[:, :, 1] = [0.2, 0.05, 0.05, 0.05, 0.0]
    pts[:, :, 2] = 0.1  # standing 10 cm over the scene's floor (a copied foot floats where the source stood)
    swing = np.arange(30, 50)
    pts[swing, :4, 2] += 0.2 * np.sin(np.pi * (swing - 30) / 20)[:, None]
    pts[swing, 4, 2] = 0.1 - 0.3 * np.sin(np.pi * (swing - 30) / 20)  # the toe tip curls 30 cm under
    touching = np.zeros((F, 5), dtype=bool)
    touching[:30, 1:] = touching[50:, 1:] = True
    channels = (touching, np.ones(5, dtype=bool))
    pelvis = np.zeros((F, 3))
    pelvis[:, 2] = 1.0
    contacts, _, floors, *_ = _contacts(pts, pelvis, sampler, channels, 30.0, 2.0, 1.7)
    assert (contacts == touching).all()
    near = 0.03 * 1.2  # (a contact's height: 3 % of the hips' 1.2 m over the lowest the toe goes)
    stand = floors[touching[:, 1], 0]
    assert (stand >= 0.1 - near - 1e-9).all() and (stand <= 0.1 + 1e-9).all(), stand  # where its contacts stand
    # over the swing: no further under that level, never over the foot (where the toe dips, down to it)
    lowest = pts[swing, :, 2].min(axis=1)
    assert (floors[swing, 0] >= np.minimum(0.1 - near, lowest) - 1e-9).all() and \
        (floors[swing, 0] <= lowest + 1e-9).all(), floors[swing, 0]


def test_a_swinging_foot_turns_at_the_ankle_only_where_that_saves_more_than_it_moves_the_foot():
    """A swinging foot under the floor is turned at the ankle (toes up or down) where the turn saves more lift
    than it moves the foot, else lifted. A long foot coming down heel first, its heel 5 mm under: lifted, not
    turned toes up (the heel swung round under the ankle: a retargeted in-place walk's foot was turned up 60 degrees
    with 12 cm more lift before each heel strike, and a 6 mm lift at toe-off was traded for a 24 degree turn; the
    leg twisted 124 degrees to pose them). A toe 5 cm under as the foot leaves the ground: turned toes up."""
    from fullbody_ik.rig.swing import TURN_COST, pitched, swing_lift, swing_pitch

    flat = np.array([[-0.05, 0.0, -0.08], [0.15, 0.0, -0.08], [0.22, 0.0, -0.08]])  # heel, ball, toe tip from
    # the ankle (the foot points along x)

    def foot(toes_up_deg, ankle_z):
        ankle = np.array([0.0, 0.0, ankle_z])
        return pitched(ankle + flat, ankle, np.radians(toes_up_deg)), ankle

    def lift_of(points):
        return swing_lift(points[None, :, 2], np.zeros((1, 3)), np.zeros(1), 3)[0]  # (a foot about to land)

    def chosen(points, ankle):
        turn = swing_pitch(points[None], ankle[None], np.zeros((1, 3)), np.zeros(1), 3, np.array([0]), points[None],
                           30.0)[0]
        return np.degrees(turn), lift_of(pitched(points, ankle, turn))

    points, ankle = foot(20.0, 0.0873)
    assert -0.006 < points[0, 2] < -0.004 and points[1:, 2].min() > 0.05  # its heel 5 mm under, its toes well up
    turn, lift = chosen(points, ankle)
    assert turn == 0.0 and lift == lift_of(points), (turn, lift)
    points, ankle = foot(-25.0, 0.12)  # pitched toes down as a foot leaves the ground: its toe tip under
    assert points[2, 2] < -0.04 and points[0, 2] > 0.0
    turn, lift = chosen(points, ankle)
    reach = np.linalg.norm(points - ankle, axis=1).max()
    assert turn > 5.0 and lift + TURN_COST * reach * np.radians(turn) < lift_of(points), (turn, lift)


def _stances_along(levels, spacing=0.6, lateral=0.1, frames_each=10):
    """Sole points (F, 4, 3), contacts (F, 4) and floors (F, 2) of feet stepping in turn along +Y, each stance's
    level given (``levels``), a left and a right foot of two points each."""
    n = len(levels)
    F = n * frames_each
    pts = np.zeros((F, 4, 3))
    contacts = np.zeros((F, 4), bool)
    floors = np.zeros((F, 2))
    for i, z in enumerate(levels):
        k = i % 2
        t = slice(i * frames_each, (i + 1) * frames_each)
        x = -lateral if k == 0 else lateral
        y = i * spacing / 2
        pts[t, 2 * k] = [x, y - 0.1, z]
        pts[t, 2 * k + 1] = [x, y + 0.1, z]
        contacts[t, 2 * k:2 * k + 2] = True
        floors[t, k] = z
    return pts, contacts, floors


def test_a_capture_floor_tilted_along_the_walk_is_read_and_steps_or_a_walk_in_place_are_not():
    """The source floor's normal: the plane through where the stances stood (each foot's soles at a height of
    their own), tilted 1 degree along the walk (a capture's frame), read within a tenth of a degree and not across
    the walk; stairs (15 cm a step) and a walk that does not go a leg's length are read as level."""
    from fullbody_ik.rig.foot_plan import floor_normal

    rng = np.random.default_rng(3)
    tilt = np.tan(np.radians(1.0))
    n = 10
    ys = np.arange(n) * 0.3
    own = np.where(np.arange(n) % 2, 0.02, 0.0)  # (the right sole 2 cm over the left, as a mocap skeleton's)
    pts, contacts, floors = _stances_along(tilt * ys + own + rng.normal(0.0, 0.002, n))
    normal = floor_normal(pts, contacts, floors, [[0, 1], [2, 3]], leg=0.9, travel=float(np.ptp(ys)))
    assert abs(np.degrees(np.arccos(normal[2])) - 1.0) < 0.1 and normal[1] < 0.0 and abs(normal[0]) < 1e-3
    stairs = _stances_along(0.15 * np.arange(n))
    assert np.allclose(floor_normal(*stairs, [[0, 1], [2, 3]], leg=0.9, travel=float(np.ptp(ys))), [0, 0, 1])
    assert np.allclose(floor_normal(pts, contacts, floors, [[0, 1], [2, 3]], leg=0.9, travel=0.5), [0, 0, 1])


def test_a_walk_captured_on_a_tilted_floor_stands_its_feet_on_level_ground_as_on_that_floor():
    """The CMU walk turned 2 degrees about the axis across its way (the capture's floor tilted: its stances rise
    along the walk) and planted on level ground: each standing foot (ankle to toe tip) pitches as the same walk's
    untilted does, within half a degree (turned from the floor it stood on to the ground; kept as captured, its
    heel goes 2 degrees down against its toe, 7 mm over a foot's length, at every stance)."""
    from mathutils import Matrix

    from fullbody_ik.rig.contacts import read_contacts, runs
    from fullbody_ik.rig.soles import sole_sampler

    def planted(turn_deg):
        obj, _ = walk_on(lambda X, Y: np.zeros_like(X))
        first, last = (int(f) for f in obj.animation_data.action.frame_range)
        obj.matrix_world = Matrix.Rotation(np.radians(turn_deg), 4, "X") @ obj.matrix_world
        bpy.context.view_layer.update()
        report = foot_placement(bpy.context.scene, obj, FootOptions(first + 1, last, ["ground"]))
        assert report.ok, report.text()
        frames = list(range(first + 1, last + 1))
        feet = find_feet(obj)
        pitch = np.zeros((len(frames), len(feet)))
        for i, f in enumerate(frames):
            bpy.context.scene.frame_set(f)
            for k, foot in enumerate(feet):
                ankle, tip = (np.array(obj.matrix_world @ v) for v in
                              (obj.pose.bones[foot.ankle].head, obj.pose.bones[foot.ball].tail))
                pitch[i, k] = np.degrees(np.arctan2(tip[2] - ankle[2], np.linalg.norm(tip[:2] - ankle[:2])))
        sampler = sole_sampler(bpy.context.scene, obj, feet, frames)
        touching = read_contacts(obj, sampler, frames)[0] > 0.5
        return pitch, np.array([touching[:, c].all(axis=1) for c in sampler.cols]).T, frames

    level, standing, frames = planted(0.0)
    tilted, *_ = planted(2.0)
    checked = 0
    for k in range(standing.shape[1]):
        for a, b in runs(standing[:, k]):
            if b - a < 8:
                continue
            off = np.median(np.abs(tilted[a:b + 1, k] - level[a:b + 1, k]))
            assert off < 0.5, (k, frames[a], frames[b], off)
            checked += 1
    assert checked >= 4
