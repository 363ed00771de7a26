# SPDX-License-Identifier: GPL-3.0-or-later
"""Scenes set up the way users set them up, for tests, benchmarks and the demo (dev only, needs bpy).

- ``cmu_scene``: a CMU clip imported from its BVH keeps its action; its root bone ``Hips`` walks across the
  floor (not a free root); position goals on both hands and both feet follow keyed empties a few centimetres
  away from the animated bones.
- ``metarig_scene``: Rigify's human metarig under an animated ``root`` bone (a walk cycle of our own), goals
  the same way.
- ``move``: the armature object animated too, or parented to a moving empty.
"""

import math
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
BVH = os.path.join(ROOT, "data", "bvh")
CMU_UNIT = 0.0254 / 0.45  # metres per CMU length unit (the ASF files' `length 0.45` inch)
CMU_LIMBS = ("LeftHand", "RightHand", "LeftFoot", "RightFoot")
METARIG_LIMBS = ("hand.L", "hand.R", "foot.L", "foot.R")
# Small offsets of the targets from the animated bones (m): sideways, forward and up, never straight down the
# line of a stretched leg, so every goal stays reachable without a free root.
OFFSETS = ((0.03, 0.02, 0.01), (-0.02, 0.03, 0.02), (0.02, -0.02, 0.015), (-0.025, 0.01, 0.02))


def fresh(bpy):
    """An empty scene with the extension registered."""
    import fullbody_ik

    bpy.ops.wm.read_factory_settings(use_empty=True)
    if not hasattr(bpy.types.Object, "fullbody_ik"):
        fullbody_ik.register()


def key_locations(bpy, obj, frames, locations):
    """Key obj.location at each frame in bulk (linear keys): one F-curve per axis."""
    from bpy_extras import anim_utils

    ad = obj.animation_data or obj.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(f"{obj.name} motion")
    if ad.action_slot is None:
        ad.action_slot = ad.action.slots.new(id_type="OBJECT", name=obj.name)
    bag = anim_utils.action_ensure_channelbag_for_slot(ad.action, ad.action_slot)
    for axis in range(3):
        fc = bag.fcurves.new("location", index=axis)
        fc.keyframe_points.add(len(frames))
        co = np.empty(2 * len(frames))
        co[0::2], co[1::2] = frames, np.asarray(locations)[:, axis]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", [1] * len(frames))  # LINEAR
        fc.update()


def bone_heads(bpy, obj, bones, frames):
    """(frames, bones, 3) world positions of the bones' heads as animated."""
    scene = bpy.context.scene
    heads = np.zeros((len(frames), len(bones), 3))
    for k, f in enumerate(frames):
        scene.frame_set(f)
        M = np.array(obj.matrix_world)
        for i, name in enumerate(bones):
            heads[k, i] = (M @ np.append(np.array(obj.pose.bones[name].head), 1.0))[:3]
    return heads


def follow_bones(bpy, obj, bones, frames, offsets=OFFSETS, kind="POSITION"):
    """Empties keyed at every frame a small offset away from each bone's head (world, as animated), and a goal
    per bone on its empty. Returns the empties."""
    heads = bone_heads(bpy, obj, bones, frames)
    empties = []
    for i, name in enumerate(bones):
        e = bpy.data.objects.new(f"target {name}", None)
        bpy.context.scene.collection.objects.link(e)
        key_locations(bpy, e, np.asarray(frames, float), heads[:, i] + np.asarray(offsets[i % len(offsets)]))
        g = obj.fullbody_ik.goals.add()
        g.kind, g.bone, g.target, g.use_tail = kind, name, e, False
        empties.append(e)
    bpy.context.scene.frame_set(frames[0])
    return empties


def animate_object(bpy, obj, frames, parent=False):
    """Move the armature over the frames: its own keys (a slide and a turn), or (``parent``) an empty it is
    parented to that slides, turns and rises."""
    mover = obj
    if parent:
        mover = bpy.data.objects.new("carrier", None)
        bpy.context.scene.collection.objects.link(mover)
        obj.parent = mover
    for k, f in enumerate(frames):
        t = k / max(len(frames) - 1, 1)
        mover.location = (1.5 * t, 0.5 * t, 0.3 * t if parent else 0.0)
        mover.rotation_euler = (0.0, 0.0, math.radians(40) * t)
        mover.keyframe_insert("location", frame=f)
        mover.keyframe_insert("rotation_euler", frame=f)
    return mover


