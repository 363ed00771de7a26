# SPDX-License-Identifier: GPL-3.0-or-later
"""The fingers of a hand: its finger chains, each told (thumb, index, middle, ring, little) and cut into its
segments, so that two hands' fingers can be paired segment by segment.

A finger is a chain of bones hanging from the hand (through a palm bone that several fingers share, or a
metacarpal of its own: both left out). Its segments are its phalanges (at most three); a leaf after them (an
exporter's end bone: ``Index4``, ``_end``) only marks where the last one ends. The thumb is the chain named so,
else the one whose base is clearly nearest the wrist; the others are told by their names, else by their order
across the hand from the thumb. A hand with fewer than three chains (a mitten, a fist) or whose thumb cannot be told
has no fingers told (they are left as they are).
"""

import re

import numpy as np

from .structure import END, NOT_LIMB

FINGERS = ("thumb", "index", "middle", "ring", "little")
FINGER_WORDS = {"thumb": re.compile(r"thumb|pollex", re.I), "index": re.compile(r"index|point|fore", re.I),
                "middle": re.compile(r"middle|mid", re.I), "ring": re.compile(r"ring", re.I),
                "little": re.compile(r"pinky|little|small|pinkie", re.I)}
NUMBERED = re.compile(r"finger([0-4])", re.I)  # 3ds Max Biped: Finger0 the thumb ... Finger4 the little finger
METACARPAL = re.compile(r"metacarp|carpal|palm|meta", re.I)
PHALANGES = 3


class Finger:
    """A finger's segments (bone names, knuckle outward) and ``end``: the bone whose head is where the last
    segment ends (an exporter's leaf), or None."""

    def __init__(self, segments, end=None):
        self.segments, self.end = segments, end

    def __repr__(self):
        return f"Finger({self.segments}, end={self.end!r})"


def _kept(hand):
    """Whether a bone under ``hand`` is part of its fingers: a deform hand's deform bones (a rig's finger controls
    and helpers are not), and nothing named as a control."""
    return lambda b: (b.use_deform or not hand.use_deform) and not NOT_LIMB.search(b.name)


def _chains(bone, kept):
    """Chains of bones from ``bone`` down: one chain while each bone has one kept child; where several branch, the
    chain so far (a palm shared by the fingers) is left out and each branch is a chain of its own."""
    chain = [bone]
    while True:
        kids = [c for c in chain[-1].children if kept(c)]
        if len(kids) == 1:
            chain.append(kids[0])
            continue
        return [c for k in kids for c in _chains(k, kept)] if kids else [chain]


def _finger(chain):
    """A Finger from a chain of bones: an end leaf split off (named so, or a fourth bone: the tip's marker), a
    metacarpal left out."""
    end = None
    if len(chain) > 1 and END.search(chain[-1].name):
        end = chain.pop()
    if len(chain) > PHALANGES:
        end = chain.pop()
    while len(chain) > 1 and (METACARPAL.search(chain[0].name) or len(chain) > PHALANGES):
        chain.pop(0)
    return Finger([b.name for b in chain], end.name if end is not None else None)


def _named(finger):
    """The finger a chain's names say it is, or None."""
    kind = next((k for k, w in FINGER_WORDS.items() if any(w.search(s) for s in finger.segments)), None)
    numbered = NUMBERED.search(finger.segments[0])
    return kind or (FINGERS[int(numbered.group(1))] if numbered else None)


