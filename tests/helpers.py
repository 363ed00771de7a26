# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test helpers: paths, random trees with every joint kind, finite differences."""

import os

import numpy as np

from fullbody_ik.solvers import BoneJoint, FreeJoint, Joint, Tree
from fullbody_ik.solvers.rotations import exp_so3, log_so3

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
URDF = os.path.join(ROOT, "data", "urdf")

# (file, base link, tip link, variables) as in data/urdf/README.md
ARMS = [
    ("kuka_iiwa.urdf", "lbr_iiwa_link_0", "lbr_iiwa_link_7", 7),
    ("franka_panda.urdf", "panda_link0", "panda_link8", 7),
    ("ur5.urdf", "base_link", "ee_link", 6),
    ("pr2.urdf", "torso_lift_link", "r_wrist_roll_link", 7),
    ("baxter.urdf", "right_arm_mount", "right_wrist", 7),
    ("kuka_kr120r2500pro.urdf", "base_link", "tool0", 6),
]


def urdf(name):
    return os.path.join(URDF, name)


def transform(rotvec=(0, 0, 0), xyz=(0, 0, 0)):
    T = np.eye(4)
    T[:3, :3] = exp_so3(np.asarray(rotvec, float))
    T[:3, 3] = xyz
    return T


def random_tree(rng, n_links=8, kinds=None, free_root=False):
    """A random tree over every joint kind: scalar joints, bones with random locks/limits, a free root."""
    rng = np.random.default_rng(rng)
    kinds = kinds or ["revolute", "continuous", "prismatic", "fixed", "bone"]
    joints, links = [], ["base"]
    if free_root:
        joints.append(FreeJoint("root", "base", "hips", transform(rng.normal(size=3) * 0.3, rng.normal(size=3) * 0.2)))
        links.append("hips")
    for i in range(n_links):
        parent = links[rng.integers(max(0, len(links) - 3), len(links))]
        child = f"l{i}"
        origin = transform(rng.normal(size=3) * 0.5, rng.normal(size=3) * 0.3)
        kind = kinds[rng.integers(len(kinds))]
        if kind == "bone":
            lock = tuple(bool(b) for b in rng.random(3) < 0.25)
            limits = {}
            for a in "xyz":
                if rng.random() < 0.5:
                    limits[a] = (-rng.uniform(0, np.pi), rng.uniform(0, np.pi))  # Blender: min <= 0 <= max
            stiff = tuple(float(s) for s in np.where(rng.random(3) < 0.3, rng.uniform(0, 0.99, 3), 0.0))
            stretch = float(rng.uniform(0.1, 1.0)) if rng.random() < 0.3 else 0.0  # Blender's ik_stretch
            joints.append(BoneJoint(f"j{i}", parent, child, origin, lock, limits, stiff, stretch,
                                    float(rng.uniform(0.1, 1.0))))
        else:
            lo = -rng.uniform(0.1, 3.0)
            hi = rng.uniform(0.1, 3.0)
            axis = rng.normal(size=3)
            joints.append(Joint(f"j{i}", kind, parent, child, origin, tuple(axis), lo, hi))
        links.append(child)
    return Tree(joints)


def numeric_jacobian(f, q, eps=1e-6):
    """Central differences of f: (n,) -> (m,)."""
    f0 = np.asarray(f(q))
    J = np.zeros((f0.size, q.size))
    for k in range(q.size):
        e = np.zeros_like(q)
        e[k] = eps
        J[:, k] = (np.asarray(f(q + e)) - np.asarray(f(q - e))).ravel() / (2 * eps)
    return J


def rotation_difference(A, B):
    return float(np.linalg.norm(log_so3(A @ B.T)))


def skinned_box(bpy, obj, bone, lo, hi, name="box"):
    """A box mesh from corner ``lo`` to ``hi`` (the armature's space) skinned wholly to ``bone`` of armature ``obj``
    by an Armature modifier: a shoe, say."""
    corners = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(corners, [], [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4),
                                   (1, 5, 7, 3)])
    box = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(box)
    box.matrix_world = obj.matrix_world.copy()
    box.modifiers.new("armature", "ARMATURE").object = obj
    box.vertex_groups.new(name=bone).add(list(range(8)), 1.0, "REPLACE")
    return box