def _finish(bpy, obj, frames, limbs, time_limit, move):
    obj.fullbody_ik.settings.time_limit = time_limit
    if move:
        animate_object(bpy, obj, frames, parent=move == "parent")
    follow_bones(bpy, obj, limbs, frames)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames[0], frames[-1]
    scene.frame_set(frames[0])
    bpy.context.view_layer.objects.active = obj
    return obj, frames


def import_cmu(bpy, clip):
    """A CMU clip from data/bvh, imported in metres; returns (armature, first frame, last frame)."""
    bpy.ops.import_anim.bvh(filepath=os.path.join(BVH, f"cmu_{clip}.bvh"), global_scale=CMU_UNIT,
                            rotate_mode="NATIVE")
    obj = bpy.context.object
    start, end = (int(round(f)) for f in obj.animation_data.action.frame_range)
    return obj, start + 1, end  # frame `start` is the added T-pose


def _import_character(bpy, importer, file, is_clip):
    """(armature, first frame, last frame) of a character from data/characters, the clip ``is_clip`` picks
    assigned (the armature the import added, not one already in the scene)."""
    before = set(bpy.data.objects)
    importer(filepath=os.path.join(ROOT, "data", "characters", file))
    obj = next(o for o in bpy.data.objects if o.type == "ARMATURE" and o not in before)
    action = next(a for a in bpy.data.actions if is_clip(a))
    obj.animation_data.action = action
    start, end = (int(round(f)) for f in action.frame_range)
    return obj, start, end


def import_mannequiny(bpy, clip="run_root.001"):
    """mannequiny (data/characters, CC BY 4.0, GDQuest and contributors): a glTF character with Unreal-like
    names; returns (armature with ``clip`` assigned, first frame, last frame)."""
    return _import_character(bpy, bpy.ops.import_scene.gltf, "mannequiny.glb", lambda a: a.name == clip)


def import_kaykit(bpy):
    """KayKit's Barbarian (data/characters, CC0): a glTF chibi with big boots and short legs, no clip; returns its
    armature."""
    before = set(bpy.data.objects)
    bpy.ops.import_scene.gltf(filepath=os.path.join(ROOT, "data", "characters", "KayKit_Barbarian.glb"))
    return next(o for o in bpy.data.objects if o.type == "ARMATURE" and o not in before)


def import_boxing(bpy):
    """assimp's Boxing_Toes.bvh (data/bvh, BSD-3): the LeftHip/LeftKnee/LeftAnkle convention, 100 fps, in
    metres; returns (armature, first frame, last frame)."""
    bpy.ops.import_anim.bvh(filepath=os.path.join(BVH, "Boxing_Toes.bvh"), global_scale=0.01, rotate_mode="NATIVE")
    obj = bpy.context.object
    start, end = (int(round(f)) for f in obj.animation_data.action.frame_range)
    return obj, start, end


def import_quaternius(bpy, clip="Man_Walk"):
    """Quaternius' casual man (data/characters, CC0): a game rig exported from Blender, its feet parented to the
    root, clips in place; returns (armature with ``clip`` assigned, first frame, last frame)."""
    return _import_character(bpy, bpy.ops.import_scene.fbx, "Quaternius_Male_Casual.fbx",
                             lambda a: a.name.endswith("|" + clip))


def cmu_scene(bpy, clip="02_01", frames=None, time_limit=0.01, move=None):
    """(armature, frames): a CMU clip with its own root motion, goals on hands and feet. ``move``: None,
    "object" (the armature object animated too) or "parent" (parented to a moving empty)."""
    fresh(bpy)
    obj, first, last = import_cmu(bpy, clip)
    return _finish(bpy, obj, list(frames or range(first, last + 1)), CMU_LIMBS, time_limit, move)


