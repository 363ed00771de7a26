# SPDX-License-Identifier: GPL-3.0-or-later
"""Humanoid armatures built bone by bone the way other tools export them (dev only, needs bpy): any naming
convention, T or A rest pose, adult or chibi proportions, metres or centimetres, feet hanging from the root
(a game rig whose leg IK was lost on export), arms with or without hands and fingers, twist segments.

``build(bpy, convention, **options)`` returns (armature object, {role: bone name}): the roles are what a
mapping must find.
"""

import math

import numpy as np

SIDE_TOKENS = {  # convention -> (left token, right token) put where "{S}" is
    "mixamo": ("Left", "Right"), "unreal": ("l", "r"), "biped": ("L", "R"), "cc": ("L", "R"), "vrm": ("L", "R"),
    "daz": ("l", "r"), "plain": ("L", "R"), "rigify": ("L", "R"), "dashed": ("l", "r"), "anonymous": ("", ""),
}
NAMES = {  # role -> name pattern
    "mixamo": dict(pelvis="mixamorig:Hips", spine="mixamorig:Spine", chest="mixamorig:Spine1", neck="mixamorig:Neck",
                   head="mixamorig:Head", thigh="mixamorig:{S}UpLeg", shin="mixamorig:{S}Leg",
                   foot="mixamorig:{S}Foot", toe="mixamorig:{S}ToeBase", shoulder="mixamorig:{S}Shoulder",
                   upper_arm="mixamorig:{S}Arm", forearm="mixamorig:{S}ForeArm", hand="mixamorig:{S}Hand",
                   finger="mixamorig:{S}Hand{F}{N}"),
    "unreal": dict(pelvis="pelvis", spine="spine_01", chest="spine_02", neck="neck_01", head="head", thigh="thigh_{S}",
                   shin="calf_{S}", foot="foot_{S}", toe="ball_{S}", shoulder="clavicle_{S}", upper_arm="upperarm_{S}",
                   forearm="lowerarm_{S}", hand="hand_{S}", finger="{f}_0{N}_{S}"),
    "biped": dict(pelvis="Bip01 Pelvis", spine="Bip01 Spine", chest="Bip01 Spine1", neck="Bip01 Neck",
                  head="Bip01 Head", thigh="Bip01 {S} Thigh", shin="Bip01 {S} Calf", foot="Bip01 {S} Foot",
                  toe="Bip01 {S} Toe0", shoulder="Bip01 {S} Clavicle", upper_arm="Bip01 {S} UpperArm",
                  forearm="Bip01 {S} Forearm", hand="Bip01 {S} Hand", finger="Bip01 {S} Finger{K}{N}"),
    "cc": dict(pelvis="CC_Base_Hip", spine="CC_Base_Waist", chest="CC_Base_Spine02", neck="CC_Base_NeckTwist01",
               head="CC_Base_Head", thigh="CC_Base_{S}_Thigh", shin="CC_Base_{S}_Calf", foot="CC_Base_{S}_Foot",
               toe="CC_Base_{S}_ToeBase", shoulder="CC_Base_{S}_Clavicle", upper_arm="CC_Base_{S}_Upperarm",
               forearm="CC_Base_{S}_Forearm", hand="CC_Base_{S}_Hand", finger="CC_Base_{S}_{F}{N}"),
    "vrm": dict(pelvis="J_Bip_C_Hips", spine="J_Bip_C_Spine", chest="J_Bip_C_Chest", neck="J_Bip_C_Neck",
                head="J_Bip_C_Head", thigh="J_Bip_{S}_UpperLeg", shin="J_Bip_{S}_LowerLeg", foot="J_Bip_{S}_Foot",
                toe="J_Bip_{S}_ToeBase", shoulder="J_Bip_{S}_Shoulder", upper_arm="J_Bip_{S}_UpperArm",
                forearm="J_Bip_{S}_LowerArm", hand="J_Bip_{S}_Hand", finger="J_Bip_{S}_{F}{N}"),
    "daz": dict(pelvis="hip", spine="abdomenLower", chest="chestUpper", neck="neckLower", head="head",
                thigh="{S}ThighBend", shin="{S}Shin", foot="{S}Foot", toe="{S}Toe", shoulder="{S}Collar",
                upper_arm="{S}ShldrBend", forearm="{S}ForearmBend", hand="{S}Hand", finger="{S}{F}{N}"),
    "plain": dict(pelvis="Hips", spine="Spine", chest="Chest", neck="Neck", head="Head", thigh="UpperLeg{S}",
                  shin="LowerLeg{S}", foot="Foot{S}", toe="Toes{S}", shoulder="Shoulder{S}", upper_arm="UpperArm{S}",
                  forearm="LowerArm{S}", hand="Hand{S}", finger="{F}{N}{S}"),
    "rigify": dict(pelvis="spine", spine="spine.001", chest="spine.002", neck="spine.004", head="spine.006",
                   thigh="thigh.{S}", shin="shin.{S}", foot="foot.{S}", toe="toe.{S}", shoulder="shoulder.{S}",
                   upper_arm="upper_arm.{S}", forearm="forearm.{S}", hand="hand.{S}", finger="f_{f}.0{N}.{S}"),
    "dashed": dict(pelvis="hips", spine="spine", chest="chest", neck="neck", head="head", thigh="{S}-thigh",
                   shin="{S}-shin", foot="{S}-foot", toe="{S}-toes", shoulder="{S}-clavicle", upper_arm="{S}-upperarm",
                   forearm="{S}-forearm", hand="{S}-hand", finger="{S}-{f}{N}"),
}
FINGERS = ("Thumb", "Index", "Middle", "Ring", "Pinky")


