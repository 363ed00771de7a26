# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake throughput on the character-tracking problem, and batch scaling from 1 to 2 jobs.

The scene (also the demo's): a CMU clip imported twice from its BVH, "mocap" (the clip) and "rig" (the same
skeleton at rest, with IK limits derived from the clip's own range, as in the tracking benchmark); the rig's
goals follow the mocap's hips (pose, free root), wrists, ankles and head (positions). The bake runs the real
thing: `Baker` in one process with BLAS on one thread (frame evaluation, solve, key writing), and
`python -m fullbody_ik batch bake --jobs 1|2` on copies of the scenes for the scaling. Each clip is baked with
the compiled core and with it switched off (numpy, the reference), in the same run.

    python -m fullbody_ik.benchmarks.bake [--clips 02_01,...] [--time-limit 0.01] [--batch-files 4]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import ROOT, prepare_compiled, table, write
from .tracking import CMU_UNIT, EFFECTORS, chain_bones, derive_limits, record

BODY_GOALS = list(EFFECTORS)  # LeftHand, RightHand, LeftFoot, RightFoot, Head
BAKE_HEADERS = ["clip", "core", "frames", "frames/s", "ms/frame", "solve ms", "all goals met", "mean mm", "p95 mm",
                "max mm", "violations"]


def build_scene(bpy, clip, time_limit=0.01):
    """The mocap clip drives the goals of a rig; returns (rig, first frame, last frame)."""
    import fullbody_ik

    path = os.path.join(ROOT, "data", "bvh", f"cmu_{clip}.bvh")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if not hasattr(bpy.types.Object, "fullbody_ik"):
        fullbody_ik.register()
    bpy.ops.import_anim.bvh(filepath=path, global_scale=CMU_UNIT, rotate_mode="NATIVE")
    mocap = bpy.context.object
    mocap.name = "mocap"
    start, end = (int(round(f)) for f in mocap.animation_data.action.frame_range)
    first = start + 1  # frame `start` is the added T-pose
    bpy.ops.import_anim.bvh(filepath=path, global_scale=CMU_UNIT, rotate_mode="NATIVE")
    rig = bpy.context.object
    rig.name = "rig"
    _, _, local = record(bpy, rig, range(first, end + 1))
    rig.animation_data.action = None  # the rig starts at rest: IK alone poses it
    for pb in rig.pose.bones:
        pb.rotation_mode, pb.rotation_quaternion, pb.location = "QUATERNION", (1, 0, 0, 0), (0, 0, 0)
    derive_limits(rig, local, chain_bones(rig))
    props = rig.fullbody_ik
    props.settings.free_root = True
    props.settings.time_limit = time_limit
    g = props.goals.add()
    g.kind, g.bone, g.target, g.subtarget, g.use_tail = "POSE", "Hips", mocap, "Hips", False
    for bone in BODY_GOALS:
        g = props.goals.add()
        g.kind, g.bone, g.target, g.subtarget, g.use_tail = "POSITION", bone, mocap, bone, False
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = first, end
    scene.frame_set(first)
    bpy.context.view_layer.objects.active = rig
    return rig, first, end


def throughput(bpy, clip, time_limit, core="compiled"):
    from fullbody_ik.rig.bake import BakeOptions, Baker
    from fullbody_ik.solvers import compiled
    from fullbody_ik.solvers.blas import single_thread_blas

    rig, first, last = build_scene(bpy, clip, time_limit)
    compiled.set_enabled(core == "compiled")
    compiled.prepare("core")  # loaded (or compiled) once a process before the clock, as the command line does
    try:
        with single_thread_blas():
            t0 = time.perf_counter()
            report = Baker(bpy.context.scene, rig, BakeOptions(first, last)).run()
            seconds = time.perf_counter() - t0
    finally:
        compiled.set_enabled(True)
    s = report.summary()
    return {"frames": s["frames"], "seconds": seconds, "fps": s["frames"] / seconds,
            "solved_frames": s["solved_frames"],
            "mean_error_mm": s["mean_error_mm"], "p95_error_mm": s["p95_error_mm"], "max_error_mm": s["max_error_mm"],
            "violations": s["violations"], "solve_ms": s["solve_ms_per_frame"], "frame_ms": s["ms_per_frame"],
            "keys": report.keys}


def batch_scaling(bpy, clips, files, time_limit):
    """Wall time of `batch bake` over the same files with 1 and 2 jobs."""
    work = tempfile.mkdtemp(prefix="fbik-bench-")
    try:
        paths = []
        for i in range(files):
            clip = clips[i % len(clips)]
            build_scene(bpy, clip, time_limit)
            path = os.path.join(work, f"scene{i}_{clip}.blend")
            bpy.ops.wm.save_as_mainfile(filepath=path)
            paths.append(path)
        out = {}
        for jobs in (1, 2):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "fullbody_ik", "batch", "bake", "--jobs", str(jobs),
                                   "--output-dir", os.path.join(work, f"out{jobs}"), *paths],
                                  capture_output=True, text=True)
            out[jobs] = {"seconds": time.perf_counter() - t0, "exit": proc.returncode}
            print(f"batch bake, {files} files, {jobs} job(s): {out[jobs]['seconds']:.1f} s (exit {proc.returncode})",
                  flush=True)
            if proc.returncode:
                print(proc.stderr[-2000:])
        return {"files": files, "clips": [os.path.basename(p) for p in paths],
                "seconds_1_job": out[1]["seconds"], "seconds_2_jobs": out[2]["seconds"],
                "speedup": out[1]["seconds"] / out[2]["seconds"], "exit_codes": [out[1]["exit"], out[2]["exit"]],
                "cpus": os.cpu_count()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clips", default="02_01,02_03,02_04,03_01")
    ap.add_argument("--time-limit", type=float, default=0.01, help="seconds per frame (the tracking budget)")
    ap.add_argument("--batch-files", type=int, default=4)
    ap.add_argument("--cores", default="compiled,numpy", help="compiled, numpy (the compiled core switched off)")
    ap.add_argument("--repeats", type=int, default=3, help="bakes of each clip with each core, the cores taking "
                    "turns; the fastest of each is reported (this machine has slow phases of a minute or so: one "
                    "of them over a compiled bake of half a second halved its frames/s)")
    args = ap.parse_args()
    import bpy

    prepare_compiled()
    clips, cores = args.clips.split(","), args.cores.split(",")
    rows, results = [], {}
    for clip in clips:
        runs = {core: [] for core in cores}
        for k in range(args.repeats):
            for core in (cores if k % 2 == 0 else cores[::-1]):
                runs[core].append(throughput(bpy, clip, args.time_limit, core))
        results[clip] = {}
        for core in cores:
            r = results[clip][core] = max(runs[core], key=lambda run: run["fps"])
            r["fps_runs"] = [run["fps"] for run in runs[core]]
            rows.append([clip, core, r["frames"], f"{r['fps']:.0f}", f"{r['frame_ms']:.2f}", f"{r['solve_ms']:.2f}",
                         f"{r['solved_frames']}/{r['frames']}", f"{r['mean_error_mm']:.3f}",
                         f"{r['p95_error_mm']:.3f}", f"{r['max_error_mm']:.1f}", r["violations"]])
            print(rows[-1], "frames/s of each bake:", [f"{f:.0f}" for f in r["fps_runs"]], flush=True)
    print(table(rows, BAKE_HEADERS))
    if set(cores) >= {"compiled", "numpy"}:
        for clip in clips:
            r = results[clip]
            print(f"{clip}: compiled {r['compiled']['fps'] / r['numpy']['fps']:.1f}x the frames/s of numpy, solve "
                  f"{r['numpy']['solve_ms'] / r['compiled']['solve_ms']:.1f}x faster per frame")
    scaling = batch_scaling(bpy, clips, args.batch_files, args.time_limit)
    print(f"batch scaling: {scaling['speedup']:.2f}x from 1 to 2 jobs ({scaling['cpus']} CPUs)")
    write("bake", {"time_limit": args.time_limit, "repeats": args.repeats, "throughput": results, "batch": scaling},
          f"python -m fullbody_ik.benchmarks.bake --time-limit {args.time_limit} --repeats {args.repeats}")


if __name__ == "__main__":
    main()
