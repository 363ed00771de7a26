# SPDX-License-Identifier: GPL-3.0-or-later
"""Retargeting as a user runs it: a CMU walk (T-pose rest, its root walking) onto other characters (Rigify's
metarig, mannequiny's glTF, Quaternius' FBX with its feet on the root), measured on the poses Blender shows."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

import fullbody_ik  # noqa: E402
from fullbody_ik.rig.armature import RigError  # noqa: E402
from fullbody_ik.rig.humanoid import map_humanoid  # noqa: E402
from fullbody_ik.rig.retarget import RetargetOptions, retarget  # noqa: E402
from fullbody_ik.rig.rigify import control_waves  # noqa: E402
from fullbody_ik.tools import characters, scenes  # noqa: E402
from test_real_scenes import action_snapshot  # noqa: E402


pytestmark = pytest.mark.usefixtures("unregistered")


NO_DRACO = ("this bpy build has no Draco decoder (libbf_intern_draco_bridge, missing from the bpy 5.2.3 wheel): "
            "KayKit's glTF is Draco-compressed")


def _kaykit_or_skip():
    """KayKit's Barbarian imported (scenes.import_kaykit), or the test skipped where bpy cannot decode it."""
    try:
        return scenes.import_kaykit(bpy)
    except RuntimeError as e:
        if "draco" in str(e).lower():
            pytest.skip(NO_DRACO)
        raise


def _target(kind):
    if kind == "metarig":
        return scenes.metarig(bpy)
    if kind == "a-pose":  # the metarig with its arms rested 40 degrees down, its legs 8 degrees apart
        obj = scenes.metarig(bpy)
        scenes.pose_rest(bpy, obj, {"upper_arm.L": (0, -40), "upper_arm.R": (0, 40), "thigh.L": (0, 8),
                                    "thigh.R": (0, -8)})
        return obj
    if kind == "mannequiny":
        return scenes.import_mannequiny(bpy)[0]
    if kind == "robot":  # no hands, its feet on the root, names without separators, an A-pose
        return characters.build(bpy, "plain", rest="A", hands=False, fingers=False, feet_on_root=True)[0]
    if kind == "daz-cm":  # Daz names, centimetres, a thigh in two segments
        return characters.build(bpy, "daz", centimetres=True, twist=True)[0]
    if kind == "specks":  # feet on the root, every bone a speck (only the heads are joints), scaled 100
        obj = characters.build(bpy, "plain", rest="A", fingers=False, feet_on_root=True, specks=True,
                               height=0.0175)[0]
        obj.scale = (100.0, 100.0, 100.0)
        return obj
    if kind == "chibi":  # legs a third of its height, feet twice as long for its legs as an adult's
        return characters.build(bpy, "vrm", proportions="chibi")[0]
    return scenes.import_quaternius(bpy)[0]


