# SPDX-License-Identifier: GPL-3.0-or-later
"""Success within a time budget, from one run per target at the largest budget.

A solve stops as soon as every objective is met, and its trajectory does not depend on the budget (the
budget only ends it), so "solved within b" is "solved, and in at most b seconds" for every b up to the
budget it ran with: one run gives the whole success-versus-budget curve.
"""

import time

import numpy as np

from fullbody_ik.solvers import solve

BUDGETS_MS = [1, 2, 5, 10, 20, 50]


def run_method(tree, problems, method, budget_s, first=0, **options):
    """problems: list of (objectives, seed q), the ``first``-th of the whole set first (it names the solves' rng
    streams: a set run in chunks gets the same). Returns (success (N,), elapsed seconds (N,))."""
    if method.endswith("-numpy"):  # on the numpy path (the reference), the compiled path switched off
        from fullbody_ik.solvers import compiled

        compiled.set_enabled(False)
        try:
            return run_method(tree, problems, method[:-len("-numpy")], budget_s, first, **options)
        finally:
            compiled.set_enabled(True)
    if method == "memetic+lm":  # the memetic solver with LM exploitation instead of L-BFGS-B
        method, options = "memetic", dict(options, exploit="lm")
    ok, secs = np.zeros(len(problems), bool), np.zeros(len(problems))
    for i, (objectives, q0) in enumerate(problems):
        t0 = time.perf_counter()
        # rng streams distinct from the ones that drew the targets (the same stream would hand the memetic
        # solver its target as its first random individual)
        res = solve(tree, objectives, q0, method=method, time_limit=budget_s, rng=1_000_003 + first + i, **options)
        secs[i] = time.perf_counter() - t0
        ok[i] = res.success
    return ok, secs


def summarize(ok, secs, budget_ms=10.0):
    """Success within ``budget_ms`` and the mean / median time of a solve under that budget."""
    b = budget_ms / 1e3
    within = ok & (secs <= b)
    capped = np.where(within, secs, np.minimum(secs, b))
    return {
        "success_rate": float(within.mean()),
        "mean_ms": float(capped.mean() * 1e3),
        "median_ms": float(np.median(capped) * 1e3),
        "curve": {str(ms): float((ok & (secs <= ms / 1e3)).mean()) for ms in BUDGETS_MS},
    }


def plot_curves(path, panels, title):
    """panels: {panel title: {label: {budget_ms: rate}}} -> one PNG with a subplot per panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = 2 if n == 4 else min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, (name, curves) in zip(axes.ravel(), panels.items()):
        for label, curve in curves.items():
            xs = sorted(float(k) for k in curve)
            ax.plot(xs, [100 * curve[str(int(x)) if float(int(x)) == x else str(x)] for x in xs], marker="o",
                    label=label, linestyle="--" if label.startswith("peer") else "-")
        ax.set_xscale("log")
        ax.set_xticks(BUDGETS_MS, [str(b) for b in BUDGETS_MS])
        ax.set_ylim(-2, 102)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("budget (ms)")
        ax.set_ylabel("solved (%)")
        ax.grid(alpha=0.3)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    axes.ravel()[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")
