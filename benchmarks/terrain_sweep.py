# SPDX-License-Identifier: GPL-3.0-or-later
"""Foot placement of CMU clips on terrains they were not made on, at their default range, through the real
command line, judged from the saved files by the outside judge beside the product's own report.

Clips: the repo's data/bvh/cmu_*.bvh and the corpus's CMU BVH clips (CORPUS/motion/cmu/*.bvh: other takes, other
conversions). Terrains (benchmarks/footplant.py's, built under each clip's path): stairs (15 cm steps), a
15-degree slope, noise (+-5 cm), a real height map. Per pair:

1. a .blend holding the clip (Blender's BVH importer, one key a clip frame, sized to stand about 1.7 m: its unit
   read from its rest height) and the terrain, the scene's range the clip's;
2. ``python -m fullbody_ik footplant IN.blend --terrain Terrain --output OUT.blend --json`` (the default range:
   the clip's reference frame left out by the product itself);
3. ``benchmarks/retarget_judge.py`` on OUT.blend against the BVH (the skeleton paired with itself): its own
   contact detector, the soles over the terrain by raycast against the source's clearance over its floor.

Aims (issue: every CMU clip): contacts at the source's clearance within 3 mm at p95 by the judge; the report's
worst contact float within 2 mm of the judge's worst clearance difference. Writes OUT/results.json and table.md.

    python -m fullbody_ik.benchmarks.terrain_sweep [--clips NAME,...] [--terrains stairs,slope,noise,dem]
        [--corpus DIR] [--out DIR] [--jobs N] [--python .venv-5.2/bin/python]
"""

import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

from fullbody_ik.benchmarks.wild_sweep import product_python

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
TERRAINS = ("stairs", "slope", "noise", "dem")
HEIGHT = 1.7  # metres a clip's skeleton is sized to stand


def clips(corpus):
    """{name: path} of the CMU BVH clips: the repo's and the corpus's."""
    out = {os.path.splitext(os.path.basename(p))[0]: p for p in sorted(glob.glob(os.path.join(REPO, "data", "bvh",
                                                                                             "cmu_*.bvh")))}
    for p in sorted(glob.glob(os.path.join(corpus, "motion", "cmu", "*.bvh"))):
        out.setdefault("corpus_" + os.path.splitext(os.path.basename(p))[0], p)
    return out


