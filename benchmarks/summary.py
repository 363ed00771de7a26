# SPDX-License-Identifier: GPL-3.0-or-later
"""Summarize benchmarks/results/*.json as Markdown; ``--write-docs`` replaces the results section of docs/performance.md.

    python -m fullbody_ik.benchmarks.summary [--write-docs]
"""

import argparse
import json
import os

from .bake import BAKE_HEADERS
from .common import RESULTS, ROOT, table
from .table1 import ARMS as ARMS_ORDER

START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def load(name):
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def stored_table(name, title, notes):
    """The paragraph of a benchmark that stores its table (rows and headers), or None before it has run."""
    r = load(name)
    return r and (f"**{title}** (`{r['command']}`, {r['machine']['date']}; {notes}).\n\n"
                  + table(r["rows"], r["headers"]))


def section():
    parts = []
    r = load("paper001")
    if r:
        rows = []
        for case in ("sweep", "random"):
            for m, s in r[case]["summary"].items():
                ms = s["mean_ms_at_success"]
                rows.append([case, m, f"{s['success']}/{s['cases']}", "-" if ms is None else f"{ms:.1f}"])
        parts.append(f"**Paper 001 §IV, 12-DOF manipulator from q = 0** (`{r['command']}`, {r['machine']['date']}). "
                     "Success = residual within 1e-6 of the best any method reached; paper (C++): LM 1000/1000 "
                     "at 2.2 ms.\n\n" + table(rows, ["test", "method", "success", "mean ms at success"]))
    r = load("paper002")
    if r:
        rows = [[k, "[" + ", ".join(f"{v:.4f}" for v in d["x"]) + "]", str(d["x_paper"]), f"{d['max_abs_diff']:.1e}",
                 d["iterations"], d["iterations_paper"], f"{d['ms']:.1f}"] for k, d in r.items()
                if isinstance(d, dict) and "x" in d]
        parts.append(f"**Paper 002 §4, nullspace optimizer** (`{r['command']}`), Table 1 parameters.\n\n"
                     + table(rows, ["example", "x* ours", "x* paper", "max diff", "iterations", "paper", "ms"]))
    r = load("table1")
    if r:
        rows = [[arm, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}", f"{s['median_ms']:.2f}"]
                for arm, ms in r["results"].items() for m, s in ms.items()]
        peers = load("table1_peers")
        if peers and peers.get("targets") == r["targets"]:
            rows += [[arm, f"peer: {p}", f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                      f"{s['median_ms']:.2f}"] for arm, ps in peers["results"].items() for p, s in ps.items()]
        rows.sort(key=lambda row: [a for a, _, _ in ARMS_ORDER].index(row[0]) if row[0] in
                  [a for a, _, _ in ARMS_ORDER] else 99)
        parts.append(f"**Table I protocol, six arms, full pose (1e-4 m, 1e-3 rad), {r['targets']} targets each, "
                     f"random seeds, success within 10 ms** (`{r['command']}`, {r['machine']['date']}; peers: "
                     "`make bench-peers`" + (f", taking turns with ours, {peers['interleaved']} targets a turn"
                                             if peers and peers.get("interleaved") else ", run before ours")
                     + (f", both processes on CPU {r['pinned_cpu']}" if r.get("pinned_cpu") is not None else "")
                     + "). Curves: `benchmarks/results/table1_curves.png`.\n\n"
                     + table(rows, ["arm", "method", "success", "mean ms", "median ms"]))
        if r.get("ratios"):
            keys = sorted({k for v in r["ratios"].values() for k in v})
            parts.append("Ratio of our median time to each peer's (below 1: we are faster):\n\n" + table(
                [[a] + [f"{v.get(k, float('nan')):.2f}" for k in keys] for a, v in r["ratios"].items()],
                ["arm"] + keys))
    r = load("table2")
    if r:
        rows = [[setup, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                 f"{100 * s['curve']['50']:.1f} %"] for setup, ms in r["results"].items() for m, s in ms.items()]
        parts.append(f"**Table II protocol, human.urdf (36 DOF), {r['targets']} targets per setup, seeds at rest** "
                     f"(`{r['command']}`, {r['machine']['date']}). Curves: `benchmarks/results/table2_curves.png`."
                     "\n\n" + table(rows, ["setup", "method", "success (10 ms)", "mean ms", "success (50 ms)"]))
    r = load("multigoal")
    if r:
        rows = [[setup, ms["dof"], m, f"{100 * d['success_rate']:.1f} %", f"{d['mean_ms']:.2f}", f"{d['median_ms']:.2f}"]
                for setup, ms in r["results"].items() for m, d in ms.items() if m != "dof"]
        parts.append(f"**Multi-goal setups on whole robots (both wrists' poses; pr2's also with its head looking at a "
                     f"point), {r['targets']} targets per setup, random seeds, targets from random configurations** "
                     f"(`{r['command']}`, {r['machine']['date']}).\n\n"
                     + table(rows, ["setup", "DOF", "method", "success (10 ms)", "mean ms", "median ms"]))
    r = load("tracking")
    if r:
        rows = [[clip, solver, f"{d['mean_mm']:.1f}", f"{d['p95_mm']:.1f}", f"{d['max_mm']:.0f}", d["violations"],
                 f"{d['ms_per_frame']:.1f}", f"{d['acceleration']:.4f}"]
                for clip, solvers in r["results"].items() for solver, d in solvers.items()]
        parts.append(f"**Character tracking, CMU clips (paper 003 §6.2 protocol)** (`{r['command']}`, "
                     f"{r['machine']['date']}; ours: {r['method']}, {r['budget_ms']:g} ms budget per frame, with the "
                     "tracker a bake uses (solvers.Tracker): the first frame a local solve, then a full one with ten "
                     "times the budget (at least 0.3 s, counted in ms/frame) when that falls short, then from the "
                     "previous frame with a continuity goal, restarting near it while goals are unmet; aims: <= 1 mm mean, p95 <= 5 mm, 0 "
                     "violations, <= 10 ms). "
                     "Plot: `benchmarks/results/tracking.png`.\n\n"
                     + table(rows, ["clip", "solver", "mean mm", "p95 mm", "max mm", "violations", "ms/frame",
                                    "knee/elbow accel (rad/frame^2)"]))
    r = load("bake")
    if r:
        rows = [[clip, core, d["frames"], f"{d['fps']:.0f}", f"{d['frame_ms']:.1f}", f"{d['solve_ms']:.1f}",
                 f"{d['solved_frames']}/{d['frames']}", f"{d['mean_error_mm']:.3f}", f"{d['p95_error_mm']:.3f}",
                 f"{d['max_error_mm']:.1f}", d["violations"]]
                for clip, cores in r["throughput"].items() for core, d in cores.items()]
        b = r["batch"]
        parts.append(f"**Bake throughput, character tracking (a CMU clip drives a rig's hips, wrists, ankles and "
                     f"head goals; free root; IK limits from the clip), one core** (`{r['command']}`, "
                     f"{r['machine']['date']}; {r['time_limit'] * 1e3:g} ms per frame; aims: >= 100 frames/s, the compiled core >= 10x numpy's frames/s at the same accuracy). "
                     "Frames/s counts everything of the bake: frame evaluation, solving, key writing, judging (the "
                     "compiled core loaded from its cache before the clock, once a process, as the command line "
                     "does); numpy: the compiled core switched off, in the same run"
                     + (f"; each core baked each clip {r['repeats']} times, the cores taking turns, the fastest "
                        "reported (the frames/s of every bake are in the results' JSON)" if r.get("repeats") else "")
                     + ".\n\n" + table(rows, BAKE_HEADERS)
                     + f"\n\nBatch scaling (`batch bake` over {b['files']} files, {b['cpus']} CPUs): 1 job "
                     f"{b['seconds_1_job']:.1f} s, 2 jobs {b['seconds_2_jobs']:.1f} s: {b['speedup']:.2f}x.")
    evaluation = stored_table("evaluation", "What Blender evaluates during a bake", "compiled core, 10 ms a frame; "
                              "each scene baked with Blender evaluating only what the bake reads (rig/evaluation.py) "
                              "and with the whole scene evaluated, the two ways taking turns in one process, the "
                              "median of the repeats; run: a bake run to its end (scripts, the command line), UI "
                              "steps: the modal operator's tenths of a second with the scene whole between them; "
                              "ratio: the whole scene's time over this way's, on the same path")
    if evaluation:
        parts.append(evaluation)
    r = load("solve_frames")
    if r:
        rows = []
        for clip, d in r["results"].items():
            for label, key in (("ours: frame + Solve", "ours"), ("Blender Standard IK", "blender")):
                x = d[key]
                rows.append([clip, label, d["frames"], f"{x['ms_per_frame']:.2f}", f"{x['mean_mm']:.3f}",
                             f"{x['p95_mm']:.3f}", f"{x['max_mm']:.2f}"])
            rows.append([clip, "ratio of times, ours / Blender", "", f"{d['ratio']:.2f}", "", "", ""])
        parts.append("**Solve on each frame of a clip, beside Blender's Standard IK** (a CMU clip keeps its action, "
                     "its root walks, not free; position goals on hands and feet follow empties a few cm away; ours: "
                     "`frame_set` then `bpy.ops.fullbody_ik.solve()`, the tree built once; Blender: IK constraints on "
                     f"the same chains, evaluated by `frame_set`) (`{r['command']}`, {r['machine']['date']}; aim: no "
                     "slower than Blender).\n\n"
                     + table(rows, ["clip", "solver", "frames", "ms/frame", "mean mm", "p95 mm", "max mm"]))
    parts += [p for p in (
        stored_table("footplant", "Foot placement on terrains",
                     "worst foot, at contact frames; each cell: the source as it is / moved by its best single vertical "
                     "offset / ours; float: the foot's, by its contact point nearest its place; point float: the worst "
                     "single point, which a rigid foot on uneven ground or a source sole below its own floor lifts; "
                     "aims: penetration <= 1 mm, float <= 5 mm, sole normal <= 3 deg, skate <= the source's, "
                     "leg acceleration <= 1.5x the source's, swing clearance >= the source's, time per frame <= the "
                     "tracking bake's"),
        stored_table("retarget", "Retargeting onto other characters",
                     "at the source's contact frames, lengths for a 0.9 m hip height; copy: rest poses aligned, root "
                     "scaled, no contacts planted (plain rotation copy at its best); ours: the same, then every "
                     "contact point planted on the floor; toe tips: height over the floor, mean ± half the spread "
                     "(how far from the floor after the best offset); aims: skate <= the source's scaled, toes within "
                     "2 mm of the floor at contacts, no limit violations, leg acceleration <= 1.5x the source's, time "
                     "per frame <= the tracking bake's")) if p]
    r = load("drag_step")
    if r:
        rows = [[m, d["variables"], f"{d['median_ms']:.1f}", f"{d['p95_ms']:.1f}", f"{100 * d['success_rate']:.0f} %",
                 f"{d['reachable_steps']}/{r['steps']}", f"{100 * d['met_where_reachable']:.0f} %",
                 f"{d['p95_ms_where_reachable']:.1f}", f"{d.get('max_jump_rad', float('nan')):.2f}"]
                for m, d in r["results"].items()]
        parts.append(f"**Drag step, Rigify human metarig, six goals** (`{r['command']}`, {r['machine']['date']}; "
                     f"budget {r['budget_ms']:g} ms; aims: every step in reach meets every goal, p95 <= 16 ms; in "
                     "reach: a 1 s solve with restarts meets the step's goals).\n\n"
                     + table(rows, ["method", "variables", "median ms", "p95 ms", "all goals met", "steps in reach",
                                    "met in reach", "p95 ms in reach", "largest joint jump per step (rad)"]))
    r = load("memetic_study")
    if r:
        rows = [[tree, k, f"{v:.3g}"] for tree, ms in r["measures"].items() for k, v in ms.items()]
        parts.append("**Memetic solver: which speed ideas pay off in numpy (incremental FK, linearized children, "
                     f"lockstep exploitation), and where a generation's time goes** (`{r['command']}`, "
                     f"{r['machine']['date']}).\n\n" + table(rows, ["tree", "measure", "value"]))
    r = load("iteration_cost")
    if r:
        rows = [[tree, op, f"{us:.0f}"] for tree, ops in r["microseconds"].items() for op, us in ops.items()]
        parts.append(f"**Cost of one iteration's building blocks** (`{r['command']}`, {r['machine']['date']}).\n\n"
                     + table(rows, ["tree", "operation", "µs"]))
        costs = r.get("solve_costs")
        if costs:
            headers = ["arm", *next(iter(costs.values()))]
            parts.append(f"**Where a compiled Table I solve's time goes** ({r['targets']} targets an arm, the fastest "
                         "of five solves each, fitted as fixed + per iteration + per restart; same run).\n\n"
                         + table([[arm, *(f"{v:.2f}" if "share" in k else f"{v:.1f}" for k, v in c.items())]
                                  for arm, c in costs.items()], headers))
    first = stored_table("first_compile", "A first use's compile, cold", "each in a new process with an empty cache "
                         "folder, with and without the helper process (solvers/compiled.py, _start_helper) in turns; "
                         "seconds of compiled.warm, the module's import not counted; the core: every solver but the "
                         "memetic one; the core ready within everything: when warm's compile of everything (Blender's in the "
                         "background) had the core, whose solvers serve from then on; aims: the core's first compile "
                         "<= 30 s, a later session's load <= 1 s")
    if first:
        parts.append(first)
    return "\n\n".join(parts) if parts else "No results yet: run `make bench`."


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    text = section()
    print(text)
    if args.write_docs:
        path = os.path.join(ROOT, "docs", "performance.md")
        readme = open(path).read()
        a, b = readme.index(START) + len(START), readme.index(END)
        with open(path, "w") as fh:
            fh.write(readme[:a] + "\n" + text + "\n" + readme[b:])
        print("docs/performance.md updated")


if __name__ == "__main__":
    main()
