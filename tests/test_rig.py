# SPDX-License-Identifier: GPL-3.0-or-later
"""The rig bridge on real rigs in the real bpy 5.0.1: Rigify's human metarig and a CMU skeleton from BVH."""

import os

import numpy as np
import pytest
from helpers import ROOT

bpy = pytest.importorskip("bpy")

from fullbody_ik.rig import RigError, build_tree, read_pose, write_pose  # noqa: E402
from fullbody_ik.rig.armature import (bone_rotations, poses_from_basis, read_frame_input,  # noqa: E402
                                      rotation_channel, rotation_channels)
from fullbody_ik.solvers.rotations import exp_so3, quaternion_to_matrix  # noqa: E402

BVH = os.path.join(ROOT, "data", "bvh", "cmu_02_01.bvh")


def metarig():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.preferences.addon_enable(module="rigify")  # bundled; its metarig operators come with it
    bpy.ops.object.armature_human_metarig_add()
    return bpy.context.object


def cmu_skeleton():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_anim.bvh(filepath=BVH)
    return bpy.context.object


def pose_matrices(obj):
    """Blender's evaluated armature-space pose matrices, by bone name."""
    bpy.context.view_layer.update()
    return {pb.name: np.array(pb.matrix) for pb in obj.pose.bones}


def random_limits(obj, rng):
    for pb in obj.pose.bones:
        for axis in "xyz":
            if rng.random() < 0.5:
                setattr(pb, f"use_ik_limit_{axis}", True)
                setattr(pb, f"ik_min_{axis}", -rng.uniform(0.1, 2.5))
                setattr(pb, f"ik_max_{axis}", rng.uniform(0.1, 2.5))
            if rng.random() < 0.15:
                setattr(pb, f"lock_ik_{axis}", True)


def random_stretch(obj, rng):
    """IK stretch on about a third of the bones; some bones do not inherit their parent's scale."""
    for pb in obj.pose.bones:
        if rng.random() < 0.35:
            pb.ik_stretch = rng.uniform(0.1, 1.0)
        if rng.random() < 0.2:
            obj.data.bones[pb.name].inherit_scale = "NONE"


@pytest.mark.parametrize("make,free_root,limits", [(metarig, False, False), (metarig, True, True),
                                                   (cmu_skeleton, False, False), (cmu_skeleton, True, True),
                                                   (metarig, True, "stretch"), (cmu_skeleton, False, "stretch")])
def test_fk_equals_blenders_evaluated_pose(make, free_root, limits):
    obj = make()
    rng = np.random.default_rng(0)
    if limits:
        random_limits(obj, rng)
    if limits == "stretch":
        random_stretch(obj, rng)
    tree, mapping = build_tree(obj, free_root=free_root)
    if limits == "stretch":
        assert len(mapping.stretch) > 5
    assert set(mapping.bones) == {b.name for b in obj.data.bones}
    scale = max(obj.data.bones[0].length, 1.0)
    bases, backs = [], []
    for q in tree.random_configurations(rng, 3):
        write_pose(obj, tree, mapping, q)
        blender = pose_matrices(obj)
        ours = tree.fk(q)
        for name in mapping.bones:
            assert np.allclose(ours[name], blender[name], atol=1e-5 * scale), name
        # Reading the pose back gives each bone the same rotation (Blender stores float32), except where
        # Blender's own swing/twist reading is singular: swing near 180 degrees.
        back = read_pose(obj, tree, mapping)
        bases.append(read_frame_input(obj, tree, mapping))
        backs.append(back)
        for name, k in mapping.stretch.items():  # scales read back as written
            assert back[k] == pytest.approx(q[k], rel=1e-5), name
        written, read = bone_rotations(tree, mapping, q), bone_rotations(tree, mapping, back)
        for name in mapping.bones:
            R = written[name][0]
            if 1.0 + R[1, 1] > 0.05 and 1.0 + np.trace(R) > 0.05:  # (and turns near 180 degrees: float32)
                assert np.allclose(read[name][0], R, atol=1e-4), name
    # A bake reads every frame's bases and turns them into configurations at once: the same as one by one.
    assert np.allclose(poses_from_basis(tree, mapping, np.array(bases)), backs, rtol=0, atol=1e-10)


