# SPDX-License-Identifier: GPL-3.0-or-later
"""The peers on Table I's targets and seeds: roboticstoolbox-python's C++ ik_LM (Sugihara and Chan damping)
and ik_NR with restarts, and ikpy. They need numpy 2, so this runs in .venv-peers (`make bench-peers`);
our solver core (numpy/scipy only) is imported there too, to judge every answer with the same FK and the same
criterion (1e-4 m, 1e-3 rad, inside the limits). Alone it runs every target and writes table1_peers.json; with
``--serve`` it runs chunks of targets on request, taking turns with our methods in table1's process (the
machine's speed drifts within minutes: only turns in one window give ratios that mean something).

    .venv-peers/bin/python -m fullbody_ik.benchmarks.peers [--serve]
"""

import json
import os
import re
import sys
import tempfile
import time
import warnings

import numpy as np

from fullbody_ik.solvers import Pose

from .budgets import summarize
from .common import WARM_SOLVES, machine, warm_cpu
from .table1 import arms as table1_arms, files, load, own_arms, urdf_path


def meshless_urdf(name):
    """roboticstoolbox loads meshes it cannot find; kinematics do not need them (nor Gazebo and transmission blocks,
    where descriptions in the wild write tags it cannot read)."""
    text = open(urdf_path(name)).read()
    text = re.sub(r"(?s)<(visual|collision|gazebo|transmission)\b.*?</\1>", "", text)
    fh = tempfile.NamedTemporaryFile("w", suffix=".urdf", delete=False)
    fh.write(text)
    fh.close()
    return fh.name


def fresh(et, rtb):
    """A copy of an ET with new joint indices (a sliced ETS keeps the old ones, which the C++ IK misreads)."""
    if not et.isjoint:
        return rtb.ET.SE3(et.A())
    return getattr(rtb.ET, et.axis)(qlim=et.qlim, flip=et.isflip)


def judge(tree, tip, T, q):
    q = np.asarray(q, dtype=float)
    if q.shape != (tree.n,) or not np.all(np.isfinite(q)):
        return False
    if np.any(q < tree.lower - 1e-7) or np.any(q > tree.upper + 1e-7):  # continuous joints: any angle
        return False
    return bool(Pose(tip, T).satisfied(tree.state(q)))


def arm_peers(name, base, tip, tree, seed_q):
    """{peer: function(T, q0) -> q} for one arm, each checked to reproduce our FK at ``seed_q`` (ikpy is left out,
    with a message, where its URDF reading differs)."""
    import ikpy.chain
    import roboticstoolbox as rtb

    path = meshless_urdf(name)
    robot = rtb.Robot.URDF(path)
    own = robot.link_dict[base].ets if robot.link_dict[base].parent is not None else []
    ets = rtb.ETS([fresh(et, rtb) for et in list(robot.ets(start=base, end=tip))[len(own):]])
    route = []  # base link, joint, link, ..., tip: the exact chain, not ikpy's first-child walk
    i = tree.link(tip)
    while tree.link_names[i] != base:
        route = [tree.link_joint[i].name, tree.link_names[i]] + route
        i = tree.parent[i]
    walked = ikpy.chain.Chain.from_urdf_file(path, base_elements=[base] + route[:-1], last_link_vector=None)
    names = [link.name for link in walked.links]
    links = walked.links[: names.index(route[-2]) + 1]  # ikpy walks on past the tip: cut there
    active = np.array([link.joint_type != "fixed" for link in links])
    chain = ikpy.chain.Chain(links, active_links_mask=active)
    # The same kinematics on both sides, or the comparison means nothing.
    q = seed_q
    assert ets.n == tree.n, (name, ets.n, tree.n)
    assert np.allclose(ets.fkine(q).A, tree.fk(q)[tip], atol=1e-6), f"{name}: rtb FK differs"
    full = np.zeros(len(chain.links))
    full[active] = q
    ik_fk = chain.forward_kinematics(full)
    ikpy_ok = np.allclose(ik_fk, tree.fk(q)[tip], atol=1e-6)
    peers = {
        "rtb ik_LM sugihara": lambda T, q0: ets.ik_LM(T, q0=q0, ilimit=30, slimit=100, tol=1e-12,
                                                      joint_limits=True, method="sugihara", k=1e-4).q,
        "rtb ik_LM chan": lambda T, q0: ets.ik_LM(T, q0=q0, ilimit=30, slimit=100, tol=1e-12,
                                                  joint_limits=True, method="chan").q,
        "rtb ik_NR": lambda T, q0: ets.ik_NR(T, q0=q0, ilimit=30, slimit=100, tol=1e-12, joint_limits=True,
                                             pinv=True).q,
    }
    if ikpy_ok:
        def ikpy_solve(T, q0):
            init = np.zeros(len(chain.links))
            init[active] = q0
            return chain.inverse_kinematics_frame(T, initial_position=init, orientation_mode="all")[active]

        peers["ikpy"] = ikpy_solve
    else:
        print(f"{name}: ikpy's chain does not reproduce the FK (its URDF reading differs); ikpy left out")
    return peers


