# SPDX-License-Identifier: GPL-3.0-or-later
"""URDF reader: joints, origins (xyz, rpy), axes, limits, continuous and fixed joints."""

import os
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .joints import FreeJoint, Joint
from .rotations import rpy_matrix


URDF_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


def _floats(text, default, count=3):
    if text is None:
        return np.array(default, dtype=float)
    try:
        values = [float(v) for v in text.replace(",", " ").split()]  # "0, 0, 0.5" is seen in the wild
    except ValueError:
        raise ValueError(f"expected {count} numbers, got {text!r}") from None
    if len(values) != count or not np.all(np.isfinite(values)):
        raise ValueError(f"expected {count} finite numbers, got {text!r}")
    return np.array(values)


def _limit(limit, which):
    """A <limit>'s lower or upper bound (URDF's default 0); a number, infinite or not, never NaN."""
    text = limit.get(which, "0")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"its {which} limit is not a number: {text!r}") from None
    if value != value:
        raise ValueError(f"its {which} limit is not a number: {text!r}")
    return value


def _origin(elem):
    T = np.eye(4)
    o = elem.find("origin")
    if o is not None:
        T[:3, :3] = rpy_matrix(_floats(o.get("rpy"), (0, 0, 0)))
        T[:3, 3] = _floats(o.get("xyz"), (0, 0, 0))
    return T


def parse_urdf(path_or_xml):
    """Return the list of joints of a URDF given as a file path, an XML string or XML bytes."""
    where, data = "the URDF text", path_or_xml
    if not isinstance(data, (bytes, bytearray)):
        text = str(data)
        data = text.lstrip("\ufeff \t\r\n")  # a byte-order mark or blank lines before the XML
        if not data.startswith("<"):
            if "\n" in text or not data:
                raise ValueError("not a URDF: neither XML text (it must start with '<') nor a file path")
            if not os.path.exists(text):
                raise FileNotFoundError(f"URDF file not found: {text}")
            where = text
            with open(text, "rb") as f:  # bytes: the parser reads the encoding the file declares
                data = f.read()
    if isinstance(data, (bytes, bytearray)):
        data = bytes(data)
        data = (data[3:] if data.startswith(b"\xef\xbb\xbf") else data).lstrip(b" \t\r\n")
    try:
        root = _xml(data)
    except ET.ParseError as e:
        root = None
        if isinstance(data, bytes):  # bytes not in the encoding they declare (UTF-8 when none): read as before
            try:
                root = _xml(data.decode("utf-8", errors="replace"))
            except ET.ParseError:
                pass
        if root is None:
            raise ValueError(f"not a URDF: {where} is not valid XML ({e})") from None
        warnings.warn(f"URDF: {where} holds bytes that are not in its encoding ({e}); they were read as U+FFFD",
                      stacklevel=3)
    if root.tag != "robot":
        raise ValueError(f"not a URDF document: root element is <{root.tag}>, expected <robot>")
    joints, names = [], set()
    # Only <robot>'s own <joint> children describe the kinematics: <joint> elements also appear inside
    # <transmission>, <gazebo> and plugin blocks, with other meanings and no links.
    for j in root.findall("joint"):
        name, kind = j.get("name"), j.get("type")
        if not name:
            child = j.find("child")
            raise ValueError(f"a URDF joint has no name (its child link: {None if child is None else child.get('link')!r})")
        if name in names:
            raise ValueError(f"two URDF joints are named {name!r}")
        names.add(name)
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


def _xml(data):
    """The document's root element (data: str, or bytes in the encoding they declare). Old Gazebo blocks write
    prefixed tags (<sensor:camera>, <controller:...>) whose prefix no xmlns declares, which XML refuses: the
    prefixes used that the root's start tag does not declare are declared there and the text read again (they name
    nothing the kinematics read; an inner declaration still holds within its element)."""
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        if "unbound prefix" not in str(e):
            raise
    binary = isinstance(data, bytes)
    text = data.decode("latin-1") if binary else data  # (bytes: ASCII markup found in any ASCII-based encoding)
    root = _root_tag(text)
    if root is None:
        raise ET.ParseError("unbound prefix (and no root element found)")
    declared = set(re.findall(r"xmlns:([\w.-]+)\s*=", text[root[0]:root[1]]))
    used = set(re.findall(r"</?([A-Za-z_][\w.-]*):[\w.-]", text))
    used |= set(re.findall(r"\s([A-Za-z_][\w.-]*):[\w.-]+\s*=", text))
    extra = "".join(f' xmlns:{p}="urn:undeclared:{p}"' for p in sorted(used - declared - {"xml", "xmlns"}))
    at = root[0] + len(re.match(r"<[^\s/>]+", text[root[0]:]).group())
    fixed = text[:at] + extra + text[at:]
    return ET.fromstring(fixed.encode("latin-1") if binary else fixed)  # (what else is wrong, if anything)