def test_rotation_modes_are_kept_and_continuous():
    obj = metarig()
    modes = ["QUATERNION", "XYZ", "ZXY", "YXZ", "AXIS_ANGLE", "ZYX"]
    for i, pb in enumerate(obj.pose.bones):
        pb.rotation_mode = modes[i % len(modes)]
    tree, mapping = build_tree(obj)
    rng = np.random.default_rng(1)
    q = tree.random_configurations(rng, 1)[0] * 0.8
    previous = None
    for step in range(10):  # a smooth path: no sign flips or 2 pi jumps between neighbouring frames
        q_t = tree.project(q + 0.04 * step)
        write_pose(obj, tree, mapping, q_t)
        assert [pb.rotation_mode for pb in obj.pose.bones][: len(modes)] == modes
        now = {pb.name: (np.array(pb.rotation_quaternion), np.array(pb.rotation_euler),
                         np.array(pb.rotation_axis_angle)) for pb in obj.pose.bones}
        if previous is not None:
            for pb in obj.pose.bones:
                (q0, e0, a0), (q1, e1, a1) = previous[pb.name], now[pb.name]
                if pb.rotation_mode == "QUATERNION":
                    assert q0 @ q1 > 0.0, pb.name
                elif pb.rotation_mode == "AXIS_ANGLE":
                    assert a0[1:] @ a1[1:] > 0.0, pb.name
                else:
                    assert np.max(np.abs(e1 - e0)) < np.pi, pb.name
        previous = now
        blender = pose_matrices(obj)
        ours = tree.fk(q_t)
        assert all(np.allclose(ours[n], blender[n], atol=1e-5) for n in mapping.bones)


def test_bad_armatures_are_refused_clearly():
    obj = metarig()
    obj.scale = (1.0, 2.0, 1.0)
    with pytest.raises(RigError, match=r"non-uniformly \(1\.0, 2\.0, 1\.0\)"):  # plain numbers (numpy 2 reprs)
        build_tree(obj)
    obj.scale = (-1.0, -1.0, -1.0)
    with pytest.raises(RigError, match=r"negative scale \(-1\.0, -1\.0, -1\.0\) \(mirrored\)"):
        build_tree(obj)
    obj.scale = (1.0, 1.0, 1.0)
    parent = bpy.data.objects.new("squash", None)
    bpy.context.scene.collection.objects.link(parent)
    parent.scale = (1.0, 1.0, 0.5)
    obj.parent = parent
    bpy.context.view_layer.update()
    from fullbody_ik.rig.goals import world_scale
    with pytest.raises(RigError, match=r"non-uniformly in the world \(1\.0, 1\.0, 0\.5\)"):
        world_scale(obj)  # a parent's non-uniform scale, checked at every frame
    parent.scale = (-2.0, -2.0, -2.0)
    bpy.context.view_layer.update()
    with pytest.raises(RigError, match="mirrored in the world"):
        world_scale(obj)
    obj.parent = None
    with pytest.raises(RigError, match="armature"):
        build_tree(None)
    bpy.ops.object.empty_add()
    with pytest.raises(RigError, match="armature"):
        build_tree(bpy.context.object)


def test_blenders_standard_ik_under_limits_stays_feasible_for_our_tree():
    """Poses that Blender's own IK solver produces under IK limits are inside our tree's feasible set."""
    from fullbody_ik.solvers.joints import bone_values

    obj = metarig()
    rng = np.random.default_rng(3)
    chain = ["upper_arm.L", "forearm.L", "hand.L"]
    for name in chain:
        pb = obj.pose.bones[name]
        for axis in "xyz":
            setattr(pb, f"use_ik_limit_{axis}", True)
            setattr(pb, f"ik_min_{axis}", -rng.uniform(0.2, 1.2))
            setattr(pb, f"ik_max_{axis}", rng.uniform(0.2, 1.2))
    bpy.ops.object.empty_add(location=(0.9, -0.4, 1.1))
    goal = bpy.context.object
    ik = obj.pose.bones["hand.L"].constraints.new("IK")
    ik.target, ik.chain_count = goal, 3
    tree, mapping = build_tree(obj)
    rest = {b.name: np.array(b.matrix_local) for b in obj.data.bones}
    checked = 0
    for location in rng.uniform([-0.5, -1.0, 0.3], [1.5, 1.0, 2.0], size=(12, 3)):
        goal.location = location
        pose = pose_matrices(obj)
        for name in chain:
            bone = obj.data.bones[name]
            parent = pose[bone.parent.name] @ np.linalg.inv(rest[bone.parent.name]) @ rest[name]
            R = (np.linalg.inv(parent) @ pose[name])[:3, :3]
            R /= np.linalg.norm(R, axis=0)
            values = bone_values(mapping.joints[name], R)
            q = np.zeros(tree.n)
            q[mapping.variables[name]] = values
            projected = tree.project(q)[mapping.variables[name]]
            assert np.allclose(projected, values, atol=2e-3), (name, values, projected)
            checked += 1
    assert checked == 36


