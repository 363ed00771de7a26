# SPDX-License-Identifier: GPL-3.0-or-later
"""An independent judge of a retargeting result: the source motion against the character it was put on.

Nothing of the product's own measuring is used (not its contact detector, foot finder nor report figures): the
judge loads the source motion itself (Blender's importers; a BVH with rotate_mode NATIVE, one key a clip frame)
and the result .blend, evaluates both at corresponding frames (``scene.frame_set`` and the pose bones' matrices,
the character's skinned meshes as Blender deforms them) and measures. The report is read only for its bone
pairing ("mapping": [role, source bone, target bone]), which objects and actions were used, the frame range and
the seconds it took; the pairing is checked geometrically (left bones on the left given the facing the feet
show, thigh above shin above foot, pelvis below chest) and a pairing that fails is flagged.

Frames: the result's frame f shows the source's clip at (f - 1) / dt clip frames after its first, dt = 1 (one key a
clip frame, ``--clip-rate clip``) or the scene's fps times the BVH's frame time (``--clip-rate scene``); both are
tried and the one whose limb directions agree better is kept (the frame count is reported beside it).
Frames that are a reference pose (CMU's first frame: a T-pose) or an isolated outlier pose of the source are left
out of every measure.

Measures (lengths in mm of the result's scene, the source "scaled" by the leg-length ratio: the result's hip
height over its soles in rest / the source's hip height over its robust floor at its first non-reference frame):

- limb directions (thigh, shin, upper arm, forearm each side, spine pelvis->chest; joint to joint): the angle
  between the result's and the source's after one best heading (a single rotation about world Z for the whole
  clip minimising the mean angle): mean, p95, max per limb and overall;
- the source's flat-foot contacts, found here: ankle and toe tip both within a small height of that foot's low
  level and both moving slowly (the floor: a low percentile of the foot points' heights over the take); at those
  frames in the result: skate (horizontal ankle speed, mm/frame, against the scaled source's), the ankle height
  spread over each contact (max - min), the sole's lowest point over the ground (flat floor at the character's
  rest lowest vertex, or a terrain object by raycast) against the scaled source's clearance over its floor;
- the swinging heel's (ankle's) peak lift over its standing height: result / scaled source, per swing;
- pelvis (hip joints' midpoint) height over the leg length, result and source; its horizontal travel, result /
  scaled source;
- joint-limit violations where the result's bones carry IK limits or Limit Rotation constraints;
- knees and elbows bent the wrong way (beyond 5 / 10 degrees against the way they fold in the rest pose), counts
  in the result and in the source;
- time per frame from the report's seconds.

A result whose rest pose lies down (a glTF whose root's pose stands it up) is measured on its rest stood up about
the armature's origin (stood_up): its floor, its leg length, the pairing's rest checks.

The aims' lengths (ankle spread 10 mm, clearance 3 mm) are a human's: they scale with the result's leg over a
human's hip height (900 mm), so a character imported 10 times a human's size is held to 30 mm, a chibi half
one's to 1.5 mm.

    python -m fullbody_ik.benchmarks.retarget_judge --source X.bvh --result Y.blend --report R.json [--json]
"""

import argparse
import json
import math
import os
import sys

import numpy as np

AIMS = {"limb_mean_deg": 10.0, "limb_p95_deg": 25.0, "ankle_spread_mm": 10.0, "swing_ratio": (0.8, 1.25),
        "clearance_p95_mm": 3.0, "ankle_step_ratio": 1.5}
HUMAN_LEG_MM = 900.0  # the aims' lengths are a human's: they scale with the character's leg over a human's hip height
CONTACT_HEIGHT = float(os.environ.get("JUDGE_CONTACT_HEIGHT", 0.035))  # of the leg: a flat foot's ankle and toe
CONTACT_SPEED = float(os.environ.get("JUDGE_CONTACT_SPEED", 0.35))  # legs a second: ... and their speed
LIMBS = ("left thigh", "right thigh", "left shin", "right shin", "left upper_arm", "right upper_arm",
         "left forearm", "right forearm", "spine")
SIDES = ("left", "right")


# --------------------------------------------------------------------------------------------------- the report

def read_report(report_json):
    """The product's report (the CLI's --json document or its "report"), as a dict; {} when none."""
    if report_json is None:
        return {}
    if isinstance(report_json, dict):
        data = report_json
    else:
        with open(report_json, encoding="utf-8") as f:
            text = f.read()
        try:
            data = json.loads(text)
        except ValueError:  # (stdout with something before the document)
            data = json.loads(text[text.index("{"):])
    if isinstance(data.get("report"), dict):
        rep = dict(data["report"])
        rep.setdefault("_cli", {k: v for k, v in data.items() if k != "report"})
        return rep
    return data


def roles_of(report):
    """{role: (source bone, target bone)} from the report's mapping."""
    out = {}
    for row in report.get("mapping") or []:
        if isinstance(row, (list, tuple)) and len(row) >= 3:
            out[str(row[0])] = (row[1], row[2])
    if isinstance(report.get("mapping"), dict):  # ({role: [source, target]})
        for role, pair in report["mapping"].items():
            out[role] = tuple(pair)[:2]
    return out


# --------------------------------------------------------------------------------------------------- sampling

def _quiet_bpy():
    import bpy
    return bpy


def _points_of(names):
    """The joint points a rig is sampled at: {point: (role, 'head'|'tail')} alternatives, first present wins."""
    pts = {"pelvis": [("pelvis", "head")], "chest": [("chest", "head"), ("neck", "head")],
           "head": [("head", "head")]}
    for s in SIDES:
        pts[f"{s} hip"] = [(f"{s} thigh", "head")]
        pts[f"{s} knee"] = [(f"{s} shin", "head"), (f"{s} thigh", "tail")]
        pts[f"{s} ankle"] = [(f"{s} foot", "head"), (f"{s} shin", "tail")]
        pts[f"{s} ball"] = [(f"{s} toe", "head"), (f"{s} foot", "tail")]
        pts[f"{s} toe"] = [(f"{s} toe", "tail"), (f"{s} foot", "tail")]
        pts[f"{s} shoulder"] = [(f"{s} upper_arm", "head")]
        pts[f"{s} elbow"] = [(f"{s} forearm", "head"), (f"{s} upper_arm", "tail")]
        pts[f"{s} wrist"] = [(f"{s} hand", "head"), (f"{s} forearm", "tail")]
    out = {}
    for p, alts in pts.items():
        for role, end in alts:
            if role in names:
                out[p] = (role, end)
                break
    return out


LIMB_POINTS = {"spine": ("pelvis", "chest")}
for _s in SIDES:
    LIMB_POINTS[f"{_s} thigh"] = (f"{_s} hip", f"{_s} knee")
    LIMB_POINTS[f"{_s} shin"] = (f"{_s} knee", f"{_s} ankle")
    LIMB_POINTS[f"{_s} upper_arm"] = (f"{_s} shoulder", f"{_s} elbow")
    LIMB_POINTS[f"{_s} forearm"] = (f"{_s} elbow", f"{_s} wrist")
EXTRA_LIMBS = ("left hand", "right hand", "left foot", "right foot")  # (measured and flagged, outside the
# overall figure: hands wrist to fingers, feet ankle to ball)
for _s in SIDES:
    LIMB_POINTS[f"{_s} hand"] = (f"{_s} wrist", f"{_s} fingers")
    LIMB_POINTS[f"{_s} foot"] = (f"{_s} ankle", f"{_s} ball")
HINGES = {f"{s} knee": (f"{s} thigh", f"{s} hip", f"{s} knee", f"{s} ankle", "back") for s in SIDES}
HINGES.update({f"{s} elbow": (f"{s} upper_arm", f"{s} shoulder", f"{s} elbow", f"{s} wrist", "front")
               for s in SIDES})


def _world(arm):
    return np.array(arm.matrix_world)


def hand_tips(arm, names):
    """{"left fingers": [(bone, "head" or "tail")]}: the points whose mean gives a hand's far end: its knuckles (the
    first joint of each finger but the thumb, where the palm ends: how far the fingers curl is not the hand's
    direction), the hand's own tail when it has no fingers."""
    out = {}
    for s in SIDES:
        hn = names.get(f"{s} hand")
        if hn is None:
            continue
        b = arm.data.bones[hn]
        near = 1e-6 * max(b.length, 1e-6)
        knuckles, todo = [], [c for c in b.children if "thumb" not in c.name.lower()]
        while todo:  # (a finger block starting at the hand's head, CMU's: its fingers' first joints past it)
            c = todo.pop()
            if (c.head_local - b.head_local).length > near:
                knuckles.append(c.name)
            else:
                todo += [g for g in c.children if "thumb" not in g.name.lower()]
        out[f"{s} fingers"] = [(k, "head") for k in knuckles] or [(hn, "tail")]
    return out


def directionless_hands(arm, names):
    """Sides whose hand bone has no fingers and no length of its own (a BVH hand ending in a zero End Site, to
    which Blender's importer gives a tail pointing anywhere): such a hand points where its forearm did in rest,
    turned with the hand (carry_hand_direction)."""
    out = []
    for s in SIDES:
        hn, fn = names.get(f"{s} hand"), names.get(f"{s} forearm")
        if hn is None or fn is None:
            continue
        hand, fore = arm.data.bones[hn], arm.data.bones[fn]
        if not hand.children and hand.length < 0.05 * max((hand.head_local - fore.head_local).length, 1e-9):
            out.append(s)
    return out


def carry_hand_direction(data, rest_pts, rest_rot, sides):
    """Each of ``sides``' fingers point (in ``data`` from sample_rig) made from its wrist: the forearm's rest
    direction, a third of its length, carried with the hand bone."""
    for s in sides:
        d = rest_pts[f"{s} wrist"] - rest_pts[f"{s} elbow"]
        local = rest_rot[f"{s} hand"].T @ (0.3 * d)
        data["points"][f"{s} fingers"] = data["points"][f"{s} wrist"] + np.einsum("nij,j->ni",
                                                                                  data["rot"][f"{s} hand"], local)


def tails_meaningful(arm):
    """Whether the armature's bones end where a child begins (BVH, Rigify, most glTF); an FBX importer's bones often
    point along an axis of their own, their tails telling nothing."""
    hits = total = 0
    for b in arm.data.bones:
        if not b.children:
            continue
        total += 1
        tol = 0.02 * max(b.length, 1e-9)
        hits += any((c.head_local - b.tail_local).length <= tol for c in b.children)
    return total > 0 and hits >= 0.6 * total