def prepare(clip, kind, blend, mapping_json):
    """(in this process, with bpy) the clip and its terrain saved as ``blend``; its bone map beside it."""
    import bpy

    from fullbody_ik.benchmarks.footplant import make_terrain
    from fullbody_ik.rig.humanoid import map_humanoid

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_anim.bvh(filepath=clip, rotate_mode="NATIVE", update_scene_fps=True, update_scene_duration=True)
    obj = bpy.context.object
    heads = np.array([obj.matrix_world @ b.head_local for b in obj.data.bones])
    unit = HEIGHT / max(float(np.ptp(heads[:, 2])), 1e-9)
    if not 0.5 < unit < 2.0:  # (a clip in centimetres or inches: imported again at the scale that stands it up)
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.import_anim.bvh(filepath=clip, rotate_mode="NATIVE", global_scale=unit, update_scene_fps=True,
                                update_scene_duration=True)
        obj = bpy.context.object
    scene = bpy.context.scene
    first, last = (int(round(f)) for f in obj.animation_data.action.frame_range)
    scene.frame_start, scene.frame_end = first, last
    h = map_humanoid(obj)
    path = []
    for f in (first + 1, (first + last) // 2, last):
        scene.frame_set(f)
        path.append(np.array(obj.matrix_world @ obj.pose.bones[h.bone("pelvis")].head))
    direction = path[2][:2] - path[0][:2]
    size = float(np.linalg.norm(direction)) + 6.0
    terrain = make_terrain(bpy, kind, path[1][:2], direction if np.linalg.norm(direction) > 0.2 else
                           np.array([0.0, 1.0]), size)
    terrain.name = "Terrain"
    scene.frame_set(first)
    bpy.ops.wm.save_as_mainfile(filepath=blend)
    with open(mapping_json, "w", encoding="utf-8") as f:
        json.dump({"armature": obj.name, "action": obj.animation_data.action.name,
                   "mapping": [[role, bone, bone] for role, bone in h.roles.items()], "unit": unit}, f)


def run_pair(name, clip, kind, out):
    stem = os.path.join(out, f"{name}__{kind}")
    row = {"clip": name, "terrain": kind}
    env = dict(os.environ)
    started = time.perf_counter()
    p = subprocess.run([product_python(), "-m", "fullbody_ik.benchmarks.terrain_sweep", "--prepare", clip, kind,
                        stem + ".in.blend", stem + ".map.json"], capture_output=True, text=True, env=env)
    if p.returncode:
        return dict(row, error="prepare: " + p.stderr.strip()[-300:])
    p = subprocess.run([product_python(), "-m", "fullbody_ik", "footplant", stem + ".in.blend", "--terrain", "Terrain",
                        "--output", stem + ".blend", "--json"], capture_output=True, text=True, env=env)
    row["exit"] = p.returncode
    row["seconds"] = time.perf_counter() - started
    try:
        product = json.loads(p.stdout)
    except ValueError:
        return dict(row, error="footplant: " + p.stderr.strip()[-300:])
    report = product.get("report") or {}
    row["verdict"] = report.get("verdict") or product.get("error")
    if not os.path.exists(stem + ".blend"):
        return dict(row, error="nothing saved: " + str(product.get("error"))[:300])
    with open(stem + ".map.json", encoding="utf-8") as f:
        mapping = json.load(f)
    after = report.get("after") or {}
    row["report_float_mm"] = max((a.get("point_float_mm_max", 0.0) for a in after.values()), default=None)
    row["report_clearance_p95_mm"] = max((a.get("clearance_diff_mm_p95", 0.0) for a in after.values()), default=None)
    row["report_penetration_mm"] = max((a.get("penetration_mm_max", 0.0) for a in after.values()), default=None)
    fr = report.get("frames") or [None, None]
    judge_report = {"source": mapping["armature"], "target": report.get("armature", mapping["armature"]),
                    "action": report.get("action"), "source_action": mapping["action"], "frames": fr,
                    "mapping": mapping["mapping"], "seconds": report.get("seconds"), "terrain": "Terrain"}
    with open(stem + ".report.json", "w", encoding="utf-8") as f:
        json.dump(judge_report, f)
    p = subprocess.run([product_python(), "-m", "fullbody_ik.benchmarks.retarget_judge", "--source", clip, "--result",
                        stem + ".blend", "--report", stem + ".report.json", "--terrain", "Terrain", "--clip-rate",
                        "clip", "--out", stem + ".judge.json"], capture_output=True, text=True, env=env)
    if p.returncode or not os.path.exists(stem + ".judge.json"):
        return dict(row, error="judge: " + p.stderr.strip()[-300:])
    with open(stem + ".judge.json", encoding="utf-8") as f:
        judge = json.load(f)
    feet = judge.get("feet") or {}
    diffs = [(v.get("clearance_diff_mm") or {}).get("p95_abs") for v in feet.values() if isinstance(v, dict)]
    row["judge_clearance_p95_mm"] = max((d for d in diffs if d is not None), default=None)
    row["judge_summary"] = judge.get("summary")
    row["aims_missed"] = judge.get("aims_missed")
    return row


def table(rows):
    lines = ["| clip | terrain | exit | report: worst point over its place / penetration / clearance vs source p95 "
             "mm | judge: clearance vs source p95 mm | judge |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['clip']} | {r['terrain']} | {r.get('exit', '-')} | - | - | {r['error'][:160]} |")
            continue
        f = lambda v: "-" if v is None else f"{v:.1f}"  # noqa: E731
        lines.append(f"| {r['clip']} | {r['terrain']} | {r['exit']} | {f(r['report_float_mm'])} / "
                     f"{f(r['report_penetration_mm'])} / {f(r.get('report_clearance_p95_mm'))} | "
                     f"{f(r['judge_clearance_p95_mm'])} | "
                     f"{(r.get('judge_summary') or '')[:200]} |")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--prepare":
        prepare(*argv[1:5])
        return 0
    ap = argparse.ArgumentParser(prog="python -m fullbody_ik.benchmarks.terrain_sweep", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clips", help="names to run (default: all)")
    ap.add_argument("--terrains", default=",".join(TERRAINS))
    ap.add_argument("--corpus", default=os.environ.get("FULLBODY_IK_CORPUS", "/work/corpus"))
    ap.add_argument("--out", default=os.path.join("out", "terrain_sweep"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--python", help="the Python whose bpy runs the product and the judge (default the repo's "
                    ".venv: bpy 5.0; .venv-5.2/bin/python for Blender 5.2)")
    args = ap.parse_args(argv)
    if args.python:
        os.environ["FULLBODY_IK_PYTHON"] = os.path.abspath(args.python)
    found = clips(args.corpus)
    if args.clips:
        found = {k: v for k, v in found.items() if any(c in k for c in args.clips.split(","))}
    os.makedirs(args.out, exist_ok=True)
    pairs = [(n, p, k) for n, p in found.items() for k in args.terrains.split(",")]
    print(f"{len(found)} clips x {len(args.terrains.split(','))} terrains: {len(pairs)} pairs", flush=True)
    rows = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for i, row in enumerate(pool.map(lambda a: run_pair(*a, args.out), pairs)):
            rows.append(row)
            print(f"[{i + 1}/{len(pairs)}] {row['clip']} {row['terrain']}: "
                  + (row.get("error") or f"exit {row['exit']}, report {row['report_float_mm']:.1f} (clearance p95 "
                     f"{row['report_clearance_p95_mm']:.1f}), judge "
                     f"{row['judge_clearance_p95_mm']}"), flush=True)
            with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
                json.dump(rows, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w", encoding="utf-8") as f:
        f.write(table(rows) + "\n")
    judged = [r for r in rows if "error" not in r and r["judge_clearance_p95_mm"] is not None]
    within = [r for r in judged if r["judge_clearance_p95_mm"] <= 3.0]
    print(f"{len(rows)} pairs, {len(judged)} judged (the others: an error, or no contact the judge accepts), "
          f"{len(within)} within 3 mm at p95 by the judge", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