def test_limit_rotation_constraints_become_limits_when_asked():
    obj = metarig()
    pb = obj.pose.bones["forearm.L"]
    c = pb.constraints.new("LIMIT_ROTATION")
    c.owner_space = "LOCAL"
    c.use_limit_x, c.min_x, c.max_x = True, -0.3, 1.1
    tree, mapping = build_tree(obj)
    assert "x" not in mapping.joints["forearm.L"].limits
    tree, mapping = build_tree(obj, use_limit_rotation=True)
    assert mapping.joints["forearm.L"].limits["x"] == pytest.approx((-0.3, 1.1))
    pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -1.0, 0.5  # intersected with the IK limits
    tree, mapping = build_tree(obj, use_limit_rotation=True)
    assert mapping.joints["forearm.L"].limits["x"] == pytest.approx((-0.3, 0.5))


def test_only_the_chains_to_the_goal_bones_are_solved():
    obj = metarig()
    tree, mapping = build_tree(obj, bones={"hand.L", "foot.R"})
    chain = set()
    for name in ("hand.L", "foot.R"):
        bone = obj.data.bones[name]
        while bone:
            chain.add(bone.name)
            bone = bone.parent
    assert set(mapping.bones) == chain and len(chain) < len(obj.data.bones) / 4
    q = tree.random_configurations(2, 1)[0]
    write_pose(obj, tree, mapping, q)
    blender = pose_matrices(obj)  # the other bones follow in Blender; ours agree on the chains
    ours = tree.fk(q)
    assert all(np.allclose(ours[n], blender[n], atol=1e-5) for n in mapping.bones)
    with pytest.raises(RigError, match="none of the goals"):
        build_tree(obj, bones={"no such bone"})


def test_fully_locked_bones_keep_their_current_rotation():
    obj = metarig()
    pb = obj.pose.bones["upper_arm.L"]
    pb.rotation_mode = "XYZ"
    pb.rotation_euler = (0.3, -0.2, 0.5)
    pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    tree, mapping = build_tree(obj)
    assert len(mapping.variables["upper_arm.L"]) == 0
    q = tree.random_configurations(5, 1)[0]
    write_pose(obj, tree, mapping, q)
    assert tuple(pb.rotation_euler) == pytest.approx((0.3, -0.2, 0.5))
    blender = pose_matrices(obj)
    ours = tree.fk(q)
    assert all(np.allclose(ours[n], blender[n], atol=1e-5) for n in mapping.bones)


