# SPDX-License-Identifier: GPL-3.0-or-later
"""The kinematic tree: URDF, forward kinematics, Jacobians, Blender's bone limits, projection."""

import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from helpers import ARMS, numeric_jacobian, random_tree, rotation_difference, transform, urdf

from fullbody_ik.solvers import BoneJoint, FreeJoint, Joint, Pose, Tree, compiled, solve
from fullbody_ik.solvers.rotations import axis_rotation, exp_so3, log_so3, rpy_matrix
from fullbody_ik.solvers.tree import BatchState


# --- URDF --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,base,tip,n", ARMS)
def test_urdf_arms_load_with_limits(name, base, tip, n):
    tree = Tree.from_urdf(urdf(name), base_link=base, tip_links=tip)
    assert tree.n == n
    assert tree.link_names[0] == base and tip in tree.link_names
    assert len(tree.joint_names) == n
    assert np.all(tree.lower <= tree.upper)
    # Every joint of the chain is in the file with these limits.
    doc = ET.parse(urdf(name)).getroot()
    for jname, lo, hi in zip(tree.joint_names, tree.lower, tree.upper):
        el = next(j for j in doc.iter("joint") if j.get("name") == jname)
        if el.get("type") == "continuous":
            assert lo == -np.inf and hi == np.inf
        else:
            assert lo == pytest.approx(float(el.find("limit").get("lower")))
            assert hi == pytest.approx(float(el.find("limit").get("upper")))


def test_pr2_continuous_joints_are_unbounded_and_wrapped():
    tree = Tree.from_urdf(urdf("pr2.urdf"), "torso_lift_link", "r_wrist_roll_link")
    cont = [i for i in range(tree.n) if not np.isfinite(tree.lower[i])]
    assert len(cont) == 2
    q = np.zeros(tree.n)
    q[cont] = [7.0, -9.0]
    p = tree.project(q)
    assert np.all(np.abs(p[cont]) <= np.pi)
    # Wrapping keeps the pose.
    for link in tree.link_names:
        assert np.allclose(tree.fk(q)[link], tree.fk(p)[link], atol=1e-12)


def test_full_turn_joints_wrap_into_their_range_and_are_never_held():
    """ur5's joints span +-2 pi (one +-pi): a value past a bound has an equal angle inside the range, so it is
    wrapped there (the same link poses), not clipped; values inside stay as they are; a joint on such a bound is
    not held against a step; a joint whose range is less than a turn is still clipped (numpy and compiled)."""
    from fullbody_ik.solvers import compiled

    tree = Tree.from_urdf(urdf("ur5.urdf"), "base_link", "ee_link")
    assert np.allclose(tree.upper - tree.lower, [4 * np.pi] * 2 + [2 * np.pi] + [4 * np.pi] * 3)
    q = np.array([7.0, -6.5, 3.5, 5.0, -13.0, 0.25])
    want = np.array([7.0 - 2 * np.pi, -6.5 + 2 * np.pi, 3.5 - 2 * np.pi, 5.0, -13.0 + 4 * np.pi, 0.25])
    for p in (tree.project(q[None])[0], tree.project(q)):  # numpy (a batch), compiled (one configuration)
        assert np.allclose(p, want, atol=1e-12)
        for link in tree.link_names:
            assert np.allclose(tree.fk(q)[link], tree.fk(p)[link], atol=1e-9)
    if compiled.available():
        T = compiled._with_origins(tree)  # (packed)
        Q = 20.0 * np.random.default_rng(3).normal(size=(200, tree.n))
        assert np.abs(np.array([compiled.project_packed(x, T) for x in Q]) - tree.project(Q)).max() < 1e-12
    assert not tree.held(tree.upper.copy(), np.ones(tree.n)).any()
    kuka = Tree.from_urdf(urdf("kuka_iiwa.urdf"), "lbr_iiwa_link_0", "lbr_iiwa_link_7")  # +-170 deg: clipped
    assert np.allclose(kuka.project(kuka.upper + 0.5), kuka.upper)
    assert kuka.held(kuka.upper.copy(), np.ones(kuka.n)).all()
    # A range written with pi to ten digits (a span 1e-10 short of a turn): wrapped values stay inside, and
    # projecting again changes nothing.
    T = np.eye(4)
    short = Tree([Joint("j", "revolute", "base", "l", T, (0, 0, 1), -3.1415926535, 3.1415926535)])
    for x in (3.1415926535 + 1e-10, -3.1415926535 - 1e-10, 3.2, -3.2, 10.0):
        for once in (short.project(np.array([[x]]))[0], short.project(np.array([x]))):
            assert -3.1415926535 <= once[0] <= 3.1415926535 and np.array_equal(short.project(once[None])[0], once)


