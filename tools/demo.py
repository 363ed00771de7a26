# SPDX-License-Identifier: GPL-3.0-or-later
"""`make demo`: a real bake, headless.

A CMU motion-capture clip from the repo (data/bvh, walk 02_01) is imported twice: "mocap" plays the clip,
"rig" is the same skeleton at rest with IK limits derived from the clip. The rig's goals follow the mocap's
hips, wrists, ankles and head. The scene is saved to out/demo_scene.blend, then the command line bakes it
like a render-node job would:

    python -m fullbody_ik bake out/demo_scene.blend --armature rig --output out/demo.blend \\
        --report out/demo_report.png

and the terminal shows the bake report. Open out/demo.blend in Blender 5.0 to play the baked rig.
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
OUT = os.path.join(ROOT, "out")
CLIP = "02_01"


def main():
    import bpy

    from fullbody_ik.benchmarks.bake import build_scene

    from fullbody_ik.solvers import compiled

    os.makedirs(OUT, exist_ok=True)
    # The compiled core compiled once here (or loaded from its cache), so no later solve waits for it.
    print(f"Solver core: {compiled.status()}; ready in {compiled.warm():.1f} s", flush=True)
    scene_path = os.path.join(OUT, "demo_scene.blend")
    rig, first, last = build_scene(bpy, CLIP, time_limit=0.01)
    bpy.ops.wm.save_as_mainfile(filepath=scene_path)
    print(f"Full-Body IK demo: CMU clip {CLIP} ({last - first + 1} frames) drives the goals of {rig.name!r}; "
          f"scene saved to {os.path.relpath(scene_path, ROOT)}", flush=True)
    cmd = [sys.executable, "-m", "fullbody_ik", "bake", scene_path, "--armature", "rig",
           "--output", os.path.join(OUT, "demo.blend"), "--report", os.path.join(OUT, "demo_report.png")]
    print("$ " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd), flush=True)
    code = subprocess.call(cmd)
    if code:
        print(f"the bake failed (exit {code})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