def test_ik_stretch_reaches_beyond_the_chain_as_blenders_ik_does():
    """A target beyond reach: with IK Stretch the arm scales to it (Blender's IK constraint with Stretch
    reaches it too); with Stretch off, or no ik_stretch, it cannot."""
    from fullbody_ik.solvers import Position, solve

    obj = metarig()
    chain = ("upper_arm.L", "forearm.L", "hand.L")
    for pb in obj.pose.bones:
        if pb.name in chain:
            pb.ik_stretch = 0.5
        else:  # only the arm moves
            pb.lock_ik_x = pb.lock_ik_y = pb.lock_ik_z = True
    bpy.context.view_layer.update()
    shoulder = np.array(obj.pose.bones["upper_arm.L"].head)
    tip = np.array(obj.pose.bones["hand.L"].tail)
    target = shoulder + 1.6 * (tip - shoulder)  # 60 % beyond the straight arm
    for use_stretch in (True, False):
        for pb in obj.pose.bones:
            pb.scale, pb.rotation_quaternion = (1, 1, 1), (1, 0, 0, 0)
        tree, mapping = build_tree(obj, bones={"hand.L"}, use_stretch=use_stretch)
        length = obj.data.bones["hand.L"].length
        res = solve(tree, [Position("hand.L", target, offset=(0, length, 0))], read_pose(obj, tree, mapping),
                    time_limit=0.5, rng=0)
        write_pose(obj, tree, mapping, res.q)
        bpy.context.view_layer.update()
        error = np.linalg.norm(np.array(obj.pose.bones["hand.L"].tail) - target)
        if use_stretch:
            assert res.success and error < 1e-3
            assert max(np.linalg.norm(np.array(obj.pose.bones[b].matrix)[:3, 0]) for b in chain) > 1.2
        else:
            assert error > 0.1 * np.linalg.norm(tip - shoulder)
    # Blender's own IK with Stretch reaches the same target.
    for pb in obj.pose.bones:
        pb.scale = (1, 1, 1)
        pb.rotation_quaternion = (1, 0, 0, 0)
    empty = bpy.data.objects.new("target", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.location = obj.matrix_world @ __import__("mathutils").Vector(target)
    c = obj.pose.bones["hand.L"].constraints.new("IK")
    c.target, c.chain_count, c.use_stretch = empty, 3, True
    bpy.context.view_layer.update()
    assert np.linalg.norm(np.array(obj.pose.bones["hand.L"].tail) - target) < 1e-2


def test_what_the_solve_does_not_model_is_named():
    """Constraints on solved bones and bones that do not inherit rotation change what Blender shows: the
    mapping names them (the operators warn), and only for the bones being solved."""
    obj = metarig()
    tree, mapping = build_tree(obj, bones={"hand.L"})
    assert mapping.unmodeled == []
    obj.pose.bones["forearm.L"].constraints.new("COPY_ROTATION")
    obj.data.bones["upper_arm.L"].use_inherit_rotation = False
    obj.pose.bones["foot.R"].constraints.new("COPY_ROTATION")  # not on the chain to hand.L
    tree, mapping = build_tree(obj, bones={"hand.L"})
    assert any(m.startswith("forearm.L: copy rotation") for m in mapping.unmodeled)
    assert any(m.startswith("upper_arm.L: does not inherit") for m in mapping.unmodeled)
    assert not any(m.startswith("foot.R") for m in mapping.unmodeled)



@pytest.mark.parametrize("mode", ["QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"])
def test_a_bakes_rotation_channels_are_blenders_for_every_frame_at_once(mode):
    """A bake turns every frame's rotations into channel values at once: those mathutils gives frame after frame
    (to its float32), on a path turning several times around, through gimbal lock and the identity."""
    rng = np.random.default_rng(1)
    R = exp_so3(np.cumsum(rng.normal(scale=0.3, size=(400, 3)), axis=0))
    R[150] = exp_so3(np.array([0.0, np.pi / 2, 0.0]))  # gimbal lock of XYZ
    R[151] = np.eye(3)
    start = {"QUATERNION": (-1.0, 0.0, 0.0, 0.0), "AXIS_ANGLE": (0.0, 0.0, -1.0, 0.0)}.get(mode, (0.3, -7.0, 2.0))
    previous, expected = start, []
    for r in R:
        previous = rotation_channel(mode, r, previous)
        expected.append(previous)
    expected, ours = np.array(expected), rotation_channels(mode, R, start)
    if mode != "AXIS_ANGLE":
        assert np.abs(ours - expected).max() < 1e-5
        return
    # mathutils' axis-angle is float32's acos near the identity (off by up to 4e-3 there): ours is the same
    # rotation, more exactly, each axis on the side of the one before (after the identity, whose axis is none,
    # either side is: there mathutils' float32 noise chooses).
    q = np.column_stack([np.cos(ours[:, 0] / 2), np.sin(ours[:, 0] / 2)[:, None] * ours[:, 1:]])
    assert np.abs(quaternion_to_matrix(q) - R).max() < 1e-6
    assert np.all(np.einsum("fi,fi->f", ours[1:, 1:], ours[:-1, 1:]) >= 0) and ours[0, 1:] @ start[1:] >= 0
    assert np.abs(ours[:151] - expected[:151]).max() < 1e-2
    assert np.allclose(np.abs(ours[151, 1:]), (0.0, 1.0, 0.0))  # the identity's axis: Y, as Blender's


def test_an_objects_world_matrix_is_inverted_as_numpy_does_and_a_singular_one_refused():
    """The goals' targets go into the armature's space through the inverse of its world matrix, computed from the
    3x3 part's cofactors (scalar arithmetic, float64): numpy's float64 inverse to rounding, for a turned, scaled
    and moved matrix read from Blender (np.array of it is float32: inverted as that, it was 1e-8 off); a matrix
    scaled to zero is a RigError, not a crash."""
    from mathutils import Euler, Matrix, Vector

    from fullbody_ik.rig.goals import _affine_inverse

    M = Matrix.LocRotScale(Vector((1.5, -2.0, 0.3)), Euler((0.3, -1.1, 2.0)), Vector((2.5, 2.5, 2.5)))
    assert np.abs(_affine_inverse(M) - np.linalg.inv(np.array(M, dtype=float))).max() < 1e-12
    with pytest.raises(RigError, match="cannot be inverted"):
        _affine_inverse(Matrix.LocRotScale(Vector((1, 2, 3)), Euler((0.3, 0, 0)), Vector((0, 1, 1))))