def test_retargeting_onto_a_slope_plants_every_contact_on_it():
    """--terrain in the same pass: CMU's walk onto mannequiny over a 10 degree slope; every sole point that
    touches in the source stands on the slope (measured against the slope's own formula, apart from the
    report), the soles turned to it, and the skin of each standing foot touches the slope, neither in it nor over
    it (mannequiny's toe bones run 7 mm over its soles: the bones on the slope put the skin 7 mm into it)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = scenes.import_mannequiny(bpy)[0]
    height = scenes.slope(10.0, along=(0.0, -1.0))
    scenes.terrain_mesh(bpy, "ground", height, size=(10, 10), resolution=0.05)
    bpy.context.view_layer.update()
    last = first + 100
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last, terrain=["ground"]))
    assert report.ok, report.text()
    for side, a in report.feet.after.items():
        assert a["penetration_mm_max"] < 8 and a["float_mm_max"] < 2 and a["sole_normal_deg_max"] < 3, (side, a)
    points, names = _contact_points(source, target, first, last)
    gaps = np.concatenate([p[:, 2] - height(p[:, 0], p[:, 1]) for p in points])
    assert len(gaps) > 100 and np.median(np.abs(gaps)) < 1e-3 and np.percentile(np.abs(gaps), 95) < 3e-3, \
        np.percentile(np.abs(gaps), [50, 95, 100])
    skin = _flat_foot_skin_gaps(source, target, first, last, height)
    for side, g in skin.items():
        assert len(g) > 10 and abs(np.median(g)) < 2e-3 and np.min(g) > -4e-3, (side, np.percentile(g, [0, 50, 100]))


def _boot(obj, foot, back, front, width, below):
    """A box skinned to ``foot`` (rig.feet.Foot) from ``back`` behind its ankle to ``front`` past its toe tip (along
    -Y, where the character faces), ``width`` across and ``below`` under its sole points: a long shoe."""
    from helpers import skinned_box

    ankle = np.array(obj.data.bones[foot.ankle].head_local)
    toe = np.array(next(p.rest for p in foot.points if p.name == "toe"))
    return skinned_box(bpy, obj, foot.ankle, (ankle[0] - width / 2, toe[1] - front, toe[2] - below),
                       (ankle[0] + width / 2, ankle[1] + back, ankle[2]), "boot")


def test_long_boots_on_short_treads_stand_on_them_or_the_report_says_so():
    """A character in boots 45 cm long (skinned to its feet, past its bones both ways), CMU's walk retargeted up
    stairs whose treads are 35 cm deep: a boot may not fit a tread. At every frame the source's foot stands flat,
    the boot's underside is on the stairs, never in a step by more than 1.5 cm, or the report fails the job (a boot
    across an edge stood in the riser with every sole point on a tread, and the report said OK)."""
    from fullbody_ik.rig.retarget_feet import humanoid_feet
    from fullbody_ik.tools import characters

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = characters.build(bpy, "plain")[0]
    boots = {f.side: _boot(target, f, 0.12, 0.08, 0.11, 0.02) for f in humanoid_feet(target, map_humanoid(target))}
    height = scenes.stairs(0.12, 0.35, along=(0.0, -1.0), start=-0.6)
    scenes.terrain_mesh(bpy, "ground", height, size=(12, 12), resolution=0.02)
    bpy.context.view_layer.update()
    last = first + 120
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last, terrain=["ground"]))
    deepest = {}
    for side, gaps in _flat_foot_skin_gaps(source, target, first, last, height, boots).items():
        assert len(gaps) > 10, side
        deepest[side] = min(gaps)
    assert not report.ok or min(deepest.values()) > -0.015, (deepest, report.text())


def _flat_foot_skin_gaps(source, target, first, last, height, meshes=None):
    """{side: [the lowest gap between the foot's skin (vertices weighted mostly to its bones, as Blender deforms
    them; of ``meshes`` {side: mesh object} when given) and the ground ``height(x, y)`` at each frame the source's
    foot stands flat (heel and toe down)]}."""
    from fullbody_ik.rig.soles import sample_motion
    from fullbody_ik.rig.retarget_feet import humanoid_feet

    frames = list(range(first, last + 1))
    sf, tf = humanoid_feet(source, map_humanoid(source)), humanoid_feet(target, map_humanoid(target))
    motion = sample_motion(bpy.context.scene, source, sf, frames)
    col = {(sf[k].side, n): j for j, (k, n, _, _) in enumerate(motion.sampler.specs)}
    skin = next(o for o in bpy.data.objects if o.type == "MESH" and any(
        m.type == "ARMATURE" and m.object == target for m in o.modifiers))
    gaps = {}
    for foot in tf:
        mesh = meshes[foot.side] if meshes else skin
        bones = {foot.ankle, foot.ball} - {""}
        groups = {g.index for g in mesh.vertex_groups if g.name in bones}
        idx = [v.index for v in mesh.data.vertices
               if sum(e.weight for e in v.groups if e.group in groups) >= 0.5 * sum(e.weight for e in v.groups)]
        flat = motion.contacts[:, col[(foot.side, "heel")]] & motion.contacts[:, col[(foot.side, "toe")]]
        gaps[foot.side] = []
        for i in np.flatnonzero(flat):
            bpy.context.scene.frame_set(frames[i])
            ev = mesh.evaluated_get(bpy.context.evaluated_depsgraph_get())
            W = np.array(ev.matrix_world)
            co = np.array([W[:3, :3] @ ev.data.vertices[j].co + W[:3, 3] for j in idx])
            gaps[foot.side].append(float(np.min(co[:, 2] - height(co[:, 0], co[:, 1]))))
    return gaps


def _contact_points(source, target, first, last, with_heel=False):
    """([world positions (k, 3) of a sole point of the target at the source's contact frames of that point (with
    ``with_heel``: those where its foot's heel touches too)], [point names]): the source's contacts from the foot
    placement's detector, the target's points sampled."""
    from fullbody_ik.rig.soles import SoleSampler, sample_motion
    from fullbody_ik.rig.retarget_feet import humanoid_feet

    frames = list(range(first, last + 1))
    sf, tf = humanoid_feet(source, map_humanoid(source)), humanoid_feet(target, map_humanoid(target))
    motion = sample_motion(bpy.context.scene, source, sf, frames)
    where = {(sf[k].side, n): j for j, (k, n, _, _) in enumerate(motion.sampler.specs)}
    sampler = SoleSampler(target, tf)
    pts = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        pts.append(sampler.sample())
    pts = np.array(pts)
    heel = lambda k: motion.contacts[:, where[(tf[k].side, "heel")]] if with_heel else True  # noqa: E731
    out = [pts[motion.contacts[:, where[(tf[k].side, n)]] & heel(k), j] for j, (k, n, _, _) in
           enumerate(sampler.specs)]
    return out, [n for _, n, _, _ in sampler.specs]


def _contact_heights(source, target, first, last, with_heel=False):
    """([heights over the target's floor of a sole point at the source's contact frames of that point], [point
    names]), world units."""
    from fullbody_ik.rig.retarget_feet import humanoid_feet

    W = np.array(target.matrix_world)
    floor = min(float((W @ np.append(p.rest, 1.0))[2]) for f in humanoid_feet(target, map_humanoid(target))
                for p in f.points)
    points, names = _contact_points(source, target, first, last, with_heel)
    return [p[:, 2] - floor for p in points], names


def _hand_direction(obj, h, side="left"):
    """The direction from a hand's wrist to its knuckles (each finger's first joint past the wrist, thumb left out)
    as Blender shows them now: where the palm points."""
    from fullbody_ik.rig.retarget import _Skeleton

    sk = _Skeleton(obj, h)
    name = h.bone(f"{side} hand")
    ends = [np.array(obj.matrix_world @ obj.pose.bones[sk.names[k]].head) for k in sk._knuckles(name)]
    d = np.mean(ends, axis=0) - np.array(obj.matrix_world @ obj.pose.bones[name].head)
    return d / np.linalg.norm(d)


def _turn_from_rest(obj, bone, base=None):
    """Degrees a bone is turned from its rest pose, relative to ``base`` (its ancestor: a head's nod on the chest)
    or the armature's."""
    def turn(name):
        pb = obj.pose.bones[name]
        return np.array(pb.matrix.to_3x3().normalized() @ pb.bone.matrix_local.to_3x3().inverted())
    D = turn(bone) if base is None else turn(base).T @ turn(bone)
    return float(np.degrees(np.arccos(np.clip((np.trace(D) - 1) / 2, -1, 1))))


def _direction(obj, bone):
    pb = obj.pose.bones[bone]
    d = np.array(obj.matrix_world @ pb.tail) - np.array(obj.matrix_world @ pb.head)
    return d / np.linalg.norm(d)


@pytest.mark.parametrize("kind", ["metarig", "a-pose", "mannequiny", "quaternius"])
def test_a_cmu_walk_onto_other_characters_keeps_its_limbs_and_plants_its_feet(kind):
    scenes.fresh(bpy)
    source, first, last = scenes.import_cmu(bpy, "02_01")
    target = _target(kind)
    bpy.context.view_layer.update()
    src_action = source.animation_data.action
    before = action_snapshot(src_action)
    last = first + 100
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    assert len(report.mapping) >= 20 and target.animation_data.action.name == report.action
    assert all(np.array_equal(action_snapshot(src_action)[k], v) for k, v in before.items())  # source untouched
    size = max(report.scale, 1.0)  # Quaternius is 2.3 CMU walkers tall in its units: millimetres scale with it
    for side, a in report.feet.after.items():  # the rotation copy's skate and penetration, planted away
        b = report.feet.before[side]
        assert a["contact_frames"] > 20 and a["penetration_mm_max"] < 2 * size and a["float_mm_max"] < 5 * size, a
        assert a["skate_mm_per_frame"] < 0.5 * b["skate_mm_per_frame"], (side, b, a)
    # Measured apart from the report: the source's contacts (its own detector), the target's sole points as
    # Blender shows them, over the target's floor. A toe tip (and every other point) that touches in the source
    # touches the floor: its heel, ball and toe, not only the nearest of them (the rotation copy's are cm off).
    heights, names = _contact_heights(source, target, first, last)
    flat_toes = _contact_heights(source, target, first, last, with_heel=True)[0]
    toe = np.concatenate([h for h, n in zip(flat_toes, names) if n == "toe"])
    every = np.concatenate(heights)
    # Toe tips down while the foot stands flat; once the copied heel rises (a tenth of the foot), the toe's bend
    # follows the neighbouring frames' (a leg near its reach cannot also bend the toe onto the floor): up to
    # about 2 cm off at push-off on the A-pose character.
    assert len(toe) > 20 and np.median(np.abs(toe)) < 0.5e-3 * size and np.percentile(np.abs(toe), 95) < 0.025 * size, \
        np.percentile(np.abs(toe), [50, 95, 100])
    assert np.median(np.abs(every)) < 0.5e-3 * size
    from fullbody_ik.rig.retarget_feet import humanoid_feet

    if all(f.ball for f in humanoid_feet(target, map_humanoid(target))):  # a foot with no toe bone (Quaternius')
        flat_every = np.concatenate(flat_toes)  # cannot also keep its ball down as its toes bend
        assert np.median(np.abs(flat_every)) < 0.5e-3 * size and np.percentile(np.abs(flat_every), 95) < 0.025 * size
    hs, ht = map_humanoid(source), map_humanoid(target)
    worst = 1.0
    for f in range(first, last + 1, 10):  # arms and spine point where the source's do (rest poses aligned)
        bpy.context.scene.frame_set(f)
        for role in ("left upper_arm", "right upper_arm", "left forearm", "right forearm", "chest"):
            worst = min(worst, float(_direction(source, hs.bone(role)) @ _direction(target, ht.bone(role))))
    assert worst > 0.98, worst
    # The pelvis travels as the source's, scaled by the hip heights.
    bpy.context.scene.frame_set(first)
    s0, t0 = (np.array(o.matrix_world @ o.pose.bones[h.bone("pelvis")].head) for o, h in ((source, hs), (target, ht)))
    bpy.context.scene.frame_set(last)
    s1, t1 = (np.array(o.matrix_world @ o.pose.bones[h.bone("pelvis")].head) for o, h in ((source, hs), (target, ht)))
    assert np.linalg.norm((t1 - t0)[:2] - report.scale * (s1 - s0)[:2]) < 0.05 * report.scale


def test_a_walk_on_uneven_ground_plants_both_feet_on_the_characters_floor():
    """CMU 03_01, the whole clip: a walk over rocks (stances up to a third of the hip height apart) onto
    Quaternius. Both feet's contacts are found on every rock; the rotation copy's pelvis follows the ground
    under the feet (not the clip's lowest point), so its feet already stand near the flat floor; every toe tip
    that touches in the source touches the floor."""
    scenes.fresh(bpy)
    source, first, last = scenes.import_cmu(bpy, "03_01")
    target = _target("quaternius")
    bpy.context.view_layer.update()
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    hip = map_humanoid(target).hip_height(target)
    F = last - first + 1
    for side, a in report.feet.after.items():
        b = report.feet.before[side]
        assert a["contact_frames"] > 0.35 * F, (side, a["contact_frames"], F)  # a walk stands half its time
        assert b["float_mm_mean"] < 0.1 * hip * 1e3, (side, b, hip)  # was 0.17-0.23 hip heights off the floor
        assert a["float_mm_max"] < 5 * report.scale and a["skate_mm_per_frame"] < 0.5 * b["skate_mm_per_frame"], a
    heights, names = _contact_heights(source, target, first, last)
    toe = np.concatenate([h for h, n in zip(heights, names) if n == "toe"])
    assert len(toe) > 0.7 * F and np.percentile(np.abs(toe), 99) < 2e-3 * report.scale, \
        np.percentile(np.abs(toe), [50, 99, 100])


def test_retarget_through_the_command_line(tmp_path):
    """`python -m fullbody_ik retarget SOURCE.bvh TARGET.blend --output OUT.blend`, a real process: the saved
    file holds the character with its new action assigned, not the source; bad input exits 2 or 1, writing
    nothing."""
    import json

    from test_cli import run

    scenes.fresh(bpy)
    scenes.metarig(bpy)
    character = tmp_path / "character.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(character))
    bvh = scenes.BVH + "/cmu_02_01.bvh"
    out = tmp_path / "out.blend"
    proc = run("retarget", bvh, character, "--output", out, "--frames", "2-60", "--json", "--report",
               tmp_path / "feet.png")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["ok"] and result["report"]["target"] == "metarig" and (tmp_path / "feet.png").exists()
    # The clip is 120 frames/s, the scene 24: one key a clip frame plays it 5x slower, said (it was silent)
    assert [w for w in result["warnings"] if "recorded at 120 frames/s and the scene plays 24" in w
            and "5x slower" in w], result["warnings"]
    resampled = tmp_path / "resampled.blend"  # --clip-rate scene: keyed at the scene's rate, as recorded
    proc = run("retarget", bvh, character, "--output", resampled, "--clip-rate", "scene", "--no-ik", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not [w for w in json.loads(proc.stdout)["warnings"] if "frames/s" in w]
    fullbody_ik.unregister()
    bpy.ops.wm.open_mainfile(filepath=str(resampled))
    start, end = bpy.data.objects["metarig"].animation_data.action.frame_range
    assert (start, end) == (2, 70)  # 344 frames at 120 /s: 2.87 s at 24 /s, the reference pose (1) left out
    bpy.ops.wm.open_mainfile(filepath=str(out))
    arms = [o for o in bpy.data.objects if o.type == "ARMATURE"]
    assert [o.name for o in arms] == ["metarig"]
    assert arms[0].animation_data.action.name == result["report"]["action"] == result["report"]["feet"]["action"]
    kept = arms[0].animation_data.action  # the reports kept on it name it (they said "... IK", no action's name)
    for prop in ("fullbody_ik_feet_report", "fullbody_ik_report"):
        assert json.loads(kept[prop])["action"] == kept.name and json.loads(kept[prop])["source_action"] == ""
    assert f"action: {kept.name!r}\n" in bpy.data.texts["Full-Body IK bake report"].as_string()
    assert run("retarget", tmp_path / "motion.txt", character, "--output", tmp_path / "x.blend").returncode == 2
    assert run("retarget", bvh, tmp_path / "missing.blend", "--output", tmp_path / "x.blend").returncode == 2
    proc = run("retarget", bvh, character, "--output", tmp_path / "x.blend", "--target-object", "nobody")
    assert proc.returncode == 2 and "no armature named 'nobody'" in proc.stderr
    bad = tmp_path / "map.json"
    bad.write_text('{"roles": ["not", "a", "map"]}')
    proc = run("retarget", bvh, character, "--output", tmp_path / "x.blend", "--target-map", bad)
    assert proc.returncode == 2 and "is not {\"roles\"" in proc.stderr
    assert not (tmp_path / "x.blend").exists()
    # A motion in a .blend whose armature has the character's name: --source-object is its name in its own file
    # (loaded beside the character it is renamed 'metarig.001', which was the name it had to be given)
    proc = run("retarget", out, character, "--source-object", "metarig", "--output", tmp_path / "again.blend",
               "--frames", "2-12", "--no-ik", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["report"]["source"] == "metarig"
    # The motion and the character in one file, retargeted there (Blender cannot load a file from itself: that was
    # a traceback); the motion's armature stays in the file
    bpy.ops.wm.open_mainfile(filepath=str(character))
    with bpy.data.libraries.load(str(out)) as (src, dst):
        dst.objects = ["metarig"]
    bpy.context.scene.collection.objects.link(dst.objects[0])
    dst.objects[0].name = "walker"
    both = tmp_path / "both.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(both))
    proc = run("retarget", both, both, "--source-object", "walker", "--target-object", "metarig", "--output",
               tmp_path / "both_out.blend", "--frames", "2-12", "--no-ik", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["report"]["source"] == "walker"
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "both_out.blend"))
    assert sorted(o.name for o in bpy.data.objects if o.type == "ARMATURE") == ["metarig", "walker"]
    assert bpy.data.objects["metarig"].animation_data.action.name == json.loads(proc.stdout)["report"]["action"]


def test_the_operator_retargets_onto_the_active_armature_with_the_panels_settings():
    scenes.fresh(bpy)
    source, first, last = scenes.import_cmu(bpy, "02_01")
    source.animation_data.action.frame_range = (first, first + 40)  # a short clip, the operator's default range
    source.animation_data.action.use_frame_range = True
    target = scenes.metarig(bpy)
    bpy.context.view_layer.objects.active = target
    props = target.fullbody_ik.retarget
    with pytest.raises(RuntimeError, match="pick the source armature"):  # no source yet: says so, changes nothing
        bpy.ops.fullbody_ik.retarget()
    assert target.animation_data is None or target.animation_data.action is None
    props.source = source
    assert bpy.ops.fullbody_ik.retarget() == {"FINISHED"}
    action = target.animation_data.action
    assert action.name == f"{source.animation_data.action.name} on {target.name}"
    assert int(action.frame_range[0]) == first and int(action.frame_range[1]) == first + 40
    target.name = "rig.001"  # retargeted again: a new action, named for this armature (not Blender's "rig.002")
    assert bpy.ops.fullbody_ik.retarget() == {"FINISHED"}
    assert target.animation_data.action.name == f"{source.animation_data.action.name} on rig.001"
    assert bpy.ops.fullbody_ik.retarget() == {"FINISHED"}
    assert target.animation_data.action.name == f"{source.animation_data.action.name} on rig.001 (2)"
    assert action.name in bpy.data.actions  # (the first kept)
    from fullbody_ik.panels.sidebar import FULLBODY_IK_PT_retarget  # the panel draws the mapping without error

    assert FULLBODY_IK_PT_retarget.bl_label == "Retarget"


def test_bone_maps_come_from_presets_and_edits_and_are_saved():
    """A skeleton with a preset's bones uses the preset; a map edited in the panel's list is what retargeting
    uses; a saved map is a preset for skeletons with the same bones; a map that cannot work is refused."""
    import json
    import os

    from fullbody_ik.rig import RigError
    from fullbody_ik.rig.humanoid import bone_map_folders, from_roles

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    assert map_humanoid(source).source == "preset 'CMU BVH'"
    target = scenes.metarig(bpy)
    assert map_humanoid(target).source == "preset 'Rigify metarig'"
    bpy.context.view_layer.objects.active = target
    assert bpy.ops.fullbody_ik.bone_map_fill() == {"FINISHED"}
    rows = {r.role: r for r in target.fullbody_ik.bone_map}
    assert rows["left hand"].bone == "hand.L" and rows["left toe"].bone == "toe.L"
    rows["left toe"].bone = rows["right toe"].bone = ""  # the user unmaps the toes
    target.fullbody_ik.retarget.source = source
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 30, ik=False))
    assert not any(role.endswith("toe") for role, _, _ in report.mapping)
    with pytest.raises(RigError, match="lacks left forearm"):  # (a hand is optional: an arm may end at its forearm)
        from_roles(target, {**{r.role: r.bone for r in target.fullbody_ik.bone_map}, "left forearm": ""})
    name = "fbik test map"
    path = os.path.join(bone_map_folders()[0], "fbik_test_map.json")
    try:
        assert bpy.ops.fullbody_ik.bone_map_save(name=name) == {"FINISHED"}
        assert json.load(open(path))["roles"]["left hand"] == "hand.L"
        target.fullbody_ik.bone_map.clear()
        assert map_humanoid(target).source == f"preset {name!r}"  # the user's own presets come first
    finally:
        if os.path.exists(path):
            os.remove(path)


def test_batch_retargets_many_motions_onto_one_character(tmp_path):
    """`batch retarget A.bvh B.bvh --target CHARACTER.blend --output-dir OUT -j 2`: each motion in its own
    process, each result saved; a motion that cannot be read fails alone and the batch says so (exit 1)."""
    import json
    import shutil

    from test_cli import run

    scenes.fresh(bpy)
    scenes.metarig(bpy)
    character = tmp_path / "character.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(character))
    motions = [tmp_path / "walk.bvh", tmp_path / "run.bvh", tmp_path / "broken.bvh"]
    shutil.copy(scenes.BVH + "/cmu_02_01.bvh", motions[0])
    shutil.copy(scenes.BVH + "/cmu_02_03.bvh", motions[1])
    motions[2].write_text("HIERARCHY\nnot a skeleton\n")
    proc = run("batch", "retarget", *motions, "--target", character, "--output-dir", tmp_path / "out", "--jobs", "2",
               "--frames", "2-40", "--json")
    assert proc.returncode == 1, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["failed"] == 1 and [r["ok"] for r in result["files"]] == [True, True, False]
    assert (tmp_path / "out" / "walk_retarget.blend").exists() and (tmp_path / "out" / "run_retarget.blend").exists()
    assert not (tmp_path / "out" / "broken_retarget.blend").exists()


def test_an_fbx_motion_with_several_clips_onto_a_glb_character(tmp_path):
    """`retarget Quaternius.fbx mannequiny.glb --action Man_Walk`: a clip picked among the source's eleven, an
    FBX source and a glTF character through the importers, as a user's files come."""
    import json

    from test_cli import run

    fbx = scenes.ROOT + "/data/characters/Quaternius_Male_Casual.fbx"
    glb = scenes.ROOT + "/data/characters/mannequiny.glb"
    out = tmp_path / "walk_on_mannequiny.blend"
    proc = run("retarget", fbx, glb, "--output", out, "--action", "HumanArmature|HumanArmature|Man_Walk", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)["report"]
    assert report["source_action"].endswith("Man_Walk") and report["ok"]
    assert len(report["mapping"]) >= 18
    # The character came into a new scene (Blender's range, 1-250): the saved scene plays the new action, no
    # more (a footplant run on the file solved 150 frames of its last pose held)
    bpy.ops.wm.open_mainfile(filepath=str(out))
    action = bpy.data.actions[report["action"]]
    shown = (bpy.context.scene.frame_start, bpy.context.scene.frame_end)
    assert shown == tuple(report["frames"]) == tuple(int(f) for f in action.frame_range), shown
    proc = run("retarget", fbx, glb, "--output", tmp_path / "x.blend", "--action", "Moonwalk")
    assert proc.returncode == 2 and "Moonwalk" in proc.stderr and not (tmp_path / "x.blend").exists()


def test_hands_held_where_the_sources_are_from_its_pelvis():
    """With hands held, each hand keeps the source's place from its pelvis (scaled) on a character of other
    proportions (Quaternius: 2.3x the CMU walker, other arm lengths), the contacts still planted."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = scenes.import_quaternius(bpy)[0]
    bpy.context.view_layer.update()
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 60, hands=True))
    assert report.ok, report.text()
    mean, worst = report.hands_mm
    assert mean < 2 * report.scale and worst < 10 * report.scale, report.hands_mm  # mm of the target's units
    assert "hands held" in report.text()


def test_the_scene_range_grows_to_play_the_whole_retargeted_action():
    """A clip longer than the scene's range: after retargeting, the scene plays all of it (its end grows to the
    action's last frame); a clip inside the range leaves the range as it was."""
    scenes.fresh(bpy)
    source = scenes.import_cmu(bpy, "02_01")[0]
    first, last = (int(f) for f in source.animation_data.action.frame_range)
    target = scenes.metarig(bpy)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = first + 3, first + 50
    bpy.context.view_layer.update()
    report = retarget(scene, source, target, RetargetOptions(ik=False))
    action = bpy.data.actions[report.action]
    assert report.reference_frames == [first]  # (CMU's reference pose, left out of the default range)
    assert last > first + 100 and (scene.frame_start, scene.frame_end) == (first + 1, last)
    assert tuple(int(f) for f in action.frame_range) == (first + 1, last)
    scene.frame_end = last + 40
    retarget(scene, source, target, RetargetOptions(first + 5, first + 30, ik=False))
    assert (scene.frame_start, scene.frame_end) == (first + 1, last + 40)
    assert [w for w in report.warnings if "not part of the take" not in w] == []
    # Frames past the clip: a note naming them; frames all past it: refused (every frame would be its last pose)
    report = retarget(scene, source, target, RetargetOptions(last - 5, last + 10, ik=False))
    assert report.warnings == [f"10 frames ({last + 1}-{last + 10}) after it: outside the animation the retarget "
                               f"follows (the action {source.animation_data.action.name!r} spans frames {first}-{last}), where "
                               "everything holds its last pose. A frame range longer than the clip?"], report.warnings
    with pytest.raises(RigError, match=rf"frames {last + 1}-{last + 9} are all outside the source's action"):
        retarget(scene, source, target, RetargetOptions(last + 1, last + 9, ik=False))


def test_a_clip_animated_on_a_generated_rigify_rig_is_a_source_through_its_deform_bones():
    """A walk keyed on a generated Rigify rig's controls (its deform bones following by constraints) is read
    through the DEF bones' preset onto mannequiny: mapped whole, its feet planted without skate."""
    scenes.fresh(bpy)
    rig, first, last = scenes.rigify_walk(bpy)
    target = scenes.import_mannequiny(bpy)[0]
    bpy.context.view_layer.update()
    assert map_humanoid(rig).source == "preset 'Rigify generated rig (DEF bones)'"
    report = retarget(bpy.context.scene, rig, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    assert len(report.mapping) >= 20 and all(s.startswith("DEF-") for _, s, _ in report.mapping)
    for side, a in report.feet.after.items():
        assert a["contact_frames"] > 10 and a["skate_mm_per_frame"] < 0.5, (side, a)
    # The pelvis travels as the rig's torso did (1.2 m along -Y over the clip, evenly), scaled: from its first step
    # (before it, the torso walks on while both feet stand, and the legs' reach holds the pelvis back some cm)
    start = first + 7
    bpy.context.scene.frame_set(start)
    p0 = np.array(target.matrix_world @ target.pose.bones[map_humanoid(target).bone("pelvis")].head)
    bpy.context.scene.frame_set(last)
    p1 = np.array(target.matrix_world @ target.pose.bones[map_humanoid(target).bone("pelvis")].head)
    travel = 1.2 * (last - start) / (last - first) * report.scale
    assert abs((p0 - p1)[1] - travel) < 0.03, (p0, p1, travel)


def _cmu_walk_and_a_rigify_rig():
    """A fresh scene with CMU 02_01 (its armature, its first frame) and the rig Rigify generates from the metarig."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    meta = scenes.metarig(bpy)
    bpy.context.view_layer.objects.active = meta
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    bpy.data.objects.remove(meta)
    return source, first, rig


def test_a_generated_rigify_rig_is_keyed_through_its_controls():
    """A character rigged with Rigify (generated from the metarig, its deform bones following the controls by
    constraints): the walk is keyed on its controls (torso, chest, neck, head, FK arms, IK legs), Rigify's
    own mechanism moving the DEF bones to the source's directions, and the feet planted through the foot
    controls. Another rig whose feet follow constraints is refused before anything is written."""
    from fullbody_ik.rig import RigError

    source, first, rig = _cmu_walk_and_a_rigify_rig()
    bpy.context.view_layer.update()
    last = first + 60
    report = retarget(bpy.context.scene, source, rig, RetargetOptions(first, last))
    assert report.ok, report.text()
    bag = rig.animation_data.action.layers[0].strips[0].channelbag(rig.animation_data.action_slot)
    keyed = {fc.data_path.split('"')[1] for fc in bag.fcurves if fc.data_path.startswith("pose.bones")}
    assert {"torso", "chest", "upper_arm_fk.L", "hand_fk.R", "foot_ik.L", "thigh_ik.R"} <= keyed, keyed
    assert not any(n.startswith(("DEF-", "ORG-", "MCH-")) for n in keyed), keyed
    assert rig.pose.bones["thigh_parent.L"]["IK_FK"] == 0.0 and rig.pose.bones["upper_arm_parent.R"]["IK_FK"] == 1.0
    # (keyed in waves, each control after those its parents and their constraints follow: an arm after its shoulder,
    # the shoulder after the chest, the chest after the torso)
    wave = {c: k for k, names in enumerate(control_waves(rig, ["hand_fk.L", "upper_arm_fk.L", "shoulder.L", "chest",
                                                              "torso", "forearm_fk.L"])) for c in names}
    assert wave["torso"] < wave["chest"] < wave["shoulder.L"] < wave["upper_arm_fk.L"] < wave["forearm_fk.L"] \
        < wave["hand_fk.L"], wave
    for side, a in report.feet.after.items():
        b = report.feet.before[side]
        assert a["contact_frames"] > 20 and a["penetration_mm_max"] < 2 and a["float_mm_max"] < 5, a
        assert a["skate_mm_per_frame"] < 0.5 * b["skate_mm_per_frame"], (side, b, a)
    hs, ht = map_humanoid(source), map_humanoid(rig)
    worst = 1.0
    for f in range(first, last + 1, 10):
        bpy.context.scene.frame_set(f)
        for role in ("left upper_arm", "right forearm", "chest", "left thigh"):
            worst = min(worst, float(_direction(source, hs.bone(role)) @ _direction(rig, ht.bone(role))))
        worst = min(worst, float(_hand_direction(source, hs) @ _direction(rig, ht.bone("left hand"))))
        nods = [_turn_from_rest(obj, h.bone("head"), h.bone("chest")) for obj, h in ((source, hs), (rig, ht))]
        assert abs(nods[0] - nods[1]) < 6.0, (f, nods)  # the head turns on the chest as the source's (through
        # Rigify's neck, which shares the turn between its neck bones)
    assert worst > 0.98, worst
    # Not a Rigify rig: a metarig whose feet copy another bone's rotation.
    target = scenes.metarig(bpy)
    for side in "LR":
        c = target.pose.bones[f"foot.{side}"].constraints.new("COPY_ROTATION")
        c.target, c.subtarget = target, f"shin.{side}"
    actions = {a.name for a in bpy.data.actions}
    with pytest.raises(RigError, match="follow constraints.*not a Rigify rig"):
        retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 10))
    assert {a.name for a in bpy.data.actions} == actions


def test_a_rigify_arm_that_starts_following_another_bone_partway_is_keyed_where_blender_shows_it():
    """The last controls keyed on a generated Rigify rig (the FK arms, the head) are set with no rig update for them
    while only their parents place them, checked through Blender every few frames. An arm whose FK follow a driver
    turns on partway (Rigify's Copy Rotation under the upper arm's FK control) is keyed, on every frame, where
    Blender shows it following the source's arm: the frames since the last check are set again."""
    source, first, rig = _cmu_walk_and_a_rigify_rig()
    follow = rig.pose.bones["MCH-upper_arm_parent.L"].constraints["Copy Rotation"]
    turned = bpy.data.objects.new("Turned", None)  # (followed, the arm's parent turns far from the shoulder's)
    bpy.context.scene.collection.objects.link(turned)
    turned.rotation_euler = (0.0, 1.2, 0.8)
    follow.target, follow.subtarget = turned, ""
    follow.driver_remove("influence")
    driver = follow.driver_add("influence").driver
    driver.type, driver.expression = "SCRIPTED", f"(frame > {first + 13}) * (frame <= {first + 30})"
    bpy.context.view_layer.update()
    last = first + 30
    report = retarget(bpy.context.scene, source, rig, RetargetOptions(first + 1, last))
    assert report.ok, report.text()
    hs, ht = map_humanoid(source), map_humanoid(rig)
    for f in range(first + 1, last + 1):
        bpy.context.scene.frame_set(f)
        assert follow.influence == (1.0 if f > first + 13 else 0.0), f
        for role in ("left upper_arm", "left forearm"):
            assert float(_direction(source, hs.bone(role)) @ _direction(rig, ht.bone(role))) > 0.98, (f, role)


def test_a_standing_jump_in_place_keeps_its_feet_pinned_not_a_treadmill():
    """CMU's jump onto mannequiny: the pelvis travels under a tenth of the hip height (in place), but its feet
    stand still while they touch: not a treadmill, so they are pinned (the rotation copy's skate removed);
    found running it as a user (skate 1.3 -> 1.3 mm/frame before)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_04")
    target = scenes.import_mannequiny(bpy)[0]
    bpy.context.view_layer.update()
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 198))
    assert report.ok, report.text()
    assert not any("treadmill" in w for w in report.feet.warnings)
    for side, a in report.feet.after.items():
        assert a["skate_mm_per_frame"] < 0.7 * report.feet.before[side]["skate_mm_per_frame"], (side, a)


@pytest.mark.parametrize("kind", ["robot", "daz-cm", "specks", "chibi"])
def test_characters_exported_by_other_tools_take_a_cmu_walk_with_its_limb_directions(kind):
    """A robot with no hands whose feet hang from the root (names without separators, an A-pose), Daz names in
    centimetres with a thigh in two segments, bones that are specks in an armature scaled 100 with its feet on the
    root, and a chibi with big feet: mapped by structure, the clip's reference frame left out, every frame's
    thighs, shins, upper arms and forearms pointing where the source's do, the contacts planted (from the first
    frame), the root left where it is, the chibi's heels rising for its legs as the source's do."""
    scenes.fresh(bpy)
    source, first, last = scenes.import_cmu(bpy, "02_01")
    bpy.context.scene.frame_end = last = first + 80
    target = _target(kind)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(frame_end=last))
    assert report.ok, report.text()
    assert report.reference_frames == [1] and report.frames[0] == first == 2
    assert any("not part of the take" in w for w in report.warnings)
    hs, ht = map_humanoid(source), map_humanoid(target)
    assert ("left foot", "LeftFoot", ht.bone("left foot")) in report.mapping
    assert (kind == "robot") == (not ht.bone("left hand"))
    angles = []
    for f in report.frames[::5]:
        bpy.context.scene.frame_set(f)
        for role in ("thigh", "shin", "upper_arm", "forearm"):
            for side in ("left", "right"):
                s_dir = _joint_direction(source, hs, f"{side} {role}")
                t_dir = _joint_direction(target, ht, f"{side} {role}")
                angles.append(np.degrees(np.arccos(np.clip(s_dir @ t_dir, -1, 1))))
    assert np.mean(angles) < 10 and np.percentile(angles, 95) < 25, np.percentile(angles, [50, 95, 100])  # (the aims)
    assert report.feet.bake["summary"]["solved_frames"] == len(report.frames), report.feet.bake["summary"]
    if kind in ("robot", "specks"):  # the feet move on the root; the root does not
        for f in report.frames[::7]:
            bpy.context.scene.frame_set(f)
            assert np.allclose(np.array(target.pose.bones["Root"].matrix_basis), np.eye(4), atol=1e-6), f
    # Feet longer for their legs than CMU's (all four): their pitch is scaled, and the chibi's (twice as long as
    # CMU's for its legs, 3.5 times by the sole points) heels rise for its legs as the source's (2-3 times without)
    assert any("feet are" in w and "pitch is scaled" in w for w in report.warnings), report.warnings
    if kind == "chibi":  # (CMU's right sole stands 2 cm over its floor where it touches; planted on the floor,
        # the right ankle rises that much more from its stance: held to 1.5)
        lifts = [_heel_lift(obj, h, report.frames) for obj, h in ((source, hs), (target, ht))]
        ratio = lifts[1] / lifts[0]
        assert 0.75 < ratio[0] < 1.25 and 0.75 < ratio[1] < 1.5, lifts


def _heel_lift(obj, h, frames, window=20):
    """(left, right) highest rise of each ankle over its lowest within ``window`` frames either side (a capture's
    floor a degree off level adds nothing), over the legs' length (hip to knee to ankle)."""
    out = []
    for side in ("left", "right"):
        heads = lambda: [np.array(obj.matrix_world @ obj.pose.bones[h.bone(f"{side} {r}")].head)  # noqa: E731
                         for r in ("thigh", "shin", "foot")]
        z, leg = [], []
        for f in frames:
            bpy.context.scene.frame_set(f)
            hip, knee, ankle = heads()
            z.append(ankle[2])
            leg.append(np.linalg.norm(knee - hip) + np.linalg.norm(ankle - knee))
        z = np.array(z)
        low = np.array([z[max(0, i - window):i + window + 1].min() for i in range(len(z))])
        out.append(float((z - low).max()) / np.median(leg))
    return np.array(out)


def _joint_direction(obj, h, role):
    """The direction from a limb bone's head to the next joint of its chain (the child's head: tails and twist
    segments aside), world space."""
    bone = obj.pose.bones[h.bone(role)]
    nxt = {"thigh": "shin", "shin": "foot", "upper_arm": "forearm", "forearm": "hand"}[role.split()[-1]]
    side = role.split()[0]
    end = obj.pose.bones[h.bone(f"{side} {nxt}")].head if h.bone(f"{side} {nxt}") else bone.tail
    d = np.array(obj.matrix_world @ end) - np.array(obj.matrix_world @ bone.head)
    return d / np.linalg.norm(d)


def test_the_command_line_refuses_a_motion_that_is_not_one_and_takes_the_feet_by_hand(tmp_path):
    """Files swapped (a character where the motion goes, a BVH where the character goes) and a source that does not
    move are refused by name, exit 2, nothing written; --feet names the character's feet."""
    import json

    from test_cli import run

    scenes.fresh(bpy)
    characters.build(bpy, "plain", rest="A", hands=False, fingers=False, feet_on_root=True, name="Robot")
    robot = tmp_path / "robot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(robot))
    bvh = scenes.BVH + "/cmu_02_03.bvh"
    glb = scenes.ROOT + "/data/characters/mannequiny.glb"
    proc = run("retarget", glb, bvh, "--output", tmp_path / "x.blend", "--json")
    assert proc.returncode == 2 and "look swapped" in proc.stderr, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["exit"] == 2  # (standard output holds the JSON alone)
    proc = run("retarget", robot, glb, "--output", tmp_path / "x.blend")
    assert proc.returncode == 2 and "'Robot'" in proc.stderr and "has no motion" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "x.blend").exists()
    out = tmp_path / "out.blend"
    proc = run("retarget", bvh, robot, "--output", out, "--clip-rate", "scene", "--feet", "FootR:ToesR,FootL:ToesL",
               "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)["report"]
    assert ["left foot", "LeftFoot", "FootL"] in report["mapping"] and report["reference_frames"] == [1]
    proc = run("retarget", bvh, robot, "--output", out, "--feet", "FootL:ToesL", "--no-ik")
    assert proc.returncode == 2 and "--feet" in proc.stderr and "give the two feet" in proc.stderr, \
        proc.stderr[-2000:]  # (a bad argument, refused before any work, as any other)
    proc = run("retarget", bvh, robot, "--output", out, "--feet", "Foot:Toes,FootR:ToesR", "--no-ik")
    assert proc.returncode == 2 and "no bone named 'Foot:Toes'" in proc.stderr, proc.stderr[-2000:]


def _cmu_walk_in_place():
    """CMU 02_01 (120 frames) with its hips held over their first place, as a game clip walks on a treadmill:
    (source, first, last, where its hips walked (F, 3) before)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    last = first + 120
    scene = bpy.context.scene
    hips = source.pose.bones["Hips"]
    walked = []
    for f in range(first, last + 1):
        scene.frame_set(f)
        walked.append(np.array(source.matrix_world @ hips.head))
    walked = np.array(walked)
    bag = source.animation_data.action.layers[0].strips[0].channelbag(source.animation_data.action_slot)
    for index in (0, 2):  # the BVH's horizontal axes (its Y is up): the hips held over their first place
        fc = bag.fcurves.find('pose.bones["Hips"].location', index=index)
        start = fc.evaluate(first)
        for k in fc.keyframe_points:
            k.co[1] = start
            k.handle_left[1] = k.handle_right[1] = start
    scene.frame_set(last)
    assert np.linalg.norm(np.array(source.matrix_world @ hips.head)[:2] - walked[0, :2]) < 0.01  # in place now
    return source, first, last, walked


def test_a_walk_that_comes_back_to_where_it_started_is_no_treadmill():
    """A walk that turns and comes back (Mixamo's walk and turn) ends where it started: read as in place, its
    contacts were found from vertical speed alone, a toe skimming the floor as its foot swung forward was one, and
    the foot was held 86 cm behind the step the source took. CMU's walk played forward, then backward."""
    from fullbody_ik.rig.retarget_feet import humanoid_feet
    from fullbody_ik.rig.soles import sample_motion

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    mid, last = first + 60, first + 120
    bag = source.animation_data.action.layers[0].strips[0].channelbag(source.animation_data.action_slot)
    for fc in bag.fcurves:  # (frames after mid replay the walk backward, to its first frame)
        back = {f: fc.evaluate(2 * mid - f) for f in range(mid + 1, last + 1)}
        for k in fc.keyframe_points:
            f = int(round(k.co[0]))
            if f in back:
                k.co[1] = k.handle_left[1] = k.handle_right[1] = back[f]
    scene = bpy.context.scene
    hips = source.pose.bones["Hips"]
    scene.frame_set(first)
    start = np.array(source.matrix_world @ hips.head)
    scene.frame_set(last)
    assert np.linalg.norm(np.array(source.matrix_world @ hips.head)[:2] - start[:2]) < 0.05  # back where it started
    motion = sample_motion(scene, source, humanoid_feet(source, map_humanoid(source)), list(range(first, last + 1)))
    assert not motion.in_place and not motion.treadmill
    speed = np.linalg.norm(np.gradient(motion.pts[..., :2], axis=0), axis=-1) * motion.fps  # (per second)
    assert motion.contacts.sum() > 100 and np.percentile(speed[motion.contacts], 99) < 0.2 * motion.leg, \
        np.percentile(speed[motion.contacts], [50, 99, 100])


def test_an_in_place_walk_slides_its_standing_feet_at_one_treadmill_speed():
    """A game clip kept in place: each standing foot of the character slides back under it at the treadmill's
    speed, the one both feet's stances share, as a foot on a belt does (each kept the slide its joint angles gave
    it, faster or slower than the other's and changing within a stance)."""
    source, first, last, _ = _cmu_walk_in_place()
    scene = bpy.context.scene
    target = scenes.metarig(bpy)
    report = retarget(scene, source, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    assert any("treadmill" in w for w in report.feet.warnings), report.feet.warnings
    ht = map_humanoid(target)
    steps, standing = {}, {}
    for side in ("left", "right"):
        bone = target.pose.bones[ht.bone(f"{side} foot")]
        where = []
        for f in range(first, last + 1):
            scene.frame_set(f)
            where.append(np.array(target.matrix_world @ bone.head)[:2])
            standing.setdefault(side, []).append(all(target[k] > 0.5 for k in target.keys()
                                                     if k.startswith(f"fbik_contact_{side}_")))
        steps[side] = np.diff(np.array(where), axis=0)
        standing[side] = np.array(standing[side][1:]) & np.array(standing[side][:-1])
    belt = np.median(np.concatenate([steps[s][standing[s]] for s in steps]), axis=0)
    off = np.concatenate([np.linalg.norm(steps[s][standing[s]] - belt, axis=1) for s in steps])
    # (a tenth of the belt's step on most frames: 0.7 mm of 10.7; each foot keeping its own slide, 1.3 mm)
    assert len(off) > 40 and np.median(off) < 0.1 * np.linalg.norm(belt), (np.median(off), np.linalg.norm(belt))


def test_an_in_place_walk_travels_as_its_standing_feet_imply():
    """A game clip walks on a treadmill (its hips keep their place): --root from-feet gives the body the travel its
    standing feet imply, so they do not slide; CMU's walk made in place travels nearly as far as the walk it came
    from, and its contacts are planted."""
    from fullbody_ik.rig.retarget_feet import feet_travel

    source, first, last, walked = _cmu_walk_in_place()
    scene = bpy.context.scene
    target = scenes.metarig(bpy)
    report = retarget(scene, source, target, RetargetOptions(first, last, root="from_feet"))
    assert report.ok, report.text()
    ht = map_humanoid(target)
    travelled = []
    for f in (first, last):
        scene.frame_set(f)
        travelled.append(np.array(target.matrix_world @ target.pose.bones[ht.bone("pelvis")].head)[:2])
    expected = report.scale * np.linalg.norm(walked[-1, :2] - walked[0, :2])
    # (within 15 %: the capture's own standing feet slide about a millimetre a frame, which its hips' travel
    # includes and its feet's does not)
    assert abs(np.linalg.norm(travelled[1] - travelled[0]) - expected) < 0.15 * expected, (travelled, expected)
    for side, a in report.feet.after.items():  # the standing feet do not slide
        assert a["contact_frames"] > 20 and a["skate_mm_per_frame"] < 2.0, (side, a)
    points = np.zeros((4, 2, 3))  # a foot that stands on a treadmill while the other swings: the body goes
    points[:, 0, 0] = [0.0, -0.1, -0.2, -0.3]
    points[:, 1, 2] = [0.0, 0.2, 0.3, 0.2]
    assert np.allclose(feet_travel(points, [[0], [1]])[:, 0], [0.0, 0.1, 0.2, 0.3])


def _lying_metarig():
    """(a fresh scene's metarig whose rest is turned to lie along X about its pelvis, as Bandai Namco's clips lie;
    the matrix that stands it up again)."""
    import math

    from mathutils import Matrix

    scenes.fresh(bpy)
    source = scenes.metarig(bpy)
    source.name = "Lying"
    bpy.context.view_layer.objects.active = source
    bones = source.data.bones
    head = bones["spine"].head_local.copy()
    lie = Matrix.Translation(head) @ Matrix.Rotation(math.radians(90.0), 4, "Y") @ Matrix.Translation(-head)
    bpy.ops.object.mode_set(mode="EDIT")
    placed = {b.name: b.matrix.copy() for b in source.data.edit_bones}
    for b in source.data.edit_bones:
        b.matrix = lie @ placed[b.name]
    bpy.ops.object.mode_set(mode="OBJECT")
    assert bones["spine.006"].head_local.z < bones["spine"].head_local.z + 0.05  # (lying)
    return source, lie.inverted()


def test_a_clip_whose_rest_pose_lies_down_takes_its_most_upright_frame_as_reference():
    """Bandai Namco's clips lie along X in their rest pose: a skeleton whose rest lies down, stood up and walking in
    its keys, is mapped from the pose it shows and retargets with its limbs where its own point (its most upright
    frame its reference, said so)."""
    import math

    from mathutils import Matrix

    source, stand = _lying_metarig()
    pb, bones = source.pose.bones, source.data.bones
    for f in range(1, 41):
        pb["spine"].matrix = stand @ bones["spine"].matrix_local
        pb["spine"].keyframe_insert("rotation_quaternion", frame=f)
        pb["spine"].keyframe_insert("location", frame=f)
        for side, sign in ((".L", 1.0), (".R", -1.0)):
            thigh = pb["thigh" + side]
            thigh.rotation_quaternion = Matrix.Rotation(0.4 * sign * math.sin(2 * math.pi * f / 20.0), 4,
                                                        "X").to_quaternion()
            thigh.keyframe_insert("rotation_quaternion", frame=f)
    bpy.context.scene.frame_set(1)
    target = scenes.metarig(bpy)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(1, 40, ik=False))
    assert any("rest pose does not stand" in w for w in report.warnings), report.warnings
    hs, ht = map_humanoid(source), map_humanoid(target)
    angles = []
    for f in range(1, 41, 3):
        bpy.context.scene.frame_set(f)
        for role in ("left thigh", "right thigh", "left shin", "left upper_arm", "right forearm"):
            a, b = _joint_direction(source, hs, role), _joint_direction(target, ht, role)
            angles.append(np.degrees(np.arccos(np.clip(a @ b, -1, 1))))
    assert np.max(angles) < 5, np.percentile(angles, [50, 100])
    assert abs(report.scale - 1.0) < 0.01  # (the same skeleton: its legs' length, not the lying rest's heights)


def test_a_foot_swinging_toes_down_behind_in_the_reference_frame_is_not_turned_round():
    """A clip whose rest lies down is matched in its most upright frame; there a run's swinging foot points down and
    back behind the body. Its heading, flattened, pointed the character's foot the other way on every frame (a
    Bandai Namco run onto Quaternius' Robot: the right foot backward as it stood, 80 degrees off on average)."""
    import math

    from mathutils import Matrix

    source, stand = _lying_metarig()
    pb, bones = source.pose.bones, source.data.bones
    for f in range(1, 41):  # (running forward: no foot stands still, so none is read as standing flat)
        pb["spine"].matrix = Matrix.Translation((0.0, -0.05 * f, 0.0)) @ stand @ bones["spine"].matrix_local
        for path in ("rotation_quaternion", "location"):
            pb["spine"].keyframe_insert(path, frame=f)
        bend = 0.5 + 0.1 * math.sin(2 * math.pi * f / 20.0)  # the left knee bent behind, the foot pointed
        for name, angle in (("thigh.L", -0.2), ("shin.L", 2.0 * bend), ("foot.L", 0.8)):
            pb[name].rotation_quaternion = Matrix.Rotation(angle, 4, "X").to_quaternion()
            pb[name].keyframe_insert("rotation_quaternion", frame=f)
    bpy.context.scene.frame_set(1)
    target = scenes.metarig(bpy)
    hs, ht = map_humanoid(source), map_humanoid(target)

    def foot(obj, h):  # ankle to toe tip, world
        a = np.array(obj.matrix_world @ obj.pose.bones[h.bone("left foot")].head)
        d = np.array(obj.matrix_world @ obj.pose.bones[h.bone("left toe")].tail) - a
        return d / np.linalg.norm(d)

    bpy.context.view_layer.update()
    down_back = foot(source, hs)
    assert down_back[2] < -0.7 and down_back[1] > 0.1, down_back  # (the metarig faces -Y: toes down, behind)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(1, 40, ik=False))
    assert any("rest pose does not stand" in w for w in report.warnings), report.warnings
    angles = []
    for f in range(1, 41, 3):
        bpy.context.scene.frame_set(f)
        angles.append(np.degrees(np.arccos(np.clip(foot(source, hs) @ foot(target, ht), -1, 1))))
    assert np.max(angles) < 10, angles


def _lying_run(roll=0.0):
    """(a metarig whose rest lies down, running in place: each foot at rest, flat, 4 frames of 12, and between them
    its knee bent far behind, never straight, the foot kicked back and turned by ``roll`` about its own length
    (radians); {"L", "R": its stance frames}). Frame 1 has the right foot at the top of its swing."""
    import math

    from mathutils import Matrix

    source, stand = _lying_metarig()
    pb, bones = source.pose.bones, source.data.bones
    stance = {"L": [], "R": []}
    for f in range(1, 37):
        pb["spine"].matrix = stand @ bones["spine"].matrix_local
        for path in ("rotation_quaternion", "location"):
            pb["spine"].keyframe_insert(path, frame=f)
        for side, offset in (("L", 0), ("R", 8)):
            phase = (f - 1 + offset) % 12
            lift = 0.0 if phase < 4 else 0.7 + 0.3 * math.sin(math.pi * (phase - 4) / 8.0)
            if phase < 4:
                stance[side].append(f)
            for name, angle in (("thigh", -0.2), ("shin", 2.0), ("foot", 0.8)):
                turn = Matrix.Rotation(angle * lift, 4, "X")
                if name == "foot":
                    turn = turn @ Matrix.Rotation(roll * lift, 4, "Y")
                pb[f"{name}.{side}"].rotation_quaternion = turn.to_quaternion()
                pb[f"{name}.{side}"].keyframe_insert("rotation_quaternion", frame=f)
    bpy.context.scene.frame_set(1)
    return source, stance


def test_a_run_whose_reference_frame_swings_a_foot_back_stands_both_feet_flat_where_the_source_does():
    """A clip whose rest lies down is matched in its most upright frame; there a run's right foot swings toes down
    behind the body, and its stances are a few frames each. Where the source's feet stand flat, the character's
    stand as its rest does, heading as the source's (read from the flat frames: matched as it pointed in the
    reference, a Bandai Namco run's feet went 28 degrees toes down into the floor at every stance; matched by the
    reference's heading, turned round)."""
    source, stance = _lying_run()
    target = scenes.metarig(bpy)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(1, 36, ik=False))
    assert any("rest pose does not stand" in w for w in report.warnings), report.warnings
    ht = map_humanoid(target)
    off = []
    for side, frames in stance.items():
        bone = ht.bone(("left" if side == "L" else "right") + " foot")
        for f in frames:
            bpy.context.scene.frame_set(f)
            off.append(_turn_from_rest(target, bone))
    assert len(off) == 24 and max(off) < 3, np.round(off, 1)


def test_a_foot_kicked_back_points_as_the_source_s_whatever_its_bones_length_runs_along():
    """A skeleton's foot is a line from ankle to toe; a capture turns it about that line as it kicks back. On a
    character whose foot bone lies level, with no toe (the source's points down to its ball), the foot stands as
    its rest where the source's stands, and kicked back high it points where the source's does (turned about the
    source's line, a level foot swung sideways: Quaternius' Robot on a Bandai Namco run)."""
    source, stance = _lying_run(roll=0.6)
    target = scenes.metarig(bpy)
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    for side in ("L", "R"):  # the foot bone level to the toe's tip, no toe bone (as Quaternius' feet)
        bones = target.data.edit_bones
        tip = bones["toe." + side].tail
        bones["foot." + side].tail = (tip.x, tip.y, bones["foot." + side].head.z)
        bones.remove(bones["toe." + side])
    bpy.ops.object.mode_set(mode="OBJECT")
    report = retarget(bpy.context.scene, source, target, RetargetOptions(1, 36, ik=False))
    assert report.ok, report.text()
    hs, ht = map_humanoid(source), map_humanoid(target)
    assert not ht.bone("left toe")  # (its heel bone is no toe)

    def line(obj, h, side):  # ankle to toe, world
        a = np.array(obj.matrix_world @ obj.pose.bones[h.bone(f"{side} foot")].head)
        return np.array(obj.matrix_world @ obj.pose.bones[h.bone(f"{side} foot")].tail) - a

    flat, kicked = [], []
    for side, frames in stance.items():
        name = "left" if side == "L" else "right"
        for f in range(1, 37):
            bpy.context.scene.frame_set(f)
            if f in frames:
                flat.append(_turn_from_rest(target, ht.bone(f"{name} foot")))
                continue
            s, t = line(source, hs, name), line(target, ht, name)
            s, t = (v / np.linalg.norm(v) for v in (s, t))
            if np.linalg.norm(s[:2]) > 0.5 and np.linalg.norm(t[:2]) > 0.5:  # (a heading to compare)
                heading = s[:2] @ t[:2] / np.linalg.norm(s[:2]) / np.linalg.norm(t[:2])
                kicked.append(np.degrees(np.arccos(np.clip(heading, -1, 1))))
    assert max(flat) < 3, np.round(flat, 1)
    assert len(kicked) > 20 and max(kicked) < 15, np.round(kicked, 1)


def test_a_foot_whose_heel_never_reads_as_touching_stands_flat_where_its_ankle_is_lowest_on_its_ball():
    """A skeleton's heel point sits at its ankle when its rest shows nothing under it (Bandai Namco's rest lies
    down), so its heel reads as touching on few frames of a run: in a reference taken from the take, the foot
    stands flat where its ball touches with its ankle as low as it comes then (not while the heel rises)."""
    from types import SimpleNamespace

    from fullbody_ik.rig.humanoid import SIDES
    from fullbody_ik.rig.retarget_feet import flat_frames

    F = 30
    feet = [SimpleNamespace(side=s) for s in SIDES]
    specs = [(k, name, "", None) for k in range(2) for name in ("heel", "ball", "toe")]
    contacts = np.zeros((F, 6), dtype=bool)
    ankles = np.zeros((F, 2, 3))
    ankles[..., 2] = 0.3  # (swinging)
    for start in (2, 12, 22):  # the left's stances: the ankle lands low, stays 3 frames, the heel rises over 2
        contacts[start:start + 5, 1:3] = True
        ankles[start:start + 5, 0, 2] = [0.08, 0.081, 0.079, 0.1, 0.12]
    contacts[3, 0] = True  # (the heel touches once)
    motion = SimpleNamespace(sampler=SimpleNamespace(specs=specs, feet=feet, cols=[[0, 1, 2], [3, 4, 5]]),
                             contacts=contacts, ankles=ankles, floors=np.zeros((F, 2)), leg=1.0)
    h = SimpleNamespace(roles={"left foot": "foot.L", "right foot": "foot.R", "left toe": "toe.L"})
    assert sorted(flat_frames(h, motion)) == ["left toe"]  # (a standing rest's feet stand flat there)
    flat = flat_frames(h, motion, lowest=True)
    assert sorted(flat) == ["left foot", "left toe"], sorted(flat)  # (the right never touches)
    assert np.flatnonzero(flat["left foot"]).tolist() == [2, 3, 4, 12, 13, 14, 22, 23, 24]
    assert flat["left toe"].sum() == 15  # (a toe: its ball and tip touching)


def test_fingers_are_mapped_finger_by_finger_and_held_at_rest_where_the_source_has_none():
    """A Mixamo-named source curling its fingers (each finger its own curl) onto VRM names in an A-pose in
    centimetres: every segment of every finger points where the source's does; from a CMU clip (a thumb and one
    block for the fingers) the character's fingers are not keyed (held at its rest) and its hand still turns."""
    from mathutils import Euler

    scenes.fresh(bpy)
    source, _ = characters.build(bpy, "mixamo", name="Source")
    target, _ = characters.build(bpy, "vrm", rest="A", centimetres=True, name="Target")
    hs, ht = map_humanoid(source), map_humanoid(target)
    curls = {"Thumb": 15, "Index": 50, "Middle": 20, "Ring": 70, "Pinky": 35}
    source.animation_data_create().action = bpy.data.actions.new("curl")
    for f in (1, 11):
        for pb in source.pose.bones:
            finger = next((k for k in curls if k in pb.name), None)
            if finger:
                pb.rotation_mode = "XYZ"
                pb.rotation_euler = Euler((np.radians(curls[finger] * (f - 1) / 10), 0, 0))
                pb.keyframe_insert("rotation_euler", frame=f)
        source.pose.bones[hs.bone("pelvis")].location = (0, 0, 0.01 * f)
        source.pose.bones[hs.bone("pelvis")].keyframe_insert("location", frame=f)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(1, 11, ik=False))
    fingers = [m for m in report.mapping if m[0].split()[1:2] in (["thumb"], ["index"], ["middle"], ["ring"], ["little"])]
    assert len(fingers) == 30, fingers
    assert ("left ring 2", "mixamorig:LeftHandRing2", "J_Bip_L_Ring2") in report.mapping
    for f in (1, 6, 11):
        bpy.context.scene.frame_set(f)
        for _, sb, tb in fingers:
            angle = np.degrees(np.arccos(np.clip(_direction(source, sb) @ _direction(target, tb), -1, 1)))
            assert angle < 1.0, (f, sb, tb, angle)
    # A CMU clip: no fingers to pair; the character's are left at its rest, its hands follow the source's.
    cmu, first, _ = scenes.import_cmu(bpy, "02_01")
    report = retarget(bpy.context.scene, cmu, target, RetargetOptions(first, first + 20, ik=False))
    assert not [m for m in report.mapping if "index" in m[0] or "thumb" in m[0]]
    bag = target.animation_data.action.layers[0].strips[0].channelbag(target.animation_data.action_slot)
    keyed = {fc.data_path.split('"')[1] for fc in bag.fcurves if fc.data_path.startswith("pose.bones")}
    assert ht.bone("left hand") in keyed and not any("Index" in n or "Thumb" in n for n in keyed), keyed


