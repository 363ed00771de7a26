# SPDX-License-Identifier: GPL-3.0-or-later
"""Humanoid skeletons mapped to roles from hierarchy and names, on the real characters and clips of data/:
CMU BVH, the Boxing_Toes BVH convention, Rigify's metarig, mannequiny (glTF), Quaternius (FBX), Mixamo names;
what is not a humanoid is refused with what is missing."""

import pytest

bpy = pytest.importorskip("bpy")

from fullbody_ik.rig import RigError  # noqa: E402
from fullbody_ik.rig.humanoid import map_humanoid  # noqa: E402
from fullbody_ik.tools import scenes  # noqa: E402

LIMBS = ("thigh", "shin", "foot", "shoulder", "upper_arm", "forearm", "hand")


pytestmark = pytest.mark.usefixtures("unregistered")


def load(kind):
    scenes.fresh(bpy)
    if kind == "cmu":
        return scenes.import_cmu(bpy, "02_01")[0]
    if kind == "boxing":
        return scenes.import_boxing(bpy)[0]
    if kind == "metarig":
        return scenes.metarig(bpy)
    if kind == "mannequiny":
        return scenes.import_mannequiny(bpy)[0]
    if kind == "quaternius":
        return scenes.import_quaternius(bpy)[0]
    obj = scenes.import_cmu(bpy, "02_01")[0]  # mixamo: CMU's skeleton under Mixamo's names
    for b in obj.data.bones:
        b.name = "mixamorig:" + b.name
    return obj


EXPECTED = {  # pelvis, chest, head, left (thigh, shin, foot, shoulder, upper arm, forearm, hand)
    "cmu": ("Hips", "Spine1", "Head", ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftShoulder", "LeftArm", "LeftForeArm",
                                       "LeftHand")),
    "boxing": ("Hips", "Chest", "Head", ("LeftHip", "LeftKnee", "LeftAnkle", "LeftCollar", "LeftShoulder",
                                         "LeftElbow", "LeftWrist")),
    "metarig": ("spine", "spine.003", "spine.006", ("thigh.L", "shin.L", "foot.L", "shoulder.L", "upper_arm.L",
                                                     "forearm.L", "hand.L")),
    "mannequiny": ("pelvis", "spine_02", "head", ("thigh.l", "calf.l", "foot.l", "clavicle.l", "upperarm.l",
                                                  "lowerarm.l", "hand.l")),
    "quaternius": ("Body", "Torso", "Head", ("UpperLeg.L", "LowerLeg.L", "Foot.L", "Shoulder.L", "UpperArm.L",
                                             "LowerArm.L", "Palm.L")),
    "mixamo": ("mixamorig:Hips", "mixamorig:Spine1", "mixamorig:Head",
               tuple(f"mixamorig:{n}" for n in ("LeftUpLeg", "LeftLeg", "LeftFoot", "LeftShoulder", "LeftArm",
                                                "LeftForeArm", "LeftHand"))),
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_humanoids_are_mapped_from_hierarchy_and_names(kind):
    obj = load(kind)
    h = map_humanoid(obj)
    pelvis, chest, head, left = EXPECTED[kind]
    assert (h.roles["pelvis"], h.roles["chest"], h.roles["head"]) == (pelvis, chest, head)
    assert tuple(h.roles[f"left {r}"] for r in LIMBS) == left
    right = tuple(h.roles[f"right {r}"] for r in LIMBS)  # the mirror, found the same way
    assert all(b != a for a, b in zip(left, right)) and len(set(right)) == len(LIMBS)
    assert h.spine[-1] == chest and pelvis not in h.spine
    assert 0.5 < h.hip_height(obj) < 3.0


def test_what_is_not_a_humanoid_is_refused_with_what_is_missing():
    obj = load("cmu")
    for b in obj.data.bones:  # a character without hands (its hand bones renamed away)
        b.name = b.name.replace("Hand", "Paw")
    with pytest.raises(RigError, match="not a humanoid.*no left hand or right hand"):
        map_humanoid(obj)