def metarig(bpy, kind="human"):
    """Rigify's human metarig, or another it ships (``kind``: "basic_human", ...), the add-on enabled first."""
    import addon_utils

    addon_utils.enable("rigify", default_set=True)
    getattr(bpy.ops.object, f"armature_{kind}_metarig_add")()
    return bpy.context.object


def rigify_walk(bpy, frames=48):
    """A rig generated by Rigify from the human metarig, animated the way an animator keys it: the torso
    control walks 1.2 m along -Y and the IK foot controls step (a foot stands, then swings 60 cm forward
    with a 8 cm lift); the deform bones follow through Rigify's constraints. Returns (rig, first, last)."""
    from mathutils import Matrix

    meta = metarig(bpy)
    bpy.context.view_layer.objects.active = meta
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    bpy.context.view_layer.objects.active = rig
    pb = rig.pose.bones

    def foot(t, start, swings):  # (forward, lift) of a foot at frame t: steps of 0.6 m over the swing frames
        y, z = start, 0.0
        for a, b in swings:
            if t >= b:
                y -= 0.6
            elif t > a:
                u = (t - a) / (b - a)
                y, z = y - 0.6 * (u * u * (3 - 2 * u)), 0.08 * math.sin(math.pi * u)
        return y, z

    for t in range(1, frames + 1):
        u = (t - 1) / max(frames - 1, 1)
        for name, (y, z) in (("torso", (-1.2 * u, 0.02 * math.cos(4 * math.pi * u))),
                             ("foot_ik.L", foot(t, 0.0, [(6, 18), (30, 42)])),
                             ("foot_ik.R", foot(t, -0.3, [(18, 30), (42, 54)]))):
            pb[name].matrix = Matrix.Translation((0.0, y, z)) @ rig.data.bones[name].matrix_local
            bpy.context.view_layer.update()
            pb[name].keyframe_insert("location", frame=t)
    bpy.context.scene.frame_set(1)
    return rig, 1, frames


def key_within_reach(bpy, rig, goal, first, last, k=0):
    """Key the target of ``goal`` (on a generated Rigify rig's hand or foot: a control or its deform bone) from where
    it stands at ``first`` to a pose within reach at ``last``: a hand drawn 8 cm toward its shoulder, a foot lifted
    6 cm and 1 cm more per ``k``."""
    from mathutils import Vector

    name, target = goal.bone, goal.target
    limb = rig.pose.bones[("ORG-upper_arm." if "hand" in name else "ORG-thigh.") + name[-1]]
    toward = (limb.head - rig.pose.bones[name].tail).normalized() * 0.08 if "hand" in name else \
        Vector((0.0, 0.0, 0.06 + 0.01 * k))
    for f, move in ((first, Vector()), (last, toward)):
        bpy.context.scene.frame_set(f)
        target.location = Vector(target.location) + move
        target.keyframe_insert("location", frame=f)


