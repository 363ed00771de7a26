# SPDX-License-Identifier: GPL-3.0-or-later
"""Solve on each frame of a clip, as a user does it, beside Blender's Standard IK on the same frames.

The scene (tools/scenes.cmu_scene): a CMU clip imported from its BVH keeps its action, its root ``Hips``
walks across the floor (not a free root), position goals on both hands and both feet follow keyed empties a
few centimetres away from the animated bones. Ours: at each frame ``scene.frame_set(f)`` then
``bpy.ops.fullbody_ik.solve()`` (the operator, undo push included). Blender: IK constraints (Standard solver,
its defaults: 500 iterations, tolerance 0.001) on the forearms and shins, chains up to the hips, targets the
same empties, evaluated by ``scene.frame_set(f)``. The clip's own frame evaluation (frame_set with no IK) is
measured too and listed apart; the ratio compares ours (frame_set + Solve) with Blender's (frame_set with IK),
both measured in this run.

    python -m fullbody_ik.benchmarks.solve_frames [--clips 02_01,03_01] [--frames 100] [--time-limit 0.01]
"""

import argparse
import time

import numpy as np

from .common import prepare_compiled, table, write

CHAIN_END = {"LeftHand": "LeftForeArm", "RightHand": "RightForeArm", "LeftFoot": "LeftLeg",
             "RightFoot": "RightLeg"}  # goal bone (its head) -> the bone whose tail it is


def goal_errors(bpy, obj):
    M = np.array(obj.matrix_world)
    return [np.linalg.norm((M @ np.append(np.array(obj.pose.bones[g.bone].head), 1.0))[:3]
                           - np.array(g.target.matrix_world.translation)) for g in obj.fullbody_ik.goals]


def timed_frames(bpy, frames, per_frame=None):
    """ms of frame_set per frame (and of ``per_frame()`` after it), errors measured outside the timing."""
    scene = bpy.context.scene
    set_ms, solve_ms = [], []
    for f in frames:
        t0 = time.perf_counter()
        scene.frame_set(f)
        t1 = time.perf_counter()
        if per_frame is not None:
            per_frame()
        t2 = time.perf_counter()
        set_ms.append((t1 - t0) * 1e3)
        solve_ms.append((t2 - t1) * 1e3)
    return np.array(set_ms), np.array(solve_ms)


def run_clip(bpy, clip, count, time_limit):
    from fullbody_ik.rig import goals as rig_goals
    from fullbody_ik.tools import scenes

    obj, frames = scenes.cmu_scene(bpy, clip, time_limit=time_limit)
    frames = frames[:count]
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = obj
    bake_only, _ = timed_frames(bpy, frames)  # the clip alone: what any solver pays to evaluate a frame

    errors = []

    def solve():
        assert bpy.ops.fullbody_ik.solve() == {"FINISHED"}
        errors.append(goal_errors(bpy, obj))

    bpy.ops.fullbody_ik.solve()  # the tree is built once, at the first Solve
    builds = rig_goals.BUILDS[0]
    ours_set, ours_solve = timed_frames(bpy, frames, solve)
    rebuilt = rig_goals.BUILDS[0] - builds
    ours_err = np.array(errors) * 1e3

    obj.pose.ik_solver = "LEGACY"
    for goal in obj.fullbody_ik.goals:
        c = obj.pose.bones[CHAIN_END[goal.bone]].constraints.new("IK")
        c.target, c.use_tail = goal.target, True
        n, b = 0, obj.data.bones[CHAIN_END[goal.bone]]
        while b is not None and b.name != "Hips":
            n, b = n + 1, b.parent
        c.chain_count = n + 1  # up to and with the hips, as ours
    blender_err = []

    def measure():
        blender_err.append(goal_errors(bpy, obj))

    blender_set, _ = timed_frames(bpy, frames, measure)
    blender_err = np.array(blender_err) * 1e3
    scene.frame_set(frames[0])
    ours_total, blender_total = ours_set + ours_solve, blender_set
    return {
        "frames": len(frames), "tree_rebuilds": int(rebuilt), "clip_eval_ms": float(np.mean(bake_only)),
        "ours": {"ms_per_frame": float(np.mean(ours_total)), "solve_ms": float(np.mean(ours_solve)),
                 "median_ms": float(np.median(ours_total)), "mean_mm": float(ours_err.mean()),
                 "p95_mm": float(np.percentile(ours_err, 95)), "max_mm": float(ours_err.max())},
        "blender": {"ms_per_frame": float(np.mean(blender_total)),
                    "ik_ms": float(np.mean(blender_set) - np.mean(bake_only)),
                    "median_ms": float(np.median(blender_total)), "mean_mm": float(blender_err.mean()),
                    "p95_mm": float(np.percentile(blender_err, 95)), "max_mm": float(blender_err.max())},
        "ratio": float(np.mean(ours_total) / np.mean(blender_total)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clips", default="02_01,03_01")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--time-limit", type=float, default=0.01, help="our solver's budget per Solve (s)")
    args = ap.parse_args()
    prepare_compiled()
    import bpy

    from fullbody_ik.solvers.blas import single_thread_blas

    results, rows = {}, []
    with single_thread_blas():
        for clip in args.clips.split(","):
            r = results[clip] = run_clip(bpy, clip, args.frames, args.time_limit)
            for label, key in (("ours: frame + Solve", "ours"), ("Blender Standard IK", "blender")):
                s = r[key]
                rows.append([clip, label, r["frames"], f"{s['ms_per_frame']:.1f}", f"{s['median_ms']:.1f}",
                             f"{s['mean_mm']:.3f}", f"{s['p95_mm']:.3f}", f"{s['max_mm']:.1f}"])
            rows.append([clip, "ratio ours / Blender", "", f"{r['ratio']:.2f}", "", "", "", ""])
            print(rows[-3:], f"clip evaluation alone {r['clip_eval_ms']:.1f} ms, tree rebuilds {r['tree_rebuilds']}",
                  flush=True)
    print(table(rows, ["clip", "solver", "frames", "ms/frame", "median ms", "mean mm", "p95 mm", "max mm"]))
    write("solve_frames", {"time_limit": args.time_limit, "results": results},
          f"python -m fullbody_ik.benchmarks.solve_frames --frames {args.frames} --time-limit {args.time_limit}")


if __name__ == "__main__":
    main()
