# SPDX-License-Identifier: GPL-3.0-or-later
"""Independent frames solved in parallel (tracking.Frames): the same answers as one by one, each frame on its own
origins, the compiled kernels releasing the GIL."""

import os

import numpy as np
import pytest

import helpers
from fullbody_ik.solvers import Frames, Position, Tracker, compiled, tracking
from fullbody_ik.solvers.problem import Problem


def _clip(seed, count=12):
    """A random tree whose first joint stands elsewhere on each frame (set_origins: a clip's root walking across
    the floor), and per frame a source pose and goals a little away from where it puts two links."""
    rng = np.random.default_rng(seed)
    while True:
        tree = helpers.random_tree(rng, n_links=9)
        if tree.n >= 6:
            break
    first = tree.link_index[tree.joints[0].child]

    def under_first(i):
        while i > 0 and i != first:
            i = tree.parent[i]
        return i == first

    links = [tree.link_names[i] for i in range(len(tree.link_names)) if under_first(i)][-2:]  # moved by it
    base = tree.origin[first].copy()
    frames = []
    for f in range(count):
        origin = base.copy()
        origin[:3, 3] += (0.3 * f, 0.1 * np.sin(f), 0.0)  # walks along x
        tree.set_origins([first], origin[None])
        seed_q = tree.project(rng.normal(scale=0.6, size=tree.n))
        target = tree.fk(tree.project(seed_q + rng.normal(scale=0.05, size=tree.n)))
        goals = [Position(link, target[link][:3, 3], tolerance=1e-4) for link in links]
        frames.append((origin[None], goals, seed_q))
    tree.set_origins([first], base[None])
    return tree, first, frames


def _met(tree, goals, q):
    state = Problem(tree, goals).state(q)
    return all(g.satisfied(state) for g in goals)


def _solve(tree, first, frames, workers):
    tracker = Tracker(tree, "lm", time_limit=1.0, seed=5)
    pool = Frames(tracker, workers)
    for origin, goals, seed_q in frames:
        tree.set_origins([first], origin)  # the next frame's input, while earlier frames may still be solving
        pool.submit(tree.frame_copy(), goals, seed_q)
    out = [pool.result(i) for i in range(len(frames))]
    pool.close()
    return out


@pytest.mark.parametrize("enabled", [True, False], ids=["compiled", "numpy"])
def test_frames_solved_at_once_are_the_frames_solved_one_by_one(enabled, monkeypatch):
    monkeypatch.setattr(compiled, "_enabled", enabled)
    for seed in range(3):
        tree, first, frames = _clip(seed)
        alone = _solve(tree, first, frames, 1)
        together = _solve(tree, first, frames, 3)
        for res, other in zip(alone, together):
            assert np.array_equal(res.q, other.q) and res.success == other.success
        # Each frame solved on its own origins: judged there, every goal is met (on the last frame's, not).
        for (origin, goals, _), res in zip(frames, together):
            tree.set_origins([first], origin)
            assert res.success and _met(tree, goals, res.q)
        tree.set_origins([first], frames[-1][0])
        assert not any(_met(tree, goals, res.q) for (_, goals, _), res in zip(frames[:-1], together))


def test_a_frames_copy_of_the_tree_keeps_its_origins():
    tree, first, frames = _clip(0, 2)
    tree.set_origins([first], frames[0][0])
    q = tree.project(np.full(tree.n, 0.2))
    copy = tree.frame_copy()
    before = copy.fk(q)
    tree.set_origins([first], frames[1][0])  # the next frame: the tree moves, its copy does not
    assert all(np.allclose(before[k], v) for k, v in copy.fk(q).items())
    assert not np.allclose(tree.fk(q)[tree.link_names[first]], before[tree.link_names[first]])


