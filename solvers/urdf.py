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
    values = [float(v) for v in text.split()]
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
    if text.lstrip().startswith("<"):
        root = ET.fromstring(text)
    else:
        if not os.path.exists(text):
            raise FileNotFoundError(f"URDF file not found: {text}")
        root = ET.parse(text).getroot()
    if root.tag != "robot":
        raise ValueError(f"not a URDF document: root element is <{root.tag}>, expected <robot>")
    joints = []
    for j in root.iter("joint"):
        if j.find("parent") is None or j.find("child") is None:
            continue  # e.g. <joint> elements inside <transmission>
        name, kind = j.get("name"), j.get("type")
        parent, child = j.find("parent").get("link"), j.find("child").get("link")
        origin = _origin(j)
        if kind == "floating":
            joints.append(FreeJoint(name, parent, child, origin))
            continue
        if kind not in ("revolute", "continuous", "prismatic", "fixed"):
            raise ValueError(f"joint {name!r}: URDF joint type {kind!r} is not supported")
        axis_el = j.find("axis")
        axis = _floats(axis_el.get("xyz") if axis_el is not None else None, (1, 0, 0))
        lower, upper = -np.inf, np.inf
        limit = j.find("limit")
        if kind in ("revolute", "prismatic") and limit is not None:
            lower = float(limit.get("lower", 0.0))
            upper = float(limit.get("upper", 0.0))
            if lower > upper:
                raise ValueError(f"joint {name!r}: lower limit {lower} is above upper limit {upper}")
        joints.append(Joint(name, kind, parent, child, origin, tuple(axis), lower, upper))
    if not joints:
        raise ValueError("the URDF has no joints")
    return joints
