# SPDX-License-Identifier: GPL-3.0-or-later
"""Tracking: goals that move from frame to frame (a bake, the steps of a drag, Solve on a frame, the tracking
benchmarks), solved with one policy, so what the benchmarks measure is what users get.

- First frame (nothing to follow yet): a local solve from the seed (the animated pose, usually close); when
  it falls short, a full solve with restarts, ten times the budget and at least 0.3 s (measured on four CMU
  clips from rest: 100 ms left the first frame 14-64 mm off for some seeds, 300 ms solved every seed tried).
- Later frames: from the previous answer with a small displacement goal toward it (continuity), giving up
  early when the goals' error stops falling (``stall``). When goals are still unmet: the goals alone (the
  objectives with a tolerance) from where that led, since the preferences' pull can hold a goal outside its
  tolerance however long the search runs; then a polish of every objective without the continuity goal,
  restarting near the best answer (local methods); both within what is left of the frame's budget (at least
  a third of it each), so a frame takes about the budget, not twice. When the polish (a third of what is left)
  falls short too, the pose has run into a dead end (a limit between it and the goals): restarts that draw the
  stuck goals' variables afresh get the rest, and their answer is taken only when it meets every goal, so a
  best effort stays continuous (``jumps``; a drag turns them off: the pose under the mouse never jumps). With
  ``rescue`` (the foot placement's), a
  frame with a goal still off by more than ``rescue_error`` (the job's max error) gets one more solve of that
  many budgets, of the goals alone when there are preferences: rare frames near a leg's full stretch.
"""

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from . import compiled
from .methods import method as method_record
from .objectives import Displacement
from .problem import Budget, Problem
from .solve import solve

FIRST_FRAME_FACTOR, FIRST_FRAME_MIN = 10.0, 0.3
NEARBY = 0.1  # rad: restarts near the best answer stay close to the previous frame's pose
# The share of a frame's time left that restarts near the answer get before the stuck limbs are drawn afresh
# (``jumps``): on CMU 02_04 (the head behind tight spine limits, 44 frames in a row) nearby restarts found nothing
# in 100 ms where fresh ones met every goal in 2-5 ms; on the bake and foot placement benchmarks 1 of 56 frames
# that nearby restarts were given was solved by them.
NEAR_SHARE = 1.0 / 3.0


