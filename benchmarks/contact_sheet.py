# SPDX-License-Identifier: GPL-3.0-or-later
"""A PNG contact sheet of a retargeting result: a few frames of the character side by side, to look at.

The result .blend is opened and never saved: whatever is added (camera, light-grey floor with a grid, capsules on
the bones of an armature with no skin, a labelled stamp) lives only in this process. Each tile is rendered with
the Workbench engine (headless, no GPU needed) from a three-quarter view in front of the character, the camera
following it at one distance that holds its whole body and the ground under it over every tile; the tiles carry
their frame numbers (Blender's stamp) and are assembled with numpy and saved through a Blender image (no PIL).

    python -m fullbody_ik.benchmarks.contact_sheet RESULT.blend [--report R.json] [--frames 1,20,40 | --count 8]
        [--span 0-1] [--size 320] [--terrain OBJ[,OBJ]] [--output SHEET.png]
"""

import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np


def _report(path):
    if not path:
        return {}
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data.get("report", data) if isinstance(data, dict) else {}


def _roles(report):
    return {str(r[0]): r[2] for r in report.get("mapping") or [] if isinstance(r, (list, tuple)) and len(r) >= 3}


def _pick_armature(bpy, report, name=None):
    want = name or report.get("target")
    if want and want in bpy.data.objects and bpy.data.objects[want].type == "ARMATURE":
        return bpy.data.objects[want]
    arms = [o for o in bpy.data.objects if o.type == "ARMATURE"]
    animated = [o for o in arms if o.animation_data and o.animation_data.action]
    if not (animated or arms):
        raise RuntimeError("no armature in the file")
    return (animated or arms)[0]


def _character_meshes(bpy, arm):
    """The meshes the armature moves: skinned to it, or hanging from it (from a bone, or through empties: a rigid
    robot's parts)."""
    def carried(o):
        while o.parent is not None:
            if o.parent == arm:
                return True
            o = o.parent
        return False
    return [o for o in bpy.data.objects if o.type == "MESH" and (
        any(m.type == "ARMATURE" and m.object == arm for m in o.modifiers) or carried(o))]


def _capsules(bpy, arm, color):
    """A cylinder on every deforming bone (parented to it, along it) for an armature with no skin: a control rig's
    controls and mechanism (Rigify's, with no mesh) are not the body."""
    objs = []
    mesh_cache = {}
    body = [b for b in arm.data.bones if b.use_deform] or list(arm.data.bones)
    for b in body:
        if b.length < 1e-6:
            continue
        key = "cyl"
        if key not in mesh_cache:
            bpy.ops.mesh.primitive_cylinder_add(vertices=12, radius=1.0, depth=1.0)
            proto = bpy.context.active_object
            mesh_cache[key] = proto.data
            bpy.data.objects.remove(proto, do_unlink=True)
        ob = bpy.data.objects.new(f"_capsule_{b.name}", mesh_cache[key])
        bpy.context.scene.collection.objects.link(ob)
        ob.parent = arm
        ob.parent_type = "BONE"
        ob.parent_bone = b.name
        r = max(0.08 * b.length, 0.01 * max(d for d in arm.dimensions) if max(arm.dimensions) > 0 else 0.01)
        ob.location = (0.0, -b.length / 2.0, 0.0)  # (a bone child sits at the bone's tail, Y along it)
        ob.rotation_euler = (-math.pi / 2, 0.0, 0.0)
        ob.scale = (r, r, b.length)
        ob.color = color
        objs.append(ob)
    return objs