def run_peer(fn, tree, tip, targets, seeds):
    """(success flags, seconds per solve) of one peer on these targets, each answer judged by our criterion."""
    ok, secs = np.zeros(len(targets), bool), np.zeros(len(targets))
    for i, (T, q0) in enumerate(zip(targets, seeds)):
        t0 = time.perf_counter()
        try:
            q = fn(T, q0)
        except Exception:  # a peer's failure is a miss, not a crash of the benchmark
            q = None
        secs[i] = time.perf_counter() - t0
        ok[i] = q is not None and judge(tree, tip, T, q)
    return ok, secs


def setup():
    """{arm: (tree, tip, targets, seeds, {peer: function})} on the stored problem set."""
    warnings.filterwarnings("ignore")
    data = np.load(files()[1])
    arms = {}
    for name, base, tip in table1_arms():
        tree = load(name, base, tip)
        targets, seeds = data[f"{name}/targets"], data[f"{name}/seeds"]
        try:
            peers = arm_peers(name, base, tip, tree, seeds[0])
        except Exception as e:  # (--arm's arms: a file the peers read otherwise, or not at all, is left out, said)
            if not own_arms():
                raise
            print(f"{name}: the peers cannot solve it as we read it ({type(e).__name__}: {e}); left out",
                  file=sys.stderr)
            peers = {}
        arms[name] = (tree, tip, targets, seeds, peers)
    return arms


def serve():
    """Run chunks on request, for table1's interleaved run: a line of JSON {"arm", "start", "stop"} on stdin ->
    a line {peer: [[ok, seconds], ...]} on stdout (every peer on targets[start:stop]); first a line of the peers'
    names per arm and the machine, once set up. Ends at the end of stdin."""
    # What the peers may print, from Python or C, goes to stderr, not into the replies (on a copy of stdout)
    sys.stdout.flush()
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    arms = setup()
    print(json.dumps({"peers": {a: list(v[4]) for a, v in arms.items()}, "machine": machine()}), file=reply,
          flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        tree, tip, targets, seeds, peers = arms[ask["arm"]]
        window = slice(ask["start"], ask["stop"])
        out = {}
        warm_cpu()  # (as table1 does before our turn)
        first = slice(ask["start"], min(ask["start"] + WARM_SOLVES, ask["stop"]))
        for peer, fn in peers.items():
            run_peer(fn, tree, tip, targets[first], seeds[first])  # (untimed, as table1 does for ours: WARM_SOLVES)
            ok, secs = run_peer(fn, tree, tip, targets[window], seeds[window])
            out[peer] = [[bool(o), float(t)] for o, t in zip(ok, secs)]
        print(json.dumps(out), file=reply, flush=True)


def main():
    if "--serve" in sys.argv[1:]:
        return serve()
    results, count = {}, None
    for name, (tree, tip, targets, seeds, peers) in setup().items():
        count = len(targets)
        results[name] = {}
        for peer, fn in peers.items():
            s = results[name][peer] = summarize(*run_peer(fn, tree, tip, targets, seeds))
            print(f"{name:20s} {peer:20s} {100 * s['success_rate']:5.1f} % within 10 ms, "
                  f"median {s['median_ms']:.3f} ms", flush=True)
    with open(files()[2], "w") as fh:
        json.dump({"targets": count, "machine": machine(), "results": results}, fh, indent=1)
    print(f"wrote {os.path.relpath(files()[2])}")


if __name__ == "__main__":
    main()