def pose_rest(bpy, obj, turns):
    """A new rest pose: each bone of ``turns`` {name: (axis index, degrees)} turned in place, about the world
    axis (0 x, 1 y, 2 z) through its head, its children with it (an A-pose from a T-pose)."""
    from mathutils import Matrix

    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = obj.data.edit_bones
    for name, (axis, degrees) in turns.items():
        bone = eb[name]
        pivot = bone.head.copy()
        R = Matrix.Translation(pivot) @ Matrix.Rotation(math.radians(degrees), 4, "XYZ"[axis]) @ \
            Matrix.Translation(-pivot)
        for b in [bone] + [c for c in bone.children_recursive]:
            b.transform(R)
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def metarig_scene(bpy, frames=range(1, 49), time_limit=0.01, move=None):
    """(armature, frames): the human metarig under a new unconnected ``root`` bone that walks 2 m along Y and
    turns 30 degrees, arms and legs swinging; goals on hands and feet."""
    fresh(bpy)
    obj = metarig(bpy)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = obj.data.edit_bones
    root = eb.new("root")
    root.head, root.tail = (0, 0, 0), (0, 0.3, 0)
    for b in eb:
        if b.parent is None and b.name != "root":
            b.parent, b.use_connect = root, False
    bpy.ops.object.mode_set(mode="POSE")
    frames = list(frames)
    for k, f in enumerate(frames):
        t = k / max(len(frames) - 1, 1)
        phase = 2 * math.pi * 2 * t  # two strides
        pb = obj.pose.bones["root"]
        pb.rotation_mode = "XYZ"
        pb.location = (0.0, 2.0 * t, 0.0)  # the root bone's Y axis is the world's Y: it points forward
        pb.rotation_euler = (0.0, 0.0, math.radians(30) * t)  # about its own Z: the world's up
        pb.keyframe_insert("location", frame=f)
        pb.keyframe_insert("rotation_euler", frame=f)
        for name, sign in (("upper_arm.L", 1), ("upper_arm.R", -1), ("thigh.L", -1), ("thigh.R", 1)):
            b = obj.pose.bones[name]
            b.rotation_mode = "XYZ"
            b.rotation_euler = (0.35 * sign * math.sin(phase), 0.0, 0.0)
            b.keyframe_insert("rotation_euler", frame=f)
        for name in ("shin.L", "shin.R", "forearm.L", "forearm.R"):
            b = obj.pose.bones[name]
            b.rotation_mode = "XYZ"
            b.rotation_euler = (0.25 + 0.2 * math.sin(phase + (0 if name.endswith("L") else math.pi)), 0.0, 0.0)
            b.keyframe_insert("rotation_euler", frame=f)
    bpy.ops.object.mode_set(mode="OBJECT")
    return _finish(bpy, obj, frames, METARIG_LIMBS, time_limit, move)


def terrain_mesh(bpy, name, height, size=(12.0, 12.0), resolution=0.1, center=(0.0, 0.0)):
    """A grid mesh object whose vertex heights are ``height(x, y)`` (vectorized), in world units."""
    nx, ny = int(size[0] / resolution) + 1, int(size[1] / resolution) + 1
    xs = np.linspace(-size[0] / 2, size[0] / 2, nx) + center[0]
    ys = np.linspace(-size[1] / 2, size[1] / 2, ny) + center[1]
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    Z = height(X, Y)
    verts = np.stack([X, Y, Z], axis=-1).reshape(-1, 3)
    idx = np.arange(nx * ny).reshape(nx, ny)
    faces = np.stack([idx[:-1, :-1], idx[1:, :-1], idx[1:, 1:], idx[:-1, 1:]], axis=-1).reshape(-1, 4)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts.tolist(), [], faces.tolist())
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def slope(degrees=15.0, along=(0.0, 1.0)):
    """height(x, y) of a plane rising ``degrees`` along the direction ``along``."""
    t = np.tan(np.radians(degrees))
    return lambda X, Y: t * (along[0] * X + along[1] * Y)


def stairs(rise=0.15, run=0.6, along=(0.0, 1.0), start=0.0):
    return lambda X, Y: rise * np.maximum(np.floor((along[0] * X + along[1] * Y - start) / run) + 1, 0)


def height_map(amplitude=0.3, size=10.0):
    """A real height map (matplotlib's jacksboro_fault_dem.npz), a patch scaled to vary about +-amplitude over
    ``size`` metres; returns height(x, y) by bilinear interpolation."""
    from matplotlib import cbook

    dem = cbook.get_sample_data("jacksboro_fault_dem.npz")  # matplotlib opens it as an NpzFile
    z = np.asarray(dem["elevation"], dtype=float)
    patch = z[100:200, 100:200]
    patch = (patch - patch.mean()) / max(np.abs(patch - patch.mean()).max(), 1e-9) * amplitude
    n = patch.shape[0]

    def height(X, Y):
        u = np.clip((X / size + 0.5) * (n - 1), 0, n - 1.001)
        v = np.clip((Y / size + 0.5) * (n - 1), 0, n - 1.001)
        i, j = u.astype(int), v.astype(int)
        fu, fv = u - i, v - j
        return ((1 - fu) * (1 - fv) * patch[i, j] + fu * (1 - fv) * patch[i + 1, j]
                + (1 - fu) * fv * patch[i, j + 1] + fu * fv * patch[i + 1, j + 1])
    return height
