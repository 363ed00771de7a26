# SPDX-License-Identifier: GPL-3.0-or-later
"""Retargeting motion capture onto other characters, against plain rotation copy, in one run.

Sources: the repo's CMU clips (02_01 walk, 02_03 run, 02_04 jump, 03_01) and Boxing_Toes.bvh (its first
frames). Targets: Rigify's human metarig, mannequiny (glTF) and Quaternius' man (FBX, feet on the root).
For each pair: the rotation copy alone (rest poses aligned, root scaled: what the popular add-ons do, at their
best) and ours (the same, then the source's contacts planted). Measured on the target's sole points as Blender
shows them, at the source's contact frames: skate (mm/frame) against the source's scaled by the hip heights;
the toe tips' height over the target's floor (mean, and ± half the spread: how far from the floor they are
after the best single offset); joint-angle acceleration of the legs against the source's; limit violations;
time per frame. Lengths in the target's units scaled to a 0.9 m hip height, so characters in other units
compare. Aims: skate <= the source's scaled, toes within 2 mm of the floor at contacts, no limit violations,
acceleration <= 1.5x the source's, time per frame <= the tracking bake's.

    python -m fullbody_ik.benchmarks.retarget [--sources 02_01,...] [--targets metarig,...] [--frames 240]
"""

import argparse
import time

import numpy as np

from .common import prepare_compiled, run_cases, table, write
from .footplant import leg_acceleration

SOURCES = ("02_01", "02_03", "02_04", "03_01", "boxing")
TARGETS = ("metarig", "mannequiny", "quaternius")


def load(bpy, source, target):
    from fullbody_ik.tools import scenes

    scenes.fresh(bpy)
    if source == "boxing":
        src, first, last = scenes.import_boxing(bpy)
    else:
        src, first, last = scenes.import_cmu(bpy, source)
    if target == "metarig":
        tgt = scenes.metarig(bpy)
    elif target == "mannequiny":
        tgt = scenes.import_mannequiny(bpy)[0]
    else:
        tgt = scenes.import_quaternius(bpy)[0]
    bpy.context.view_layer.update()
    return src, tgt, first, last


def measure(bpy, tgt, frames, contacts, unit):
    """Skate and toe heights over the floor of the target at the source's contacts, in metres of a 0.9 m hip
    height."""
    from fullbody_ik.rig.feet import find_feet
    from fullbody_ik.rig.contacts import runs
    from fullbody_ik.rig.soles import SoleSampler

    feet = find_feet(tgt)
    sampler = SoleSampler(tgt, feet)
    W = np.array(tgt.matrix_world)
    floor = min(float((W @ np.append(p.rest, 1.0))[2]) for f in feet for p in f.points)
    pts = np.zeros((len(frames), len(sampler.specs), 3))
    for i, f in enumerate(frames):
        bpy.context.scene.frame_set(f)
        pts[i] = sampler.sample()
    skate, toes = [], []
    for j, (k, name, _, _) in enumerate(sampler.specs):
        for a, b in runs(contacts[:, j]):
            if b > a:
                skate.append(np.linalg.norm(np.diff(pts[a:b + 1, j, :2], axis=0), axis=1))
        if name == "toe":
            toes.append((pts[:, j, 2] - floor)[contacts[:, j]])
    skate = np.concatenate(skate) if skate else np.zeros(1)
    toes = np.concatenate(toes) if toes else np.zeros(1)
    return {"skate_mm": 1e3 * unit * float(skate.mean()), "toe_mm_mean": 1e3 * unit * float(toes.mean()),
            "toe_mm_spread": 1e3 * unit * float(np.ptp(toes))}