def _legs_on_root():
    """CMU's walk and a game rig whose hips, legs and feet hang from a root bone on the floor: (source, its first
    frame, the rig, its roles)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target, roles = characters.build(bpy, "plain", fingers=False, feet_on_root=True, name="Game")
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    eb = target.data.edit_bones
    for name in (roles["left thigh"], roles["right thigh"]):
        eb[name].use_connect = False
        eb[name].parent = eb["Root"]
    bpy.ops.object.mode_set(mode="OBJECT")
    return source, first, target, roles


def test_legs_hanging_from_a_root_beside_the_hips_walk_with_the_hips():
    """A game rig whose hips and legs hang side by side from a root bone on the floor (Quaternius' platformer
    characters): mapped by its structure (the hips its pelvis, not the root), the thighs' heads follow the hips
    on every frame (keyed where the hips carry them), the limbs point as the source's, the feet planted, the walk
    carried by the hips, not the root."""
    source, first, target, roles = _legs_on_root()
    ht = map_humanoid(target)
    assert ht.bone("pelvis") == roles["pelvis"] and ht.bone("left thigh") == roles["left thigh"]
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 80))
    assert report.ok, report.text()
    hs = map_humanoid(source)
    pelvis = target.data.bones[roles["pelvis"]]
    angles = []
    for f in report.frames[::4]:
        bpy.context.scene.frame_set(f)
        assert target.pose.bones["Root"].location.length < 0.05, f  # (the walk is the hips': the foot placement's
        # body adjustment moves the root both hang from)
        for side in ("left", "right"):
            thigh = target.data.bones[roles[f"{side} thigh"]]
            carried = target.pose.bones[pelvis.name].matrix @ (pelvis.matrix_local.inverted() @ thigh.head_local)
            assert (carried - target.pose.bones[thigh.name].head).length < 1e-3, (f, side)
            for role in ("thigh", "shin", "upper_arm", "forearm"):
                s_dir = _joint_direction(source, hs, f"{side} {role}")
                t_dir = _joint_direction(target, ht, f"{side} {role}")
                angles.append(np.degrees(np.arccos(np.clip(s_dir @ t_dir, -1, 1))))
    assert np.mean(angles) < 10 and np.percentile(angles, 95) < 25, np.percentile(angles, [50, 95, 100])
    for side, a in report.feet.after.items():
        assert a["contact_frames"] > 20 and a["float_mm_max"] < 5, (side, a)


def test_legs_hanging_from_a_root_on_the_floor_are_planted():
    """A game rig whose legs and hips hang from a root bone standing on the floor, mapped with the root as its
    pelvis: its size is read from its skeleton, not from that pelvis's height (which made it a millimetre tall:
    the floor's raycasts started under the soles and missed, every foot off the terrain)."""
    source, first, target, roles = _legs_on_root()
    roles = dict(roles, pelvis="Root")
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 80, target_roles=roles))
    assert report.ok, report.text()
    for side, a in report.feet.after.items():
        assert a["frames_off_terrain"] == 0 and a["contact_frames"] > 20 and a["float_mm_max"] < 5, (side, a)