def _root_tag(text):
    """(start, end) of the root element's start tag: after the prolog's declaration, processing instructions,
    comments and DOCTYPE (its internal subset may hold '<' and '>'); None if there is none."""
    i, n = 0, len(text)
    while i < n:
        i = text.find("<", i)
        if i < 0:
            return None
        if text.startswith("<?", i):
            i = text.find("?>", i + 2)
        elif text.startswith("<!--", i):
            i = text.find("-->", i + 4)
        elif text.startswith("<!", i):  # <!DOCTYPE name [ ... ]>: quoted strings and the subset skipped
            j, depth, quote = i + 2, 0, None
            while j < n and (quote or depth or text[j] != ">"):
                c = text[j]
                if quote:
                    quote = None if c == quote else quote
                elif c in "\"'":
                    quote = c
                elif c == "[":
                    depth += 1
                elif c == "]":
                    depth -= 1
                j += 1
            i = j if j < n else -1
        else:
            end = text.find(">", i)
            return None if end < 0 else (i, end + 1)
        if i < 0:
            return None
        i += 1
    return None


def _joint(j, name, kind, parent, child):
    origin = _origin(j)
    if kind == "floating":
        return FreeJoint(name, parent, child, origin)
    if kind not in ("revolute", "continuous", "prismatic", "fixed"):
        if kind is None or (kind not in URDF_TYPES and kind.lower() in URDF_TYPES):  # (a mistake, not a type)
            raise ValueError(f"its type is {kind!r}, not a URDF joint type ({', '.join(URDF_TYPES)})")
        # Held fixed so the rest of the robot loads; Tree.from_urdf refuses it when it is in the tree asked for.
        return Joint(name, "fixed", parent, child, origin, problem=f"URDF joint type {kind!r} is not supported")
    axis_el = j.find("axis")
    axis = _floats(axis_el.get("xyz") if axis_el is not None else None, (1, 0, 0))
    if kind != "fixed":
        norm = np.linalg.norm(axis)
        if not norm > 1e-12:
            raise ValueError(f"its axis is zero ({axis_el.get('xyz')!r})")
        axis = axis / norm  # descriptions in the wild carry axes like "0 0.7 0.7"
    lower, upper = -np.inf, np.inf
    limit = j.find("limit")
    if kind in ("revolute", "prismatic") and limit is not None:
        lower, upper = _limit(limit, "lower"), _limit(limit, "upper")
        if lower > upper:  # held fixed so the rest of the robot loads; Tree.from_urdf refuses it in the tree asked for
            return Joint(name, "fixed", parent, child, origin, problem=f"its lower limit {lower:g} is above its upper "
                         f"limit {upper:g}")
        if lower == upper:  # (URDF's default for a bound not given is 0: a <limit effort velocity/> locks it)
            warnings.warn(f"URDF joint {name!r} ({kind}): its limits are {lower:g} to {upper:g}"
                          + (" (<limit> gives no lower or upper: URDF's default is 0)" if limit.get("lower") is None
                             and limit.get("upper") is None else "") + ": it cannot move", stacklevel=4)
    mimic = j.find("mimic")
    if mimic is not None and kind != "fixed":
        mimic = (mimic.get("joint"), _number(mimic, "multiplier", 1.0), _number(mimic, "offset", 0.0))
    else:
        mimic = None
    return Joint(name, kind, parent, child, origin, tuple(axis), lower, upper, mimic)


def _number(elem, name, default):
    text = elem.get(name)
    try:
        value = default if text is None else float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        raise ValueError(f"its <{elem.tag}> {name} is not a finite number: {text!r}")
    return value