def test_the_characteristic_length_is_the_structures():
    """The tree's scale (LM's damping bias) comes from its links as built, not from the first per-solve input (a
    rig's walking root)."""
    tree = Tree.from_urdf(urdf("kuka_iiwa.urdf"), "lbr_iiwa_link_0", "lbr_iiwa_link_7")
    length = Tree.from_urdf(urdf("kuka_iiwa.urdf"), "lbr_iiwa_link_0", "lbr_iiwa_link_7").characteristic_length
    moved = tree.origin[1].copy()
    moved[:3, 3] += [10.0, 0.0, 0.0]
    tree.set_origins([1], moved[None])
    assert tree.characteristic_length == length and 0.1 < length < 0.3


def test_human_urdf_whole_tree():
    tree = Tree.from_urdf(urdf("human.urdf"))
    assert tree.n == 36
    assert all(np.isfinite(tree.lower)) and all(np.isfinite(tree.upper))


def _reference_fk(path, q_by_name):
    """Independent FK straight from the XML: recursive, one joint at a time, scalar math."""
    doc = ET.parse(path).getroot()
    joints = [j for j in doc.iter("joint") if j.find("parent") is not None]
    world = {}
    children = {j.find("child").get("link") for j in joints}
    roots = {j.find("parent").get("link") for j in joints} - children
    for r in roots:
        world[r] = np.eye(4)
    pending = list(joints)
    while pending:
        for j in list(pending):
            parent = j.find("parent").get("link")
            if parent not in world:
                continue
            o = j.find("origin")
            T = np.eye(4)
            if o is not None:
                T[:3, :3] = rpy_matrix([float(v) for v in (o.get("rpy") or "0 0 0").split()])
                T[:3, 3] = [float(v) for v in (o.get("xyz") or "0 0 0").split()]
            ax = j.find("axis")
            a = np.array([float(v) for v in (ax.get("xyz") if ax is not None else "1 0 0").split()])
            a = a / max(np.linalg.norm(a), 1e-300)
            M = np.eye(4)
            qv = q_by_name.get(j.get("name"), 0.0)
            if j.get("type") in ("revolute", "continuous"):
                M[:3, :3] = exp_so3(a * qv)
            elif j.get("type") == "prismatic":
                M[:3, 3] = a * qv
            world[j.find("child").get("link")] = world[parent] @ T @ M
            pending.remove(j)
    return world


@pytest.mark.parametrize("name", ["kuka_iiwa.urdf", "franka_panda.urdf", "ur5.urdf", "pr2.urdf", "baxter.urdf",
                                  "kuka_kr120r2500pro.urdf", "human.urdf"])
def test_fk_matches_an_independent_reference(name):
    tree = Tree.from_urdf(urdf(name), mimic="free")
    rng = np.random.default_rng(3)
    for q in tree.random_configurations(rng, 3):
        ours = tree.fk(q)
        ref = _reference_fk(urdf(name), dict(zip(tree.joint_names, q)))
        root = ref[tree.root]
        for link in tree.link_names:
            assert np.allclose(ours[link], np.linalg.inv(root) @ ref[link], atol=1e-10), link


def test_subtree_is_relative_to_its_base():
    full = Tree.from_urdf(urdf("baxter.urdf"), mimic="free")
    sub = Tree.from_urdf(urdf("baxter.urdf"), "right_arm_mount", "right_wrist")
    q = sub.random_configurations(0, 1)[0]
    qf = np.zeros(full.n)
    for name, v in zip(sub.joint_names, q):
        qf[full.joint_names.index(name)] = v
    F, S = full.fk(qf), sub.fk(q)
    base = F["right_arm_mount"]
    assert np.allclose(np.linalg.inv(base) @ F["right_wrist"], S["right_wrist"], atol=1e-10)


def test_urdf_from_string_and_clear_errors():
    xml = """<robot name="r"><link name="a"/><link name="b"/>
      <joint name="j" type="revolute"><parent link="a"/><child link="b"/>
      <origin xyz="0 0 1" rpy="0 0 0"/><axis xyz="0 0 1"/><limit lower="-1" upper="1"/></joint></robot>"""
    tree = Tree.from_urdf(xml)
    assert tree.joint_names == ["j"] and tree.lower[0] == -1 and tree.upper[0] == 1
    with pytest.raises(FileNotFoundError):
        Tree.from_urdf("/no/such/file.urdf")
    with pytest.raises(ValueError, match="planar"):
        Tree.from_urdf(xml.replace('type="revolute"', 'type="planar"'))
    with pytest.raises(ValueError, match="no link named"):
        Tree.from_urdf(xml, base_link="zzz")
    with pytest.raises(ValueError, match="configuration has"):
        tree.fk([1.0, 2.0])


