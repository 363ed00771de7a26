# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared benchmark helpers: results as JSON in benchmarks/results/, with the machine they ran on."""

import json
import os
import platform
import time

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.realpath(__file__)), "results")
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
URDF = os.path.join(ROOT, "data", "urdf")


WARM_SECONDS = 0.2  # a core kept busy this long before a timed turn (warm_cpu)
# Solves each solver (ours, each peer) makes untimed on the first targets of a turn before timing it (table1's
# interleaved run, peers.py --serve): each is timed as it runs in a loop of solves, warm, not just after the other
# process's turn. Without them the two sides were not alike: rtb's Chan runs right after rtb's Sugihara, its same
# C++ code, while our turn follows ikpy's second of numpy; our first 5 solves of a turn ran 40 % slower.
WARM_SOLVES = 5


def one_core():
    """Keep the calling thread (the one that solves; threads started before it, a BLAS pool's, keep their CPUs) and
    the processes it starts afterwards (the peers') on one CPU where the OS allows it (Linux): the highest-numbered
    one it may run on. Both sides of an interleaved comparison then take their turns
    on the same core. Unpinned, each process ran where the OS put it, and chunks of ours ran 1.6-1.8x slower than
    their neighbours while the peers' did not (ur5, 100 targets a chunk, two runs: 3 and 1 chunks of 10, overall
    0.47x and 0.41x); both pinned to one core, in turns: no such chunk, 0.41x on either core. Returns the CPU, or
    None (not pinned)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = max(os.sched_getaffinity(0))
    try:  # (the calling thread: the one that solves, and the processes it starts)
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None
    return cpu


def warm_cpu(seconds=WARM_SECONDS):
    """Keep this process's core busy for ``seconds``, untimed, before a timed turn. A core that slept through the
    other side's turn ran a whole chunk slower: kuka_iiwa's 100 targets after 1 s asleep, median 88 us a solve
    against 50 awake (0.2 s of this first: 55). Interleaved, the side that waits longer (ours: ikpy takes a second
    a chunk) would pay it; both sides warm before each turn (table1, peers.py --serve)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def prepare_compiled():
    """Compile (or load from the cache) every kernel before anything is timed: that is a first use's cost, once per
    machine, not a solve's or a frame's (else a run's first case counts it: the foot placement benchmark's first
    clip measured 98 ms a frame where the others took 1-3, and loading from the cache, 0.5-1 s, fails a Table I
    target's 10 ms)."""
    from fullbody_ik.solvers import compiled

    compiled.warm()


def machine():
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "numpy": np.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def write(name, data, command):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as fh:
        json.dump({"benchmark": name, "command": command, "machine": machine(), **data}, fh, indent=1,
                  default=lambda o: o.tolist() if isinstance(o, np.ndarray) else float(o))
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return path


def table(rows, headers):
    """A plain text table (also valid Markdown)."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows])


def run_cases(firsts, seconds, run, row, width):
    """Run every (first, second) case with ``run(first, second) -> result dict``; returns (results {"first second":
    result}, table rows from ``row(first, second, result)``, each printed as it comes). A case that cannot run is
    reported in its row (``width`` cells), never hidden."""
    results, rows = {}, []
    for a in firsts:
        for b in seconds:
            try:
                r = run(a, b)
            except Exception as e:
                r = {"error": f"{type(e).__name__}: {e}"}
            results[f"{a} {b}"] = r
            rows.append([a, b, "-", "error", r["error"][:70]] + [""] * (width - 5) if "error" in r else row(a, b, r))
            print(rows[-1], flush=True)
    return results, rows
