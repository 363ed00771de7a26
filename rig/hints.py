# SPDX-License-Identifier: GPL-3.0-or-later
"""Why goals were missed, told in sentences: targets out of the reach of their chains (or nearer than they fold,
or two goals on one chain too far apart), goals pulled off by others sharing their bones, and joint limits the
goals pull against. Bake and Solve both tell them."""

import numpy as np

from ..solvers import Pose, Position


def counted(n, word):
    """'1 frame', '3 frames'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def chain_roots(tree):
    """The links whose joint is the first to move on the way down from the root (nothing above them moves): where
    the reach of a chain is measured from. Known once per tree."""
    known = tree.__dict__.get("_chain_roots")
    if known is None:
        known = tree._chain_roots = sorted({int(i) for i in tree.var_link
                                            if tree.parent[i] < 0 or not tree.ancestors[tree.parent[i]].any()})
    return known


def fixed_positions(tree, links):
    """(len(links), 3): where links that nothing above moves are (their joint origins composed up to the root,
    with the tree's origins as they are: a frame's)."""
    out = np.zeros((len(links), 3))
    for k, i in enumerate(links):
        M = tree.origin[i]
        j = tree.parent[i]
        while j >= 0:
            M = tree.origin[j] @ M
            j = tree.parent[j]
        out[k] = M[:3, 3]
    return out


def _position_part(objective):
    """A Position goal itself, a Pose goal's position part, else None."""
    return objective.position if type(objective) is Pose else objective if type(objective) is Position else None