def test_frames_run_in_threads_only_where_the_compiled_core_serves(monkeypatch, tmp_path):
    tree, _, _ = _clip(0, 1)
    monkeypatch.delenv("FULLBODY_IK_THREADS", raising=False)
    monkeypatch.setattr(compiled, "_enabled", True)
    assert Frames(Tracker(tree)).workers >= 1
    monkeypatch.setattr(compiled, "_enabled", False)  # numpy holds the GIL: threads would only take turns
    assert Frames(Tracker(tree)).workers == 1
    quota = tmp_path / "cpu.max"  # a container allowed one CPU: one thread, whatever the host's cores
    quota.write_text("100000 100000\n")
    monkeypatch.setattr(tracking, "CPU_MAX", str(quota))
    monkeypatch.setattr(compiled, "_enabled", True)
    assert Frames(Tracker(tree)).workers == 1
    quota.write_text("max 100000\n")
    assert Frames(Tracker(tree)).workers == min(len(os.sched_getaffinity(0)), tracking.MAX_WORKERS)
    monkeypatch.setenv("FULLBODY_IK_THREADS", "3")
    assert Frames(Tracker(tree)).workers == 3
    monkeypatch.setenv("FULLBODY_IK_THREADS", "many")
    with pytest.raises(ValueError, match="FULLBODY_IK_THREADS must be a whole number"):
        Frames(Tracker(tree))


def test_the_compiled_solves_release_the_gil():
    if compiled.numba is None:
        pytest.skip("numba is not installed here")
    for kernel in (compiled.restarts_kernel, compiled.make_work, compiled.judge, compiled.project_packed,
                   compiled.memetic):
        assert kernel.targetoptions.get("nogil") is True, kernel


def test_a_frame_whose_answer_strays_from_its_seed_or_jumps_is_solved_again_from_the_frame_before():
    """Read in order, an independent frame whose answer turns a link more than FAR from its seed, or JUMPs from the
    answer before it (a link turning that much more than the seeds do), is solved again from the answer before it;
    that answer is kept when it meets as many goals, jumps less and stays within FAR of the seed (and within SLACK
    of the frame's own distance); every other frame keeps its own answer. A random tree whose goals wander from a
    drifting pose: one frame of ten strays 94 degrees from its seed, others jump."""
    from fullbody_ik.solvers.tracking import FAR, JUMP, SLACK, largest_turn, link_turns

    rng = np.random.default_rng(4)
    tree = helpers.random_tree(rng, n_links=7)
    links = tree.link_names[-2:]
    q = tree.project(rng.normal(scale=0.5, size=tree.n))
    frames = []
    for _ in range(10):
        q = tree.project(q + rng.normal(scale=0.15, size=tree.n))
        target = tree.fk(tree.project(q + rng.normal(scale=0.6, size=tree.n)))
        frames.append(([Position(link, target[link][:3, 3], tolerance=1e-4) for link in links], q.copy()))
    for workers in (1, 2):
        pool = Frames(Tracker(tree, "lm", time_limit=0.5, seed=5), workers)
        for goals, seed_q in frames:
            pool.submit(tree, goals, seed_q)
        kept = [pool.result(i) for i in range(len(frames))]
        direct = [pool._results[i].result() for i in range(len(frames))]
        pool.close()
        assert pool.mended == sum(k is not d for k, d in zip(kept, direct)) >= 1, workers
        far = [largest_turn(tree, seed_q, d.q) for (_, seed_q), d in zip(frames, direct)]
        assert max(far) > FAR  # (the frame that strays)
        for i in range(1, len(frames)):
            (goals, seed_q), k, d = frames[i], kept[i], direct[i]
            moves = link_turns(tree, frames[i - 1][1], seed_q)
            jump = float(np.max(link_turns(tree, kept[i - 1].q, d.q) - moves))
            if far[i] > FAR:
                assert k is not d, i  # (mended: the frame before meets its goals near its own seed)
            if k is d:
                continue
            assert far[i] > FAR or jump > JUMP, i
            assert largest_turn(tree, seed_q, k.q) <= min(FAR, far[i] + SLACK)
            assert float(np.max(link_turns(tree, kept[i - 1].q, k.q) - moves)) < jump
            assert sum(k.satisfied) >= sum(d.satisfied) and _met(tree, goals, k.q)


def test_a_frame_read_lets_its_tree_copy_go():
    """Each frame's tree copy (and goals) is let go once the frame is read: a long clip's would all be kept."""
    import gc
    import weakref

    tree, first, frames = _clip(3, count=6)
    for workers in (1, 2):
        pool = Frames(Tracker(tree, "lm", time_limit=1.0, seed=5), workers)
        copies = []
        for origin, goals, seed_q in frames:
            tree.set_origins([first], origin)
            copy = tree.frame_copy()
            copies.append(weakref.ref(copy))
            pool.submit(copy, goals, seed_q)
            del copy
        results = [pool.result(i) for i in range(len(frames))]
        pool.close()
        gc.collect()
        assert len(results) == len(frames) and all(ref() is None for ref in copies), workers