class Tracker:
    """Solves frame after frame; ``step(objectives, seed)`` returns the frame's Result.

    ``previous``: the answer the next frame starts from (None: the next frame is a first frame; a drag sets
    it to the pose it starts from)."""

    def __init__(self, tree, method="lm", time_limit=0.01, continuity=1e-4, seed=0, previous=None, rescue=0.0,
                 rescue_error=0.0, jumps=True, **options):
        self.record = method_record(method)
        self.record.check_options(options)
        if not time_limit > 0:
            raise ValueError(f"time_limit must be positive seconds, got {time_limit}")
        if not continuity >= 0:
            raise ValueError(f"continuity must be >= 0, got {continuity}")
        self.tree, self.method, self.time_limit = tree, method, float(time_limit)
        self.continuity, self.seed, self.options = float(continuity), int(seed), options
        self.previous = None if previous is None else np.asarray(previous, dtype=float)
        self.rescue = float(rescue)  # a frame still short after its budget: one more solve, this many budgets,
        self.rescue_error = float(rescue_error)  # when a goal is still off by more than this (tree units)
        self.jumps = bool(jumps)  # a frame the pose near the last cannot solve may take another that meets its goals
        self.frames = 0

    def for_frame(self, tree, index, previous):
        """A tracker with these settings for one frame of a job whose frames are independent (Frames): it follows
        ``previous`` (the frame's own seed, a source pose) on ``tree``, its rng this one's seed + ``index``."""
        return Tracker(tree, self.method, self.time_limit, self.continuity, self.seed + index, previous, self.rescue,
                       self.rescue_error, self.jumps, **self.options)

    def _solve(self, objectives, seed_q, time_limit, rng, **kw):
        return solve(self.tree, objectives, seed_q, self.method, time_limit=time_limit, rng=rng,
                     **kw, **self.options)

    def step(self, objectives, seed_q=None):
        """Solve one frame's goals (``objectives``, without continuity: the tracker adds it). ``seed_q``: where
        a first frame starts (default: zeros)."""
        rng = self.seed + self.frames
        self.frames += 1
        start = time.perf_counter()
        if self.previous is None:
            res = self._first(objectives, seed_q, rng)
        else:
            res = self._next(objectives, rng, start)
        self.previous = res.q
        res.elapsed = time.perf_counter() - start
        return res

    def _first(self, objectives, seed_q, rng):
        local = None
        if self.record.local:
            local = self._solve(objectives, seed_q, self.time_limit, rng, restarts=False)
            if local.success:
                return local
            only = self._goals_only(objectives, local.q, self.time_limit, rng)  # (as a later frame: the
            # preferences' pull can hold a goal just outside its tolerance, which no restart changes)
            if only is not None and only.success:
                return only
        budget = max(FIRST_FRAME_FACTOR * self.time_limit, FIRST_FRAME_MIN)
        full = self._solve(objectives, seed_q, budget, rng)
        if full.success or local is None or self.continuity == 0:
            return full
        # Short of the goals either way (out of reach): ranked with continuity to the seed, as later frames rank
        # theirs; a restart's far pose 0.05 mm closer would be carried through a whole bake (Baker._follow).
        seed = np.zeros(self.tree.n) if seed_q is None else np.asarray(seed_q, dtype=float)
        tracked = Problem(self.tree, list(objectives) + [Displacement(seed, weight=self.continuity)])
        return full if _cost(tracked, full.q) < _cost(tracked, local.q) else local

    def _next(self, objectives, rng, start):
        previous, tl = self.previous, self.time_limit
        goals = list(objectives)
        if self.continuity > 0:
            goals.append(Displacement(previous, weight=self.continuity))
        # stall=3: when the goals' error stops falling (the continuity goal holds them just short of their
        # tolerance, or a dead end), hand over to the polish instead of using up the budget.
        stall = {"stall": 3} if "stall" in self.record.options and "stall" not in self.options else {}
        res = self._solve(goals, previous, tl, rng, restarts=False, **stall)
        if res.success:
            return _without_continuity(res, len(objectives))
        best = _without_continuity(res, len(objectives))
        only = self._goals_only(objectives, res.q, max(tl - (time.perf_counter() - start), tl / 3), rng)
        if only is not None and only.success:
            return only
        left = max(tl - (time.perf_counter() - start), tl / 3)
        near = {"restarts": True, "nearby": NEARBY} if self.record.local else {}
        jump = self.jumps and self.record.local
        polish = self._solve(objectives, res.q, NEAR_SHARE * left if jump else left, rng, **near)
        if polish.success:
            best = polish
        else:  # short of the goals, ranked as the frame's first search ranked them: the goals' cost and the
            # continuity's (a frame out of reach took a polish 0.01 mm closer with the arms turned 46 degrees: a pop)
            tracked, ranked = Problem(self.tree, goals), res.cost
            for other in (polish, only):
                cost = np.inf if other is None else _cost(tracked, other.q)
                if cost < ranked:
                    best, ranked = other, cost
        if jump and not best.success:  # a dead end near the pose: the stuck limbs' variables drawn afresh, kept
            # only when that meets every goal (a best effort stays the continuous one)
            fresh = self._solve(objectives, best.q, max(tl - (time.perf_counter() - start), tl / 6), rng + 104729,
                                restarts=True)
            if fresh.success:
                return fresh
        far = any(np.isfinite(o.tolerance) and e > self.rescue_error for o, e in zip(objectives, best.errors))
        if not best.success and self.rescue > 0 and far:  # rare hard frames (a leg near full stretch): more time,
            # for the goals alone when there are preferences to leave out, restarting near the best answer when a
            # search ends short (a local minimum, a limit), else for all objectives
            more = self._goals_only(objectives, best.q, self.rescue * tl, rng + 7919, **near) or \
                self._solve(objectives, best.q, self.rescue * tl, rng + 7919, **near)
            if (more.success, -more.cost) > (best.success, -best.cost):
                return more
        return best

    def _goals_only(self, objectives, q, time_limit, rng, **kw):
        """The frame's goals (objectives with a tolerance) solved alone from ``q``, judged on every objective
        (None when every objective is a goal, or none is). The preferences (the body's pose, the pelvis's
        place, continuity: infinite tolerance) are a cost too: near a straight knee, where a goal moves little
        for a large turn, their pull can hold a goal just outside its tolerance at the weighted optimum, and
        the search creeps there (a walk's push-off: 190 iterations, 13 mm off after 40). Without them LM,
        starting close, meets the goals in a few iterations and moves the pose no further than that needs."""
        goals = [o for o in objectives if np.isfinite(o.tolerance)]
        if not goals or len(goals) == len(objectives):
            return None
        res = self._solve(goals, q, time_limit, rng, **({"restarts": False} | kw))
        judged = Problem(self.tree, objectives).result(res.q, res.method, Budget(), res.message)
        judged.iterations, judged.elapsed = res.iterations, res.elapsed
        return judged