def clamp_toes(P, rest, tails=True):
    """(tails meaningless: a toe tip 0.35 of the foot beyond the ball, along ankle to ball)"""
    if not tails:
        for s in SIDES:
            t, b, a = f"{s} toe", f"{s} ball", f"{s} ankle"
            if all(k in rest for k in (t, b, a)) and t in P and b in P and a in P and rest.get(f"{s} toe@head") \
                    is not None:
                P[t] = P[b] + 0.35 * (P[b] - P[a])
                rest[t] = rest[b] + 0.35 * (rest[b] - rest[a])
        return
    _clamp(P, rest)


def _clamp(P, rest):
    """A toe tip no further from the ball than 0.6 of the foot (ankle to ball) in rest: importers end a leaf toe
    bone anywhere (a glTF Mixamo toe's tail lies 20 m away)."""
    for s in SIDES:
        t, b, a = f"{s} toe", f"{s} ball", f"{s} ankle"
        if not all(k in rest for k in (t, b, a)) or t not in P:
            continue
        cap = 0.6 * float(np.linalg.norm(rest[b] - rest[a]))
        L = float(np.linalg.norm(rest[t] - rest[b]))
        if cap > 0 and L > cap:
            v = P[t] - P[b]
            P[t] = P[b] + v * (cap / L)
            rest[t] = rest[b] + (rest[t] - rest[b]) * (cap / L)


def sample_rig(bpy, arm, names, frames, meshes=(), foot_vertices=None, extra=None):
    """Per frame: the joint points (world), each mapped bone's world rotation, the lowest point of each foot's
    skin (world) when ``foot_vertices`` {side: [(mesh, indices)]} is given. ``names`` {role: bone}; ``extra``
    {point: [bones]}: points at the mean of those bones' tails."""
    scene = bpy.context.scene
    pts = _points_of(names)
    extra = extra or {}
    roles = sorted(names)
    n = len(frames)
    P = {p: np.zeros((n, 3)) for p in list(pts) + list(extra)}
    R = {r: np.zeros((n, 3, 3)) for r in roles}
    B = {r: np.zeros((n, 4, 4)) for r in roles}  # pose bones' matrix_basis
    sole = {s: np.full((n, 3), np.nan) for s in (foot_vertices or {})}
    sole_low = {s: [] for s in (foot_vertices or {})}
    for i, f in enumerate(frames):
        fi = int(math.floor(f))
        scene.frame_set(fi, subframe=float(f - fi))
        W = _world(arm)
        for r in roles:
            pb = arm.pose.bones[names[r]]
            M = W @ np.array(pb.matrix)
            R[r][i] = M[:3, :3] / np.linalg.norm(M[:3, :3], axis=0)
            B[r][i] = np.array(pb.matrix_basis)
        for p, (role, end) in pts.items():
            pb = arm.pose.bones[names[role]]
            v = pb.head if end == "head" else pb.tail
            P[p][i] = (W @ np.append(np.array(v), 1.0))[:3]
        for p, bones in extra.items():
            v = np.mean([np.array(getattr(arm.pose.bones[b], end)) for b, end in bones], axis=0)
            P[p][i] = (W @ np.append(v, 1.0))[:3]
        if foot_vertices:
            dg = bpy.context.evaluated_depsgraph_get()
            for s, parts in foot_vertices.items():
                best = None
                lows = []
                for ob, idx in parts:
                    co = _evaluated_coords(ob, dg)
                    if co is None or len(idx) == 0:
                        continue
                    w = co[idx]
                    lows.append(w[np.argsort(w[:, 2])[:24]])
                    j = int(np.argmin(w[:, 2]))
                    if best is None or w[j, 2] < best[2]:
                        best = w[j]
                if best is not None:
                    sole[s][i] = best
                    sole_low[s].append(np.concatenate(lows))
                else:
                    sole_low[s].append(np.zeros((0, 3)))
    return {"points": P, "rot": R, "basis": B, "sole": sole, "sole_low": sole_low}


def _evaluated_coords(ob, dg):
    """World coordinates of a mesh object's vertices as Blender shows them (None when the evaluated mesh's
    vertices are not the original's)."""
    ev = ob.evaluated_get(dg)
    me = ev.data
    if len(me.vertices) != len(ob.data.vertices):
        return None
    co = np.empty(len(me.vertices) * 3)
    me.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    W = np.array(ev.matrix_world)
    return co @ W[:3, :3].T + W[:3, 3]


def rest_points(arm, names):
    """The joint points in the rest pose (world) and the mapped bones' rest rotations (world)."""
    W = _world(arm)
    pts = {}
    for p, (role, end) in _points_of(names).items():
        b = arm.data.bones[names[role]]
        v = b.head_local if end == "head" else b.tail_local
        pts[p] = (W @ np.append(np.array(v), 1.0))[:3]
    for r, bn in names.items():  # (each mapped bone's ends, for the pairing's chain check)
        b = arm.data.bones[bn]
        pts[f"{r}@head"] = (W @ np.append(np.array(b.head_local), 1.0))[:3]
        pts[f"{r}@tail"] = (W @ np.append(np.array(b.tail_local), 1.0))[:3]
    rot = {}
    for r, bn in names.items():
        M = W @ np.array(arm.data.bones[bn].matrix_local)
        rot[r] = M[:3, :3] / np.linalg.norm(M[:3, :3], axis=0)
    return pts, rot


def skinned_meshes(bpy, arm):
    out = []
    for ob in bpy.data.objects:
        if ob.type != "MESH" or len(ob.data.vertices) == 0:
            continue
        if any(m.type == "ARMATURE" and m.object == arm for m in ob.modifiers) or ob.parent == arm:
            out.append(ob)
    return out


def foot_vertex_sets(arm, meshes, names):
    """{side: [(mesh, vertex indices)]}: vertices weighted mostly (>= 0.5) to that foot's bones (the foot, the toe
    and every bone below them); for a foot with none (shoes that follow the shin, a game rig's foot control), the
    shin's below its ankle in the rest pose."""
    out = {}
    for s in SIDES:
        roots = [names[r] for r in (f"{s} foot", f"{s} toe") if r in names]
        if not roots:
            continue
        bones = set()
        for bn in roots:
            b = arm.data.bones[bn]
            bones.add(b.name)
            bones.update(c.name for c in b.children_recursive)
        parts = _weighted_to(arm, meshes, bones)
        if not parts and f"{s} shin" in names:
            W = np.array(arm.matrix_world)
            ankle = (W @ np.append(arm.data.bones[roots[0]].head_local, 1.0))[2]
            parts = [(ob, idx[_rest_world(arm, ob)[idx, 2] < ankle])
                     for ob, idx in _weighted_to(arm, meshes, {names[f"{s} shin"]})]
            parts = [(ob, idx) for ob, idx in parts if len(idx)]
        if parts:
            out[s] = parts
    return out


def _rest_world(arm, ob):
    """A mesh's vertices (world) with the armature at rest: a mesh parented to a bone brought back from its pose."""
    co = np.empty(3 * len(ob.data.vertices))
    ob.data.vertices.foreach_get("co", co)
    M = np.array(ob.matrix_world)
    if ob.parent == arm and ob.parent_type == "BONE":
        W = np.array(arm.matrix_world)
        bone = arm.data.bones[ob.parent_bone]
        M = W @ np.array(bone.matrix_local) @ np.linalg.inv(np.array(arm.pose.bones[bone.name].matrix)) @ \
            np.linalg.inv(W) @ M
    return co.reshape(-1, 3) @ M[:3, :3].T + M[:3, 3]


def _weighted_to(arm, meshes, bones):
    """[(mesh, vertex indices)] of the skin weighted mostly (>= 0.5) to ``bones``, whole meshes parented to one."""
    parts = []
    for ob in meshes:
        if ob.parent == arm and ob.parent_type == "BONE":
            if ob.parent_bone in bones:
                parts.append((ob, np.arange(len(ob.data.vertices))))
            continue
        gi = {g.index for g in ob.vertex_groups if g.name in bones}
        if not gi:
            continue
        idx = []
        for v in ob.data.vertices:
            tot = sum(g.weight for g in v.groups)
            mine = sum(g.weight for g in v.groups if g.group in gi)
            if tot > 0 and mine / tot >= 0.5:
                idx.append(v.index)
        if idx:
            parts.append((ob, np.array(idx)))
    return parts


class _Turn:
    """A rotation R about a point (world)."""

    def __init__(self, R, origin):
        self.R, self.origin = R, origin

    def __call__(self, p):
        return self.origin + (np.asarray(p) - self.origin) @ self.R.T


def stood_up(pts, W):
    """None for a rest pose that stands (upright); else the least turn about the armature's origin (``W`` its
    world matrix) that stands it: its legs' rise, ankles to hips, onto the world's up; the rise taken along the
    armature's axis it is within 10 degrees of (a rest lies along an axis; legs lean a little)."""
    if upright(pts):
        return None
    rise = [pts[f"{s} hip"] - pts[f"{s} ankle"] for s in SIDES if f"{s} hip" in pts and f"{s} ankle" in pts]
    if not rise:
        return None
    u = np.mean([r / np.linalg.norm(r) for r in rise], axis=0)
    R = W[:3, :3] / np.linalg.norm(W[:3, :3], axis=0)
    a = R.T @ (u / np.linalg.norm(u))  # (armature space)
    k = int(np.argmax(np.abs(a)))
    if abs(a[k]) > np.cos(np.radians(10.0)):
        a = np.sign(a[k]) * np.eye(3)[k]
    u = R @ a
    u /= np.linalg.norm(u)
    z = np.array([0.0, 0.0, 1.0])
    axis = np.cross(u, z)
    s_, c = float(np.linalg.norm(axis)), float(u @ z)
    if s_ < 1e-9:
        return None
    k = axis / s_
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return _Turn(np.eye(3) + s_ * K + (1.0 - c) * K @ K, W[:3, 3].copy())


