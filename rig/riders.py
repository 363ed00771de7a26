# SPDX-License-Identifier: GPL-3.0-or-later
"""Bones that ride a mapped foot or hand: a deforming bone that no role takes and that nothing the retargeting
keys carries (a game rig's foot or IK control left on the root when its leg IK was lost on export: Quaternius'
mech's front feet), with its head at a mapped foot's or hand's. Keyed to keep its rest place on that bone, each
frame as Blender shows it; left as they were, they stood where the rest pose put them while the character walked
away."""

import numpy as np

from .armature import rotation_channels, rotation_path
from .evaluation import evaluating_only
from .humanoid import SIDES
from .keys import write_keys

NEAR = 0.1  # of the character's height: a rider's head this near its anchor's head


def find_riders(obj, humanoid, keyed):
    """{rider bone: anchor bone}: deforming bones outside ``keyed`` (the bones the retargeting keys, the mapped ones
    and their ancestors) that no mapped bone carries, their heads nearest a mapped foot's or hand's and within
    NEAR of the character's height of it."""
    bones = obj.data.bones
    anchors = [humanoid.bone(f"{s} {part}") for s in SIDES for part in ("foot", "hand")]
    anchors = [a for a in anchors if a]
    if not anchors:
        return {}
    heads = np.array([np.array(b.head_local) for b in bones])
    size = float(np.ptp(heads[:, 2])) if len(heads) else 0.0
    carried = set(keyed)
    for name in set(humanoid.roles.values()) & set(keyed):  # (what hangs from a mapped bone moves with it)
        carried |= {c.name for c in bones[name].children_recursive}
    out = {}
    for b in bones:
        if b.name in carried or not b.use_deform:
            continue
        d = {a: float(np.linalg.norm(np.array(b.head_local) - np.array(bones[a].head_local))) for a in anchors}
        nearest = min(d, key=d.get)
        if d[nearest] <= NEAR * size:
            out[b.name] = nearest
    return out


def key_riders(scene, obj, riders, action, slot, frames):
    """Key each rider (find_riders) in ``action`` so that it keeps its rest place on its anchor as Blender shows
    the anchor on each of ``frames``."""
    from bpy_extras import anim_utils


    if not riders:
        return
    bones, pose = obj.data.bones, obj.pose.bones
    rest = {n: np.array(bones[n].matrix_local) for n in (*riders, *riders.values())}
    local = {n: np.zeros((len(frames), 4, 4)) for n in riders}
    with evaluating_only(scene, [obj]):
        for i, f in enumerate(frames):
            scene.frame_set(f)
            for n, anchor in riders.items():
                M = np.array(pose[anchor].matrix) @ np.linalg.inv(rest[anchor]) @ rest[n]
                M[:3, :3] /= np.linalg.norm(M[:3, :3], axis=0, keepdims=True)
                local[n][i] = np.array(obj.convert_space(pose_bone=pose[n], matrix=_matrix(M), from_space="POSE",
                                                         to_space="LOCAL"))
    bag = anim_utils.action_ensure_channelbag_for_slot(action, slot)
    fr = np.array(frames, dtype=float)
    for n, L in local.items():
        pb = pose[n]
        path = rotation_path(pb)
        R = L[:, :3, :3] / np.linalg.norm(L[:, :3, :3], axis=1, keepdims=True)
        values = rotation_channels(pb.rotation_mode, R, tuple(getattr(pb, path)))
        channels = [(path, values), ("location", L[:, :3, 3]), ("scale", np.ones((len(frames), 3)))]
        for prop, v in channels:
            for c in range(v.shape[1]):
                fc = bag.fcurves.find(f'pose.bones["{n}"].{prop}', index=c) or \
                    bag.fcurves.new(f'pose.bones["{n}"].{prop}', index=c, group_name=n)
                write_keys(fc, fr, v[:, c])
    scene.frame_set(frames[0])


def _matrix(M):
    from mathutils import Matrix

    return Matrix([list(row) for row in M])
