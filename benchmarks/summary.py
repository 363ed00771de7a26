# SPDX-License-Identifier: GPL-3.0-or-later
"""Summarize benchmarks/results/*.json as Markdown; ``--write-readme`` replaces the README's results section.

    python -m fullbody_ik.benchmarks.summary [--write-readme]
"""

import argparse
import json
import os

from .common import RESULTS, ROOT, table

START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"


def load(name):
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


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
    r = load("arms")
    if r:
        rows = [[arm, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}", f"{s['median_ms']:.2f}"]
                for arm, ms in r["results"].items() for m, s in ms.items()]
        n = next(iter(next(iter(r["results"].values())).values()))["targets"]
        parts.append(f"**Arms, full pose (1e-4 m, 1e-3 rad), {n} targets each, {r['budget_s'] * 1e3:.0f} ms "
                     f"budget, random seeds** (`{r['command']}`, {r['machine']['date']}).\n\n"
                     + table(rows, ["arm", "method", "success", "mean ms", "median ms"]))
    r = load("iteration_cost")
    if r:
        rows = [[tree, op, f"{us:.0f}"] for tree, ops in r["microseconds"].items() for op, us in ops.items()]
        parts.append(f"**Cost of one iteration's building blocks** (`{r['command']}`, {r['machine']['date']}).\n\n"
                     + table(rows, ["tree", "operation", "µs"]))
    return "\n\n".join(parts) if parts else "No results yet: run `make bench`."


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args()
    text = section()
    print(text)
    if args.write_readme:
        path = os.path.join(ROOT, "README.md")
        readme = open(path).read()
        a, b = readme.index(START) + len(START), readme.index(END)
        with open(path, "w") as fh:
            fh.write(readme[:a] + "\n" + text + "\n" + readme[b:])
        print("README.md updated")


if __name__ == "__main__":
    main()