def _rest_lowest(bpy, arm, meshes, turn=None):
    """The lowest world height of the character's skin in its rest pose (its bones' if it has no skin), that
    pose stood up by ``turn`` (stood_up) if given."""
    turn = turn or (lambda p: p)
    old = arm.data.pose_position
    arm.data.pose_position = "REST"
    try:
        bpy.context.view_layer.update()
        dg = bpy.context.evaluated_depsgraph_get()
        low = None
        for ob in meshes:
            co = _evaluated_coords(ob, dg)
            if co is not None and len(co):
                z = float(turn(co)[:, 2].min())
                low = z if low is None else min(low, z)
        if low is None:
            W = _world(arm)
            zs = [turn((W @ np.append(np.array(getattr(b, e)), 1.0))[:3])[2] for b in arm.data.bones
                  for e in ("head_local", "tail_local")]
            low = float(min(zs))
        return low
    finally:
        arm.data.pose_position = old
        bpy.context.view_layer.update()


class Ground:
    """Height of the ground under world points: a flat floor, or terrain objects by a downward raycast."""

    def __init__(self, bpy=None, objects=(), floor=0.0):
        self.floor = float(floor)
        self.tree = None
        self.top = None
        if objects:
            from mathutils import Vector
            from mathutils.bvhtree import BVHTree
            dg = bpy.context.evaluated_depsgraph_get()
            verts, polys = [], []
            for ob in objects:
                ev = ob.evaluated_get(dg)
                me = ev.to_mesh()
                W = ev.matrix_world
                base = len(verts)
                verts.extend(W @ v.co for v in me.vertices)
                polys.extend([base + i for i in p.vertices] for p in me.polygons)
                ev.to_mesh_clear()
            self.tree = BVHTree.FromPolygons(verts, polys)
            self.top = max(v.z for v in verts) + 10.0
            self._V = Vector

    def height(self, xy):
        """Ground heights under points (..., >=2) (nan where no terrain is under them)."""
        xy = np.asarray(xy, dtype=float)
        if self.tree is None:
            return np.full(xy.shape[:-1], self.floor)
        flat = xy.reshape(-1, xy.shape[-1])
        out = np.full(len(flat), np.nan)
        down = self._V((0.0, 0.0, -1.0))
        for i, p in enumerate(flat):
            if not np.all(np.isfinite(p[:2])):
                continue
            hit = self.tree.ray_cast(self._V((p[0], p[1], self.top)), down)
            if hit[0] is not None:
                out[i] = hit[0].z
        return out.reshape(xy.shape[:-1])

    def normal(self, xy):
        """Ground normals (..., 3) under points (..., >=2) (up where no terrain is under them)."""
        xy = np.asarray(xy, dtype=float)
        out = np.zeros(xy.shape[:-1] + (3,))
        out[..., 2] = 1.0
        if self.tree is None:
            return out
        flat, res = xy.reshape(-1, xy.shape[-1]), out.reshape(-1, 3)
        down = self._V((0.0, 0.0, -1.0))
        for i, p in enumerate(flat):
            if np.all(np.isfinite(p[:2])):
                hit = self.tree.ray_cast(self._V((p[0], p[1], self.top)), down)
                if hit[0] is not None:
                    n = np.array(hit[1])
                    res[i] = n if n[2] > 0 else -n
        return out


def load_result(bpy, result_blend, report, terrain=None):
    """Open the result and sample its character at every frame of the report's range."""
    bpy.ops.wm.open_mainfile(filepath=os.path.abspath(result_blend))
    scene = bpy.context.scene
    roles = roles_of(report)
    names = {r: t for r, (s, t) in roles.items()}
    arm = bpy.data.objects.get(str(report.get("target") or ""))
    if arm is None or arm.type != "ARMATURE":
        cands = [o for o in bpy.data.objects if o.type == "ARMATURE" and all(n in o.data.bones for n in names.values())]
        if not cands:
            raise RuntimeError("no armature in the result carries the mapped bones")
        arm = cands[0]
    missing = [r for r, n in names.items() if n not in arm.data.bones]
    for r in missing:
        del names[r]
    action = bpy.data.actions.get(str(report.get("action") or ""))
    if action is not None:
        ad = arm.animation_data or arm.animation_data_create()
        if ad.action != action:
            ad.action = action
    act = arm.animation_data.action if arm.animation_data else None
    fr = report.get("frames")
    if fr and len(fr) == 2:
        first, last = int(fr[0]), int(fr[1])
    elif act is not None:
        first, last = int(math.floor(act.frame_range[0])), int(math.ceil(act.frame_range[1]))
    else:
        first, last = scene.frame_start, scene.frame_end
    frames = list(range(first, last + 1))
    meshes = skinned_meshes(bpy, arm)
    for ob in meshes:  # (only the armature deforms: vertex counts kept)
        for m in ob.modifiers:
            if m.type != "ARMATURE":
                m.show_viewport = False
    terrain_objs = []
    if terrain:
        for t in (terrain if isinstance(terrain, (list, tuple)) else str(terrain).split(",")):
            t = t.strip()
            if t and t in bpy.data.objects:
                terrain_objs.append(bpy.data.objects[t])
            elif t:
                raise RuntimeError(f"no terrain object {t!r} in the result")
    rest_pts, rest_rot = rest_points(arm, names)
    turn = stood_up(rest_pts, _world(arm))
    if turn is not None:  # a rest lying down (its root's pose stands it up): its rest stood up about the origin
        rest_pts = {k: turn(v) for k, v in rest_pts.items()}
        rest_rot = {k: turn.R @ v for k, v in rest_rot.items()}
    floor = _rest_lowest(bpy, arm, meshes, turn)
    ground = Ground(bpy, terrain_objs, floor)
    fv = foot_vertex_sets(arm, meshes, names)
    data = sample_rig(bpy, arm, names, frames, meshes, fv, hand_tips(arm, names))
    carry_hand_direction(data, rest_pts, rest_rot, directionless_hands(arm, names))
    tails = tails_meaningful(arm)
    clamp_toes(data["points"], rest_pts, tails)
    for s in SIDES:  # (no skin: a heel under each ankle at its toe tip's rest height, carried with the foot)
        if s in fv or f"{s} foot" not in rest_rot or f"{s} toe" not in rest_pts:
            continue
        d = np.array([0.0, 0.0, -(rest_pts[f"{s} ankle"][2] - rest_pts[f"{s} toe"][2])])
        local = rest_rot[f"{s} foot"].T @ d
        data["points"][f"{s} heel"] = data["points"][f"{s} ankle"] + np.einsum("nij,j->ni", data["rot"][f"{s} foot"],
                                                                              local)
    limits = limit_specs(arm, names)
    fps = scene.render.fps / scene.render.fps_base
    unit = scene.unit_settings.scale_length if scene.unit_settings.system != "NONE" else 1.0
    return {"arm": arm.name, "names": names, "frames": np.array(frames, float), "data": data, "ground": ground,
            "floor": floor, "rest_points": rest_pts, "rest_rot": rest_rot, "fps": fps, "fps_int": scene.render.fps,
            "unit": unit or 1.0, "meshes": [m.name for m in meshes], "has_skin": bool(fv), "limits": limits,
            "missing_roles": missing, "terrain": [o.name for o in terrain_objs], "tails": tails,
            "action": act.name if act else None}


def limit_specs(arm, names):
    """{role: spec} of the mapped bones that carry IK limits or Limit Rotation constraints."""
    out = {}
    for r, bn in names.items():
        pb = arm.pose.bones[bn]
        spec = {}
        ik = {}
        for ax in "xyz":
            if getattr(pb, f"lock_ik_{ax}"):
                ik[ax] = (0.0, 0.0)
            elif getattr(pb, f"use_ik_limit_{ax}"):
                ik[ax] = (getattr(pb, f"ik_min_{ax}"), getattr(pb, f"ik_max_{ax}"))
        if ik:
            spec["ik"] = ik
        cons = []
        for c in pb.constraints:
            if c.type == "LIMIT_ROTATION" and not c.mute and c.influence > 0 and c.owner_space == "LOCAL":
                lim = {ax: (getattr(c, f"min_{ax}"), getattr(c, f"max_{ax}")) for ax in "xyz"
                       if getattr(c, f"use_limit_{ax}")}
                if lim:
                    cons.append({"order": getattr(c, "euler_order", "AUTO"), "limits": lim})
        if cons:
            spec["constraints"] = cons
        if spec:
            out[r] = spec
    return out


def _scene_fps_set(scene, fps_int, fps_base=1.0):
    scene.render.fps = int(fps_int)
    scene.render.fps_base = fps_base


def load_source(bpy, source_path, report, fps_int, fps_base=1.0):
    """Import the source motion into an empty scene (the result's frame rate) and sample it at every key frame."""
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    _scene_fps_set(scene, fps_int, fps_base)
    ext = os.path.splitext(source_path)[1].lower()
    before = set(bpy.data.objects)
    path = os.path.abspath(source_path)
    bvh = None
    if ext == ".bvh":
        bpy.ops.import_anim.bvh(filepath=path, rotate_mode="NATIVE", use_fps_scale=False, global_scale=1.0)
        bvh = bvh_header(path)
    elif ext == ".fbx":
        bpy.ops.import_scene.fbx(filepath=path)
    elif ext in (".glb", ".gltf"):
        bpy.ops.import_scene.gltf(filepath=path)
    elif ext == ".blend":
        with bpy.data.libraries.load(path, link=False) as (src, dst):
            dst.objects = list(src.objects)
        for o in dst.objects:
            if o is not None:
                scene.collection.objects.link(o)
    else:
        raise RuntimeError(f"cannot read the source {source_path}")
    added = [o for o in bpy.data.objects if o not in before]
    roles = roles_of(report)
    names = {r: s for r, (s, t) in roles.items()}
    arms = [o for o in added if o.type == "ARMATURE"]
    want = str(report.get("source") or "")
    arm = next((o for o in arms if o.name == want), None)
    if arm is None:
        arm = next((o for o in arms if all(n in o.data.bones for n in names.values())), None)
    if arm is None:
        arm = max(arms, key=lambda o: sum(n in o.data.bones for n in names.values()), default=None)
    if arm is None:
        raise RuntimeError(f"no armature in the source {source_path}")
    missing = [r for r, n in names.items() if n not in arm.data.bones]
    for r in missing:
        del names[r]
    sa = report.get("source_action")
    if sa and sa in bpy.data.actions and ext != ".bvh":
        ad = arm.animation_data or arm.animation_data_create()
        if ad.action is None or ad.action.name != sa:
            ad.action = bpy.data.actions[sa]
            if ad.action_slot is None and len(ad.action.slots):
                ad.action_slot = ad.action.slots[0]
    act = arm.animation_data.action if arm.animation_data else None
    if bvh is not None:
        first, last = 1, bvh["frames"]
    elif act is not None:
        first, last = int(math.floor(act.frame_range[0])), int(math.ceil(act.frame_range[1]))
    else:
        first, last = scene.frame_start, scene.frame_end
    frames = list(range(first, last + 1))
    data = sample_rig(bpy, arm, names, frames, extra=hand_tips(arm, names))
    rest_pts, rest_rot = rest_points(arm, names)
    carry_hand_direction(data, rest_pts, rest_rot, directionless_hands(arm, names))
    tails = tails_meaningful(arm)
    clamp_toes(data["points"], rest_pts, tails)
    return {"arm": arm.name, "names": names, "frames": np.array(frames, float), "data": data,
            "rest_points": rest_pts, "rest_rot": rest_rot, "bvh": bvh, "missing_roles": missing, "tails": tails,
            "action": act.name if act else None}


