# SPDX-License-Identifier: GPL-3.0-or-later
"""The table of methods: one record per solver, read by ``solve``, tracking, the command line and the UI.

A method's ``run(problem, q0, budget, rng=..., **options) -> (q, message[, elites])`` keeps q feasible.
``local`` methods descend from their seed: ``solve`` restarts them while the budget lasts and tracking restarts
them near the previous answer; global methods (memetic) search the whole space themselves. ``options`` are the
names ``run`` accepts (with their defaults, for documentation); anything else is an error, never ignored
(``scipy.optimize``'s ``_check_unknown_options``).
"""

from dataclasses import dataclass, field

from . import lm, memetic, ncg, nullspace, projected_gradient

_LM = {"damping_bias": None, "step_tol": 1e-12, "residual_tol": 1e-12, "backtracks": 8, "stall": None,
       "damping_scale": 1.0, "starts": None, "stall_ratio": None, "damping_start": None}
_NULLSPACE = {"damping_bias": 1e-3, "step_tol": 1e-12, "cost_tol": 1e-14, "backtracks": 8, "stall": None}
_PG = {"alpha": 1e-4, "beta": 0.5, "growth": 4.0, "grad_tol": 1e-14}
_NCG = {"alpha": 1e-4, "beta": 0.5, "grad_tol": 1e-14, "restart_every": None}
_MEMETIC = {"population": None, "elites": None, "exploit": None, "exploit_iterations": None, "waves": 2,
            "timings": None}


@dataclass(frozen=True)
class Method:
    name: str  # what solve(method=...) and --method take
    label: str  # what the UI shows
    description: str
    run: object
    local: bool  # restarts (random or near the last answer) apply
    options: dict = field(default_factory=dict)  # accepted options -> default
    paper: str = ""
    multistart: object = None  # run several searches at once when restarts are allowed (LM): (q, message, restarts)
    stall_restarts: bool = False  # with restarts one by one (solve's loop), give up a stalled search early (stall=5)

    def check_options(self, options):
        """ValueError naming any option this method does not take (a misspelt option is not ignored)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            accepted = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"method {self.name!r} has no option {', '.join(map(repr, unknown))} "
                             f"(its options: {accepted})")


METHODS = {m.name: m for m in (
    Method("lm", "Levenberg-Marquardt", "Fast local solver; several starts at once within the time budget",
           lm.run, True, _LM, "001", multistart=lm.run_multistart, stall_restarts=True),
    Method("memetic", "Memetic (BioIK)", "Global evolutionary solver with gradient exploitation: many goals, "
           "avoids local minima", memetic.run, False, _MEMETIC, "000"),
    Method("nullspace", "Prioritized", "Higher-priority goals first, lower ones only in what is left",
           nullspace.run, True, _NULLSPACE, "002", stall_restarts=True),
    Method("ncg", "Conjugate Gradient", "Projected non-linear conjugate gradient", ncg.run, True, _NCG, "004"),
    Method("projected_gradient", "Projected Gradient", "Steepest descent with projected line search",
           projected_gradient.run, True, _PG, "003"),
)}


def method(name):
    """The record of a method by name; ValueError listing the choices for an unknown one."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {name!r}; choose one of {', '.join(METHODS)}") from None


def register_method(name, run, label=None, local=False, options=None, description=""):
    """Add a method: ``run(problem, q0, budget, rng=..., **options) -> (q, message[, elites])``."""
    METHODS[name] = Method(name, label or name, description, run, local, dict(options or {}))
    return METHODS[name]
