# SPDX-License-Identifier: GPL-3.0-or-later
"""Humanoid skeletons mapped to roles from hierarchy and names, on the real characters and clips of data/:
CMU BVH, the Boxing_Toes BVH convention, Rigify's metarig, mannequiny (glTF), Quaternius (FBX), Mixamo names;
what is not a humanoid is refused with what is missing."""

import itertools

import pytest

bpy = pytest.importorskip("bpy")

from fullbody_ik.rig import RigError  # noqa: E402
from fullbody_ik.rig.humanoid import map_humanoid  # noqa: E402
from fullbody_ik.tools import characters, scenes  # noqa: E402

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


def test_a_skeleton_with_hand_bones_named_otherwise_is_mapped_by_its_structure():
    obj = load("cmu")
    for b in obj.data.bones:  # no bone named like a hand: the arms still end in hands, found from the fingers
        b.name = b.name.replace("Hand", "Paw")
    h = map_humanoid(obj)
    assert (h.roles["left hand"], h.roles["right forearm"]) == ("LeftPaw", "RightForeArm")


def test_fingers_hanging_from_a_short_bone_named_a_forearm_leave_the_arm_without_a_hand():
    """Quaternius' Astronaut Finn: Shoulder, UpperArm, LowerArm (0.63 of the upper arm), fingers from the
    LowerArm's end and no hand bone. The bone the fingers hang from was taken for the hand and every arm bone
    above it one role too high (its shoulder the upper arm); named a forearm, it is the forearm."""
    scenes.fresh(bpy)
    obj, roles = characters.build(bpy, "plain")
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = obj.data.edit_bones
    for s in ("L", "R"):
        upper, fore, hand = eb[f"UpperArm{s}"], eb[f"LowerArm{s}"], eb[f"Hand{s}"]
        fore.tail = fore.head + (fore.tail - fore.head) * (0.63 * upper.length / fore.length)
        shift = fore.tail - hand.tail  # (the fingers start where the forearm ends)
        for finger in list(hand.children):
            for b in [finger, *finger.children_recursive]:
                b.head, b.tail = b.head + shift, b.tail + shift
            finger.use_connect = False
            finger.parent = fore
        eb.remove(hand)
    bpy.ops.object.mode_set(mode="OBJECT")
    h = map_humanoid(obj)
    for s, token in (("left", "L"), ("right", "R")):
        assert (h.roles.get(f"{s} shoulder"), h.roles[f"{s} upper_arm"], h.roles[f"{s} forearm"],
                h.roles.get(f"{s} hand")) == (f"Shoulder{token}", f"UpperArm{token}", f"LowerArm{token}", None)


# Naming conventions, rest poses, proportions, units, feet hanging from the root, arms with no hands, twist segments:
# built bone by bone as other tools export them; each must map to the roles it was built with.
VARIANTS = [dict(convention=c, rest=r, proportions=p, centimetres=cm, hands=hands, fingers=hands and fingers,
                 toes=toes, feet_on_root=root, twist=twist)
            for k, (c, r, p, cm, hands, fingers, toes, root, twist) in enumerate(itertools.product(
                list(characters.NAMES) + ["anonymous"], ("T", "A"), ("adult", "chibi", "long"), (False, True),
                (True, False), (True, False), (True, False), (False, True), (False, True)))
            if k % 37 == 0]  # (a spread sample: every convention, every option both ways)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(str(x) for x in v.values()))
def test_humanoids_of_any_naming_pose_and_proportions_are_mapped_by_structure(variant):
    scenes.fresh(bpy)
    obj, roles = characters.build(bpy, **variant)
    h = map_humanoid(obj)
    assert {r: h.roles.get(r) for r in roles} == roles
    assert not set(h.roles) - set(roles)  # nothing else taken for a role (a pole target, a finger)


def test_a_mascot_with_its_feet_ik_on_the_root_and_arms_named_as_duplicates_is_mapped():
    scenes.fresh(bpy)  # (as Godot's mascot: each foot and its IK control on the root at the ankle, deforming)
    obj, roles = characters.build(bpy, "plain", feet_on_root=True, toes=False, fingers=False)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = obj.data.edit_bones
    for s in "LR":
        foot = eb[f"Foot{s}"]
        ik = eb.new(f"FootIK{s}")
        ik.head, ik.tail, ik.parent = foot.head, foot.head + (foot.tail - foot.head) * 0.5, foot.parent
        extra = eb.new(f"Foot{s}.001")  # (a second copy, named as Blender names duplicates)
        extra.head, extra.tail, extra.parent = foot.head, foot.tail, foot.parent
    renamed = {}
    for side, s in (("left", "L"), ("right", "R")):
        for k, role in enumerate(("upper_arm", "forearm", "hand")):
            renamed[roles[f"{side} {role}"]] = f"hand.{s}" + (f".{k:03d}" if k else "")
    for old, new in renamed.items():
        eb[old].name = new
    bpy.ops.object.mode_set(mode="OBJECT")
    h = map_humanoid(obj)
    expected = {r: renamed.get(b, b) for r, b in roles.items()}
    assert {r: h.roles.get(r) for r in expected if "foot" not in r} == \
        {r: b for r, b in expected.items() if "foot" not in r}
    assert {h.roles["left foot"], h.roles["right foot"]} <= {"FootL", "FootR", "FootL.001", "FootR.001"}
    assert h.roles["left foot"].startswith("FootL")


def test_what_is_not_a_humanoid_is_refused_saying_what_was_looked_at():
    scenes.fresh(bpy)
    obj, _ = characters.build(bpy, "plain")
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = obj.data.edit_bones
    for name in ("UpperLegR", "LowerLegR", "FootR", "ToesR"):  # one leg
        eb.remove(eb[name])
    bpy.ops.object.mode_set(mode="OBJECT")
    with pytest.raises(RigError, match=r"not a humanoid this can map: .*legs.*looked at.*'FootL'"):
        map_humanoid(obj)


def test_legs_with_no_foot_bones_are_refused_by_name_not_a_traceback():
    scenes.fresh(bpy)
    obj, _ = characters.build(bpy, "plain", toes=False)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    for name in ("FootL", "FootR"):  # legs that end at the shin
        obj.data.edit_bones.remove(obj.data.edit_bones[name])
    bpy.ops.object.mode_set(mode="OBJECT")
    with pytest.raises(RigError, match=r"not a humanoid this can map: .*no left foot"):
        map_humanoid(obj)
