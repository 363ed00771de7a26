# SPDX-License-Identifier: GPL-3.0-or-later
"""Foot placement on terrains, beside what a user does by hand today (the source moved by its best single
vertical offset), in one run.

Clips: the CMU clips of the repo (02_01 walk, 02_03 run, 02_04 jump, 03_01), mannequiny's run (glTF, 15 frames in
place) and Quaternius' walk (FBX, in place, its feet parented to the root). "ok": the job's own verdict.
Terrains (built under each clip's path): a real height map (matplotlib's jacksboro_fault_dem.npz, a patch
scaled to +-30 cm over 10 m), stairs (15 cm steps), a 15-degree slope, noise (+-5 cm, 20 cm features), and a
plane with Subdivision + Displace modifiers (evaluated by the raycast). Measured at contact frames, per foot,
worst of the two: penetration and float (relative to the source's clearance over its floor; the foot's: its
contact point nearest its place, and each point's: a rigid foot on uneven ground, or a source sole below its own
floor, leaves some points above theirs) in mm, sole normal
against the terrain's in degrees, skate in mm/frame; joint-angle acceleration of the legs relative to the
source's; the lowest clearance of a swinging foot (none of its points touching) over the terrain against the
source's over its floor; ms per frame.
Aims: penetration <= 1 mm, float <= 5 mm, sole normal <= 3 deg, skate <= the source's, acceleration <= 1.5x,
swing clearance >= the source's, time per frame <= the tracking bake's.

    python -m fullbody_ik.benchmarks.footplant [--clips 02_01,...] [--terrains dem,stairs,...] [--frames 240]
"""

import argparse
import math
import time

import numpy as np

from .common import prepare_compiled, run_cases, table, write

TERRAINS = ("dem", "stairs", "slope", "noise", "modifiers")


def make_terrain(bpy, kind, center, direction, size):
    from fullbody_ik.tools import scenes

    d = direction / max(np.linalg.norm(direction), 1e-9)
    along = lambda X, Y: (X - center[0]) * d[0] + (Y - center[1]) * d[1]  # noqa: E731
    if kind == "dem":
        dem = scenes.height_map(0.3, 10.0)
        h = lambda X, Y: dem(X - center[0], Y - center[1])  # noqa: E731
    elif kind == "stairs":
        h = lambda X, Y: 0.15 * np.clip(np.floor(along(X, Y) / 0.6) + 3, 0, None)  # noqa: E731
    elif kind == "slope":
        h = lambda X, Y: math.tan(math.radians(15)) * along(X, Y)  # noqa: E731
    elif kind == "noise":
        rng = np.random.default_rng(7)
        k = rng.normal(size=(8, 2)) * 2 * np.pi / 0.8
        ph = rng.uniform(0, 2 * np.pi, 8)
        h = lambda X, Y: 0.05 / 2 * sum(np.sin(k[i, 0] * X + k[i, 1] * Y + ph[i]) for i in range(8)) / 2  # noqa: E731
    else:
        h = lambda X, Y: 0.0 * X  # noqa: E731
    obj = scenes.terrain_mesh(bpy, f"terrain_{kind}", h, size=(size, size),
                              resolution=0.5 if kind == "modifiers" else 0.05, center=center)
    if kind == "modifiers":
        sub = obj.modifiers.new("subdivide", "SUBSURF")
        sub.subdivision_type, sub.levels = "SIMPLE", 3
        tex = bpy.data.textures.new("bumps", "CLOUDS")
        tex.noise_scale = 1.0
        disp = obj.modifiers.new("displace", "DISPLACE")
        disp.texture, disp.strength, disp.mid_level = tex, 0.3, 0.5
    return obj


def load_clip(bpy, clip):
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    if clip == "quaternius":
        return scenes.import_quaternius(bpy, "Man_Walk")
    if clip == "mannequiny":
        return scenes.import_mannequiny(bpy, "run_root.001")
    return scenes.import_cmu(bpy, clip)


def leg_acceleration(bpy, obj, frames, bones):
    """Mean |second difference| of the legs' local rotation angles, rad/frame^2."""
    angles = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        angles.append([np.arccos(np.clip((np.trace(np.array(obj.pose.bones[b].matrix_basis)[:3, :3]) - 1) / 2, -1, 1))
                       for b in bones])
    a = np.array(angles)
    return float(np.mean(np.abs(np.diff(a, 2, axis=0)))) if len(a) > 2 else 0.0


