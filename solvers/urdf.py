# SPDX-License-Identifier: GPL-3.0-or-later
"""URDF reader: joints, origins (xyz, rpy), axes, limits, continuous and fixed joints."""

import os
import xml.etree.ElementTree as ET

import numpy as np

from .joints import FreeJoint, Joint
from .rotations import rpy_matrix


def _floats(text, default, count=3):
    if text is None:
        return np.array(default, dtype=float)
    try:
        values = [float(v) for v in text.replace(",", " ").split()]  # "0, 0, 0.5" is seen in the wild
    except ValueError:
        raise ValueError(f"expected {count} numbers, got {text!r}") from None
    if len(values) != count:
        raise ValueError(f"expected {count} numbers, got {text!r}")
    return np.array(values)


def _origin(elem):
    T = np.eye(4)
    o = elem.find("origin")
    if o is not None:
        T[:3, :3] = rpy_matrix(_floats(o.get("rpy"), (0, 0, 0)))
        T[:3, 3] = _floats(o.get("xyz"), (0, 0, 0))
    return T


def parse_urdf(path_or_xml):
    """Return the list of joints of a URDF given as a file path or an XML string."""
    text = str(path_or_xml)
    stripped = text.lstrip("\ufeff \t\r\n")  # a byte-order mark or blank lines before the XML
    if stripped.startswith("<"):
        root = ET.fromstring(stripped)
    elif "\n" in text or not stripped:
        raise ValueError("not a URDF: neither XML text (it must start with '<') nor a file path")
    else:
        if not os.path.exists(text):
            raise FileNotFoundError(f"URDF file not found: {text}")
        root = ET.parse(text).getroot()
    if root.tag != "robot":
        raise ValueError(f"not a URDF document: root element is <{root.tag}>, expected <robot>")
    joints = []
    # Only <robot>'s own <joint> children describe the kinematics: <joint> elements also appear inside
    # <transmission>, <gazebo> and plugin blocks, with other meanings and no links.
    for j in root.findall("joint"):
        name, kind = j.get("name"), j.get("type")
        parent_el, child_el = j.find("parent"), j.find("child")
        if parent_el is None or child_el is None or not parent_el.get("link") or not child_el.get("link"):
            raise ValueError(f"joint {name!r}: a URDF joint needs <parent link=...> and <child link=...>")
        parent, child = parent_el.get("link"), child_el.get("link")
        try:
            joints.append(_joint(j, name, kind, parent, child))
        except ValueError as e:
            raise ValueError(f"joint {name!r}: {e}") from None
    if not joints:
        raise ValueError("the URDF has no joints")
    return joints


def _joint(j, name, kind, parent, child):
    origin = _origin(j)
    if kind == "floating":
        return FreeJoint(name, parent, child, origin)
    if kind not in ("revolute", "continuous", "prismatic", "fixed"):
        # Held fixed so the rest of the robot loads; Tree.from_urdf refuses it when it is in the tree asked for.
        return Joint(name, "fixed", parent, child, origin, unsupported=str(kind))
    axis_el = j.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, (1, 0, 0))
    if kind != "fixed":
        norm = np.linalg.norm(axis)
        if not norm > 1e-12:
            raise ValueError("its axis is zero")
        axis = axis / norm  # descriptions in the wild carry axes like "0 0.7 0.7"
    lower, upper = -np.inf, np.inf
    limit = j.find("limit")
    if kind in ("revolute", "prismatic") and limit is not None:
        lower = float(limit.get("lower", 0.0))
        upper = float(limit.get("upper", 0.0))
        if lower > upper:
            raise ValueError(f"lower limit {lower} is above upper limit {upper}")
    mimic = j.find("mimic")
    if mimic is not None and kind != "fixed":
        mimic = (mimic.get("joint"), float(mimic.get("multiplier", 1.0)), float(mimic.get("offset", 0.0)))
    else:
        mimic = None
    return Joint(name, kind, parent, child, origin, tuple(axis), lower, upper, mimic)