def test_feet_that_are_specks_pointing_back_with_no_toes_walk_toes_first():
    """A game character whose foot bones are specks pointing back, with no toe bones, and skin reaching forward
    (RobotExpressive's): its feet are turned as its soles point, heel to toe. Turned as the specks point, each foot
    walked backwards: its heel rose as its toes should, and a contact floated 12 mm."""
    from mathutils import Vector

    from fullbody_ik.rig.retarget_feet import humanoid_feet

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = characters.build(bpy, "plain", toes=False)[0]
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    for s in "LR":
        foot = target.data.edit_bones[f"Foot{s}"]
        foot.tail = foot.head + Vector((0.0, 0.005, 0.0))  # (a speck, pointing back: +Y)
    bpy.ops.object.mode_set(mode="OBJECT")
    boots = {}
    for s in "LR":
        head = np.array(target.data.bones[f"Foot{s}"].head_local)
        boots[s] = _boot_box(target, f"Foot{s}", head)
    feet = humanoid_feet(target, map_humanoid(target))
    assert all(np.array(p.rest)[1] < -0.1 for f in feet for p in f.points if p.name == "toe")  # (read from the skin)
    last = first + 120
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    pelvis = target.pose.bones[map_humanoid(target).bone("pelvis")]
    bpy.context.scene.frame_set(first)
    start = np.array(target.matrix_world @ pelvis.head)
    bpy.context.scene.frame_set(last)
    travel = np.array(target.matrix_world @ pelvis.head) - start
    travel = travel[:2] / np.linalg.norm(travel[:2])
    dots = []
    for f in range(first, last + 1, 6):
        bpy.context.scene.frame_set(f)
        for box in boots.values():
            ev = box.evaluated_get(bpy.context.evaluated_depsgraph_get())
            co = np.array([ev.matrix_world @ v.co for v in ev.data.vertices])
            front, back = co[[0, 1, 4, 5]].mean(axis=0), co[[2, 3, 6, 7]].mean(axis=0)  # (the -Y end, the +Y end)
            d = (front - back)[:2]
            dots.append(float(d @ travel / np.linalg.norm(d)))
    assert np.median(dots) > 0.8 and min(dots) > 0.0, np.percentile(dots, [0, 50, 100])