def run_case(bpy, clip, kind, max_frames, independent=False, workers=0):
    from fullbody_ik.rig import footplant as fp
    from fullbody_ik.rig.feet import find_feet

    obj, first, last = load_clip(bpy, clip)
    obj.fullbody_ik.settings.time_limit = 0.01
    frames = list(range(first, min(last, first + max_frames - 1) + 1))
    path = []
    for f in (frames[0], frames[len(frames) // 2], frames[-1]):
        bpy.context.scene.frame_set(f)
        path.append(np.array(obj.matrix_world @ obj.pose.bones[0].head))
    center = path[1][:2]
    direction = path[2][:2] - path[0][:2]
    size = float(np.linalg.norm(direction)) + 6.0
    terrain = make_terrain(bpy, kind, center, direction if np.linalg.norm(direction) > 0.2 else np.array([0, 1.0]),
                           size)
    bpy.context.view_layer.update()
    feet = find_feet(obj)
    legs = sorted({b.name for f in feet for b in [obj.data.bones[f.ankle]] + obj.data.bones[f.ankle].parent_recursive[:2]})
    source_acc = leg_acceleration(bpy, obj, frames, legs)
    t0 = time.perf_counter()
    report = fp.foot_placement(bpy.context.scene, obj, fp.FootOptions(frames[0], frames[-1], [terrain.name],
                                                                      independent=independent, workers=workers))
    seconds = time.perf_counter() - t0
    result_acc = leg_acceleration(bpy, obj, frames, legs)
    # The hand-made baseline: the source moved by one vertical offset, the median a contact needs.
    plan_ = _plan_again(bpy, obj, feet, terrain, frames, report)
    need = plan_["need"]
    dz = float(np.nanmedian(need)) if np.isfinite(need).any() else 0.0
    pts = plan_["points"].copy()
    pts[..., 2] += dz
    baseline, _ = fp.foot_metrics(plan_["plan"], pts, plan_["plan"].rotations, plan_["terrain"], plan_["sampler"])
    worst = lambda m, k: max(v[k] for v in m.values())  # noqa: E731
    bake = report.bake["summary"]
    row = {"frames": len(frames), "ok": report.ok, "ms_per_frame": 1e3 * seconds / len(frames),
           "solve_ms_per_frame": bake["solve_ms_per_frame"], "bake_seconds": report.bake["seconds"],
           "source_acceleration": source_acc, "result_acceleration": result_acc,
           "swing_clearance_source_mm": plan_["swing_source"], "swing_clearance_result_mm": plan_["swing_result"]}
    for name, m in (("before", report.before), ("offset", baseline), ("after", report.after)):
        for k in ("penetration_mm_max", "float_mm_max", "point_float_mm_max", "sole_normal_deg_max",
                  "skate_mm_per_frame"):
            row[f"{name}_{k}"] = worst(m, k)
    return row


def _plan_again(bpy, obj, feet, terrain_obj, frames, report):
    """The source's sole points and contacts (read back from the source action), what a contact needs, and the
    lowest swing clearances of source and result."""
    from fullbody_ik.rig import footplant as fp
    from fullbody_ik.rig.terrain import Terrain

    scene = bpy.context.scene
    result_action = obj.animation_data.action
    obj.animation_data.action = bpy.data.actions[report.source_action]
    terrain = Terrain([terrain_obj], bpy.context.evaluated_depsgraph_get())
    plan_, sampler, _ = fp.plan(scene, obj, feet, terrain, frames, fp.FootOptions(frames[0], frames[-1], []))
    obj.animation_data.action = result_action
    result = np.zeros_like(plan_.points)
    for i, f in enumerate(frames):
        scene.frame_set(f)
        result[i] = sampler.sample()
    need = np.where(plan_.contacts, plan_.terrain + np.maximum(plan_.clearance, 0) - plan_.points[..., 2], np.nan)
    swing = np.zeros_like(plan_.contacts)  # swinging feet: every point of the foot off the ground
    for cols in sampler.cols:
        swing[:, cols] = ~plan_.contacts[:, cols].any(axis=1, keepdims=True)
    _, h_res = fp.foot_metrics(plan_, result, plan_.rotations, terrain, sampler)
    src = np.where(swing, plan_.clearance, np.nan)
    res = np.where(swing, result[..., 2] - h_res, np.nan)
    low = lambda a: 1e3 * float(np.nanmin(a)) if np.isfinite(a).any() else float("nan")  # noqa: E731
    return {"plan": plan_, "sampler": sampler, "terrain": terrain, "points": plan_.points, "need": need,
            "swing_source": low(src), "swing_result": low(res)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clips", default="02_01,02_03,02_04,03_01,mannequiny,quaternius")
    ap.add_argument("--terrains", default=",".join(TERRAINS))
    ap.add_argument("--frames", type=int, default=240, help="at most this many frames per clip")
    ap.add_argument("--independent", action="store_true", help="each frame from the source's pose there, frames "
                    "in parallel threads (FootOptions.independent; default: tracked, as the product)")
    ap.add_argument("--workers", type=int, default=0, help="threads for --independent (0: automatic)")
    args = ap.parse_args()
    prepare_compiled()
    import bpy

    def row(clip, kind, r):
        f = lambda k: f"{r['before_' + k]:.1f} / {r['offset_' + k]:.1f} / {r['after_' + k]:.1f}"  # noqa: E731
        return [clip, kind, r["frames"], "yes" if r["ok"] else "NO", f("penetration_mm_max"), f("float_mm_max"),
                f("point_float_mm_max"), f("sole_normal_deg_max"), f("skate_mm_per_frame"),
                f"{r['result_acceleration'] / max(r['source_acceleration'], 1e-12):.2f}",
                f"{r['swing_clearance_source_mm']:.0f} / {r['swing_clearance_result_mm']:.0f}",
                f"{r['ms_per_frame']:.1f}", f"{1e3 * r['bake_seconds'] / r['frames']:.2f}",
                f"{r['solve_ms_per_frame']:.2f}"]

    results, rows = run_cases(args.clips.split(","), args.terrains.split(","),
                              lambda clip, kind: run_case(bpy, clip, kind, args.frames, args.independent,
                                                                          args.workers), row, 14)
    headers = ["clip", "terrain", "frames", "ok", "penetration mm (src/offset/ours)", "float mm", "point float mm",
               "sole normal deg", "skate mm/frame", "accel ratio", "min swing clearance mm (src/ours)", "ms/frame",
               "bake ms/frame", "solve ms/frame"]
    print(table(rows, headers))
    write("footplant_independent" if args.independent else "footplant", {"results": results, "rows": rows, "headers": headers},
          f"python -m fullbody_ik.benchmarks.footplant --frames {args.frames}"
          + (" --independent" if args.independent else "") + (f" --workers {args.workers}" if args.workers else ""))


if __name__ == "__main__":
    main()