def _points(bpy, arm, meshes, roles):
    """World points of the character now: its skin's vertices (a sample) or its bones' heads and tails; the hips
    (left, right) when the roles name them."""
    dg = bpy.context.evaluated_depsgraph_get()
    pts = []
    for ob in meshes:
        ev = ob.evaluated_get(dg)
        me = ev.data
        n = len(me.vertices)
        if not n:
            continue
        co = np.empty(n * 3)
        me.vertices.foreach_get("co", co)
        co = co.reshape(-1, 3)[:: max(1, n // 4000)]
        W = np.array(ev.matrix_world)
        pts.append(co @ W[:3, :3].T + W[:3, 3])
    W = np.array(arm.matrix_world)
    if not pts:
        bp = [np.array(getattr(pb, e)) for pb in arm.pose.bones for e in ("head", "tail")]
        pts.append(np.array(bp) @ W[:3, :3].T + W[:3, 3])
    hips = None
    if "left thigh" in roles and "right thigh" in roles and all(roles[k] in arm.pose.bones for k in
                                                                  ("left thigh", "right thigh")):
        hips = [(W @ np.append(np.array(arm.pose.bones[roles[k]].head), 1.0))[:3] for k in ("left thigh",
                                                                                            "right thigh")]
    return np.concatenate(pts), hips


def _quads(bpy, name, quads, color):
    """A mesh object of quads (each four corners), linked to the scene."""
    import bmesh

    me = bpy.data.meshes.new(name)
    bm = bmesh.new()
    for q in quads:
        bm.faces.new([bm.verts.new(p) for p in q])
    bm.to_mesh(me)
    bm.free()
    obj = bpy.data.objects.new(name, me)
    obj.color = color
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _grid(bpy, floor, lo, hi, step, colors):
    """A floor plane at height ``floor`` over [lo, hi] (xy) with grid lines every ``step``."""
    lo = np.floor(np.asarray(lo) / step) * step
    hi = np.ceil(np.asarray(hi) / step) * step
    w = step * 0.03
    z = floor + step * 0.002
    quads = [((lo[0], lo[1], floor), (hi[0], lo[1], floor), (hi[0], hi[1], floor), (lo[0], hi[1], floor))]
    lines = [((x - w, lo[1], z), (x + w, lo[1], z), (x + w, hi[1], z), (x - w, hi[1], z))
             for x in np.arange(lo[0], hi[0] + step / 2, step)]
    lines += [((lo[0], y - w, z), (hi[0], y - w, z), (hi[0], y + w, z), (lo[0], y + w, z))
              for y in np.arange(lo[1], hi[1] + step / 2, step)]
    plane, grid = (_quads(bpy, name, q, color) for name, q, color in (("_floor", quads, colors[0]),
                                                                       ("_grid", lines, colors[1])))
    return [plane, grid]


def _nice(x):
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e


def contact_sheet(result_blend, output, frames=None, count=8, span=(0.0, 1.0), size=320, report=None,
                  terrain=None, armature=None, columns=None, label=None, azimuth=40.0, elevation=18.0):
    """Render the sheet; returns {"output", "frames", "seconds_per_frame"}."""
    import time

    import bpy
    from mathutils import Vector

    rep = _report(report) if not isinstance(report, dict) else report.get("report", report)
    bpy.ops.wm.open_mainfile(filepath=os.path.abspath(result_blend))
    scene = bpy.context.scene
    arm = _pick_armature(bpy, rep, armature)
    act = arm.animation_data.action if arm.animation_data else None
    if rep.get("action") and rep["action"] in bpy.data.actions and act is not None and act.name != rep["action"]:
        arm.animation_data.action = bpy.data.actions[rep["action"]]
        act = arm.animation_data.action
    if frames:
        frames = [int(f) for f in frames]
    else:
        if rep.get("frames"):
            first, last = int(rep["frames"][0]), int(rep["frames"][1])
        elif act is not None:
            first, last = int(math.floor(act.frame_range[0])), int(math.ceil(act.frame_range[1]))
        else:
            first, last = scene.frame_start, scene.frame_end
        a = first + span[0] * (last - first)
        b = first + span[1] * (last - first)
        frames = sorted(set(int(round(x)) for x in np.linspace(a, b, count)))
    roles = _roles(rep)
    meshes = _character_meshes(bpy, arm)
    terrain_objs = []
    for t in ([terrain] if isinstance(terrain, str) else (terrain or [])):
        for n in str(t).split(","):
            if n.strip() in bpy.data.objects:
                terrain_objs.append(bpy.data.objects[n.strip()])
    keep = set(meshes) | {arm} | set(terrain_objs)
    for ob in bpy.data.objects:  # (only the character, and its ground, are shown)
        if ob not in keep:
            ob.hide_render = True
    for ob in meshes:
        ob.hide_render = False
        ob.color = (0.85, 0.55, 0.35, 1.0)
    for ob in terrain_objs:
        ob.hide_render = False
        ob.color = (0.55, 0.62, 0.5, 1.0)
    capsules = [] if meshes else _capsules(bpy, arm, (0.35, 0.55, 0.85, 1.0))
    shown = meshes or capsules

    # the rest's lowest point: the floor
    arm.data.pose_position = "REST"
    bpy.context.view_layer.update()
    rest_pts, _ = _points(bpy, arm, meshes, roles)
    floor = float(rest_pts[:, 2].min())
    height = float(np.ptp(rest_pts[:, 2])) or 1.0
    arm.data.pose_position = "POSE"

    # where the character is at each frame, its facing
    boxes, fwd = [], np.zeros(3)
    for f in frames:
        scene.frame_set(f)
        pts, hips = _points(bpy, arm, shown if meshes else [], roles)
        if not meshes:
            pts = _points(bpy, arm, [], roles)[0]
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        lo[2] = min(lo[2], floor)
        boxes.append((lo, hi))
        if hips is not None:
            lat = hips[0] - hips[1]
            fwd += np.cross(lat, [0.0, 0.0, 1.0])
    fwd[2] = 0.0
    if np.linalg.norm(fwd) < 1e-9:
        fwd = np.array([0.0, -1.0, 0.0])  # (Blender's front view looks along +Y: a character facing -Y)
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    elev = math.radians(elevation)
    d = (math.cos(math.radians(azimuth)) * fwd + math.sin(math.radians(azimuth)) * right) * math.cos(elev)
    d[2] = math.sin(elev)
    radius = max(float(np.linalg.norm(hi - lo)) / 2.0 for lo, hi in boxes)
    radius = max(radius, 0.55 * height)

    cam_data = bpy.data.cameras.new("_sheet_cam")
    cam_data.lens = 50.0
    cam_data.sensor_width = 36.0
    cam_data.clip_start = radius * 0.01
    cam_data.clip_end = radius * 100.0
    cam = bpy.data.objects.new("_sheet_cam", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    fov = 2.0 * math.atan(18.0 / cam_data.lens)
    dist = radius / math.sin(fov / 2.0) * 1.02

    if not terrain_objs:
        allp = np.array([b for bb in boxes for b in bb])
        margin = 2.5 * radius
        _grid(bpy, floor, allp[:, :2].min(axis=0) - margin, allp[:, :2].max(axis=0) + margin,
              _nice(height / 4.0), [(0.78, 0.78, 0.76, 1.0), (0.45, 0.45, 0.45, 1.0)])

    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = int(size)
    scene.render.resolution_percentage = 100
    scene.render.film_transparent = False
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGBA"
    sh = scene.display.shading
    sh.light = "STUDIO"
    sh.color_type = "OBJECT"
    sh.show_shadows = True
    sh.show_cavity = False
    if scene.world is None:
        scene.world = bpy.data.worlds.new("_sheet_world")
    scene.world.color = (0.93, 0.94, 0.96)
    r = scene.render
    r.use_stamp = True
    for attr in ("use_stamp_date", "use_stamp_time", "use_stamp_render_time", "use_stamp_frame_range",
                 "use_stamp_memory", "use_stamp_hostname", "use_stamp_camera", "use_stamp_lens", "use_stamp_scene",
                 "use_stamp_marker", "use_stamp_filename", "use_stamp_sequencer_strip", "use_stamp_frame"):
        if hasattr(r, attr):
            setattr(r, attr, False)
    r.use_stamp_note = True
    r.stamp_font_size = max(10, int(size) // 22)
    r.stamp_foreground = (0.0, 0.0, 0.0, 1.0)
    r.stamp_background = (1.0, 1.0, 1.0, 0.6)

    tmp = tempfile.mkdtemp(prefix="contact_sheet_")
    tiles = []
    t0 = time.perf_counter()
    for f, (lo, hi) in zip(frames, boxes):
        scene.frame_set(f)
        c = (lo + hi) / 2.0
        pos = c + d * dist
        cam.location = Vector(pos.tolist())
        cam.rotation_euler = Vector((c - pos).tolist()).to_track_quat("-Z", "Y").to_euler()
        r.stamp_note_text = f"{label + '  ' if label else ''}frame {f}"
        r.filepath = os.path.join(tmp, f"tile_{f:06d}.png")
        bpy.ops.render.render(write_still=True)
        tiles.append(r.filepath)
    per = (time.perf_counter() - t0) / max(1, len(frames))

    # assemble with numpy, saved through a Blender image
    imgs = []
    for p in tiles:
        im = bpy.data.images.load(p)
        w, h = im.size
        px = np.empty(w * h * 4, dtype=np.float32)
        im.pixels.foreach_get(px)
        imgs.append(px.reshape(h, w, 4))
        bpy.data.images.remove(im)
    cols = columns or min(len(imgs), 4)
    rows = int(math.ceil(len(imgs) / cols))
    gap = 4
    h, w = imgs[0].shape[:2]
    H, Wd = rows * h + (rows + 1) * gap, cols * w + (cols + 1) * gap
    sheet = np.ones((H, Wd, 4), dtype=np.float32)
    sheet[..., :3] = 0.3
    for k, im in enumerate(imgs):
        rr, cc = divmod(k, cols)
        y0 = H - (rr + 1) * (h + gap)  # (Blender's pixels start at the bottom row)
        x0 = gap + cc * (w + gap)
        sheet[y0:y0 + h, x0:x0 + w] = im
    out = bpy.data.images.new("_sheet", width=Wd, height=H, alpha=True)
    out.pixels.foreach_set(sheet.ravel())
    out.filepath_raw = os.path.abspath(output)
    out.file_format = "PNG"
    os.makedirs(os.path.dirname(os.path.abspath(output)) or ".", exist_ok=True)
    out.save()
    for p in tiles:
        os.remove(p)
    os.rmdir(tmp)
    return {"output": os.path.abspath(output), "frames": frames, "seconds_per_frame": per,
            "armature": arm.name, "skin": [m.name for m in meshes], "capsules": len(capsules)}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fullbody_ik.benchmarks.contact_sheet", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", help="the result .blend (opened, never saved)")
    ap.add_argument("--report", help="the retarget's JSON: the character's armature, its action and frames")
    ap.add_argument("--armature", help="the armature to show (default: the report's, else the animated one)")
    ap.add_argument("--frames", help="frames to show, e.g. 1,20,40 (default: --count evenly spaced)")
    ap.add_argument("--count", type=int, default=8, help="how many frames when --frames is not given (default 8)")
    ap.add_argument("--span", default="0-1", help="the part of the range to spread them over, as fractions "
                    "(default 0-1; 0.25-0.75: mid-clip)")
    ap.add_argument("--size", type=int, default=320, help="a tile's pixels (square; default 320)")
    ap.add_argument("--columns", type=int, help="tiles a row (default: up to 4)")
    ap.add_argument("--terrain", help="OBJ[,OBJ...] in the result to show as the ground (default: a floor grid)")
    ap.add_argument("--label", help="text before each tile's frame number")
    ap.add_argument("--azimuth", type=float, default=40.0, help="the camera's bearing from the character's front "
                    "toward its right, degrees (default 40: three-quarter; 90: its right side; 0: its front)")
    ap.add_argument("--elevation", type=float, default=18.0, help="the camera's height angle, degrees (default 18)")
    ap.add_argument("--output", "-o", help="the PNG (default: RESULT_sheet.png)")
    args = ap.parse_args(argv)
    frames = [int(x) for x in args.frames.split(",")] if args.frames else None
    a, b = (float(x) for x in args.span.split("-"))
    output = args.output or os.path.splitext(args.result)[0] + "_sheet.png"
    res = contact_sheet(args.result, output, frames, args.count, (a, b), args.size, args.report, args.terrain,
                        args.armature, args.columns, args.label, args.azimuth, args.elevation)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