def _boot_box(obj, bone, ankle):
    """A boot skinned to ``bone``: from 6 cm behind the ankle to 24 cm before it (the character faces -Y), 10 cm wide,
    from the ankle's height to the floor."""
    from helpers import skinned_box

    return skinned_box(bpy, obj, bone, (ankle[0] - 0.05, ankle[1] - 0.24, 0.0), (ankle[0] + 0.05, ankle[1] + 0.06,
                                                                                 ankle[2]), "boot")


def test_a_deforming_bone_left_on_the_root_at_a_foot_rides_that_foot():
    """A game rig's front foot left on the root where its leg IK was lost on export (Quaternius' mech: the leg ends
    in a back claw, mapped as the foot): keyed to keep its rest place on the mapped foot as Blender shows it, and
    named in the report. Left as it was, it stood where the rest pose put it while the character walked away."""
    from mathutils import Vector

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = characters.build(bpy, "plain")[0]
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    for s in "LR":
        foot = target.data.edit_bones[f"Foot{s}"]
        claw = target.data.edit_bones.new(f"Claw{s}")  # (no parent: on the armature's root)
        claw.head, claw.tail = foot.head + Vector((0.0, -0.02, -0.03)), foot.head + Vector((0.0, -0.15, -0.06))
    bpy.ops.object.mode_set(mode="OBJECT")
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 60))
    assert "'ClawL' ('FootL')" in report.text() and "'ClawR' ('FootR')" in report.text(), report.text()
    bones, pose = target.data.bones, target.pose.bones
    moved = []
    for f in report.frames[::5]:
        bpy.context.scene.frame_set(f)
        for s in "LR":
            rest = bones[f"Foot{s}"].matrix_local.inverted() @ bones[f"Claw{s}"].matrix_local
            want = pose[f"Foot{s}"].matrix @ rest
            got = pose[f"Claw{s}"].matrix
            assert (got.translation - want.translation).length < 1e-3, (f, s)
            assert got.to_quaternion().rotation_difference(want.to_quaternion()).angle < 1e-3, (f, s)
            moved.append((got.translation - bones[f"Claw{s}"].head_local).length)
    assert max(moved) > 0.5  # (it walked with the character)


