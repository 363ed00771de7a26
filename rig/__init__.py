# SPDX-License-Identifier: GPL-3.0-or-later
"""The rig bridge: armatures to solver trees and solutions back to pose bones (needs bpy)."""

from .armature import ROOT_LINK, RigError, RigMapping, bone_settings, build_tree, read_pose, write_pose

__all__ = ["build_tree", "read_pose", "write_pose", "bone_settings", "RigError", "RigMapping", "ROOT_LINK"]
