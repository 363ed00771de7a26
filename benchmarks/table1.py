# SPDX-License-Identifier: GPL-3.0-or-later
"""Paper 000 Table I protocol on the six arms of data/urdf: full pose goals at 1e-4 m and 1e-3 rad,
targets from FK of random valid configurations, random valid seeds; success within 10 ms, mean and median
time per method, success-versus-budget curves, and, when `make bench-peers` has run, the peers
(roboticstoolbox-python's C++ ik_LM / ik_NR, ikpy) on the same targets and seeds with the ratio of our
median time to theirs. With ``--arm`` (as often as wanted), the same on your own URDFs instead (results in
table1_arms.json, apart from the six arms'): FILE, FILE:BASE:TIP, or FILE::TIP (base: the root link; tip: the
link with the most joints above it and no mimic joint on the way).

    python -m fullbody_ik.benchmarks.table1 [--targets N] [--methods lm,memetic,...] [--max-budget-ms 50]
    python -m fullbody_ik.benchmarks.table1 --arm my_robot.urdf --arm other.urdf:base_link:tool0 --methods lm
"""

import argparse
import json
import os
import subprocess

import numpy as np

from fullbody_ik.solvers import Pose, Tree

from .budgets import plot_curves, run_method, summarize
from .common import RESULTS, ROOT, URDF, WARM_SOLVES, one_core, prepare_compiled, table, warm_cpu, write

ARMS = [
    ("kuka_iiwa", "lbr_iiwa_link_0", "lbr_iiwa_link_7"),
    ("franka_panda", "panda_link0", "panda_link8"),
    ("ur5", "base_link", "ee_link"),
    ("pr2", "torso_lift_link", "r_wrist_roll_link"),
    ("baxter", "right_arm_mount", "right_wrist"),
    ("kuka_kr120r2500pro", "base_link", "tool0"),
]
METHODS = ["memetic", "memetic+lm", "lm", "lm-numpy", "nullspace", "projected_gradient", "ncg"]
PEERS_PYTHON = os.path.join(ROOT, ".venv-peers", "bin", "python")
OWN_ARMS = "FULLBODY_IK_TABLE1_ARMS"  # --arm's arms, as JSON {name: path}, for this process and the peers'


def own_arms():
    """{name: URDF path} of --arm's arms (empty: the six arms)."""
    return json.loads(os.environ.get(OWN_ARMS) or "{}")


def arms():
    """[(name, base, tip)]: --arm's when given, else the six arms."""
    own = own_arms()
    return [tuple(a) for a in own["arms"]] if own else ARMS


def files(stem="table1"):
    """(results name, problem set, peers' results) for the six arms, or for --arm's apart from theirs."""
    name = f"{stem}_arms" if own_arms() else stem
    return name, os.path.join(RESULTS, f"{name}_problems.npz"), os.path.join(RESULTS, f"{name}_peers.json")


def urdf_path(name):
    return own_arms().get("paths", {}).get(name) or os.path.join(URDF, f"{name}.urdf")


def load(name, base, tip):
    return Tree.from_urdf(urdf_path(name), base_link=base, tip_links=tip)


def arm_spec(spec):
    """--arm FILE[:BASE[:TIP]] -> (path, base, tip), the defaults found in the file: the root link, and the link with
    the most joints above it that no mimic joint moves (a gripper's second finger)."""
    path, _, rest = spec.partition(":")
    base, _, tip = rest.partition(":")
    if not os.path.isfile(path):
        raise SystemExit(f"--arm {spec}: no file {path}")
    whole = Tree.from_urdf(path, base_link=base or None, mimic="free")
    base = base or whole.link_names[0]
    if not tip:
        mimicked = np.zeros(len(whole.link_names), bool)
        for i in range(1, len(whole.link_names)):
            joint = whole.link_joint[i]
            mimicked[i] = mimicked[whole.parent[i]] or bool(getattr(joint, "mimic", None))
        depth = np.where(mimicked, -1, whole.ancestors.sum(axis=1))
        tip = whole.link_names[int(np.argmax(depth))]
    return path, base, tip


def problems(tree, tip, count, seed):
    """(targets (N, 4, 4), seeds (N, n)): poses of random valid configurations, random valid seeds."""
    rng = np.random.default_rng(seed)
    W = tree.fk_batch(tree.random_configurations(rng, count))
    return W[:, tree.link(tip)], tree.random_configurations(rng, count)


def chunk_problems(tip, targets, seeds):
    """run_method's problems: a Pose goal on ``tip`` per target, with its seed."""
    return [([Pose(tip, T)], q0) for T, q0 in zip(targets, seeds)]