def test_a_wrist_bent_in_a_cmu_clip_is_bent_on_the_character():
    """CMU's hand bone has no length (its fingers' block and thumb start at its head): the wrist's bend is in the
    bone after it, the palm (LeftFingerBase). The character's hands point where the source's palms do."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = scenes.metarig(bpy)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 40, ik=False))
    assert ("left hand", "LeftFingerBase", "hand.L") in report.mapping, report.mapping
    hs, ht = map_humanoid(source), map_humanoid(target)
    angles, bends = [], []
    for f in range(first, first + 41, 4):
        bpy.context.scene.frame_set(f)
        for side in ("left", "right"):
            a, b = _hand_direction(source, hs, side), _hand_direction(target, ht, side)
            angles.append(np.degrees(np.arccos(np.clip(a @ b, -1, 1))))
            fore = _direction(source, hs.bone(f"{side} forearm"))
            bends.append(np.degrees(np.arccos(np.clip(a @ fore, -1, 1))))
    assert np.median(bends) > 15  # (the clip's wrists are bent: what is measured)
    assert np.max(angles) < 8, np.round(angles, 1)


def test_a_hand_points_where_its_palm_ends_not_where_a_slot_under_it_hangs():
    """KayKit's hand carries a weapon slot hanging below its palm, deeper in the chain than the palm's end: the
    hand is aligned by its knuckles, so its wrist bends as the source's (it bent 19 degrees further on every
    frame, taken to point at the slot)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = _kaykit_or_skip()
    retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 40, ik=False))
    T = target.pose.bones
    at = lambda obj, bone: np.array(obj.matrix_world @ obj.pose.bones[bone].head)  # noqa: E731
    off = []
    for f in range(first, first + 41, 8):
        bpy.context.scene.frame_set(f)
        for s, x in (("Left", "l"), ("Right", "r")):
            a = at(source, f"{s}HandIndex1") - at(source, f"{s}FingerBase")  # CMU's palm: finger base to knuckle
            b = at(target, f"hand.{x}") - at(target, f"wrist.{x}")
            off.append(np.degrees(np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))))
    assert "handslot.l" in T and np.max(off) < 3, np.round(off, 1)


