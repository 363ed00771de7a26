# SPDX-License-Identifier: GPL-3.0-or-later
"""The skin that follows a bone: what a character's mesh says where its bones say too little (a foot's sole)."""

import numpy as np


def skin_points(obj, bones):
    """(N, 3) armature-space rest positions of the skin that follows ``bones`` (a bone or several, together):
    vertices weighted to them at least half of their whole weight through an Armature modifier on ``obj``, and
    meshes parented to one of them; None with fewer than 8."""
    bones = [bones] if hasattr(bones, "name") else list(bones)
    names = {b.name for b in bones}
    W_inv = np.linalg.inv(np.array(obj.matrix_world))
    out = []
    for o in obj.users_scene[0].objects if obj.users_scene else ():
        if o.type != "MESH" or len(o.data.vertices) == 0:
            continue
        M = W_inv @ np.array(o.matrix_world)
        if o.parent == obj and o.parent_type == "BONE" and o.parent_bone in names:
            bone = obj.data.bones[o.parent_bone]
            posed = np.array(obj.pose.bones[bone.name].matrix)  # (placed by the pose: brought back to the rest)
            M = np.array(bone.matrix_local) @ np.linalg.inv(posed) @ M
            out.append(_coords(o) @ M[:3, :3].T + M[:3, 3])
        elif any(m.type == "ARMATURE" and m.object == obj for m in o.modifiers):
            groups = {g.index for g in o.vertex_groups if g.name in names}
            if groups:
                keep = [v.index for v in o.data.vertices if _share(v.groups, groups) >= 0.5]
                out.append(_coords(o)[keep] @ M[:3, :3].T + M[:3, 3])
    pts = np.vstack(out) if out else np.zeros((0, 3))
    return pts if len(pts) >= 8 else None


def _coords(mesh_object):
    co = np.empty(3 * len(mesh_object.data.vertices))
    mesh_object.data.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


def _share(weights, groups):
    """The part of a vertex's whole weight that ``groups`` hold."""
    total = mine = 0.0
    for e in weights:
        total += e.weight
        if e.group in groups:
            mine += e.weight
    return mine / total if total > 0 else 0.0
