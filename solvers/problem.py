# SPDX-License-Identifier: GPL-3.0-or-later
"""An IK problem: a tree and its objectives composed into one weighted least-squares system,
the result type every method returns, and the time/iteration budget they share."""

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from .objectives import Objective


@dataclass
class Result:
    """What every method returns (``scipy.optimize``-like)."""

    q: np.ndarray
    success: bool  # every objective within its tolerance
    errors: np.ndarray  # per objective, in its own unit (m or rad; Pose: position, see details)
    iterations: int
    elapsed: float  # seconds
    message: str
    method: str = ""
    cost: float = 0.0  # sum w |r|^2 / 2 at q
    satisfied: list = field(default_factory=list)  # per objective
    details: list = field(default_factory=list)  # per objective: named errors
    restarts: int = 0
    elites: list = field(default_factory=list)  # (q, fitness) of distinct elite solutions (memetic)

    def __repr__(self):
        return (f"Result(method={self.method!r}, success={self.success}, iterations={self.iterations}, "
                f"elapsed={self.elapsed * 1e3:.2f} ms, cost={self.cost:.3g}, message={self.message!r})")


class Budget:
    """Wall-clock and iteration limits shared by a solve (and its restarts)."""

    def __init__(self, time_limit=None, max_iterations=None):
        if time_limit is not None and not (time_limit > 0):
            raise ValueError(f"time_limit must be positive seconds or None, got {time_limit}")
        if max_iterations is not None and int(max_iterations) < 1:
            raise ValueError(f"max_iterations must be >= 1 or None, got {max_iterations}")
        self.start = time.perf_counter()
        self.deadline = None if time_limit is None else self.start + float(time_limit)
        self.max_iterations = None if max_iterations is None else int(max_iterations)
        self.iterations = 0

    def tick(self):
        self.iterations += 1

    def exhausted(self):
        if self.max_iterations is not None and self.iterations >= self.max_iterations:
            return True
        return self.past_deadline()

    def past_deadline(self):
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def elapsed(self):
        return time.perf_counter() - self.start


class Problem:
    """The objectives of one solve over a tree: weighted residual, Jacobian, cost and success."""

    def __init__(self, tree, objectives):
        if isinstance(objectives, Objective):
            objectives = [objectives]
        objectives = list(objectives)
        if not objectives:
            raise ValueError("solve needs at least one objective")
        for o in objectives:
            if not isinstance(o, Objective):
                raise TypeError(f"not an objective: {o!r}")
        self.tree = tree
        self.objectives = objectives
        # Fail early, with the objective named, on a link or joint the tree does not have: link names are looked
        # up (cheap: a frame of tracking builds a problem); other objectives are evaluated once at zero.
        state = None
        known = tree.link_index
        for o in objectives:
            link, other = getattr(o, "link", None), getattr(o, "other_link", None)
            if isinstance(link, str) or isinstance(other, str):
                for name in (link, other):
                    if isinstance(name, str) and name not in known:
                        raise ValueError(f"{type(o).__name__}: no link named {name!r} in the tree")
                continue
            try:
                try:  # joint objectives need only q: a configuration without FK (a tracking frame builds these)
                    o.residual(SimpleNamespace(tree=tree, q=np.zeros(tree.n), cache={}))
                except (AttributeError, TypeError):
                    state = state or tree.state(np.zeros(tree.n))
                    o.residual(state)
            except KeyError as e:
                raise ValueError(f"{type(o).__name__}: {e.args[0]}") from None

    def state(self, q):
        return self.tree.state(q)

    def residual(self, state, objectives=None):
        objs = self.objectives if objectives is None else objectives
        return np.concatenate([np.sqrt(o.weight) * o.residual(state) for o in objs], axis=-1)

    def jacobian(self, state, objectives=None):
        objs = self.objectives if objectives is None else objectives
        return np.concatenate([np.sqrt(o.weight) * o.jacobian(state) for o in objs], axis=-2)

    def cost(self, state, objectives=None):
        r = self.residual(state, objectives)
        return 0.5 * float(r @ r)

    def satisfied(self, state):
        return all(bool(o.satisfied(state)) for o in self.objectives)

    def progress(self, state):
        """(every objective met, sum w |r|^2 / 2 over the objectives not yet met), for one state (bool, float)
        or a batch ((P,) arrays): what is left to do."""
        met = np.ones(np.shape(state.q)[:-1], dtype=bool)
        unmet = np.zeros(np.shape(state.q)[:-1])
        for o in self.objectives:
            ok = np.asarray(o.satisfied(state))
            met = met & ok
            unmet = unmet + np.where(ok, 0.0, 0.5 * o.weight * np.sum(o.residual(state) ** 2, axis=-1))
        return met, unmet

    def unmet(self, state):
        """sum w |r|^2 / 2 over the objectives not yet within tolerance (one state)."""
        return float(self.progress(state)[1])

    def stop(self, state, budget):
        """The loop head every local method shares: a reason to stop, or None (one more iteration counted)."""
        if self.satisfied(state):
            return "every objective within tolerance"
        if budget.exhausted():
            return "budget exhausted"
        budget.tick()
        return None

    def result(self, q, method, budget, message, restarts=0):
        k = self.__dict__.get("_kernel")
        if k is not None:  # solved on the compiled path: judged there, no numpy FK
            return k.result(q, method, budget, message, restarts)
        state = self.state(q)
        errors = np.array([float(o.error(state)) for o in self.objectives])
        satisfied = [bool(o.satisfied(state)) for o in self.objectives]
        return Result(
            q=q, success=all(satisfied), errors=errors, iterations=budget.iterations, elapsed=budget.elapsed(),
            message=message, method=method, cost=self.cost(state), satisfied=satisfied,
            details=[o.details(state) for o in self.objectives], restarts=restarts,
        )