def run_case(bpy, source, target, max_frames, independent=True):
    from fullbody_ik.rig.feet import find_feet
    from fullbody_ik.rig.soles import sample_motion
    from fullbody_ik.rig.humanoid import map_humanoid
    from fullbody_ik.rig.retarget import RetargetOptions, retarget

    row = {}
    for ik in (False, True):
        src, tgt, first, last = load(bpy, source, target)
        tgt.fullbody_ik.settings.time_limit = 0.01
        frames = list(range(first, min(last, first + max_frames - 1) + 1))
        motion = sample_motion(bpy.context.scene, src, find_feet(src), frames)
        t0 = time.perf_counter()
        options = RetargetOptions(frames[0], frames[-1], ik=ik, independent=independent)
        report = retarget(bpy.context.scene, src, tgt, options)
        seconds = time.perf_counter() - t0
        ht, hs = map_humanoid(tgt), map_humanoid(src)
        unit = 0.9 / ht.hip_height(tgt)  # lengths as for a character with a 0.9 m hip height
        tfeet, sfeet = find_feet(tgt), find_feet(src)
        from fullbody_ik.rig.soles import SoleSampler

        ts = SoleSampler(tgt, tfeet)
        where = {(sfeet[k].side, n): j for j, (k, n, _, _) in enumerate(motion.sampler.specs)}
        contacts = np.array([motion.contacts[:, where[(tfeet[k].side, n)]] for k, n, _, _ in ts.specs]).T
        m = measure(bpy, tgt, frames, contacts, unit)
        legs = [ht.bone(f"{s} {r}") for s in ("left", "right") for r in ("thigh", "shin", "foot")]
        acc = leg_acceleration(bpy, tgt, frames, legs)
        key = "ours" if ik else "copy"
        row[f"{key}_skate_mm"], row[f"{key}_toe_mean"], row[f"{key}_toe_spread"] = \
            m["skate_mm"], m["toe_mm_mean"], m["toe_mm_spread"]
        row[f"{key}_acc"] = acc
        row[f"{key}_ms"] = 1e3 * seconds / len(frames)
        if ik:
            row["ok"] = report.ok
            row["violations"] = int(np.sum(report.feet.bake.get("per_frame", {}).get("violations", [0])))
        if not ik:  # the source's skate, scaled as the target's lengths are
            s_unit = 0.9 / hs.hip_height(src)
            sk = []
            from fullbody_ik.rig.contacts import runs

            for j in range(motion.contacts.shape[1]):
                for a, b in runs(motion.contacts[:, j]):
                    if b > a:
                        sk.append(np.linalg.norm(np.diff(motion.pts[a:b + 1, j, :2], axis=0), axis=1))
            row["source_skate_mm"] = 1e3 * s_unit * float(np.concatenate(sk).mean()) if sk else 0.0
            src_legs = [hs.bone(f"{s} {r}") for s in ("left", "right") for r in ("thigh", "shin", "foot")]
            row["source_acc"] = leg_acceleration(bpy, src, frames, src_legs)
        row["frames"] = len(frames)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--frames", type=int, default=240)
    ap.add_argument("--no-independent-frames", dest="independent", action="store_false",
                    help="track each frame from the previous frame's answer (default: independent frames, as the "
                         "product)")
    args = ap.parse_args()
    prepare_compiled()
    import bpy

    def row(source, target, r):
        return [source, target, r["frames"], "yes" if r["ok"] else "NO",
                f"{r['source_skate_mm']:.2f} / {r['copy_skate_mm']:.2f} / {r['ours_skate_mm']:.2f}",
                f"{r['copy_toe_mean']:.1f} ± {r['copy_toe_spread'] / 2:.1f} / "
                f"{r['ours_toe_mean']:.1f} ± {r['ours_toe_spread'] / 2:.1f}",
                f"{r['copy_acc'] / max(r['source_acc'], 1e-12):.2f} / {r['ours_acc'] / max(r['source_acc'], 1e-12):.2f}",
                r["violations"], f"{r['copy_ms']:.1f} / {r['ours_ms']:.1f}"]

    results, rows = run_cases(args.sources.split(","), args.targets.split(","),
                              lambda s, t: run_case(bpy, s, t, args.frames, args.independent), row, 9)
    headers = ["source", "target", "frames", "ok", "skate mm/frame (source scaled / copy / ours)",
               "toe tip over the floor at contacts mm, mean ± half spread (copy / ours)", "leg accel ratio (copy / ours)",
               "limit violations", "ms/frame (copy / ours)"]
    print(table(rows, headers))
    write("retarget" if args.independent else "retarget_tracked", {"results": results, "rows": rows, "headers": headers},
          f"python -m fullbody_ik.benchmarks.retarget --frames {args.frames}"
          + ("" if args.independent else " --no-independent-frames"))


if __name__ == "__main__":
    main()