def _cost(problem, q):
    """The cost of ``problem``'s objectives at q (compiled when it serves)."""
    k = compiled.kernel(problem)
    if k is not None:
        return float(k.judge(np.ascontiguousarray(q, dtype=float))[1])
    return float(problem.cost(problem.state(q)))


def _without_continuity(res, count):
    """The result judged on the frame's own goals (the continuity goal, last, dropped from its lists)."""
    if len(res.errors) > count:
        res.errors, res.satisfied, res.details = res.errors[:count], res.satisfied[:count], res.details[:count]
        res.success = all(res.satisfied)
    return res


FAR = np.radians(90.0)  # an independent frame's answer turning a link more than this from its seed: another branch
JUMP = np.radians(10.0)  # ... or turning a link this much more from the frame before's answer than its seed turns
SLACK = np.radians(15.0)  # how much further from its seed a mended answer may be than the frame's own


def _turns(Ra, Rb):
    """(links,) the angle (radians) between world rotations Ra and Rb (links, 3, 3), link by link."""
    cos = (np.einsum("lij,lij->l", Ra, Rb) - 1.0) / 2.0  # trace(Ra^T Rb) = sum of elementwise products
    return np.arccos(np.clip(cos, -1.0, 1.0))


def link_turns(tree, a, b):
    """(links,) the angle (radians) between each link's world rotation in configuration ``a`` and in ``b``."""
    W = tree.fk_batch(np.stack([np.asarray(a, dtype=float), np.asarray(b, dtype=float)]))[:, :, :3, :3]
    return _turns(W[0], W[1])


def largest_turn(tree, a, b):
    """The largest angle (radians) between a link's world rotation in configuration ``a`` and in ``b``."""
    return float(link_turns(tree, a, b).max(initial=0.0))


MAX_WORKERS = 4  # threads for frames at once by default (measured on 2 cores only: see benchmarks.footplant)


def default_workers(tree):
    """Threads for independent frames: FULLBODY_IK_THREADS when set, else the cores this process may use (at most
    MAX_WORKERS) when the compiled core serves the tree (its kernels release the GIL), else 1 (numpy's solve holds
    the GIL: threads would only take turns)."""
    env = os.environ.get("FULLBODY_IK_THREADS", "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"FULLBODY_IK_THREADS must be a whole number of threads, got {env!r}") from None
    if not compiled.covers_tree(tree):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, _cpu_quota() or cores, MAX_WORKERS))


CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: a container's CPU quota ("max" or "<quota> <period>")