def solve_batch(tree, tip, targets, seeds, method, budget, first=0):
    """Solve every target (the ``first``-th of the set first); returns (success flags, seconds per solve)."""
    return run_method(tree, chunk_problems(tip, targets, seeds), method, budget, first)


class PeerProcess:
    """The peers (`peers.py --serve`) in .venv-peers's Python, solving chunks of the stored targets on request, so
    that they and our methods take turns in one window of time."""

    def __init__(self):
        self.process = subprocess.Popen([PEERS_PYTHON, "-m", "fullbody_ik.benchmarks.peers", "--serve"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        header = self.process.stdout.readline()
        if not header:
            raise RuntimeError(f"the peers' process ({PEERS_PYTHON}) ended before it was ready: see its output above")
        header = json.loads(header)
        self.names, self.machine = header["peers"], header["machine"]

    def run(self, arm, start, stop):
        """{peer: (success flags, seconds)} of every peer of ``arm`` on targets[start:stop]."""
        self.process.stdin.write(json.dumps({"arm": arm, "start": start, "stop": stop}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the peers' process ended in the middle of the run: see its output above")
        return {peer: (np.array([o for o, _ in r], bool), np.array([t for _, t in r])) for peer, r in
                json.loads(line).items()}

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def interleaved(tree, tip, targets, seeds, name, methods, budget, peers, chunk):
    """Our methods and the peers on the same targets, taking turns chunk by chunk (who goes first alternates):
    {label: (success flags, seconds)}, the peers' labels as peers.py names them."""
    runs = {}
    for k, start in enumerate(range(0, len(targets), chunk)):
        stop = min(start + chunk, len(targets))

        def ours():
            warm_cpu()
            for m in methods:
                turn = chunk_problems(tip, targets[start:stop], seeds[start:stop])
                # (its first WARM_SOLVES solved untimed first, as peers.py does for each peer, right before the timed
                # ones: making the chunk's Pose goals, 24 us each, had left the first timed solves 1.5-2.5x slower)
                run_method(tree, turn[:WARM_SOLVES], m, budget, start)
                runs.setdefault(m, []).append(run_method(tree, turn, m, budget, start))

        def theirs():
            for peer, r in peers.run(name, start, stop).items():
                runs.setdefault(peer, []).append(r)

        for turn in ((ours, theirs) if k % 2 == 0 else (theirs, ours)):
            turn()
    return {label: (np.concatenate([r[0] for r in rs]), np.concatenate([r[1] for r in rs]))
            for label, rs in runs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--arm", action="append", metavar="FILE[:BASE:TIP]",
                    help="your own URDF arm instead of the six (as often as wanted); results in table1_arms.json")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--max-budget-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prepare-only", action="store_true", help="write the problem set for the peers and stop")
    ap.add_argument("--merge", action="store_true", help="keep the stored results of the methods not run now "
                    "(their rows are from the earlier run, on the same targets)")
    ap.add_argument("--chunk", type=int, default=100, help="targets per turn: with .venv-peers (make bench-peers) "
                    "the peers run in its Python beside this process, and they and our methods take turns on chunks "
                    "of this many targets")
    ap.add_argument("--no-pin", action="store_true", help="leave this process and the peers' unpinned (by default both "
                    "run on one CPU, taking turns: common.one_core)")
    ap.add_argument("--stored-peers", action="store_true", help="do not run the peers: compare with their stored "
                    "results (an earlier run: the ratios then compare two moments of the machine)")
    args = ap.parse_args()
    if args.arm:  # (in the environment: the peers' process reads them too)
        own, paths = [], {}
        for spec in args.arm:
            path, base, tip = arm_spec(spec)
            name = stem = os.path.splitext(os.path.basename(path))[0]
            k = 0
            while name in paths:  # (a.urdf twice: a, a_1; never a name given to another file)
                k += 1
                name = f"{stem}_{k}"
            paths[name] = os.path.abspath(path)
            own.append((name, base, tip))
        os.environ[OWN_ARMS] = json.dumps({"arms": own, "paths": paths})
        for name, base, tip in own:
            print(f"arm {name}: {paths[name]}, {base} -> {tip}, {load(name, base, tip).n} joints")
    results_name, problem_file, peers_file = files()
    prepare_compiled()
    methods = args.methods.split(",")
    stored = {}
    for name, base, tip in arms():  # the problem set the peers read
        tree = load(name, base, tip)
        targets, seeds = problems(tree, tip, args.targets, args.seed)
        stored[f"{name}/targets"], stored[f"{name}/seeds"] = targets, seeds
    os.makedirs(RESULTS, exist_ok=True)
    np.savez_compressed(problem_file, **stored)
    if args.prepare_only:
        print(f"wrote {problem_file}")
        return
    process = None
    pinned = None
    if not args.stored_peers and os.path.exists(PEERS_PYTHON):
        pinned = None if args.no_pin else one_core()  # (before the peers' process starts: it runs on the same CPU)
        process = PeerProcess()
        peers = {"targets": args.targets, "machine": process.machine, "results": {}, "interleaved": args.chunk}
    else:
        if not args.stored_peers:
            print(f"(no {os.path.relpath(PEERS_PYTHON, ROOT)}: make bench-peers runs the peers beside ours; the "
                  "stored peer results, if any, are from another moment)")
        peers = json.load(open(peers_file)) if os.path.exists(peers_file) else None
        if peers and peers.get("targets") != args.targets:
            print(f"(peer results are for {peers.get('targets')} targets, not {args.targets}: left out)")
            peers = None
    rows, out, panels = [], {}, {}
    before = {}
    path = os.path.join(RESULTS, f"{results_name}.json")
    if args.merge and os.path.exists(path):
        old = json.load(open(path))
        before = old["results"] if old.get("targets") == args.targets else {}
    for name, base, tip in arms():
        tree = load(name, base, tip)
        targets, seeds = stored[f"{name}/targets"], stored[f"{name}/seeds"]
        out[name], panels[name] = {}, {}
        budget = args.max_budget_ms / 1e3
        if process is not None:
            runs = interleaved(tree, tip, targets, seeds, name, methods, budget, process, args.chunk)
            peers["results"][name] = {p: summarize(*runs[p]) for p in process.names[name]}
        else:
            runs = {m: solve_batch(tree, tip, targets, seeds, m, budget) for m in methods}
        for m in list(dict.fromkeys([*before.get(name, {}), *methods])):
            if m in methods:
                s = out[name][m] = summarize(*runs[m])
            else:
                s = out[name][m] = before[name][m]
            panels[name][m] = s["curve"]
            rows.append([name, tree.n, m, f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                         f"{s['median_ms']:.2f}"])
            print(rows[-1], flush=True)
        for peer, s in (peers or {}).get("results", {}).get(name, {}).items():
            panels[name][f"peer {peer}"] = s["curve"]
            rows.append([name, tree.n, f"peer {peer}", f"{100 * s['success_rate']:.1f} %", f"{s['mean_ms']:.2f}",
                         f"{s['median_ms']:.2f}"])
    if process is not None:
        process.close()
        with open(peers_file, "w") as fh:
            json.dump(peers, fh, indent=1)
        print(f"wrote {os.path.relpath(peers_file, ROOT)} (the peers taking turns with ours, {args.chunk} targets a turn)")
    print(f"\nFull pose, {args.targets} targets per arm, success within 10 ms, random seeds")
    print(table(rows, ["arm", "DOF", "method", "success", "mean ms", "median ms"]))
    ratios = {}
    if peers:
        for name in out:
            ratios[name] = {f"{ours} / {peer}": out[name][ours]["median_ms"] / max(s["median_ms"], 1e-9)
                            for ours in ("memetic", "memetic+lm", "lm", "lm-numpy") if ours in out[name]
                            for peer, s in peers["results"].get(name, {}).items()}
        print("\nRatio of our median time to each peer's (below 1: we are faster)")
        keys = sorted({k for r in ratios.values() for k in r})
        print(table([[a] + [f"{r.get(k, float('nan')):.2f}" for k in keys] for a, r in ratios.items()], ["arm"] + keys))
    plot_curves(os.path.join(RESULTS, f"{results_name}_curves.png"), panels,
                "Table I arms: solved within budget (full pose)")
    write(results_name, {"targets": args.targets, "results": out, "ratios": ratios,
                         "arms": own_arms().get("paths") or None,
                     "peers": peers["machine"] if peers else None,
                     "peers_interleaved": bool(peers and peers.get("interleaved")), "pinned_cpu": pinned},
          f"python -m fullbody_ik.benchmarks.table1 --targets {args.targets}"
          + "".join(f" --arm {spec}" for spec in args.arm or [])
          + (" --stored-peers" if args.stored_peers else f" --chunk {args.chunk}" if process else "") + (
              f" --methods {','.join(methods)} --merge" if args.merge else ""))


if __name__ == "__main__":
    main()