def _hip_height(obj, h):
    """The hips' height over the soles in the rest pose (world): over its skin's lowest point, or with no skin
    over the lowest of its feet's joints."""
    W = obj.matrix_world
    hips = np.mean([(W @ obj.data.bones[h.bone(f"{s} thigh")].head_local).z for s in ("left", "right")])
    skins = [o for o in bpy.data.objects if o.type == "MESH" and o.find_armature() is obj]
    if skins:
        low = min((o.matrix_world @ v.co).z for o in skins for v in o.data.vertices)
    else:
        low = min((W @ obj.data.bones[h.bone(f"{s} {r}")].head_local).z for s in ("left", "right")
                  for r in ("foot", "toe") if h.bone(f"{s} {r}"))
    return float(hips - low)


def test_a_chibi_with_short_legs_and_big_boots_lifts_its_feet_for_its_legs_as_the_source(tmp_path):
    """KayKit's Barbarian (short legs, big boots) through the command line, the clip at the scene's rate: its
    ankles rise, for its hips' height, as the source's do (within the aims, 0.8-1.25 of it: the joint angles
    alone lifted them half as high)."""
    import json

    from test_cli import run

    out = tmp_path / "out.blend"
    proc = run("retarget", scenes.BVH + "/cmu_02_01.bvh", scenes.ROOT + "/data/characters/KayKit_Barbarian.glb",
               "--output", out, "--clip-rate", "scene", "--json")
    if proc.returncode and "draco" in proc.stderr.lower():
        pytest.skip(NO_DRACO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, last = json.loads(proc.stdout)["report"]["frames"]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    target = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    ht = map_humanoid(target)
    rises = [_ankle_rise(target, ht, range(first, last + 1), bpy.context.scene.render.fps) / _hip_height(target, ht)]
    scenes.fresh(bpy)
    source, first, last = scenes.import_cmu(bpy, "02_01")
    hs = map_humanoid(source)
    rises.append(_ankle_rise(source, hs, range(first, last + 1), 120) / _hip_height(source, hs))
    ratio = rises[0] / rises[1]
    assert np.all((0.8 < ratio) & (ratio < 1.25)), ratio


def _ankle_rise(obj, h, frames, window):
    """(left, right) the median over the swings of each ankle's highest rise over where it stood (its lowest
    within ``window`` frames either side: a second's worth holds a stance)."""
    out = []
    for side in ("left", "right"):
        z = []
        for f in frames:
            bpy.context.scene.frame_set(f)
            z.append((obj.matrix_world @ obj.pose.bones[h.bone(f"{side} foot")].head).z)
        z = np.array(z)
        rise = z - np.array([z[max(0, i - window):i + window + 1].min() for i in range(len(z))])
        near = max(1, window // 4)
        peaks = [i for i in range(len(z)) if rise[i] >= rise[max(0, i - near):i + near + 1].max()
                 and rise[i] > 0.5 * rise.max()]
        out.append(float(np.median(rise[peaks])))
    return np.array(out)

def test_a_foot_leaving_the_ground_on_its_toe_does_not_jump():
    """KayKit's Barbarian takes a CMU walk: as each foot leaves the ground its copied toe curls under the floor. The
    foot rests on the ground, its toe bent up onto it, and the ankle moves no faster as its contacts change than
    as it swings (it jumped 6 cm in one frame, 19 times its swing's usual step, the frame the ball lifted)."""
    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    target = _kaykit_or_skip()
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, first + 200))
    assert report.ok, report.text()
    ht = map_humanoid(target)
    bag = target.animation_data.action.layers[0].strips[0].channelbag(target.animation_data.action_slot)
    for side in ("left", "right"):
        channels = [fc for fc in bag.fcurves if fc.data_path.startswith(f'["fbik_contact_{side}')]
        z, touch = [], []
        for f in report.frames:
            bpy.context.scene.frame_set(f)
            z.append((target.matrix_world @ target.pose.bones[ht.bone(f"{side} foot")].head).z)
            touch.append(tuple(round(fc.evaluate(f)) for fc in channels))
        step = np.abs(np.diff(z))
        changes = [i for i in range(len(touch) - 1) if touch[i] != touch[i + 1]]
        assert len(changes) >= 4, touch
        assert step[changes].max() < 5 * np.percentile(step, 95), (side, step[changes].max(), np.percentile(step, 95))