def _cpu_quota():
    """The CPUs a container's quota allows (a farm's 1-CPU job on a 64-core host: 1), or None. Affinity does not
    show it, and each frame's budget is wall-clock time: threads beyond it would shorten every frame's solve."""
    try:
        with open(CPU_MAX) as fh:
            quota, period = fh.read().split()[:2]
        return None if quota == "max" else max(1, int(quota) // int(period))
    except (OSError, ValueError):
        return None


class Frames:
    """Frames that do not depend on each other (each follows its own seed, a source pose, as foot placement and
    retargeting have) solved in parallel: ``submit(tree, objectives, seed_q)`` queues one and returns at once,
    ``result(i)`` waits for frame i's Result. With one worker the frame is solved in ``submit`` itself.

    Each frame is solved by ``tracker.for_frame``: the tracker's policy as for a later frame of a tracking (its
    goals and a small continuity goal toward the seed, goals alone, polish, rescue), its rng the tracker's seed +
    the frame's index, so its answer does not depend on which thread solves it or when (short of the wall-clock
    budget). ``tree``: the frame's own (Tree.frame_copy) when its origins change from frame to frame.

    A frame whose answer strays (its goals met on another branch: a leg twisted half a turn where the frame
    before met them with the leg as posed, or turned 20 degrees away and back over two frames) is solved again,
    as results are read in order, from the answer before it as a tracking would (_mend; ``mended`` counts the
    answers kept). Seeded from the pose alone, some frames' searches ran down to such a branch and back the
    next frame."""

    def __init__(self, tracker, workers=None):
        self.tracker = tracker
        self.workers = default_workers(tracker.tree) if workers is None else max(1, int(workers))
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="fullbody_ik") if self.workers > 1 else None
        if self._pool is not None:  # compiled before the threads start (a compile in one makes the others wait)
            compiled.prepare("memetic" if tracker.method == "memetic" else "core")
        self._results, self._inputs = [], []
        self._read = (-1, None)  # (index, its Result): the last frame read, in order
        self.mended = 0

    def __len__(self):
        return len(self._results)

    def submit(self, tree, objectives, seed_q):
        index = len(self._results)
        self._inputs.append((tree, objectives, np.asarray(seed_q, dtype=float)))
        tracker = self.tracker.for_frame(tree, index, seed_q)
        if self._pool is not None:
            self._results.append(self._pool.submit(tracker.step, objectives))
            return index
        done = Future()  # (solved here: a finished future, its exception kept for result() as a thread's would be)
        try:
            done.set_result(tracker.step(objectives))
        except Exception as e:
            done.set_exception(e)
        self._results.append(done)
        return index

    def done(self, index):
        return self._results[index].done()

    def result(self, index, timeout=None):
        """Frame ``index``'s Result (waits up to ``timeout`` s; TimeoutError after); its solve's exception, raised.
        Read in order, a frame whose answer strays is mended from the answer before it (_mend)."""
        last, before = self._read
        if index == last:
            return before
        res = self._results[index].result(timeout)
        if index == last + 1 and last >= 0:
            res = self._mend(index, res, before.q)
        self._inputs[index] = (None, None, self._inputs[index][2])  # (its tree copy and goals let go: a long clip's
        # would all be kept; the next frame's mend needs its seed)
        self._read = (index, res)
        return res

    def _mend(self, index, res, before):
        """``res``, or the frame solved again from ``before`` (the answer of the frame before it) when ``res``
        strays: it turns a link more than FAR from the frame's seed, or JUMPs from ``before`` (a link turning
        that much more than the seeds turn from frame to frame: another of the goals' answers, for a frame or
        two). The new answer is kept when it meets as many goals, jumps less, and stays within FAR of the seed
        and within SLACK of how far ``res`` is from it (a bad answer before is not carried on)."""
        tree, objectives, seed = self._inputs[index]
        # (one FK pass: the seed before, this seed, the answer before, this answer)
        R_seed_before, R_seed, R_before, R_res = tree.fk_batch(np.stack([self._inputs[index - 1][2], seed, before,
                                                                          res.q]))[:, :, :3, :3]
        moves = _turns(R_seed_before, R_seed)
        far, jump = float(_turns(R_seed, R_res).max()), float(np.max(_turns(R_before, R_res) - moves))
        if far <= FAR and jump <= JUMP:
            return res
        start = time.perf_counter()
        other = self.tracker.for_frame(tree, index, before).step(objectives)
        other.elapsed = res.elapsed + (time.perf_counter() - start)
        R_other = tree.fk_batch(other.q[None])[0, :, :3, :3]
        if sum(other.satisfied) >= sum(res.satisfied) and _turns(R_seed, R_other).max() <= min(FAR, far + SLACK) and \
                float(np.max(_turns(R_before, R_other) - moves)) < jump:
            self.mended += 1
            return other
        res.elapsed = other.elapsed
        return res

    def close(self, cancel=False):
        """Let the threads go (``cancel``: frames not started are dropped; those running end first)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
