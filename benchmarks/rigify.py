# SPDX-License-Identifier: GPL-3.0-or-later
"""Full-body IK on a rig Rigify generates from its human metarig (700 bones), against the aims for production rigs:

- Solve: Pose goals on both hands' and feet's IK controls, their targets moved 3-8 cm (a new random move each
  repeat, from the walk's first pose): time per Solve (solve_pose: the solve, the pose written, the rig updated and
  judged as Blender shows it), goals met as shown within 1 mm. Aim p95 <= 10 ms.
- Drag: the left hand's target dragged along a loop in the view plane with the four goals: time per step (solve
  and pose written). Aim p95 <= 5 ms.
- Bake: the same goals, targets keyed (the hands drawn 8 cm toward the shoulders, the feet lifted), over the frames:
  time per frame, frames met as shown, after a bake of a few frames (what a process pays once, loading the compiled
  code a bake uses, is benchmarks/first_compile.py's; the first bake's time is printed too). Aim <= 5 ms a frame.
- Retarget and foot placement: CMU 02_01 onto the rig and onto the metarig it was generated from (a plain character
  of the same proportions), then each result planted on stairs, in one run: the time per frame of each and the
  ratio. Aim: the rig at most 3x the plain character.

    python -m fullbody_ik.benchmarks.rigify [--repeats 40] [--steps 60] [--frames 48] [--clip-frames 120]
"""

import argparse
import time

import numpy as np

from .common import prepare_compiled, table, write

CONTROLS = ("hand_ik.L", "hand_ik.R", "foot_ik.L", "foot_ik.R")


def _stats(ms):
    ms = np.asarray(ms, dtype=float)
    return {"median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95)), "n": int(len(ms))}


def _walk(bpy, frames):
    """The generated rig walking (scenes.rigify_walk), active, in Pose Mode, with Pose goals on its IK controls."""
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    rig, first, last = scenes.rigify_walk(bpy, frames=frames)
    bpy.context.scene.frame_set(first)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="POSE")
    for name in CONTROLS:
        rig.data.bones.active = rig.data.bones[name]
        bpy.ops.fullbody_ik.goal_add(kind="POSE")
    bpy.context.view_layer.update()
    return rig, first, last


def solve_times(bpy, repeats, rng):
    """Solve with the four goals, their targets moved 3-8 cm each repeat: times and goals met as shown."""
    from fullbody_ik.rig.goals import solve_pose

    rig, _, _ = _walk(bpy, 4)
    bases = {pb.name: pb.matrix_basis.copy() for pb in rig.pose.bones}
    homes = [np.array(g.target.location) for g in rig.fullbody_ik.goals]
    times, met, worst = [], [], []
    for r in range(repeats + 2):
        for name, m in bases.items():
            rig.pose.bones[name].matrix_basis = m
        for g, home in zip(rig.fullbody_ik.goals, homes):
            d = rng.normal(size=3)
            g.target.location = home + d / np.linalg.norm(d) * rng.uniform(0.03, 0.08)
        bpy.context.view_layer.update()
        t0 = time.perf_counter()
        result = solve_pose(rig)
        if r >= 2:  # (two untimed: the first solves build the tree and find the controls)
            times.append(1e3 * (time.perf_counter() - t0))
            met.append(bool(result.shown_success))
            worst.append(float(np.max(result.shown_errors)))
    return dict(_stats(times), met=float(np.mean(met)), worst_shown_mm=1e3 * float(np.max(worst)))


def drag_times(bpy, steps):
    """The left hand's target dragged along a loop 60 px wide and 40 px high: time per step and steps met."""
    from fullbody_ik.rig.drag import DragSession, look_at_perspective, to_screen

    rig, _, _ = _walk(bpy, 4)
    P, size = look_at_perspective((0.0, -4.0, 1.2), (0.0, 0.0, 1.0)), (1200, 800)
    mouse = to_screen(P, size, np.array(rig.fullbody_ik.goals[0].target.matrix_world.translation))[:2]
    session = DragSession(rig, P, size, mouse)
    times, ok = [], []
    for k in range(steps):
        a = 2 * np.pi * k / steps
        t0 = time.perf_counter()
        res = session.move(mouse + np.array([60.0 * np.sin(a), 40.0 * (1 - np.cos(a))]))
        times.append(1e3 * (time.perf_counter() - t0))
        ok.append(bool(res.success))
    session.confirm()
    return dict(_stats(times), met=float(np.mean(ok)))


