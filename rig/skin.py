# SPDX-License-Identifier: GPL-3.0-or-later
"""The skin that follows a bone: what a character's mesh says where its bones say too little (a foot's sole)."""

import numpy as np


def skin_points(obj, bone):
    """(N, 3) armature-space rest positions of the skin that follows ``bone``: vertices weighted to it at least half
    through an Armature modifier on ``obj``, and meshes parented to the bone itself."""
    W_inv = np.linalg.inv(np.array(obj.matrix_world))
    out = []
    for o in obj.users_scene[0].objects if obj.users_scene else ():
        if o.type != "MESH":
            continue
        M = W_inv @ np.array(o.matrix_world)
        co = np.array([v.co for v in o.data.vertices]).reshape(-1, 3)
        if o.parent == obj and o.parent_type == "BONE" and o.parent_bone == bone.name:
            posed = np.array(obj.pose.bones[bone.name].matrix)  # (placed by the pose: brought back to the rest)
            M = np.array(bone.matrix_local) @ np.linalg.inv(posed) @ M
            out.append(co @ M[:3, :3].T + M[:3, 3])
        elif any(m.type == "ARMATURE" and m.object == obj for m in o.modifiers) and bone.name in o.vertex_groups:
            g = o.vertex_groups[bone.name].index
            keep = [v.index for v in o.data.vertices if any(e.group == g and e.weight >= 0.5 for e in v.groups)]
            out.append(co[keep] @ M[:3, :3].T + M[:3, 3])
    pts = np.vstack(out) if out else np.zeros((0, 3))
    return pts if len(pts) >= 8 else None