def _joints(height, proportions, rest):
    """{joint: (x, y, z)} of the left side and the middle, the character facing -Y (its left +X), standing on z=0."""
    legs = {"adult": 0.53, "chibi": 0.36, "long": 0.6}[proportions]  # hip height / height
    head = {"adult": 0.13, "chibi": 0.38, "long": 0.12}[proportions]  # head's share of the height
    hip = legs * height
    neck_top = height * (1 - head)
    chest = hip + 0.62 * (neck_top - hip)
    arm = 0.44 * height * (legs / 0.53) ** 0.5 if proportions == "chibi" else 0.44 * height
    shoulder_x = 0.10 * height if proportions != "chibi" else 0.12 * height
    ang = math.radians(0.0 if rest == "T" else 45.0)
    d = np.array([math.cos(ang), 0.0, -math.sin(ang)])
    sh = np.array([shoulder_x, 0.0, chest + 0.06 * height])
    ankle_z = 0.045 * height * (1.6 if proportions == "chibi" else 1.0)
    foot_len = 0.15 * height * (1.3 if proportions == "chibi" else 1.0)
    J = {"pelvis": (0, 0, hip), "spine": (0, 0, hip + 0.35 * (chest - hip)), "chest": (0, 0, chest),
         "neck": (0, 0, neck_top - 0.04 * height), "head": (0, 0, neck_top), "head_top": (0, 0, height),
         "hip": (0.09 * height * (0.8 if proportions == "chibi" else 1.0), 0, hip - 0.03 * height),
         "clav": (0.02 * height, 0, chest + 0.05 * height), "shoulder": tuple(sh),
         "elbow": tuple(sh + d * arm * 0.45), "wrist": tuple(sh + d * arm * 0.85), "hand_end": tuple(sh + d * arm)}
    hx = J["hip"][0]
    J["knee"] = (hx, -0.01 * height, ankle_z + 0.52 * (J["hip"][2] - ankle_z))
    J["ankle"] = (hx, 0.0, ankle_z)
    J["ball"] = (hx, -0.72 * foot_len, 0.01 * height)
    J["toe"] = (hx, -foot_len, 0.0)
    return {k: np.array(v, float) for k, v in J.items()}, d