def bake_time(bpy, frames):
    """A bake of the four goals, targets keyed within reach, over ``frames`` frames of the rig at rest."""
    from fullbody_ik.rig.bake import Baker, BakeOptions
    from fullbody_ik.tools import scenes

    rig, first, last = _walk(bpy, frames)
    rig.animation_data.action = None
    for pb in rig.pose.bones:
        pb.location, pb.rotation_quaternion = (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    for k, (name, goal) in enumerate(zip(CONTROLS, rig.fullbody_ik.goals)):
        goal.target.matrix_world = rig.matrix_world @ rig.pose.bones[name].matrix
        goal.target.location = rig.matrix_world @ rig.pose.bones[name].tail
        scenes.key_within_reach(bpy, rig, goal, first, last, k)
    bpy.ops.object.mode_set(mode="OBJECT")
    t0 = time.perf_counter()
    report = Baker(bpy.context.scene, rig, BakeOptions(first, last)).run()
    seconds = time.perf_counter() - t0
    missed = report.verdict()["missed_frames"]
    return {"ms_per_frame": 1e3 * seconds / (last - first + 1), "frames": last - first + 1,
            "frames_met": last - first + 1 - len(missed), "ok": bool(report.ok)}


def _character(bpy, rigify):
    """The human metarig, or the rig Rigify generates from it; the CMU walk beside it."""
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    src, first, last = scenes.import_cmu(bpy, "02_01")
    meta = scenes.metarig(bpy)
    if not rigify:
        return src, meta, first, last
    bpy.context.view_layer.objects.active = meta
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    meta.hide_set(True)
    return src, rig, first, last


def retarget_and_plant(bpy, rigify, frames):
    """Seconds to retarget CMU 02_01's first ``frames`` take frames onto the character, then to plant the result on
    stairs; whether each job's verdict was OK."""
    from fullbody_ik.rig.footplant import FootOptions, foot_placement
    from fullbody_ik.rig.retarget import RetargetOptions, retarget
    from fullbody_ik.tools import scenes

    src, tgt, first, last = _character(bpy, rigify)
    f0, f1 = first + 1, min(last, first + frames)  # (its first frame is CMU's reference pose)
    scene = bpy.context.scene
    t0 = time.perf_counter()
    report = retarget(scene, src, tgt, RetargetOptions(f0, f1))
    retarget_s = time.perf_counter() - t0
    scene.frame_set(f0)
    at = np.array(tgt.matrix_world @ tgt.pose.bones[0].head)
    terrain = scenes.terrain_mesh(bpy, "Stairs", scenes.stairs(rise=0.1, run=0.5, start=float(at[1]) + 0.3),
                                  center=(float(at[0]), float(at[1])))
    t0 = time.perf_counter()
    feet = foot_placement(scene, tgt, FootOptions(f0, f1, [terrain.name]))
    plant_s = time.perf_counter() - t0
    return {"frames": f1 - f0 + 1, "retarget_ms_per_frame": 1e3 * retarget_s / (f1 - f0 + 1),
            "retarget_ok": bool(report.ok), "plant_ms_per_frame": 1e3 * plant_s / (f1 - f0 + 1),
            "plant_ok": bool(feet.ok), "plant_verdict": feet.verdict}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--frames", type=int, default=48)
    ap.add_argument("--clip-frames", type=int, default=120)
    args = ap.parse_args()
    import bpy

    import fullbody_ik

    prepare_compiled()
    bpy.ops.preferences.addon_enable(module="rigify")
    fullbody_ik.register()
    out = {"solve": solve_times(bpy, args.repeats, np.random.default_rng(0)), "drag": drag_times(bpy, args.steps),
           "first bake": bake_time(bpy, 4),
           "bake": bake_time(bpy, args.frames),
           "plain": retarget_and_plant(bpy, False, args.clip_frames),
           "rigify": retarget_and_plant(bpy, True, args.clip_frames)}
    s, d, b, p, r = out["solve"], out["drag"], out["bake"], out["plain"], out["rigify"]
    ratio_r = r["retarget_ms_per_frame"] / p["retarget_ms_per_frame"]
    ratio_p = r["plant_ms_per_frame"] / p["plant_ms_per_frame"]
    out["ratios"] = {"retarget": ratio_r, "plant": ratio_p}
    rows = [
        ["Solve, 4 Pose goals (IK controls)", f"{s['median_ms']:.1f} / {s['p95_ms']:.1f} ms",
         f"{100 * s['met']:.0f} % met as shown (worst {s['worst_shown_mm']:.2f} mm)", "p95 <= 10 ms"],
        ["Drag step, 4 goals", f"{d['median_ms']:.1f} / {d['p95_ms']:.1f} ms", f"{100 * d['met']:.0f} % steps met",
         "p95 <= 5 ms"],
        ["Bake, 4 Pose goals", f"{b['ms_per_frame']:.1f} ms a frame (the first, 4 frames: "
         f"{out['first bake']['ms_per_frame']:.1f})", f"{b['frames_met']}/{b['frames']} frames met", "<= 5 ms a frame"],
        ["Retarget CMU 02_01", f"{r['retarget_ms_per_frame']:.1f} ms a frame (plain {p['retarget_ms_per_frame']:.1f}:"
         f" {ratio_r:.1f}x)", f"OK: {r['retarget_ok']} (plain {p['retarget_ok']})", "<= 3x plain"],
        ["Foot placement on stairs", f"{r['plant_ms_per_frame']:.1f} ms a frame (plain {p['plant_ms_per_frame']:.1f}:"
         f" {ratio_p:.1f}x)", f"OK: {r['plant_ok']} (plain {p['plant_ok']})", "<= 3x plain"],
    ]
    print("Generated Rigify human rig (median / p95 where two figures)")
    print(table(rows, ["job", "time", "result", "aim"]))
    write("rigify", out, f"python -m fullbody_ik.benchmarks.rigify --repeats {args.repeats} --steps {args.steps} "
                         f"--frames {args.frames} --clip-frames {args.clip_frames}")


if __name__ == "__main__":
    main()