def bvh_header(path):
    frames = step = None
    with open(path, "rb") as f:
        for raw in f:
            line = raw.decode("latin-1").strip()
            low = line.lower()
            if low.startswith("frames:"):
                frames = int(line.split(":", 1)[1])
            elif low.startswith("frame time:"):
                step = float(line.split(":", 1)[1])
                break
    return {"frames": frames, "frame_time": step}


# --------------------------------------------------------------------------------------------------- measures

def _unit(v):
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 1e-12, n, 1.0)


def _angle(a, b):
    a, b = _unit(a), _unit(b)
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1)))


def _rotz(theta):
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def limb_dirs(P):
    return {limb: P[b] - P[a] for limb, (a, b) in LIMB_POINTS.items() if a in P and b in P}


def reference_frames(P):
    """Indices of the source's frames that are a reference pose or an isolated outlier: the limbs' mean direction
    change to the next frame far above its typical (median) change."""
    D = limb_dirs(P)
    if not D:
        return np.zeros(0, bool)
    n = len(next(iter(D.values())))
    out = np.zeros(n, bool)
    if n < 3:
        return out
    jump = np.mean([_angle(d[1:], d[:-1]) for d in D.values()], axis=0)  # (n-1,)
    thr = max(10.0, 8.0 * float(np.median(jump)))
    big = jump > thr
    # a block at the start (or the end) held still, then a jump
    k = np.flatnonzero(big)
    if len(k):
        if k[0] < max(3, n // 10) and np.all(jump[:k[0]] < thr / 4):
            out[:k[0] + 1] = True
        if k[-1] >= n - 1 - max(3, n // 10) and np.all(jump[k[-1] + 1:] < thr / 4):
            out[k[-1] + 1:] = True
    for i in range(1, n - 1):
        if big[i - 1] and big[i]:
            out[i] = True
    return out


def _interp(arr, s):
    """arr (n, ...) sampled at 0..n-1, read at fractional indices s (clamped)."""
    n = len(arr)
    s = np.clip(s, 0, n - 1)
    i0 = np.floor(s).astype(int)
    i1 = np.minimum(i0 + 1, n - 1)
    t = (s - i0).reshape((-1,) + (1,) * (arr.ndim - 1))
    return arr[i0] * (1 - t) + arr[i1] * t


def best_heading(S, T):
    """The rotation about Z (radians) minimising the mean angle between Rz @ S and T (both (N, 3)), and that mean."""
    ok = np.all(np.isfinite(S), axis=1) & np.all(np.isfinite(T), axis=1)
    S, T = _unit(S[ok]), _unit(T[ok])

    def cost(th):
        return float(np.mean(_angle(S @ _rotz(th).T, T)))

    grid = np.radians(np.arange(0, 360, 2.0))
    costs = [cost(t) for t in grid]
    t0 = grid[int(np.argmin(costs))]
    lo, hi = t0 - math.radians(2), t0 + math.radians(2)
    g = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if cost(a) < cost(b):
            hi = b
        else:
            lo = a
    th = (lo + hi) / 2
    return th, cost(th)


def runs(mask):
    """[(start, end_exclusive)] of True runs."""
    m = np.concatenate([[False], np.asarray(mask, bool), [False]])
    d = np.diff(m.astype(int))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def _speeds(P, fps_src):
    """Each point's speed (units/s), smoothed over about 1/30 s so that mocap jitter at high rates does not split
    contacts."""
    k = max(1, int(round(fps_src / 30.0)))
    ker = np.ones(2 * k + 1) / (2 * k + 1)
    out = {}
    for name, x in P.items():
        v = np.linalg.norm(np.gradient(x, axis=0), axis=1) * fps_src
        out[name] = np.convolve(np.pad(v, k, mode="edge"), ker, mode="valid")
    return out


def treadmill(P, valid, fps, leg):
    """The ground's horizontal velocity under an in-place clip (a game loop whose hips stay put while the standing
    foot slides back: a treadmill), units/s as a 3-vector, or None when the clip travels or its feet do not slide.
    The median velocity of a low ankle (both it and its toe tip near their low levels)."""
    if "left hip" not in P or "right hip" not in P:
        return None
    hips = (P["left hip"] + P["right hip"]) / 2
    idx = np.flatnonzero(valid)
    if len(idx) < 5 or np.max(np.linalg.norm(hips[idx, :2] - hips[idx[0], :2], axis=1)) > 0.5 * leg:
        return None
    vels = []
    for s in SIDES:
        a, t = P.get(f"{s} ankle"), P.get(f"{s} toe")
        if a is None or t is None:
            continue
        low = valid & (a[:, 2] < np.percentile(a[valid, 2], 5) + 0.035 * leg) \
            & (t[:, 2] < np.percentile(t[valid, 2], 5) + 0.035 * leg)
        vels.append((np.gradient(a[:, :2], axis=0) * fps)[low])
    v = np.concatenate(vels) if vels else np.zeros((0, 2))
    if len(v) < 5:
        return None
    g = np.median(v, axis=0)
    if np.linalg.norm(g) < 0.1 * leg:
        return None
    return np.array([g[0], g[1], 0.0])


def source_floor(P, valid, V, leg):
    """The source's floor as a plane z = a + b x + c y: its slope fitted to the lowest foot point of the frames
    where a foot is slow (mocap floors drift: CMU 02_01 rises ~1 unit over the walk), its level a low percentile (2 %)
    of the lowest foot points over the take (reference poses left out). Level when the clip does not travel.
    Returns (a, b, c)."""
    xs, ys, zs = [], [], []
    lows_all = []
    for s in SIDES:
        keys = [f"{s} {k}" for k in ("ankle", "ball", "toe") if f"{s} {k}" in P]
        if not keys:
            continue
        Z = np.stack([P[k] for k in keys])  # (k, n, 3)
        j = np.argmin(Z[:, :, 2], axis=0)
        low = Z[j, np.arange(Z.shape[1])]  # (n, 3)
        lows_all.append(low[valid])
        slow = valid.copy()
        for k in (f"{s} ankle", f"{s} toe"):
            if k in V:
                slow &= V[k] < 0.35 * leg
        xs.append(low[slow, 0])
        ys.append(low[slow, 1])
        zs.append(low[slow, 2])
    b = c = 0.0
    if xs:
        x, y, z = np.concatenate(xs), np.concatenate(ys), np.concatenate(zs)
        hips = (P["left hip"] + P["right hip"]) / 2 if "left hip" in P and "right hip" in P else None
        travel = float(np.max(np.ptp(hips[valid, :2], axis=0))) if hips is not None else 0.0
        if len(x) >= 10 and travel > 1.0 * leg:  # (in place: no slope to find)
            keep = np.ones(len(x), bool)
            for _ in range(4):
                A = np.stack([np.ones(keep.sum()), x[keep], y[keep]], axis=1)
                coef, *_ = np.linalg.lstsq(A, z[keep], rcond=None)
                r = z - (coef[0] + coef[1] * x + coef[2] * y)
                keep = r <= np.percentile(r[keep], 70)  # (the lowest: a slow foot on its toes is not the floor)
                if keep.sum() < 6:
                    break
            if math.hypot(coef[1], coef[2]) < 0.15:
                b, c = float(coef[1]), float(coef[2])
    low = np.concatenate(lows_all)
    a = float(np.percentile(low[:, 2] - b * low[:, 0] - c * low[:, 1], 2))
    return a, b, c


def heel_offset(R, mask, d):
    """(3,) world offsets ``d`` (m, 3: on the frames of ``mask``) of a bone whose rotations are R (n, 3, 3), as
    one offset in the bone's frame: their mean (a skinless foot's heel, made as it stands)."""
    return np.mean(np.einsum("nji,nj->ni", R[mask], d), axis=0)


def flattest(ankle_height, contacts, share=0.2):
    """(n,) bool: in each contact, the frames (``share`` of them, at least one) whose ankle stands lowest: the
    foot flat, its heel down (a contact's other frames have the heel rising or the toes not yet down)."""
    out = np.zeros(len(contacts), bool)
    for a, b in runs(contacts):
        n = max(1, int(round(share * (b - a))))
        out[a + np.argsort(ankle_height[a:b])[:n]] = True
    return out


def lowest_bone_point(H, side):
    """(n,) the height of a foot's lowest bone point (ball or toe tip) in heights ``H`` ({point: (n,)})."""
    return np.min(np.stack([H[f"{side} {k}"] for k in ("ball", "toe") if f"{side} {k}" in H]), axis=0)


def contact_level(H, side, a, b):
    """The level a foot stands on over frames a..b-1 of a contact: a low percentile (10 %) of its lowest bone point
    (its joints sit inside the foot: the toe tip pressed down as the heel rises reaches lower than the ball as the
    foot stands flat, CMU 02_01's 13 mm)."""
    return float(np.percentile(lowest_bone_point(H, side)[a:b], 10))


def made_heel(H, side, contacts, R, up):
    """(3,) a skinless foot's heel in its bone's frame (rotations R (n, 3, 3)): under the ankle, along the ground's
    ``up`` (the frames' mask -> (m, 3) or (3,)), on each contact's level (contact_level) where the foot stands
    flattest (flattest); ``H`` heights ({point: (n,)}) over the ground."""
    flat = flattest(H[f"{side} ankle"], contacts)
    level = np.zeros(len(contacts))
    for a, b in runs(contacts):
        level[a:b] = contact_level(H, side, a, b)
    up = np.broadcast_to(up(flat), (int(flat.sum()), 3))
    return heel_offset(R, flat, -up * (H[f"{side} ankle"] - level)[flat][:, None])


def carried(point, R, local):
    """(n, 3) ``point`` (n, 3) moved by ``local``, an offset in the frame of the bone whose rotations are R."""
    return point + np.einsum("nij,j->ni", R, local)


def foot_scale(src, res, side, tol=0.02):
    """The result's foot over the source's when it is the source's, scaled (ankle, ball and toe tip where they are
    in the foot bone's frame in rest, within ``tol`` of the foot's length once scaled: a skeleton paired with
    itself), else None."""
    keys = [f"{side} {k}" for k in ("ankle", "ball", "toe")]
    role = f"{side} foot"
    if not all(k in src["rest_points"] and k in res["rest_points"] for k in keys) or \
            role not in src["rest_rot"] or role not in res["rest_rot"]:
        return None
    shape = [(np.array([data["rest_points"][k] for k in keys[1:]]) - data["rest_points"][keys[0]]) @
             data["rest_rot"][role] for data in (src, res)]  # (rows: ball, toe tip, in the bone's frame)
    lengths = [float(np.linalg.norm(x[-1])) for x in shape]
    if min(lengths) <= 0:
        return None
    k = lengths[1] / lengths[0]
    return k if float(np.max(np.linalg.norm(shape[1] - k * shape[0], axis=1))) <= tol * lengths[1] else None


def heights(P, floor):
    a, b, c = floor
    return {k: v[:, 2] - (a + b * v[:, 0] + c * v[:, 1]) for k, v in P.items()}


def source_contacts(H, V, valid, fps_src, leg):
    """The source's flat-foot contacts, per side: ankle and toe tip both within a small height (3.5 % of the leg)
    of that foot's low level (5th percentile of its height over the floor) and both slow (under 0.35 legs a second).
    ``H`` heights over the floor, ``V`` speeds, ``valid``: frames that are not reference poses; ``leg``: the
    source's leg length (its units). Returns ({side: bool array}, details)."""
    h_tol = CONTACT_HEIGHT * leg
    v_tol = CONTACT_SPEED * leg  # per second
    out, det = {}, {}
    for s in SIDES:
        az, tz = H.get(f"{s} ankle"), H.get(f"{s} toe")
        if az is None or tz is None:
            continue
        a_low = float(np.percentile(az[valid], 5))
        t_low = float(np.percentile(tz[valid], 5))
        c = (az < a_low + h_tol) & (tz < t_low + h_tol) & (V[f"{s} ankle"] < v_tol) & (V[f"{s} toe"] < v_tol) & valid
        # fill gaps shorter than 0.05 s, drop contacts shorter than 0.08 s
        gap, short = max(1, int(round(0.05 * fps_src))), max(2, int(round(0.08 * fps_src)))
        for st, en in runs(~c):
            if 0 < st and en < len(c) and en - st <= gap and valid[st:en].all():
                c[st:en] = True
        for st, en in runs(c):
            if en - st < short:
                c[st:en] = False
        out[s] = c
        det[s] = {"ankle_low": a_low, "toe_low": t_low, "frames": int(c.sum()), "contacts": len(runs(c))}
    det["height_tolerance"] = h_tol
    det["speed_tolerance_per_s"] = v_tol
    return out, det


POP_OVER_NEIGHBOURS = 2.0  # a pop: an ankle's move in a frame at least this many times its neighbours' median


def neighbourhood_median(x, k):
    """(n,) each value's neighbours' median: the values within ``k`` places of it, itself left out."""
    return np.array([np.median(np.delete(x[max(0, i - k):i + k + 1], min(i, k))) if len(x) > 1 else 0.0
                     for i in range(len(x))])


def turn_acceleration(D_s, D_r, use, frames):
    """How jerky the limbs are against the source's: each limb direction's change of turn from frame to frame,
    |d[f+1] - 2 d[f] + d[f-1]| (radians a frame squared), over the judged frames whose neighbours are judged too;
    the result's mean and 99th percentile over all limbs and frames as ratios of the source's, and the frames where
    the result's exceeds the source's most."""
    ok = use[2:] & use[1:-1] & use[:-2]
    if not ok.any() or not D_r:
        return None

    def acc(D):
        D = [d / np.linalg.norm(d, axis=1, keepdims=True) for d in D]
        return np.stack([np.linalg.norm(d[2:] - 2.0 * d[1:-1] + d[:-2], axis=1)[ok] for d in D])
    a_s, a_r = acc(D_s), acc(D_r)
    ratio = {k: float(f(a_r) / f(a_s)) if f(a_s) > 1e-12 else None
             for k, f in (("mean_ratio", np.mean), ("p99_ratio", lambda a: np.percentile(a, 99)))}
    excess = np.max(a_r - a_s, axis=0)
    worst = [[int(frames[1:-1][ok][i]), float(np.degrees(excess[i]))] for i in np.argsort(excess)[::-1][:3]]
    return {**ratio, "worst_frames_excess_deg": worst}


def _stats(x):
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if not len(x):
        return None
    return {"mean": float(np.mean(x)), "p95": float(np.percentile(x, 95)), "max": float(np.max(x)), "n": int(len(x))}


def _hinge_signed(P, hinge):
    """Signed bend (degrees, per frame) of a knee or elbow from positions: positive the way a human's folds (a knee
    backward, an elbow forward) against the facing its hips show on that frame (left hip to right hip across the
    up axis); NaN where the upper bone points nearly along that facing (the fold's side unknown). Positions only:
    a bone's own axes, as a rig's importer set them, say nothing of which way its joint bends."""
    _, a, b, c, way = HINGES[hinge]
    if not all(k in P for k in (a, b, c, "left hip", "right hip")):
        return None
    facing = np.cross(P["left hip"] - P["right hip"], [0.0, 0.0, 1.0])
    facing[:, 2] = 0.0
    want = _unit(facing) * (1.0 if way == "front" else -1.0)
    u = _unit(P[b] - P[a])
    f = _unit(P[c] - P[b])
    d = want - np.sum(want * u, axis=1, keepdims=True) * u
    n = np.linalg.norm(d, axis=1)
    d = d / np.maximum(n, 1e-9)[:, None]
    out = np.degrees(np.arctan2(np.sum(f * d, axis=1), np.sum(f * u, axis=1)))
    return np.where(n > 0.3, out, np.nan)


def upright(pts):
    """Whether a pose stands upright: each hip well above its ankle (the leg within 45 degrees of vertical)."""
    ok = False
    for s in SIDES:
        if f"{s} hip" in pts and f"{s} ankle" in pts:
            v = pts[f"{s} hip"] - pts[f"{s} ankle"]
            if v[2] < 0.7 * np.linalg.norm(v):
                return False
            ok = True
    return ok


def facing_of(pts):
    """The horizontal facing a rig's feet show (ankle -> toe tip), unit; None when it has no feet."""
    v = np.zeros(3)
    for s in SIDES:
        if f"{s} ankle" in pts and f"{s} toe" in pts:
            v += pts[f"{s} toe"] - pts[f"{s} ankle"]
    v[2] = 0.0
    n = np.linalg.norm(v)
    return v / n if n > 1e-9 else None


def pairing_check(pts, label, posed=False, fwd=None, tails=True):
    """Failures of a rig's pairing, judged in one pose ({point: world position}): in a rest pose every left point
    on the left (given the facing its feet show) and the legs' joints above one another; in a pose of the motion
    (``posed``, walking feet may cross) only the hips and shoulders, with the facing given or the feet's."""
    bad = []
    if not posed and not tails:
        has_toe = any(f"{x} toe@head" in pts for x in SIDES)
        if not has_toe:  # (the feet's direction would be a tail's: unknown)
            return bad, None
    if not posed and tails:
        # chains: each bone starts where the one above it ends (a foot mapped to the ball, a hand to a finger, fail)
        for s in SIDES:
            for up, down in (("thigh", "shin"), ("shin", "foot"), ("foot", "toe"), ("upper_arm", "forearm"),
                             ("forearm", "hand")):
                a, b = f"{s} {up}", f"{s} {down}"
                if f"{a}@tail" in pts and f"{b}@head" in pts:
                    length = float(np.linalg.norm(pts[f"{a}@tail"] - pts[f"{a}@head"]))
                    gap = float(np.linalg.norm(pts[f"{b}@head"] - pts[f"{a}@tail"]))
                    # (a foot parented to the root still starts at its shin's end; a leaf bone's tail is where an
                    # importer ended it, so the gap is taken against the upper bone's length)
                    if gap > 0.3 * max(length, 1e-9) and not (up == "foot" and gap <= 0.6 * max(length, 1e-9)):
                        bad.append(f"{label}: {b} does not start where its {up} ends ({gap / max(length, 1e-9):.2f} "
                                   f"of the {up}'s length away)")
            if f"{s} ankle" in pts and f"{s} ball" in pts and f"{s} hip" in pts:
                leg = float(pts[f"{s} hip"][2] - pts[f"{s} ankle"][2])
                if pts[f"{s} ball"][2] > pts[f"{s} ankle"][2] + 0.1 * abs(leg):
                    bad.append(f"{label}: {s} toe/ball above its ankle")
    fwd = facing_of(pts) if fwd is None else fwd
    if fwd is None:
        bad.append(f"{label}: no feet to tell its facing")
        return bad, None
    left = np.cross([0.0, 0.0, 1.0], fwd)
    lateral = []
    for p in (("hip", "shoulder") if posed else ("hip", "knee", "ankle", "toe", "shoulder", "elbow", "wrist")):
        if f"left {p}" in pts and f"right {p}" in pts:
            d = float(np.dot(pts[f"left {p}"] - pts[f"right {p}"], left))
            lateral.append((p, d))
            if d <= 0:
                bad.append(f"{label}: left {p} not on the left of the right one ({d:+.3f} along its left)")
    for s in () if posed else SIDES:
        chain = [f"{s} hip", f"{s} knee", f"{s} ankle"]
        zs = [pts[c][2] for c in chain if c in pts]
        if len(zs) == 3 and not (zs[0] > zs[1] > zs[2]):
            bad.append(f"{label}: {s} thigh/shin/foot not above one another (z {zs[0]:.3f}, {zs[1]:.3f}, {zs[2]:.3f})")
        if f"{s} shoulder" in pts and f"{s} hip" in pts and pts[f"{s} shoulder"][2] <= pts[f"{s} hip"][2]:
            bad.append(f"{label}: {s} shoulder below its hip")
    if not posed and "pelvis" in pts and "chest" in pts and pts["chest"][2] <= pts["pelvis"][2]:
        bad.append(f"{label}: chest not above the pelvis")
    return bad, fwd


def joint_limit_violations(basis, specs, tol_deg=1.0):
    """Counts of frames x bones outside the result's IK limits (Blender's swing ellipse in (sin x/2, sin z/2), twist
    range) or Limit Rotation constraints (local Euler)."""
    from mathutils import Matrix
    tol = math.radians(tol_deg)
    count, where = 0, {}
    for role, spec in specs.items():
        Bs = basis[role]
        n_bad = 0
        for M in Bs:
            q = Matrix(M.tolist()).to_quaternion()
            bad = False
            if "ik" in spec:
                lim = spec["ik"]
                w, x, y, z = q.w, q.x, q.y, q.z
                if w < 0:
                    w, x, y, z = -w, -x, -y, -z
                # twist about Y, swing = q * twist^-1
                tn = math.hypot(w, y)
                tw = 2.0 * math.atan2(y, w) if tn > 1e-9 else 0.0
                if tn > 1e-9:
                    cw, cy = w / tn, y / tn
                    sx = x * cw + z * cy  # swing = q * conj(twist)
                    sz = z * cw - x * cy
                else:
                    sx, sz = x, z
                if "y" in lim and not (lim["y"][0] - tol <= tw <= lim["y"][1] + tol):
                    bad = True
                ax = [(a, v) for a, v in (("x", sx), ("z", sz)) if a in lim]
                if ax:
                    terms = 0.0
                    for a, v in ax:
                        m = lim[a][1] if v >= 0 else -lim[a][0]
                        r = math.sin(max(abs(m) + tol, 0.0) / 2.0)
                        terms += (v / r) ** 2 if r > 1e-9 else (0.0 if abs(v) < 1e-6 else 1e9)
                    if terms > 1.0 + 1e-6:
                        bad = True
            for c in spec.get("constraints", ()):
                order = c["order"] if c["order"] != "AUTO" else "XYZ"
                e = q.to_euler(order)
                for a, (lo, hi) in c["limits"].items():
                    v = getattr(e, a)
                    if not (lo - tol <= v <= hi + tol):
                        bad = True
            n_bad += bad
        if n_bad:
            where[role] = n_bad
        count += n_bad
    return count, where


def judge(source_path, result_blend, report_json, terrain=None, clip_rate=None):
    """Measure a retargeting result against its source; returns a dict (see the module's doc)."""
    bpy = _quiet_bpy()
    report = read_report(report_json)
    roles = roles_of(report)
    if not roles:
        raise RuntimeError("the report has no mapping")
    if terrain is None:
        cli_args = (report.get("_cli") or {}).get("terrain") or report.get("terrain")
        if isinstance(cli_args, (str, list)) and cli_args:
            terrain = cli_args
    res = load_result(bpy, result_blend, report, terrain)
    src = load_source(bpy, source_path, report, res["fps_int"], res["fps_int"] / res["fps"] if res["fps"] else 1.0)
    U = 1000.0 * res["unit"]  # result units -> mm
    out = {"source": os.path.abspath(source_path), "result": os.path.abspath(result_blend),
           "source_armature": src["arm"], "target_armature": res["arm"], "flags": [], "aims_missed": []}
    P_s, P_r = src["data"]["points"], res["data"]["points"]
    n_src = len(src["frames"])

    # reference frames and the source's floor
    ref = reference_frames(P_s)
    valid = ~ref if len(ref) else np.ones(n_src, bool)
    out["source_reference_frames"] = [int(src["frames"][i]) for i in np.flatnonzero(ref)]
    fps_src = 1.0 / src["bvh"]["frame_time"] if src["bvh"] else res["fps"]
    first_valid = int(np.flatnonzero(valid)[0])
    hips_s = (P_s["left hip"] + P_s["right hip"]) / 2
    rough = float(hips_s[first_valid, 2] - np.percentile(
        np.min(np.stack([P_s[k][:, 2] for k in P_s if k.split()[-1] in ("ankle", "ball", "toe")]), axis=0)[valid], 2))
    belt = treadmill(P_s, valid, fps_src, rough)  # (in place: speeds are taken over the sliding ground)
    t_s = np.arange(n_src) / fps_src
    V_s = _speeds({k: v - (belt if belt is not None else 0.0) * t_s[:, None] for k, v in P_s.items()}, fps_src)
    out["in_place_treadmill"] = None if belt is None else {"speed_per_s": float(np.linalg.norm(belt))}
    floor_s = source_floor(P_s, valid, V_s, rough)
    H_s = heights(P_s, floor_s)
    leg_s = float(H_s["left hip"][first_valid] + H_s["right hip"][first_valid]) / 2
    out["source_floor"] = {"level": floor_s[0], "slope_x": floor_s[1], "slope_y": floor_s[2],
                           "tilt_deg": math.degrees(math.atan(math.hypot(floor_s[1], floor_s[2])))}
    # the result's leg: hip height over its soles in rest
    rp = res["rest_points"]
    hip_rest = (rp["left hip"] + rp["right hip"]) / 2
    leg_r = float(hip_rest[2] - res["floor"])  # (over its own rest soles: a terrain under the rest pose may be a step)
    scale = leg_r / leg_s
    out["scale"] = scale
    out["product_scale"] = report.get("scale")
    out["leg_mm"] = {"result": leg_r * U, "source_scaled": leg_s * scale * U}

    # frame correspondence: result frame f <-> source index (f - 1) / dt (BVH), else the same frame
    fr = res["frames"]
    cands = {}
    if src["bvh"]:
        dt_scene = res["fps_int"] * src["bvh"]["frame_time"]
        cands["clip"] = 1.0
        if abs(dt_scene - 1.0) > 1e-3:
            cands["scene"] = dt_scene
    else:
        cands["same frames"] = None
    if clip_rate in cands:  # (told: the other reading is not tried)
        cands = {clip_rate: cands[clip_rate]}
    D_r = limb_dirs(P_r)
    D_s_full = limb_dirs(P_s)
    limbs = [l for l in LIMBS if l in D_r and l in D_s_full]
    best = None
    for mode, dt in cands.items():
        if dt is None:
            s_idx = fr - src["frames"][0]
        else:
            s_idx = (fr - 1.0) / dt + (1.0 - src["frames"][0])
        inside = (s_idx >= -1e-6) & (s_idx <= n_src - 1 + 1e-6)
        okv = _interp(valid.astype(float), s_idx) > 0.999
        use = inside & okv
        if use.sum() < 2:
            continue
        S = np.concatenate([_interp(D_s_full[l], s_idx)[use] for l in limbs])
        T = np.concatenate([D_r[l][use] for l in limbs])
        th, c = best_heading(S, T)
        if best is None or c < best[3]:
            best = (mode, dt, s_idx, c, th, use)
    if best is None:
        raise RuntimeError("the result's frames do not overlap the source's")
    mode, dt, s_idx, _, heading, use = best
    expected = {m: (1 + (n_src - 1) / d if d else None) for m, d in cands.items()}
    out["frame_mapping"] = {"mode": mode, "result_frames_per_source_frame": dt,
                            "result_range": [int(fr[0]), int(fr[-1])],
                            "last_frame_expected": {m: (round(v, 2) if v else None) for m, v in expected.items()},
                            "judged_frames": int(use.sum())}
    if src["bvh"] and fr[-1] > max(v for v in expected.values() if v) + 1.5:
        out["flags"].append("the result runs past the source's end")
    out["heading_deg"] = math.degrees(heading) % 360.0
    Rz = _rotz(heading)

    # the source resampled onto the result's frames, scaled and turned
    def S_at(arr):
        return _interp(arr, s_idx)

    Ps = {k: S_at(v) for k, v in P_s.items()}
    Hs = {k: S_at(v) for k, v in H_s.items()}
    frames_used = fr[use]

    # ---------------------------------------------------------------- pairing sanity
    bad_r, _ = pairing_check(rp, "result (rest)", tails=res["tails"])
    out["pairing_notes"] = []
    for who, d in (("result", res), ("source", src)):
        if not d["tails"]:
            out["pairing_notes"].append(f"the {who}'s bones do not end at their children: its chains are not checked"
                                        + ("" if any(f"{x} toe" in d["names"] for x in SIDES) else
                                           " and, with no toe bones, nor its sides (its feet's direction is a "
                                           "tail's) nor its feet's heading"))
    # the source's rest is checked where it stands upright (a BVH's rest need not: Bandai's lies along X)
    src_rest_up = upright(src["rest_points"])
    bad_s = pairing_check(src["rest_points"], "source (rest)", tails=src["tails"])[0] if src_rest_up else []
    out["source_rest_upright"] = bool(src_rest_up)
    src_pose = {k: v[first_valid] for k, v in P_s.items()}
    hips_fwd = None
    if "left hip" in src_pose and "right hip" in src_pose:  # (the facing of a posed body: across its hips)
        lat = src_pose["left hip"] - src_pose["right hip"]
        hips_fwd = _unit(np.cross(lat, [0.0, 0.0, 1.0]) * np.array([1.0, 1.0, 0.0]))
        toes = facing_of(src_pose)
        if toes is not None and np.dot(toes, hips_fwd) < 0:
            bad_s.append(f"source (frame {int(src['frames'][first_valid])}): its feet point backward from the "
                         "facing its hips show (left and right swapped?)")
    bad_s += pairing_check(src_pose, f"source (frame {int(src['frames'][first_valid])})", posed=True)[0]
    # the pairing across: the source's left limbs should land on the result's left once turned
    cross_bad = []
    if "left hip" in Ps and "right hip" in Ps:
        lat_s = (Ps["left hip"] - Ps["right hip"])[use] @ Rz.T
        lat_r = (P_r["left hip"] - P_r["right hip"])[use]
        agree = float(np.mean(np.sum(lat_s[:, :2] * lat_r[:, :2], axis=1) > 0))
        if agree < 0.8:
            cross_bad.append(f"source's left hip lands on the result's right on {100 * (1 - agree):.0f} % of frames")
    out["pairing"] = {"ok": not (bad_r or bad_s or cross_bad), "problems": bad_r + bad_s + cross_bad,
                      "missing_roles": {"source": src["missing_roles"], "result": res["missing_roles"]}}
    if not out["pairing"]["ok"]:
        out["flags"].append("pairing: " + "; ".join(bad_r + bad_s + cross_bad))

    # ---------------------------------------------------------------- limb directions
    per = {}
    allang = []
    for l in limbs:
        a = _angle(S_at(D_s_full[l])[use] @ Rz.T, D_r[l][use])
        per[l] = _stats(a)
        allang.append(a)
    for l in EXTRA_LIMBS:
        side = l.split()[0]
        if "foot" in l and any(not d["tails"] and f"{side} toe" not in d["names"] for d in (res, src)):
            continue  # (a foot whose far end would be an arbitrary tail)
        if l in D_r and l in D_s_full:
            a, b = S_at(D_s_full[l])[use] @ Rz.T, D_r[l][use]
            if "foot" in l:  # (the feet's heading only: where a rig's ankle sits over its ball is its own)
                flat = (np.linalg.norm(a[:, :2], axis=1) > 0.7 * np.linalg.norm(a, axis=1)) & \
                    (np.linalg.norm(b[:, :2], axis=1) > 0.7 * np.linalg.norm(b, axis=1))
                a, b = a[flat] * [1.0, 1.0, 0.0], b[flat] * [1.0, 1.0, 0.0]
            per[l] = _stats(_angle(a, b))
    overall = _stats(np.concatenate(allang)) if allang else None
    out["limbs_deg"] = {"overall": overall, **per}
    worst_frames = []
    if allang:
        per_frame = np.mean(np.stack(allang), axis=0)
        for i in np.argsort(per_frame)[::-1][:5]:
            worst_frames.append([int(frames_used[i]), float(per_frame[i])])
    out["limbs_worst_frames"] = worst_frames
    out["limb_turn_acceleration"] = turn_acceleration(
        [S_at(D_s_full[l]) for l in limbs], [D_r[l] for l in limbs], use, fr)

    # ---------------------------------------------------------------- contacts (the source's, found here)
    contact_s, cdet = source_contacts(H_s, V_s, valid, fps_src, leg_s)
    # the source's heels (a skeleton has none): under each ankle, on the level its contact stands on (contact_level)
    # where the foot stands flattest (flattest), carried with the foot bone; with the toe tips, the source's sole
    heels_s = {}
    for s, cmask in contact_s.items():
        R = src["data"]["rot"].get(f"{s} foot")
        if R is None or not cmask.any():
            continue
        heels_s[s] = made_heel(H_s, s, cmask, R, lambda flat: np.array([0.0, 0.0, 1.0]))
        P_s[f"{s} heel"] = carried(P_s[f"{s} ankle"], R, heels_s[s])
        H_s[f"{s} heel"] = heights({"h": P_s[f"{s} heel"]}, floor_s)["h"]
        Ps[f"{s} heel"], Hs[f"{s} heel"] = S_at(P_s[f"{s} heel"]), S_at(H_s[f"{s} heel"])
    out["source_contacts"] = cdet
    G = res["ground"]
    feet = {}
    per_res_frame = {}
    belt_r = None  # (in place: the result's own treadmill step, from both feet's contacts)
    if belt is not None:
        moves = []
        for s, cmask in contact_s.items():
            c = (_interp(cmask.astype(float), s_idx) > 0.5) & use
            moves.append(np.diff(P_r[f"{s} ankle"][:, :2], axis=0)[c[1:] & c[:-1]])
        moves = np.concatenate(moves) if moves else np.zeros((0, 2))
        belt_r = np.median(moves, axis=0) if len(moves) >= 5 else None
    for s, cmask in contact_s.items():
        cm = _interp(cmask.astype(float), s_idx) > 0.5
        cm &= use
        per_res_frame[s] = cm
        a_r = P_r[f"{s} ankle"]
        a_s = Ps[f"{s} ankle"]
        # skate: horizontal ankle speed between consecutive contact frames, mm/frame
        both = cm[1:] & cm[:-1]
        step_s = np.zeros(2)  # (in place: the ground's slide over one result frame, taken off both)
        if belt is not None:
            step_s = belt[:2] * ((1.0 / dt) if dt else 1.0) / fps_src
        step_r = (Rz[:2, :2] @ step_s) * scale
        if belt_r is not None:  # (the result's own belt: its stride may scale with its legs, not with the judge's
            # hip heights; a standing foot slides with the ground, not against it)
            step_r = belt_r
        sk_r = np.linalg.norm(np.diff(a_r[:, :2], axis=0) - step_r, axis=1)[both] * U
        sk_s = np.linalg.norm(np.diff(a_s[:, :2], axis=0) - step_s, axis=1)[both] * U * scale
        sk_worst = [[int(fr[1:][both][i]), float(sk_r[i])] for i in np.argsort(sk_r)[::-1][:3]] if len(sk_r) else []
        # the ankle's longest move from one frame to the next against the scaled source's; a pop is such a move
        # that stands out of the moves around it (a fast swing of a longer stride is no pop)
        both_used = use[1:] & use[:-1]
        steps = np.linalg.norm(np.diff(a_r, axis=0), axis=1) * U
        st_r = steps[both_used]
        st_s = np.linalg.norm(np.diff(a_s, axis=0), axis=1)[both_used] * U * scale
        pops = both_used & (steps > POP_OVER_NEIGHBOURS * neighbourhood_median(steps, 3))
        # ankle height over ground and its spread over each contact
        g_a = G.height(a_r[:, :2])
        h_r = a_r[:, 2] - g_a
        spreads, spreads_s = [], []
        hs = Hs[f"{s} ankle"] * scale
        for st, en in runs(cm):
            if en - st >= 2:
                spreads.append(float(np.ptp(h_r[st:en])) * U)
                spreads_s.append(float(np.ptp(hs[st:en])) * U)
        if not res["has_skin"] and f"{s} toe" in P_r and f"{s} foot" in res["data"]["rot"] and cm.any():
            # (no skin: the source's heel where the foot is the source's, scaled: the same point of the foot, so
            # the clearance compares where the foot stands and not two readings of a heel whose height varies with
            # the frames it is read on, 3-4 mm on a CMU foot; else made as the source's, from the result's own
            # heights over the ground, along its normal; carried with the foot bone)
            A, R = P_r[f"{s} ankle"], res["data"]["rot"][f"{s} foot"]
            k = foot_scale(src, res, s) if s in heels_s else None
            if k is not None:
                local = heels_s[s] * k
            else:
                H_r = {f"{s} {p}": P_r[f"{s} {p}"][:, 2] - G.height(P_r[f"{s} {p}"][:, :2])
                       for p in ("ankle", "ball", "toe") if f"{s} {p}" in P_r}
                local = made_heel(H_r, s, cm, R, lambda flat: G.normal(A[flat, :2]))
            P_r[f"{s} heel"] = carried(A, R, local)
        # clearance: the lowest sole point over the ground (skin; bone points without skin)
        if s in res["data"]["sole"] and np.isfinite(res["data"]["sole"][s]).any():
            if G.tree is None:
                clr = res["data"]["sole"][s][:, 2] - G.floor
            else:
                clr = np.array([np.nanmin(lo[:, 2] - G.height(lo[:, :2])) if len(lo) else np.nan
                                for lo in res["data"]["sole_low"][s]])
        else:
            pts = np.stack([P_r[f"{s} {k}"] for k in ("heel", "ball", "toe") if f"{s} {k}" in P_r])
            clr = np.min(pts[:, :, 2] - G.height(pts[:, :, :2]), axis=0)
        # the source's sole: its lowest point (heel, ball, toe tip) over that foot's own standing level on each
        # contact (contact_level: of its bone points; its heel is made here, not captured) (a mocap floor is
        # seldom flat to the mm: CMU 02_01's left foot stands 4 mm higher on its second step than on its first), so
        # the result, planted on a flat floor, is held to the source's clearance as it changes over a contact, not
        # to its floor's unevenness; none under that level (a toe poked through the capture's floor is no
        # clearance a foot on the ground can keep)
        low_full = np.min(np.stack([H_s[f"{s} {k}"] for k in ("heel", "ball", "toe") if f"{s} {k}" in H_s]), axis=0)
        stand_of = np.full(n_src, float(np.percentile(lowest_bone_point(H_s, s)[cmask], 10)) if cmask.any() else 0.0)
        levels = []
        for a0, b0 in runs(cmask):
            stand_of[a0:b0] = contact_level(H_s, s, a0, b0)
            levels.append(stand_of[a0] * scale * U)
        stand = float(np.median(stand_of[cmask])) if cmask.any() else 0.0
        clr_s = np.maximum(S_at(low_full) - _interp(stand_of, s_idx), 0.0) * scale
        diff = (clr - clr_s)[cm] * U
        # swing: the ankle's peak lift over its standing height, per swing between contacts
        stand_r = float(np.median(h_r[cm])) if cm.any() else float("nan")
        stand_s = float(np.median(hs[cm])) if cm.any() else float("nan")
        ratios, peaks = [], []
        sw = ~cm & use
        for st, en in runs(sw):
            if st == 0 or en >= len(sw) or en - st < 2:
                continue  # (a swing cut by the clip's ends or a reference frame is not whole)
            if not (cm[st - 1] and cm[en]):
                continue
            pr = float(np.max(h_r[st:en]) - stand_r)
            ps = float(np.max(hs[st:en]) - stand_s)
            peaks.append([int(fr[st]), int(fr[en - 1]), pr * U, ps * U])
            if ps * U > 5.0:
                ratios.append(pr / ps)
        feet[s] = {
            "contact_frames": int(cm.sum()), "contacts": len(runs(cm)),
            "skate_mm_per_frame": _stats(sk_r), "skate_source_scaled_mm_per_frame": _stats(sk_s),
            "skate_worst_frames": sk_worst,
            "ankle_spread_mm": _stats(spreads), "ankle_spread_source_scaled_mm": _stats(spreads_s),
            "clearance_mm": _stats(clr[cm] * U),
            "source_sole_level_mm": stand * scale * U,
            "source_contact_levels_mm": levels,
            "clearance_source_scaled_mm": _stats(clr_s[cm] * U),
            "clearance_diff_mm": {"mean": float(np.mean(diff)) if len(diff) else None,
                                  "p95_abs": float(np.percentile(np.abs(diff), 95)) if len(diff) else None,
                                  "min": float(np.min(diff)) if len(diff) else None,
                                  "max": float(np.max(diff)) if len(diff) else None},
            "penetration_frames": int(np.sum(clr[cm] * U < -1.0)),
            "swing_peaks": peaks,
            "ankle_step_mm": {"max": float(st_r.max()) if len(st_r) else None,
                              "frame": int(fr[1:][both_used][int(np.argmax(st_r))]) if len(st_r) else None,
                              "source_scaled_max": float(st_s.max()) if len(st_s) else None,
                              "pop_max": float(steps[pops].max()) if pops.any() else None,
                              "pop_frame": int(fr[1:][pops][int(np.argmax(steps[pops]))]) if pops.any() else None},
            "swing_ratio": {"median": float(np.median(ratios)) if ratios else None,
                            "min": float(np.min(ratios)) if ratios else None,
                            "max": float(np.max(ratios)) if ratios else None, "n": len(ratios)},
            "contact_ranges": [[int(fr[a]), int(fr[b - 1])] for a, b in runs(cm)],
            "per_contact": [{"frames": [int(fr[a]), int(fr[b - 1])],
                             "source_clearance_mm": [round(float(clr_s[a] * U), 1), round(float(np.max(clr_s[a:b]) * U), 1),
                                                     round(float(clr_s[b - 1] * U), 1)],
                             "result_clearance_mm": [round(float(clr[a] * U), 1), round(float(np.max(clr[a:b]) * U), 1),
                                                     round(float(clr[b - 1] * U), 1)]} for a, b in runs(cm)],
        }
    out["feet"] = feet

    # ---------------------------------------------------------------- pelvis
    hips_r = (P_r["left hip"] + P_r["right hip"]) / 2
    hips_sr = (Ps["left hip"] + Ps["right hip"]) / 2
    gh = G.height(hips_r[:, :2])
    ph_r = (hips_r[:, 2] - gh)[use] / leg_r
    ph_s = ((Hs["left hip"] + Hs["right hip"]) / 2)[use] / leg_s
    out["pelvis_height_over_leg"] = {"result": float(np.mean(ph_r)), "source": float(np.mean(ph_s)),
                                     "ratio": float(np.mean(ph_r) / np.mean(ph_s))}
    idx = np.flatnonzero(use)
    seg = [(a, b) for a, b in runs(use)]
    path_r = sum(float(np.sum(np.linalg.norm(np.diff(hips_r[a:b, :2], axis=0), axis=1))) for a, b in seg)
    path_s = sum(float(np.sum(np.linalg.norm(np.diff(hips_sr[a:b, :2], axis=0), axis=1))) for a, b in seg) * scale
    net_r = float(np.linalg.norm(hips_r[idx[-1], :2] - hips_r[idx[0], :2]))
    net_s = float(np.linalg.norm(hips_sr[idx[-1], :2] - hips_sr[idx[0], :2])) * scale
    out["root_travel"] = {"path_mm": path_r * U, "source_scaled_path_mm": path_s * U,
                          "path_ratio": path_r / path_s if path_s > 0.5 * leg_r else None,
                          "net_mm": net_r * U, "source_scaled_net_mm": net_s * U,
                          "net_ratio": net_r / net_s if net_s > 0.05 * leg_r else None}

    # ---------------------------------------------------------------- limits and hinges
    if res["limits"]:
        basis = {r: res["data"]["basis"][r][use] for r in res["limits"]}
        n, where = joint_limit_violations(basis, res["limits"])
        out["joint_limits"] = {"bones_with_limits": sorted(res["limits"]), "violations": n, "where": where}
    else:
        out["joint_limits"] = None
    hinges = {}
    for h in HINGES:
        thr = 5.0 if "knee" in h else 10.0
        sr = _hinge_signed({k: v[use] for k, v in P_r.items()}, h)
        ss = _hinge_signed({k: v[use] for k, v in Ps.items()}, h)
        if sr is None or not np.isfinite(sr).any():
            continue
        has_s = ss is not None and np.isfinite(ss).any()
        hinges[h] = {"result_inverted_frames": int(np.sum(sr < -thr)), "result_min_deg": float(np.nanmin(sr)),
                     "source_inverted_frames": int(np.sum(ss < -thr)) if has_s else None,
                     "source_min_deg": float(np.nanmin(ss)) if has_s else None,
                     "threshold_deg": thr,
                     "result_frames": [int(f) for f in frames_used[sr < -thr][:20]]}
    out["hinges"] = hinges

    # ---------------------------------------------------------------- time
    secs = report.get("seconds")
    nfr = len(fr)
    out["ms_per_frame"] = 1000.0 * float(secs) / nfr if isinstance(secs, (int, float)) and nfr else None

    _aims(out)
    out["summary"] = summary_line(out)
    return out


def _fmt(x, d=1):
    return "-" if x is None else f"{x:.{d}f}"


def _aims(out):
    miss = out["aims_missed"]
    ov = out["limbs_deg"].get("overall")
    if ov:
        for l, st in out["limbs_deg"].items():
            if l == "overall" or not st:
                continue
            l = l + ((" (extra: wrist to fingers)" if "hand" in l else " (extra: heading, ankle to ball)")
                     if l in EXTRA_LIMBS else "")
            if st["mean"] > AIMS["limb_mean_deg"]:
                miss.append(f"{l} mean {st['mean']:.1f} deg > {AIMS['limb_mean_deg']:.0f}")
            if st["p95"] > AIMS["limb_p95_deg"]:
                miss.append(f"{l} p95 {st['p95']:.1f} deg > {AIMS['limb_p95_deg']:.0f}")
    size = out["leg_mm"]["result"] / HUMAN_LEG_MM
    out["aims_mm_scale"] = size
    spread_mm, clearance_mm = AIMS["ankle_spread_mm"] * size, AIMS["clearance_p95_mm"] * size
    for s, f in out["feet"].items():
        sp = f["ankle_spread_mm"]
        if sp and sp["max"] > spread_mm:
            miss.append(f"{s} ankle spread on a contact up to {sp['max']:.1f} mm > {spread_mm:.1f}")
        sk, sks = f["skate_mm_per_frame"], f["skate_source_scaled_mm_per_frame"]
        if sk and sks and sk["mean"] > sks["mean"]:
            miss.append(f"{s} skate {sk['mean']:.2f} mm/frame > the source's scaled {sks['mean']:.2f}")
        r = f["swing_ratio"]["median"]
        lo, hi = AIMS["swing_ratio"]
        if r is not None and not (lo <= r <= hi):
            miss.append(f"{s} swing heel peak ratio {r:.2f} outside {lo}-{hi}")
        j = f["ankle_step_mm"]
        pop, frame = (j["pop_max"], j["pop_frame"]) if "pop_max" in j else (j["max"], j["frame"])
        if pop is not None and pop > AIMS["ankle_step_ratio"] * j["source_scaled_max"]:
            miss.append(f"{s} ankle pops {pop:.1f} mm in a frame (frame {frame}) > "
                        f"{AIMS['ankle_step_ratio']}x the source's fastest {j['source_scaled_max']:.1f}")
        c = f["clearance_diff_mm"]["p95_abs"]
        if c is not None and c > clearance_mm:
            miss.append(f"{s} clearance vs source p95 {c:.1f} mm > {clearance_mm:.1f} "
                        f"(mean {f['clearance_diff_mm']['mean']:+.1f})")
        if not f["contact_frames"]:
            miss.append(f"{s} foot: no flat contact found in the source")
    if not out["pairing"]["ok"]:
        miss.append("pairing fails the geometric check")
    jl = out.get("joint_limits")
    if jl and jl["violations"]:
        miss.append(f"{jl['violations']} joint-limit violations")
    for h, v in out["hinges"].items():
        src_n = v["source_inverted_frames"] or 0
        if v["result_inverted_frames"] > src_n:
            miss.append(f"{h} bent the wrong way on {v['result_inverted_frames']} frames (source {src_n})")


def summary_line(out):
    ov = out["limbs_deg"].get("overall") or {}
    f = out["feet"]

    def per(key, sub="mean", d=1):
        return "/".join(_fmt((f[s][key] or {}).get(sub) if f.get(s) and f[s][key] else None, d) for s in SIDES)

    sw = "/".join(_fmt(f[s]["swing_ratio"]["median"], 2) if s in f else "-" for s in SIDES)
    cl = "/".join(_fmt(f[s]["clearance_diff_mm"]["p95_abs"], 1) if s in f else "-" for s in SIDES)
    rt = out["root_travel"]
    return (f"limbs {_fmt(ov.get('mean'))}/{_fmt(ov.get('p95'))}/{_fmt(ov.get('max'))} deg (mean/p95/max); "
            f"skate L/R {per('skate_mm_per_frame', d=2)} vs src {per('skate_source_scaled_mm_per_frame', d=2)} "
            f"mm/fr; ankle spread max {per('ankle_spread_mm', 'max')} mm; clearance diff p95 {cl} mm; "
            f"swing {sw}; pelvis h {_fmt(out['pelvis_height_over_leg']['result'], 3)} vs "
            f"{_fmt(out['pelvis_height_over_leg']['source'], 3)}; travel x{_fmt(rt['path_ratio'], 2)}; "
            f"{'OK' if not out['aims_missed'] else str(len(out['aims_missed'])) + ' aims missed'}")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating,)):
        x = float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fullbody_ik.benchmarks.retarget_judge", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, help="the motion file the result was made from")
    ap.add_argument("--result", required=True, help="the result .blend")
    ap.add_argument("--report", required=True, help="the product's JSON (retarget --json's output)")
    ap.add_argument("--terrain", help="OBJ[,OBJ...] in the result to measure the ground on (default: a flat floor "
                    "at the character's rest lowest vertex)")
    ap.add_argument("--clip-rate", choices=("clip", "scene"), help="how the BVH's frames were keyed (default: both "
                    "readings tried, the one whose limbs agree better kept)")
    ap.add_argument("--json", action="store_true", help="print the whole judgement as JSON on standard output")
    ap.add_argument("--out", help="also write the JSON to this file")
    args = ap.parse_args(argv)
    out = _jsonable(judge(args.source, args.result, args.report, args.terrain, args.clip_rate))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    if args.json:
        print(out["summary"], file=sys.stderr)
        print(json.dumps(out, indent=1))
    else:
        print(out["summary"])
        for m in out["aims_missed"]:
            print("  missed: " + m)
        for fl in out["flags"]:
            print("  flag: " + fl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
