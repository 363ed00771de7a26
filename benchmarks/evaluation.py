# SPDX-License-Identifier: GPL-3.0-or-later
"""What Blender's evaluation costs a bake, and what evaluating only what the bake reads saves (rig/evaluation.py).

Two scenes: the bake benchmark's CMU 03_01 (two armatures: the mocap and the rig whose goals follow it; no mesh),
and a user's character: mannequiny (glTF, its skinned mesh of 12,639 vertices) with a free root, its hips, hands and
feet following CMU 02_01 imported beside it. Each is baked (compiled core, 10 ms a frame) with Blender evaluating
only what the bake reads, and with the whole scene evaluated as before (``evaluating_only`` replaced by a context
that disables nothing), the two ways taking turns in one process; the median of the repeats is reported, and the
judged errors of both must agree. Two paths: a bake run to its end (``Baker.run``: scripts, the command line) and
the UI's (``Baker.steps`` a tenth of a second at a time, the scene whole again between steps, then ``finish``).

    python -m fullbody_ik.benchmarks.evaluation [--repeats 5]
"""

import argparse
import contextlib
import statistics
import sys
import time

from .common import prepare_compiled, table, write

HEADERS = ["scene", "path", "evaluated", "frames", "bake s (median)", "frames/s", "ratio", "all goals met", "max mm"]


def mannequiny_scene(bpy):
    """mannequiny, its own clip off, following CMU 02_01 (frames 2-120): (armature, first, last)."""
    from ..tools import scenes

    scenes.fresh(bpy)
    rig = scenes.import_mannequiny(bpy)[0]
    rig.animation_data.action = None
    for pb in rig.pose.bones:
        pb.scale = (1.0, 1.0, 1.0)
    mocap = scenes.import_cmu(bpy, "02_01")[0]
    rig.fullbody_ik.settings.free_root = True
    rig.fullbody_ik.settings.time_limit = 0.01
    for kind, bone, source in (("POSE", "pelvis", "Hips"), ("POSITION", "hand.l", "LeftHand"),
                               ("POSITION", "hand.r", "RightHand"), ("POSITION", "foot.l", "LeftFoot"),
                               ("POSITION", "foot.r", "RightFoot")):
        g = rig.fullbody_ik.goals.add()
        g.kind, g.bone, g.target, g.subtarget = kind, bone, mocap, source
    bpy.context.view_layer.objects.active = rig
    return rig, 2, 120


def _by_steps(baker):
    """A bake as the UI's modal operator runs it: steps of a tenth of a second, then finish."""
    while not baker.steps(0.1):
        pass
    return baker.finish()


PATHS = {"run": lambda baker: baker.run(), "UI steps": _by_steps}


def measure(bpy, build, repeats):
    """{(path, way): (seconds of each bake, last report)}, the ways and paths taking turns on one scene."""
    from fullbody_ik.rig import bake as B

    @contextlib.contextmanager
    def whole(scene, needed):  # the scene evaluated whole, as before rig/evaluation.py
        yield 0

    only = B.evaluating_only
    rig, first, last = build(bpy)
    scene = bpy.context.scene
    out = {(path, way): ([], None) for path in PATHS for way in ("only what is read", "the whole scene")}
    try:
        for k in range(repeats):
            for path, way in (list(out) if k % 2 == 0 else list(out)[::-1]):
                B.evaluating_only = only if way == "only what is read" else whole
                t = time.perf_counter()
                report = PATHS[path](B.Baker(scene, rig, B.BakeOptions(first, last, max_error=float("inf"))))
                out[path, way][0].append(time.perf_counter() - t)
                out[path, way] = (out[path, way][0], report)
    finally:
        B.evaluating_only = only
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import bpy
    import numpy as np

    from .bake import build_scene

    prepare_compiled()
    scenes = {"CMU 03_01 (mocap + rig)": lambda bpy: build_scene(bpy, "03_01"),
              "mannequiny after CMU 02_01 (mesh 12,639 vertices)": mannequiny_scene}
    rows, results = [], {}
    for name, build in scenes.items():
        out = measure(bpy, build, args.repeats)
        errors = [report.errors for _, report in out.values()]
        agree = float(max(np.nanmax(np.abs(e - errors[0])) for e in errors))
        results[name] = {"agree_max_difference": agree}
        for (path, way), (seconds, report) in out.items():
            s = report.summary()
            median = statistics.median(seconds)
            whole = statistics.median(out[path, "the whole scene"][0])
            results[name][f"{path}, {way}"] = {"seconds": seconds, "frames": s["frames"],
                                               "solved_frames": s["solved_frames"], "max_error_mm": s["max_error_mm"]}
            rows.append([name, path, way, s["frames"], f"{median:.3f}", f"{s['frames'] / median:.0f}",
                         f"{whole / median:.2f}x", f"{s['solved_frames']}/{s['frames']}", f"{s['max_error_mm']:.3g}"])
        print(f"{name}: the judged errors of the four bakes differ by at most {agree:.2g} (world units)",
              file=sys.stderr)
    print(table(rows, HEADERS))
    write("evaluation", {"repeats": args.repeats, "scenes": results, "rows": rows, "headers": HEADERS},
          f"python -m fullbody_ik.benchmarks.evaluation --repeats {args.repeats}")


if __name__ == "__main__":
    main()