# --- batched FK and Jacobians ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_fk_batch_equals_single(seed):
    tree = random_tree(seed, n_links=10, free_root=True)
    Q = tree.random_configurations(seed, 6)
    W = tree.fk_batch(Q)
    assert W.shape == (6, len(tree.link_names), 4, 4)
    for p in range(6):
        single = tree.fk(Q[p])
        for i, link in enumerate(tree.link_names):
            assert np.allclose(W[p, i], single[link], atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_point_jacobian_matches_finite_differences(seed):
    tree = random_tree(seed, n_links=9, free_root=seed % 2 == 0)
    rng = np.random.default_rng(seed)
    q = tree.random_configurations(rng, 1)[0] * 0.9
    offset = rng.normal(size=3) * 0.2
    st = tree.state(q)
    for link in range(1, len(tree.link_names)):
        point = st.world[link, :3, :3] @ offset + st.world[link, :3, 3]
        J = st.point_jacobian(link, point)

        def position(x):
            W = tree.fk_batch(x[None])[0][link]
            return W[:3, :3] @ offset + W[:3, 3]

        assert np.allclose(J[:3], numeric_jacobian(position, q), atol=1e-6)
        R0 = st.world[link, :3, :3]
        eps = 1e-6
        Jw = np.zeros((3, tree.n))
        for k in range(tree.n):
            e = np.zeros(tree.n)
            e[k] = eps
            Rp = tree.fk_batch((q + e)[None])[0][link, :3, :3]
            Rm = tree.fk_batch((q - e)[None])[0][link, :3, :3]
            Rp, Rm = Rp / np.linalg.norm(Rp[:, 0]), Rm / np.linalg.norm(Rm[:, 0])  # a stretching bone scales
            Jw[:, k] = log_so3(Rp @ Rm.T) / (2 * eps)
        assert np.allclose(J[3:], Jw, atol=1e-6), (link, R0)


def test_unlimited_ball_joint_has_no_singularity():
    tree = Tree([BoneJoint("b", "base", "bone", np.eye(4))])
    assert tree.n == 3
    for angle in [0.0, 1.0, np.pi / 2, np.pi - 1e-3, np.pi]:
        q = np.array([angle, 0.0, 0.0])
        J = tree.state(q).point_jacobian(1, np.zeros(3))[3:]
        assert np.linalg.svd(J, compute_uv=False).min() > 0.6
    # Wrapping past pi keeps the rotation and the norm <= pi.
    q = np.array([4.0, -2.0, 1.0])
    p = tree.project(q)
    assert np.linalg.norm(p) <= np.pi + 1e-12
    assert rotation_difference(exp_so3(p), exp_so3(q)) < 1e-10


# --- Blender's bone limits ---------------------------------------------------------------------


def blender_range_parameters(R):
    """IK_Math.h SphericalRangeParameters: (ax, twist, az) of R = Swing(ax, az) Twist(tau)."""
    tau = 2.0 * math.atan2(R[0, 2] - R[2, 0], R[0, 0] + R[1, 1] + R[2, 2] + 1)
    num = 1.0 / math.sqrt(2.0 * (1.0 + R[1, 1]))
    return -R[2, 1] * num, tau, R[0, 1] * num


def blender_swing_matrix(ax, az):
    s2 = ax * ax + az * az
    c2 = math.sqrt(0.0 if s2 >= 1.0 else 1.0 - s2)
    from fullbody_ik.solvers.rotations import quaternion_to_matrix

    return quaternion_to_matrix([-c2, ax, 0.0, az])


def blender_ellipse_clamp(ax, az, amin, amax):
    """IK_Math.h EllipseClamp, line for line."""
    if ax < 0.0:
        x, xlim = -ax, -amin[0]
    else:
        x, xlim = ax, amax[0]
    if az < 0.0:
        z, zlim = -az, -amin[1]
    else:
        z, zlim = az, amax[1]
    if abs(xlim) < 1e-20 or abs(zlim) < 1e-20:
        if x <= xlim and z <= zlim:
            return ax, az, False
        x, z = min(x, xlim), min(z, zlim)
    else:
        invx, invz = 1.0 / (xlim * xlim), 1.0 / (zlim * zlim)
        if x * x * invx + z * z * invz <= 1.0:
            return ax, az, False
        if abs(x) < 1e-20:
            x, z = 0.0, zlim
        else:
            rico = z / x
            x = math.sqrt(1.0 / (invx + invz * rico * rico))
            z = rico * x
    return (-x if ax < 0 else x), (-z if az < 0 else z), True


def blender_clamp(R, limits):
    """IK_QSphericalSegment::UpdateAngle's clamp of a new basis R, for limits {'x','y','z'}."""
    ax, ay, az = blender_range_parameters(R)
    amin, amax = [0.0, 0.0], [0.0, 0.0]
    for k, a in ((0, "x"), (1, "z")):
        if a in limits:
            lo, hi = limits[a]
            amin[k], amax[k] = -math.sin(hi / 2), -math.sin(lo / 2)  # SetLimit
    if "y" in limits:
        ay = min(max(ay, limits["y"][0]), limits["y"][1])
    if "x" in limits and "z" in limits:
        ax, az, _ = blender_ellipse_clamp(ax, az, amin, amax)
    elif "x" in limits:
        ax = min(max(ax, amin[0]), amax[0])
    elif "z" in limits:
        az = min(max(az, amin[1]), amax[1])
    return blender_swing_matrix(ax, az) @ axis_rotation(1, ay)


LIMIT_SETS = [
    {"x": (-0.5, 1.2), "y": (-0.3, 0.8), "z": (-1.0, 0.4)},
    {"x": (-2.5, 0.2), "z": (-0.1, 2.9)},
    {"x": (-0.7, 0.7)},
    {"z": (-1.5, 0.0)},
    {"y": (-0.2, 0.2)},
    {"x": (-np.pi, np.pi), "y": (-1.0, 1.0), "z": (-np.pi / 2, np.pi / 3)},
]


@pytest.mark.parametrize("limits", LIMIT_SETS)
def test_projection_is_blenders_clamp(limits):
    """Our feasible set and projection are Blender's: clamp any rotation the way intern/iksolver does."""
    origin = transform((0.3, -0.2, 0.5), (0, 1, 0))
    tree = Tree([BoneJoint("b", "base", "bone", origin, limits=limits)], swing_projection="blender")
    rng = np.random.default_rng(0)
    for _ in range(200):
        # A random rotation, expressed in our variables (swing exponential coordinates and twist).
        R = exp_so3(rng.normal(size=3) * 1.2)
        ax, tau, az = blender_range_parameters(R)
        s = 2 * np.arcsin(min(1.0, math.hypot(ax, az)))
        r = math.hypot(ax, az)
        sx, sz = (-ax * s / r, -az * s / r) if r > 1e-12 else (0.0, 0.0)
        q = np.array([sx, tau, sz])
        M = np.linalg.inv(origin) @ tree.fk(q)["bone"]
        assert rotation_difference(M[:3, :3], R) < 1e-9  # the parametrization reproduces R
        p = tree.project(q)
        M = np.linalg.inv(origin) @ tree.fk(p)["bone"]
        assert rotation_difference(M[:3, :3], blender_clamp(R, limits)) < 1e-9
        assert np.allclose(tree.project(p), p, atol=1e-12)  # idempotent


@pytest.mark.parametrize("limits", LIMIT_SETS)
def test_feasible_samples_are_inside_blenders_limits(limits):
    tree = Tree([BoneJoint("b", "base", "bone", np.eye(4), limits=limits)])
    for q in tree.random_configurations(1, 300):
        R = tree.fk(q)["bone"][:3, :3]
        if 1.0 + R[1, 1] < 1e-4:
            continue  # swing within ~1 degree of 180: Blender's decomposition itself is singular there
        assert rotation_difference(blender_clamp(R, limits), R) < 1e-9


def test_locked_axes_and_elbow_and_stiffness():
    # Y locked -> swing only (x, z); X locked -> elbow about Z with twist; two locked -> one hinge.
    tree = Tree([
        BoneJoint("swing", "base", "a", np.eye(4), lock=(False, True, False), limits={"x": (-0.5, 0.5)}),
        BoneJoint("elbow", "a", "b", transform(xyz=(0, 1, 0)), lock=(True, False, False),
                  limits={"z": (0.0, 2.0), "y": (-0.1, 0.1)}, stiffness=(0, 0.5, 0.9)),
        BoneJoint("hinge", "b", "c", transform(xyz=(0, 1, 0)), lock=(True, True, False), limits={"z": (-1, 1)}),
        BoneJoint("rigid", "c", "d", transform(xyz=(0, 1, 0)), lock=(True, True, True)),
    ])
    assert tree.joint_names == ["swing.x", "swing.z", "elbow.y", "elbow.z", "hinge.z"]
    assert np.allclose(tree.weights, [1, 1, 0.5, 0.1, 1])
    q = tree.project(np.array([2.0, 0.3, 1.0, 3.0, -5.0]))
    assert q[2] == pytest.approx(0.1) and q[3] == pytest.approx(2.0) and q[4] == pytest.approx(-1.0)
    # The elbow is RotZ(a) @ RotY(twist) (IK_QElbowSegment), and locked axes never move.
    M = np.linalg.inv(tree.fk(q)["a"] @ transform(xyz=(0, 1, 0))) @ tree.fk(q)["b"]
    assert np.allclose(M[:3, :3], axis_rotation(2, q[3]) @ axis_rotation(1, q[2]), atol=1e-12)
    ax, tau, az = blender_range_parameters(tree.fk(q)["a"][:3, :3])
    assert abs(tau) < 1e-12  # no twist on a Y-locked bone
    assert -ax <= math.sin(0.25) + 1e-12


def test_free_root_moves_everything():
    tree = Tree([FreeJoint("root", "world", "hips"), Joint("knee", "revolute", "hips", "shin",
                                                             transform(xyz=(0, 0, -1)), (1, 0, 0), -1, 1)])
    assert tree.n == 7 and np.all(np.isinf(tree.lower[:3]))
    q = np.array([1.0, 2.0, 3.0, 0.0, 0.0, np.pi / 2, 0.0])
    W = tree.fk(q)
    assert np.allclose(W["hips"][:3, 3], [1, 2, 3])
    assert np.allclose(W["shin"][:3, 3], [1, 2, 2])


@pytest.mark.parametrize("lock", [(False, False, False), (False, True, False), (True, False, False),
                                  (False, False, True), (True, True, False), (False, True, True), (True, False, True)])
@pytest.mark.parametrize("limited", [False, True])
def test_bone_rotation_and_values_round_trip(lock, limited):
    """bone_values reads back the variables bone_rotation wrote (and FK uses the same rotation)."""
    from fullbody_ik.solvers.joints import bone_rotation, bone_values

    limits = {"x": (-1.0, 1.2), "y": (-0.8, 0.9), "z": (-1.1, 0.7)} if limited else {}
    joint = BoneJoint("b", "base", "bone", np.eye(4), lock=lock, limits=limits)
    tree = Tree([joint])
    for q in tree.random_configurations(4, 50):
        R = bone_rotation(joint, q)
        assert np.allclose(R, tree.fk(q)["bone"][:3, :3], atol=1e-12)
        assert np.allclose(bone_values(joint, R), q, atol=1e-9)


@pytest.mark.parametrize("limits", LIMIT_SETS)
def test_nearest_projection_has_blenders_feasible_set(limits):
    """The nearest-point projection (an option) lands inside Blender's limits, leaves feasible
    rotations alone, and is never farther (in swing quaternion components) than Blender's radial clamp."""
    from fullbody_ik.solvers.joints import _swing_quaternion_xz

    nearest = Tree([BoneJoint("b", "base", "bone", np.eye(4), limits=limits)], swing_projection="nearest")
    radial = Tree([BoneJoint("b", "base", "bone", np.eye(4), limits=limits)])
    rng = np.random.default_rng(2)
    for q in rng.normal(size=(300, 3)) * 1.3:
        p = nearest.project(q)
        R = nearest.fk(p)["bone"][:3, :3]
        if 1.0 + R[1, 1] > 1e-4 and 1.0 + np.trace(R) > 1e-4:
            assert rotation_difference(blender_clamp(R, limits), R) < 1e-8  # inside Blender's limits
        assert np.allclose(nearest.project(p), p, atol=1e-10)
        s0 = _swing_quaternion_xz(nearest.project(q * np.array([1, 0, 1]))[[0, 2]])
        s1 = _swing_quaternion_xz(radial.project(q * np.array([1, 0, 1]))[[0, 2]])
        s = _swing_quaternion_xz(np.array([q[0], q[2]]))
        if np.hypot(q[0], q[2]) < 3.0:  # no wrap to the other side of 180 degrees
            assert np.linalg.norm(s0 - s) <= np.linalg.norm(s1 - s) + 1e-9


@pytest.mark.parametrize("seed", range(12))
def test_rotations_of_all_joints_at_once_match_each_bones_own(seed):
    """joint_rotations / values_from_rotations (batched, used by the rig bridge) agree with bone_rotation
    and bone_values (Blender's reading of one bone) joint by joint, and invert each other."""
    from fullbody_ik.solvers.joints import bone_rotation, bone_values

    tree = random_tree(seed, n_links=10, kinds=["bone", "revolute", "continuous", "fixed", "prismatic"],
                       free_root=seed % 2 == 0)
    Q = tree.random_configurations(seed, 4)
    R = tree.joint_rotations(Q)
    V = tree.values_from_rotations(R, Q)
    for p in range(len(Q)):
        for i, j in enumerate(tree.link_joint):
            if isinstance(j, BoneJoint):
                idx = tree.joint_vars[j.name]
                idx = idx[: len(idx) - (j.stretch > 0)]
                Rb = bone_rotation(j, Q[p, idx])
                assert np.allclose(Rb, R[p, i], atol=1e-12)
                assert np.allclose(bone_values(j, Rb), V[p, idx], atol=1e-9)
    assert np.allclose(tree.joint_rotations(V), R, atol=1e-9)


def test_a_batch_shares_one_point_for_its_jacobian():
    tree = random_tree(3, n_links=7, free_root=True)
    Q = tree.random_configurations(1, 4)
    point = np.array([0.1, -0.2, 0.3])
    J = BatchState(tree, Q).point_jacobian(5, point)
    assert J.shape == (4, 6, tree.n)
    for p in range(4):
        assert np.allclose(J[p], tree.state(Q[p]).point_jacobian(5, point), atol=1e-12)


def test_urdf_from_the_wild_reads_only_the_robots_own_joints():
    """<joint> elements inside <transmission>, <gazebo> and plugin blocks are not kinematics; a mimic finger
    is refused by name when it is in the tree, fine when the tree stops above it."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wild_arm.urdf")
    tree = Tree.from_urdf(path, "world", "hand")
    assert tree.joint_names == ["shoulder_pan", "shoulder_lift", "elbow", "wrist_roll"]
    assert np.allclose(tree.fk(np.zeros(4))["hand"][:3, 3], [0, 0, 0.8])
    q = np.array([np.pi / 2, 0.0, 0.0, 0.0])  # axis "0 0 2" is read as a unit axis: a quarter turn
    assert np.allclose(tree.fk(q)["hand"][:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    with pytest.raises(ValueError, match="'finger_right_joint' mimics 'finger_left_joint'.*tip links above"):
        Tree.from_urdf(path)
    with pytest.raises(ValueError, match="mimics"):
        Tree.from_urdf(path, "world", ["finger_left", "finger_right"])
    free = Tree.from_urdf(path, mimic="free")
    assert "finger_right_joint" in free.joint_names and free.n == 6
    broken = open(path).read().replace('<child link="forearm"/>', "")
    with pytest.raises(ValueError, match="'shoulder_lift': a URDF joint needs"):
        Tree.from_urdf(broken)


def test_urdf_rough_edges_from_the_wild():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wild_arm.urdf")
    text = open(path).read()
    # A planar base joint (a mobile robot's odometry) outside the chain asked for; refused when inside it.
    planar = text.replace('<joint name="world_fixed" type="fixed">', '<joint name="odom" type="planar">')
    assert Tree.from_urdf(planar, "base_link", "hand").n == 4
    with pytest.raises(ValueError, match="'odom': URDF joint type 'planar' is not supported; choose a base link"):
        Tree.from_urdf(planar, "world", "hand")
    # A byte-order mark, commas between numbers, a second robot in the same file.
    odd = "\ufeff" + text.replace('<origin xyz="0 0 0.3" rpy="0 0 0"/>', '<origin xyz="0, 0, 0.3" rpy="0,0,0"/>')
    odd = odd.replace("</robot>", '<link name="cart"/><link name="wheel"/><joint name="axle" type="continuous">'
                      '<parent link="cart"/><child link="wheel"/></joint></robot>')
    tree = Tree.from_urdf(odd, "world", "hand")
    assert np.allclose(tree.fk(np.zeros(4))["hand"][:3, 3], [0, 0, 0.8])
    with pytest.raises(ValueError, match="2 separate trees .*give the base link"):
        Tree.from_urdf(odd, mimic="free")
    with pytest.raises(ValueError, match="joint 'elbow': expected 3 numbers"):
        Tree.from_urdf(text.replace('<origin xyz="0 0 0.25" rpy="0 0 0"/>', '<origin xyz="0 0 a" rpy="0 0 0"/>'))
    with pytest.raises(ValueError, match="not a URDF"):
        Tree.from_urdf("robot\nwithout xml")
    cycle = """<robot name="c"><link name="a"/><link name="b"/>
      <joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint>
      <joint name="ba" type="fixed"><parent link="b"/><child link="a"/></joint></robot>"""
    with pytest.raises(ValueError, match="cycle"):
        Tree.from_urdf(cycle)


def test_urdf_undeclared_prefixes_huge_and_crossed_limits(tmp_path):
    """Descriptions from the wild: Gazebo blocks with prefixes no xmlns declares load (a file, text or bytes, and a
    tag in a comment does not get in the way), other broken XML is still refused; "no limit" written as +-1e16 or
    +-999999 is sampled like no bound (restarts drawn a million units away never came back); a joint whose lower
    limit is above its upper is refused by name when it is in the tree asked for, not when it is elsewhere."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wild_arm.urdf")
    text = open(path).read()
    assert "<sensor:camera" in text and "xmlns:sensor" not in text
    for source in (path, text, text.encode(), text.replace("<robot ", "<!-- <robot> in a comment -->\n<robot ", 1)):
        assert Tree.from_urdf(source, "world", "hand").joint_names == ["shoulder_pan", "shoulder_lift", "elbow",
                                                                      "wrist_roll"]
    (tmp_path / "bad.urdf").write_text(text.replace("</sensor:camera>", ""))
    with pytest.raises(ValueError, match="bad.urdf is not valid XML .mismatched tag"):
        Tree.from_urdf(str(tmp_path / "bad.urdf"))
    with pytest.raises(ValueError, match="not a URDF document: root element is <.*ros.*robot>"):
        Tree.from_urdf(text.replace("<robot ", "<ros:robot ").replace("</robot>", "</ros:robot>"))
    # The encoding the bytes declare holds on the second reading; a prefix declared on another element only, a
    # processing instruction, a DOCTYPE's internal subset and a CDATA section do not get in the way.
    latin = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="ISO-8859-1"?>').replace(
        '"shoulder_pan"', '"\u00e9paule"')
    assert "\u00e9paule" in Tree.from_urdf(latin.encode("latin-1"), "world", "hand").joint_names
    odd = text.replace('<?xml version="1.0"?>', '<?xml version="1.0"?>\n<?tool a<b?>\n'
                       '<!DOCTYPE robot [<!ENTITY e "<x/>">]>').replace(
        '<gazebo reference="upper_arm">', '<gazebo reference="upper_arm" xmlns:sensor="urn:s"><sensor:ray/>'
        '<![CDATA[ <!-- ]]>')
    assert odd.count("\n") == text.count("\n") + 2
    assert Tree.from_urdf(odd, "world", "hand").n == Tree.from_urdf(odd.encode(), "world", "hand").n == 4

    huge = text.replace('lower="-2.9" upper="2.9"', 'lower="-1e+16" upper="1e+16"').replace(
        'lower="-1.9" upper="1.9"', 'lower="-999999" upper="999999"')
    tree = Tree.from_urdf(huge, "world", "hand")
    assert tree.upper[0] == 1e16 and tree.lower[1] == -999999  # the bounds are the file's
    Q = tree.random_configurations(0, 500)
    assert np.abs(Q[:, :2]).max() <= np.pi and np.ptp(Q[:, 0]) > 5  # sampled within one turn, over it
    assert np.allclose(tree.span()[:2], 2 * np.pi)
    rng = np.random.default_rng(1)
    for _ in range(20):
        target = tree.fk(tree.random_configurations(rng, 1)[0])["hand"]
        for enabled in (True, False):
            compiled.set_enabled(enabled)
            try:
                res = solve(tree, [Pose("hand", target)], tree.random_configurations(rng, 1)[0], method="lm",
                            time_limit=1.0, rng=rng)
            finally:
                compiled.set_enabled(True)
            assert res.success and np.abs(res.q[:2]).max() < 50

    # One bound far and the other near: sampled within pi of the near one, inside the bounds (never upside down).
    far = text.replace('lower="-2.9" upper="2.9"', 'lower="0.5" upper="1e+16"').replace(
        'lower="-1.9" upper="1.9"', 'lower="-1e6" upper="-0.2"')
    tree = Tree.from_urdf(far, "world", "hand")
    assert np.allclose([tree.sample_lower[0], tree.sample_upper[0]], [0.5, 0.5 + np.pi])
    assert np.allclose([tree.sample_lower[1], tree.sample_upper[1]], [-0.2 - np.pi, -0.2])
    Q = tree.random_configurations(2, 200)
    assert (Q[:, 0] >= 0.5).all() and (Q[:, 0] <= 0.5 + np.pi).all() and (Q[:, 1] <= -0.2).all()

    crossed = text.replace('lower="-1.9" upper="1.9"', 'lower="1.9" upper="-1.9"')
    with pytest.raises(ValueError, match="joint 'shoulder_lift': its lower limit 1.9 is above its upper limit -1.9; "
                                         "choose a base link below it .base_link='forearm'"):
        Tree.from_urdf(crossed, "world", "hand")
    assert Tree.from_urdf(crossed, "forearm", "hand").joint_names == ["elbow", "wrist_roll"]