def build(bpy, convention="plain", rest="T", proportions="adult", height=1.75, centimetres=False, hands=True,
          fingers=True, toes=True, feet_on_root=False, twist=False, specks=False, name="Character"):
    """An armature object in the scene (facing -Y, its left +X) and the roles a mapping must find. ``specks``:
    every bone a speck (a thousandth of the height) pointing where it did, as some glTF files' bones are: only the
    heads are joints."""
    unit = 100.0 if centimetres else 1.0
    J, arm_dir = _joints(height * unit, proportions, rest)
    names = dict(NAMES.get(convention, NAMES["plain"]))
    counter = iter(range(1000))
    anonymous = convention == "anonymous"

    def nm(role, side="", f="", n=""):
        if anonymous:
            k = next(counter)
            return "Bone" if k == 0 else f"Bone.{k:03d}"
        left, right = SIDE_TOKENS.get(convention, ("L", "R"))
        token = {"left": left, "right": right}.get(side, "")
        return names[role].format(S=token, F=f.capitalize(), f=f.lower(), N=n, K=FINGERS.index(f.capitalize())
                                  if f else "")

    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    if centimetres:
        obj.scale = (0.01, 0.01, 0.01)
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    eb = data.edit_bones
    roles = {}

    def bone(label, head, tail, parent=None, role=None):
        b = eb.new(label)
        b.head, b.tail = tuple(head), tuple(tail)
        if parent is not None:
            b.parent = parent
            b.use_connect = bool(np.allclose(parent.tail, head))
        if role:
            roles[role] = b.name
        return b

    root = bone("Root" if not anonymous else nm("root"), (0, 0, 0), (0, 0.1 * height * unit, 0)) if feet_on_root \
        else None
    pelvis = bone(nm("pelvis"), J["pelvis"], J["spine"], root, "pelvis")
    spine = bone(nm("spine"), J["spine"], J["chest"], pelvis)
    chest = bone(nm("chest"), J["chest"], J["neck"], spine, "chest")
    neck = bone(nm("neck"), J["neck"], J["head"], chest, "neck")
    bone(nm("head"), J["head"], J["head_top"], neck, "head")
    for side, sx in (("left", 1.0), ("right", -1.0)):
        m = lambda p: p * np.array([sx, 1.0, 1.0])  # noqa: E731
        if twist:  # the thigh in two segments, as a generated rig's deform bones
            mid = 0.5 * (m(J["hip"]) + m(J["knee"]))
            thigh = bone(nm("thigh", side), m(J["hip"]), mid, pelvis, f"{side} thigh")
            top = bone(nm("thigh", side) + ".001", mid, m(J["knee"]), thigh)
        else:
            top = bone(nm("thigh", side), m(J["hip"]), m(J["knee"]), pelvis, f"{side} thigh")
        shin = bone(nm("shin", side), m(J["knee"]), m(J["ankle"]), top, f"{side} shin")
        foot_parent = root if feet_on_root else shin
        foot = bone(nm("foot", side), m(J["ankle"]), m(J["ball"]) if toes else m(J["toe"]), foot_parent,
                    f"{side} foot")
        if toes:
            bone(nm("toe", side), m(J["ball"]), m(J["toe"]), foot, f"{side} toe")
        if feet_on_root:
            pole = bone(f"PoleTarget{('L', 'R')[sx < 0]}", m(J["knee"]) + np.array([0, -0.4 * height * unit, 0]),
                        m(J["knee"]) + np.array([0, -0.45 * height * unit, 0]), root)
            pole.use_deform = False
        clav = bone(nm("shoulder", side), m(J["clav"]), m(J["shoulder"]), chest, f"{side} shoulder")
        upper = bone(nm("upper_arm", side), m(J["shoulder"]), m(J["elbow"]), clav, f"{side} upper_arm")
        fore = bone(nm("forearm", side), m(J["elbow"]), m(J["wrist"]), upper, f"{side} forearm")
        if not hands:
            continue
        hand = bone(nm("hand", side), m(J["wrist"]), m(J["hand_end"]), fore, f"{side} hand")
        if not fingers:
            continue
        span = np.linalg.norm(J["hand_end"] - J["wrist"])
        across = np.array([0.0, 1.0, 0.0])
        for k, f in enumerate(FINGERS):
            base = m(J["hand_end"] + across * span * (k - 2) * 0.25 * (-1))
            prev = hand
            for n in (1, 2, 3):
                d = m(arm_dir) * span * 0.3
                prev = bone(nm("finger", side, f, str(n)), base + d * (n - 1), base + d * n, prev)
    if specks:
        for b in eb:
            b.use_connect = False
        for b in eb:
            b.length = 1e-3 * height * unit
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj, roles