def reach_hints(tree, frames, columns, labels, scales, anchors, missed, errors=None, root_bones=None):
    """Why position goals were missed, where the tree tells: no bone above the goal free to move, or its target
    further from the first bone that moves (its chain's root: chain_roots) than the bones between them reach
    (their joint offsets, as the frame has them, and the goal's offset summed), or nearer than they fold (the
    longest of them less the others), for chains without a translation
    (a free root, a prismatic joint, IK stretch). Per frame: ``frames`` its objectives, ``scales`` world units per
    tree unit, ``anchors`` (fixed_positions of chain_roots, the tree's joint offsets' lengths), ``missed``
    (frames, columns) which report columns missed, ``errors`` (frames, columns; world units) by how much;
    ``columns``, ``labels``: the report's. Only goals that missed are told of; one with no reason of its own is
    told of the goals it shares bones with (_shared_hints); Free Root is named when the chains' roots stay where
    they are over the frames and a goal out of reach has a chain that starts at the armature's root (``root_bones``:
    the names of its bones without a parent; None: any root of the tree), not at a control rig's limb whose
    mechanism above is posed by the rig. Returns sentences."""
    from ..solvers.joints import FreeModel

    roots = chain_roots(tree)
    hints, far = [], set()  # (the first bones that move of the chains whose targets were out of reach)
    # per column: its chain's variables, the frames its own reason explains, {frame: by how much (world units)} on
    # the frames its target could not be reached
    chains, explained, unreached, by_pair = {}, {}, {}, []
    for c, ((i, field), label) in enumerate(zip(columns, labels)):
        rows = np.flatnonzero(missed[:, c])
        if field != "error" or not len(rows):
            continue
        position = _position_part(frames[rows[0]][i])
        if position is None:
            continue
        # (its tolerance in world units, per frame: a target beyond reach by less can be met within it)
        tolerance = np.array([_position_part(frames[k][i]).tolerance * scales[k] for k in rows])
        link = tree.link(position.link)
        chain = np.flatnonzero(tree.ancestors[link])
        chains[c], explained[c] = set(chain.tolist()), set()
        if not len(chain):
            hints.append(f"{label}: no bone above it is free to move (locked, or nothing between it and the root)")
            explained[c] = set(rows.tolist())
            continue
        if not tree._rotational[chain].all():  # (a variable of the chain translates: its reach is not a length,
            # but from another goal's point above it, held by its own goal, it may be)
            pair = _pair_reach(tree, frames, rows, i, position, link, anchors, scales)
            if pair is not None and (pair[2] > tolerance).any():
                other = next((repr(lb) for (j, f), lb in zip(columns, labels) if j == pair[0] and f == "error"),
                             f"the goal on {tree.link_names[pair[1]]!r}")
                hints.append(f"{label}: its target and the target of {other} were further apart than the bones "
                             f"between them reach on {int((pair[2] > tolerance).sum())} of the "
                             f"{counted(len(rows), 'frame')} it was not met, by up to {_mm(pair[2].max())} (the two "
                             "cannot both be met there: the character's proportions differ from the targets'?)")
                explained[c] = set(rows[pair[2] > tolerance].tolist())
                other_column = next((n for n, (j, f) in enumerate(columns) if j == pair[0] and f == "error"), None)
                if other_column is not None:  # (the other goal's miss there: told by this sentence)
                    by_pair.append((other_column, explained[c]))
            continue
        movers = set(tree.var_link[chain].tolist())
        base = next(b for b in roots if b in movers)
        path = _links_between(tree, link, base)  # (none for a goal on the base itself: it turns about its head)
        offset = float(np.linalg.norm(position.offset))
        beyond, near = np.zeros(len(rows)), np.zeros(len(rows))
        for n, k in enumerate(rows):
            where, lengths = anchors[k]
            target = _position_part(frames[k][i]).target
            segments = np.append(lengths[path], offset)
            distance = np.linalg.norm(target - where[roots.index(base)])
            beyond[n] = (distance - segments.sum()) * scales[k]
            # (the nearest the chain folds to: the longest segment less all the others, when it is the longer)
            near[n] = (2.0 * segments.max() - segments.sum() - distance) * scales[k]
        if (beyond > tolerance).any():
            hints.append(f"{label}: its target was out of reach on {int((beyond > tolerance).sum())} of the "
                         f"{counted(len(rows), 'frame')} it was not met, up to {_mm(beyond.max())} further from "
                         f"{tree.link_names[base]!r} than the bones between them reach")
            far.add(base)
        if (near > tolerance).any():
            hints.append(f"{label}: its target was too near {tree.link_names[base]!r} on "
                         f"{int((near > tolerance).sum())} of the {counted(len(rows), 'frame')} it was not met, up "
                         f"to {_mm(near.max())} nearer than the bones between them fold (one of them is longer than "
                         "the others together: a goal on a bone's tail from its own head, or a bone that hangs from "
                         "the root)")
            far.add(base)
        amount = np.maximum(beyond, near)
        explained[c] = set(rows[amount > tolerance].tolist())
        unreached[c] = {int(k): float(a) for k, a in zip(rows, amount) if a > 0}
    for c, rows in by_pair:
        if c in explained:
            explained[c] |= rows
    hints += _shared_hints(tree, chains, explained, unreached, labels, missed, errors)
    at = np.array([a for a, _ in anchors])
    root_moves = at.size and np.ptp(at, axis=0).max() > 1e-9  # (the action moves them)
    on_root = any(root_bones is None or tree.link_names[b] in root_bones for b in far)
    if on_root and not root_moves and not any(type(m) is FreeModel for m in tree.models):
        hints.append("the root stays where it is (Free Root is off): for targets that travel with a clip, turn Free "
                     "Root on and give the hips a goal")
    return hints