def test_table1_takes_your_own_urdf_arms():
    """``table1 --arm`` (a user's robot against the peers): FILE finds the root and the link with the most joints
    above it that no mimic joint moves; FILE:BASE:TIP takes them; the same file twice gets two names; the problem
    set is written apart from the six arms'; a file that does not exist is refused by name."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wild_arm.urdf")
    command = [sys.executable, "-m", "fullbody_ik.benchmarks.table1", "--targets", "3", "--prepare-only"]
    out = subprocess.run(command + ["--arm", path, "--arm", f"{path}:base_link:wrist"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"arm wild_arm: {path}, world -> finger_left, 5 joints" in out.stdout  # (finger_right mimics it)
    assert f"arm wild_arm_1: {path}, base_link -> wrist, 3 joints" in out.stdout
    written = out.stdout.strip().splitlines()[-1]
    assert written.startswith("wrote ") and written.endswith("table1_arms_problems.npz")
    with np.load(written[len("wrote "):]) as data:
        assert data["wild_arm/targets"].shape == (3, 4, 4) and data["wild_arm_1/seeds"].shape == (3, 3)
    out = subprocess.run(command + ["--arm", path + ".missing"], capture_output=True, text=True, timeout=600)
    assert out.returncode != 0 and "no file" in out.stderr and ".missing" in out.stderr


def test_urdf_mistakes_are_refused_by_name(tmp_path):
    """NaN and infinities in numbers (a memetic solve of a NaN origin never ended), duplicate and missing joint
    names, a joint type with a capital or none, a file that is not XML, XML as bytes; a revolute joint whose
    <limit> gives no bounds loads locked, as URDF says, with a warning."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wild_arm.urdf")
    text = open(path).read()
    elbow = '<origin xyz="0 0 0.25" rpy="0 0 0"/>'
    for bad in ('<origin xyz="nan 0 0.25" rpy="0 0 0"/>', '<origin xyz="0 0 inf" rpy="0 0 0"/>',
                '<origin xyz="0 0 0.25" rpy="0 NaN 0"/>'):
        with pytest.raises(ValueError, match="joint 'elbow': expected 3 finite numbers"):
            Tree.from_urdf(text.replace(elbow, bad))
    joint = '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>{}</joint>'
    one = '<robot name="r"><link name="a"/><link name="b"/><link name="c"/>{}</robot>'
    with pytest.raises(ValueError, match="joint 'j': its lower limit is not a number: 'nan'"):
        Tree.from_urdf(one.format(joint.format('<limit lower="nan" upper="1"/>')))
    with pytest.raises(ValueError, match="joint 'j': expected 3 finite numbers, got 'nan 0 1'"):
        Tree.from_urdf(one.format(joint.format('<axis xyz="nan 0 1"/><limit lower="-1" upper="1"/>')))
    twice = joint.format('<limit lower="-1" upper="1"/>') + joint.format("").replace('"a"', '"b"').replace(
        '<child link="b"/>', '<child link="c"/>')
    with pytest.raises(ValueError, match="two URDF joints are named 'j'"):
        Tree.from_urdf(one.format(twice))
    with pytest.raises(ValueError, match="a URDF joint has no name .its child link: 'b'"):
        Tree.from_urdf(one.format(joint.format("").replace(' name="j"', "")))
    for kind in ('type="Revolute"', ""):
        with pytest.raises(ValueError, match="joint 'j': its type is .*, not a URDF joint type .revolute, "):
            Tree.from_urdf(one.format(joint.format("").replace('type="revolute"', kind)))
    (tmp_path / "notes.urdf").write_text("not xml\n")
    with pytest.raises(ValueError, match="not a URDF: .*notes.urdf is not valid XML"):
        Tree.from_urdf(str(tmp_path / "notes.urdf"))
    assert Tree.from_urdf(text.encode(), "world", "hand").n == 4
    with pytest.warns(UserWarning, match="'j' .revolute.: its limits are 0 to 0 .<limit> gives no lower or upper"):
        locked = Tree.from_urdf(one.format(joint.format('<limit effort="10" velocity="1"/>')))
    assert locked.lower[0] == locked.upper[0] == 0.0
    nan = np.eye(4)
    nan[1, 3] = np.nan
    with pytest.raises(ValueError, match="joint 'j': its origin holds a value that is not a finite number"):
        Tree([Joint("j", "revolute", "a", "b", nan)])
    with pytest.raises(ValueError, match="joint 'k': its lower holds"):
        Tree([Joint("k", "revolute", "a", "b", lower=np.nan)])