def test_a_character_whose_rest_pose_lies_down_walks_stood_up_feet_forward_on_its_floor():
    """A glTF whose rest lies along -Y and whose root's pose stands it up (Khronos' BrainStem): its feet's soles
    are read from the rest stood up, and it walks on the floor under that. Read from the lying rest, its soles ran
    up its shins: the feet walked pointing backward (175 degrees off the source's) and the skin stood 7 cm over
    the floor where the foot placement held them."""
    import math

    from mathutils import Matrix

    scenes.fresh(bpy)
    source, first, _ = scenes.import_cmu(bpy, "02_01")
    last = first + 60
    target = scenes.import_mannequiny(bpy)[0]
    skin = [o for o in bpy.data.objects if o.type == "MESH" and any(
        m.type == "ARMATURE" and m.object == target for m in o.modifiers)]
    target.data.pose_position = "REST"
    bpy.context.view_layer.update()
    floor = min(float((o.matrix_world @ v.co).z) for o in skin for v in o.data.vertices)  # where it stands
    target.data.pose_position = "POSE"
    W = target.matrix_world.copy()
    lie = Matrix.Rotation(math.radians(-90.0), 4, "X")  # (about the armature's origin: head toward -Y)
    for o in skin:  # the skin laid down with its rest, so it stays bound as it was
        o.data.transform(o.matrix_world.inverted() @ W @ lie @ W.inverted() @ o.matrix_world)
    bpy.context.view_layer.objects.active = target
    bpy.ops.object.mode_set(mode="EDIT")
    placed = {b.name: b.matrix.copy() for b in target.data.edit_bones}
    for b in target.data.edit_bones:
        b.matrix = lie @ placed[b.name]
    bpy.ops.object.mode_set(mode="OBJECT")
    ht = map_humanoid(target)
    assert (target.data.bones[ht.bone("head")].head_local - target.data.bones[ht.bone("left foot")].head_local).z \
        < 0.1  # (lying)
    target.animation_data.action = bpy.data.actions.new("stood up")  # its root's pose stands it up
    for pb in target.pose.bones:
        pb.matrix_basis = Matrix.Identity(4)
    for b in target.data.bones:
        if b.parent is None:
            pb = target.pose.bones[b.name]
            pb.matrix = lie.inverted() @ b.matrix_local
            pb.keyframe_insert("rotation_quaternion", frame=first)
            pb.keyframe_insert("location", frame=first)
    bpy.context.scene.frame_set(first)
    report = retarget(bpy.context.scene, source, target, RetargetOptions(first, last))
    assert report.ok, report.text()
    assert any("character's rest pose does not stand" in w for w in report.warnings), report.warnings
    hs = map_humanoid(source)
    heading = []  # feet forward: the ankle to the ball as the source's, seen from above, where the source's is flat
    for f in range(first, last + 1, 2):
        bpy.context.scene.frame_set(f)
        for side in ("left", "right"):
            d = [np.array(o.matrix_world @ o.pose.bones[h.bone(f"{side} toe")].head -
                          o.matrix_world @ o.pose.bones[h.bone(f"{side} foot")].head) for o, h in
                 ((source, hs), (target, ht))]
            if np.linalg.norm(d[0][:2]) > 0.9 * np.linalg.norm(d[0]):
                cos = d[0][:2] @ d[1][:2] / (np.linalg.norm(d[0][:2]) * np.linalg.norm(d[1][:2]))
                heading.append(float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))))
    assert len(heading) > 20 and np.max(heading) < 25.0, (len(heading), np.percentile(heading, [50, 100]))
    gaps = _flat_foot_skin_gaps(source, target, first, last, lambda x, y: np.full(np.shape(x), floor))
    every = np.concatenate([gaps["left"], gaps["right"]])
    assert len(every) > 20 and np.median(np.abs(every)) < 0.005 and np.max(np.abs(every)) < 0.02, \
        np.percentile(every, [0, 50, 100])


def test_a_standing_foot_swung_round_by_wide_hips_as_the_body_turns_is_kept_by_the_pelvis():
    """A character whose hips are wider than the source's turns about its pelvis as the source's does: its standing
    foot, half a metre out, swings round a quarter circle (a cartoon's moved a metre in a walk that turns back, and
    the foot placement pinned it there, its legs 50 degrees off the source's). The pelvis travels besides by what
    keeps that foot where it stands."""
    from types import SimpleNamespace

    from fullbody_ik.rig.feet import SolePoint
    from fullbody_ik.rig.retarget_feet import planted_travel
    from fullbody_ik.solvers.rotations import exp_so3

    F = 21
    turn = np.radians(np.linspace(0.0, 90.0, F))
    R = np.array([exp_so3(np.array([0.0, 0.0, a])) for a in turn])
    out = np.array([0.5, 0.0, 0.1])  # the left ankle, half a metre from the pelvis
    ankles = np.zeros((F, 2, 3))
    ankles[:, 0] = R @ out
    ankles[:, 1] = R @ (out * [-1.0, 1.0, 1.0]) + [0.0, 0.0, 0.2]  # (the right foot swings)
    pose = {}
    feet = []
    for side, ankle in (("left", "foot.L"), ("right", "foot.R")):
        pose[ankle] = np.tile(np.eye(4), (F, 1, 1))
        pose[ankle][:, :3, :3] = R
        feet.append(SimpleNamespace(side=side, ankle=ankle, points=[
            SolePoint("heel", ankle, np.array([0.0, -0.05, -0.1]), None),
            SolePoint("ball", ankle, np.array([0.0, 0.15, -0.1]), None)]))
    specs = [(k, name, f.ankle, None) for k, f in enumerate(feet) for name in ("heel", "ball")]
    contacts = np.zeros((F, 4), dtype=bool)
    contacts[:, :2] = True  # the left foot stands throughout
    column = {(feet[k].side, name): j for j, (k, name, _, _) in enumerate(specs)}
    motion = SimpleNamespace(sampler=SimpleNamespace(feet=feet, specs=specs, column=column), contacts=contacts,
                             fps=24.0)
    travel = planted_travel(motion, feet, pose, ankles, lambda p: p, np.zeros((F, 3)), 0.0)
    standing = np.mean([ankles[:, 0] + R @ p.offset for p in feet[0].points], axis=0)[:, :2] + travel
    assert np.linalg.norm(standing[-1] - standing[0]) < 5e-3 < 0.5 < np.linalg.norm(travel[-1]), travel[-1]
    assert np.abs(np.diff(standing, axis=0)).max() < 4e-3  # (of 39 mm a frame it swings round)
    # A foot sliding slower than the slack (a stride a little unlike the source's) is left as it is
    step = np.linalg.norm(np.diff(standing - travel, axis=0), axis=1)
    slow = planted_travel(motion, feet, pose, ankles, lambda p: p, np.zeros((F, 3)), 1.01 * step.max())
    assert np.abs(slow).max() < 1e-12
    part = planted_travel(motion, feet, pose, ankles, lambda p: p, np.zeros((F, 3)), 0.5 * step.max())
    assert 0.3 * np.linalg.norm(travel[-1]) < np.linalg.norm(part[-1]) < 0.7 * np.linalg.norm(travel[-1])
