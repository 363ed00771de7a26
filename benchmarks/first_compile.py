# SPDX-License-Identifier: GPL-3.0-or-later
"""A first use's compile, cold: the core (every solver but the memetic one) and everything, each in a new Python
process with an empty cache folder, with and without the helper process (solvers/compiled.py, _start_helper), the
two taking turns; within everything (Blender's compile in the background), when the core was ready (its solvers
serve from then on); then a later session's load from the cache. Aims: the first compile of the core at most 30 s,
a later load at most 1 s.

    python -m fullbody_ik.benchmarks.first_compile [--pairs 3] [--python /path/to/python3.13 ...]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from .common import ROOT, table, write

CODE = ("import time\n"
        "t = time.perf_counter()\n"
        "from fullbody_ik.solvers import compiled\n"
        "ready, stamp = {{}}, compiled._stamp\n"
        "def stamped(part):\n"
        "    ready.setdefault(part, time.perf_counter())\n"
        "    stamp(part)\n"
        "compiled._stamp = stamped\n"
        "t0 = time.perf_counter()\n"
        "seconds = compiled.warm({part!r})\n"
        "print('SECONDS', seconds, time.perf_counter() - t, ready.get('core', t0) - t0)\n")


def cold(python, part, helper, folder):
    """Seconds of warm(part), with the module's import, and to the core's stamp (the core ready; 0 when it was
    not compiled) in a new process with the cache ``folder``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=folder, FULLBODY_IK_COMPILE_HELPER="1" if helper else "0")
    out = subprocess.run([python, "-c", CODE.format(part=part)], env=env, capture_output=True, text=True, cwd=ROOT,
                         timeout=900)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("SECONDS")]
    if out.returncode or not line:
        raise SystemExit(f"{python} failed to compile:\n{out.stderr[-3000:]}")
    return [float(x) for x in line[0].split()[1:]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="cold compiles with and without the helper, in turns")
    parser.add_argument("--python", action="append", help="the Pythons to measure (default: this one)")
    args = parser.parse_args()
    pythons = args.python or [sys.executable]
    rows, runs = [], {}
    for python in pythons:
        version = subprocess.run([python, "-c", "import sys, bpy; print('%d.%d' % sys.version_info[:2], "
                                  "'.'.join(map(str, bpy.app.version)))"], capture_output=True, text=True).stdout.split()
        label = f"Python {version[0]}, bpy {version[1]}" if len(version) == 2 else python
        for part in ("core", "memetic"):
            seconds, core = {False: [], True: []}, {False: [], True: []}
            for _ in range(args.pairs):
                for helper in (False, True):
                    folder = tempfile.mkdtemp(prefix="fullbody_ik_cold_")
                    try:
                        warm, _, ready = cold(python, part, helper, folder)
                        seconds[helper].append(warm)
                        core[helper].append(ready)
                        if part == "memetic" and helper and not runs.get((label, "load")):
                            runs[(label, "load")] = [cold(python, part, helper, folder) for _ in range(3)]
                    finally:
                        shutil.rmtree(folder, ignore_errors=True)
                    print(label, part, "helper" if helper else "alone", f"{seconds[helper][-1]:.1f} s", flush=True)
            for helper in (False, True):
                s = seconds[helper]
                runs[(label, part, helper)] = s
                rows.append([label, "the core" if part == "core" else "everything",
                             "with the helper" if helper else "alone", ", ".join(f"{x:.1f}" for x in s),
                             f"{np.mean(s):.1f}"])
            rows.append([label, "the core" if part == "core" else "everything", "ratio, with / alone", "",
                         f"{np.mean(seconds[True]) / np.mean(seconds[False]):.2f}"])
            if part == "memetic":
                for helper in (False, True):
                    runs[(label, "core ready in everything", helper)] = core[helper]
                    rows.append([label, "the core ready, within everything", "with the helper" if helper else "alone",
                                 ", ".join(f"{x:.1f}" for x in core[helper]), f"{np.mean(core[helper]):.1f}"])
        load = runs[(label, "load")]
        rows.append([label, "a later session's load (everything)", "", ", ".join(f"{w:.2f}" for w, *_ in load),
                     f"{np.mean([w for w, *_ in load]):.2f}"])
    headers = ["Python", "compile", "how", "seconds, each run", "mean"]
    print(table(rows, headers))
    command = "python -m fullbody_ik.benchmarks.first_compile" + (f" --pairs {args.pairs}" if args.pairs != 3 else "") \
        + "".join(f" --python {os.path.relpath(p, ROOT) if os.path.isabs(p) else p}" for p in args.python or [])
    write("first_compile", {"rows": rows, "headers": headers,
                            "runs": {" / ".join(map(str, k)): v for k, v in runs.items()}}, command)


if __name__ == "__main__":
    main()