def _shared_hints(tree, chains, explained, unreached, labels, missed, errors):
    """For each position goal missed on frames its own reason does not explain (reach_hints' ``explained``): on
    those frames, a goal sharing its bones whose target could not be reached, by half its miss or more
    (``unreached``, ``errors``: one out of reach by 9 mm does not pull another 112 mm off), pulled it off; else one
    sharing its bones missed there too: they may pull against each other (targets further apart than the bones
    between them allow, each reachable alone). One sentence per goal; a pair once."""
    hints, paired = [], set()

    def shared(c, d):
        bones = list(dict.fromkeys(tree.link_names[tree.var_link[v]] for v in sorted(chains[c] & chains[d])))
        return ", ".join(repr(b) for b in bones[:3]) + (f" and {len(bones) - 3} more" if len(bones) > 3 else "")

    for c in chains:
        missed_c = np.flatnonzero(missed[:, c])
        rows = set(missed_c.tolist()) - explained[c]
        if not rows or c in paired:
            continue
        pulls = []
        for d, amounts in unreached.items():
            if d != c and chains[c] & chains[d]:
                by = [k for k in rows if k in explained[d] and k in amounts and
                      (errors is None or amounts[k] >= 0.5 * errors[k, c])]
                if by:
                    pulls.append((len(by), d))
        if pulls:
            count, d = max(pulls)
            hints.append(f"{labels[c]}: on {count} of the {counted(len(missed_c), 'frame')} it was not met, the "
                         f"target of {labels[d]!r} could not be reached (its hint above), and the two goals share "
                         f"bones ({shared(c, d)}): pulled toward that target, they take this goal with them")
            continue
        together = [(rows & set(np.flatnonzero(missed[:, d]).tolist()), d) for d in chains
                    if d != c and chains[c] & chains[d]]
        frames_both, d = max(together, key=lambda t: len(t[0]), default=(set(), None))
        if frames_both:
            paired.update((c, d))
            alone = "" if frames_both & explained[d] else ", though neither target is beyond what its bones reach"
            hints.append(f"{labels[c]} and {labels[d]!r}: both not met on {counted(len(frames_both), 'frame')}"
                         f"{alone}, and they share bones ({shared(c, d)}): they may pull against each other there "
                         "(their targets further apart, or nearer, than the bones between them allow: proportions "
                         "that differ from the targets'?)")
    return hints