def hand_fingers(bones, hand):
    """{finger: Finger} of the hand bone named ``hand`` in ``bones`` (an armature's bones; rest positions in
    armature space), only the fingers that can be told; {} when there are none or the thumb cannot be told."""
    b = bones[hand]
    kept = _kept(b)
    chains = [c for k in b.children if kept(k) for c in _chains(k, kept)]
    chains = [c for c in chains if not (len(c) == 1 and END.search(c[0].name))]
    fingers = [_finger(list(c)) for c in chains]
    if len(fingers) < 3:  # a mitten or a fist (CMU's hand: a thumb and one block): no fingers to tell apart
        return {}
    base = lambda f: np.array(bones[f.segments[0]].head_local)  # noqa: E731
    named = [_named(f) for f in fingers]
    thumb = next((i for i, k in enumerate(named) if k == "thumb"), None)
    if thumb is None:
        wrist = np.array(b.head_local)
        d = np.array([np.linalg.norm(base(f) - wrist) for f in fingers])
        near = int(np.argmin(d))
        others = np.delete(d, near)
        if d[near] < 0.8 * float(np.median(others)):
            thumb = near
    if thumb is None:
        return {}
    out = {"thumb": fingers[thumb]}
    rest = [i for i in range(len(fingers)) if i != thumb]
    kinds = [named[i] for i in rest if named[i] in FINGERS[1:]]
    if len(set(kinds)) == len(kinds) and len(kinds) >= min(len(rest), 2):  # told by names (a chain named as no
        # finger beside them is an accessory: a sleeve, a ring on the finger)
        out.update({named[i]: fingers[i] for i in rest if named[i] in FINGERS[1:]})
        return out
    # by their order across the hand from the thumb: the index nearest it, the little finger farthest
    rest.sort(key=lambda i: float(np.linalg.norm(base(fingers[i]) - base(fingers[thumb]))))
    n = len(rest)
    for k, i in enumerate(rest):
        kind = FINGERS[1 + (round(k * 3 / (n - 1)) if n > 1 else 0)]
        out.setdefault(kind, fingers[i])
    return out


def palm(bones, hand):
    """The bone that turns the hand named ``hand`` (in ``bones``): the hand itself, unless it has no length of its
    own (a mocap wrist joint: CMU's LeftHand, whose finger block and thumb both start at its head) and one chain
    that is not the thumb starts there and carries the fingers (CMU's LeftFingerBase): then that bone, whose
    rotation is the palm's (a wrist bent in the clip is bent there)."""
    b = bones[hand]
    kept = _kept(b)
    kids = [c for c in b.children if kept(c)]
    wrist = np.array(b.head_local)
    reach = max((float(np.linalg.norm(np.array(d.head_local) - wrist)) for d in b.children_recursive if kept(d)),
                default=0.0)
    if not kids or reach <= 0.0 or any(np.linalg.norm(np.array(c.head_local) - wrist) > 0.05 * reach for c in kids):
        return hand
    blocks = [c for c in kids if c.children and not FINGER_WORDS["thumb"].search(c.name)]
    return blocks[0].name if len(blocks) == 1 else hand


def finger_pairs(source_bones, source_hand, target_bones, target_hand, side):
    """[(role, source bone, target bone)] of the fingers both hands have ("left index 1", ...): the target's
    segments each paired with the source's at the same place along the finger (fractions of its segments)."""
    fs, ft = hand_fingers(source_bones, source_hand), hand_fingers(target_bones, target_hand)
    out = []
    for kind in FINGERS:
        if kind not in fs or kind not in ft:
            continue
        ss, ts = fs[kind].segments, ft[kind].segments
        for i, name in enumerate(ts):
            j = min(range(len(ss)), key=lambda j: abs((j + 1) / (len(ss) + 1) - (i + 1) / (len(ts) + 1)))
            out.append((f"{side} {kind} {i + 1}", ss[j], name))
    return out


def finger_next_joint(fingers, bone):
    """The bone whose head is where a finger segment ends (the next segment, or the finger's end leaf), among a
    hand's ``fingers`` (hand_fingers), or None when the segment is a finger's last with no leaf after it (its tail
    may be an importer's guess)."""
    for finger in fingers.values():
        if bone in finger.segments:
            k = finger.segments.index(bone)
            return finger.segments[k + 1] if k + 1 < len(finger.segments) else finger.end
    return None