def limit_hints(tree_at, frames, Q, missed, goals=None, most=200):
    """Which joint limits the goals pull against on the frames that missed one: at a missed frame's answer, the
    goals' steepest descent (their summed error's, each variable scaled by its weight squared, as the solver's most
    damped step is) is taken a small way and projected onto the limits (Tree.project: box limits, swing ellipses);
    when the projection holds back a tenth of that move or more, the bones whose limited variables it holds back
    are told, with how many frames each (what a projection wraps, a ball's, a free root's, a continuous joint's
    turn, is no limit and is not counted). At a solve's answer with every goal free to go on, nothing is held
    back; a goal out of reach with the chain stretched toward it has no descent left to hold. ``tree_at(k)``: the
    tree with frame k's origins; ``frames``: per frame its objectives, of which ``goals`` (indices; default all)
    are the goals; ``Q``: per frame the answer; ``missed``: (frames,) which frames the solve left short of a goal.
    At most ``most`` of them are looked at (evenly spread). Returns sentences (none or one)."""
    from ..solvers.problem import Problem

    rows = np.flatnonzero(missed)
    if len(rows) > most:
        rows = rows[np.linspace(0, len(rows) - 1, most).round().astype(int)]
    if not len(rows):
        return []
    limited = _limited_variables(tree_at(rows[0]))  # (the structure's: the same on every frame)
    held, count = {}, 0  # bone -> frames
    for k in rows:
        tree = tree_at(k)
        problem = Problem(tree, [frames[k][i] for i in goals] if goals is not None else frames[k])
        state = problem.state(Q[k])
        step = -tree.weights ** 2 * (problem.jacobian(state).T @ problem.residual(state))
        size = np.linalg.norm(step)
        if not size > 1e-12:
            continue
        step *= 1e-3 / size  # (a thousandth of a radian or of a tree unit)
        moved = Q[k] + step
        blocked = np.where(limited, moved - tree.project(moved), 0.0)
        if not np.linalg.norm(blocked) >= 0.1 * 1e-3:
            continue
        count += 1
        for v in np.flatnonzero(np.abs(blocked) > 0.01 * 1e-3):
            held.setdefault(tree.link_names[tree.var_link[v]], set()).add(int(k))
    if not count:
        return []
    bones = sorted(held.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    named = ", ".join(f"{b!r} on {len(f)}" for b, f in bones[:4]) + (" and others" if len(bones) > 4 else "")
    return [f"joint limits: on {count} of the {counted(len(rows), 'frame')} with a goal not met looked at, the goals "
            f"pull bones past their IK limits ({named}): widen those limits, or the targets ask for a pose they do not "
            "allow"]


def _limited_variables(tree):
    """(n,) which variables a limit holds, clipped by Tree.project rather than wrapped: a limited scalar joint's
    (not a continuous or full-turn one's), a swing-twist bone's limited axes, an IK stretch; not a ball's or a free
    root's."""
    from ..solvers.joints import ScalarModel, StretchModel, SwingTwistModel

    out = np.zeros(tree.n, dtype=bool)
    for m in tree.models:
        if type(m) is ScalarModel:
            bounded = np.array([np.isfinite(j.lower) or np.isfinite(j.upper) for j in m.joints], dtype=bool)
            out[m.vars[bounded & ~m.continuous & ~m.full_turn, 0]] = True
        elif type(m) is SwingTwistModel:
            for a, k in m.col.items():
                out[m.vars[m.limited[:, a], k]] = True
        elif type(m) is StretchModel:
            out[m.vars[:, 0]] = True
    return out


def _links_between(tree, link, above):
    """The links from ``link`` up to ``above``'s child: those whose joint offsets lie between the two (above's
    own excluded); [] when ``above`` is not above ``link`` (or is it)."""
    path = []
    while link >= 0 and link != above:
        path.append(link)
        link = int(tree.parent[link])
    return path if link == above else []


def _mm(length):
    """A length in world units as millimetres, whole from 10 mm up."""
    mm = length * 1e3
    return f"{mm:.{0 if mm >= 10 else 1}f} mm"


def _pair_reach(tree, frames, rows, i, position, link, anchors, scales):
    """A missed position goal (objective i on ``link``) against the nearest position goal above it on its chain (a
    free root's hips goal above a foot's): (that goal's objective index, its link, per missed frame how much further
    apart their targets were than the bones between their points reach, in world units), when no length between
    them can change (only turns: a free root's own translation moves both points alike); else None."""
    from ..solvers.joints import StretchModel

    stretched = {int(f) for m in tree.models if type(m) is StretchModel for f in m.frames}
    first = frames[rows[0]]
    best = None
    for j, objective in enumerate(first):
        other = _position_part(objective) if j != i else None
        if other is None:
            continue
        a = tree.link(other.link)
        path = _links_between(tree, link, a)
        if not path or stretched.intersection(path + [a]) or not tree._rotational[np.isin(tree.var_link, path)].all():
            continue  # (not above it, or a length between them can change)
        if best is None or len(path) < len(best[2]):
            best = (j, a, path, other)
    if best is None:
        return None
    j, a, path, other = best
    reach0 = float(np.linalg.norm(position.offset)) + float(np.linalg.norm(other.offset))
    beyond = np.zeros(len(rows))
    for n, k in enumerate(rows):
        here, there = _position_part(frames[k][i]), _position_part(frames[k][j])
        if here is None or there is None:
            return None
        lengths = anchors[k][1]
        beyond[n] = (np.linalg.norm(here.target - there.target) - lengths[path].sum() - reach0) * scales[k]
    return j, a, beyond


def root_bones(obj):
    """The names of an armature's bones without a parent (reach_hints' ``root_bones``: what Free Root frees)."""
    return {b.name for b in obj.data.bones if b.parent is None}


def frame_anchors(tree):
    """reach_hints' anchors for a tree with a frame's origins: where its chains start (chain_roots) and its joint
    offsets' lengths (keyed bones move, and lengthen chains)."""
    return fixed_positions(tree, chain_roots(tree)), np.linalg.norm(tree.origin[:, :3, 3], axis=1)
