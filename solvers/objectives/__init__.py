# SPDX-License-Identifier: GPL-3.0-or-later
"""Objectives (paper 000, eq. 14-15, extended), one small file per family."""

from .base import Objective
from .distance import Distance
from .joint import Displacement, JointFunction, JointValue
from .pose import LookAt, Orientation, Pose, Position

__all__ = ["Objective", "Position", "Orientation", "Pose", "LookAt", "Distance", "Displacement", "JointValue",
           "JointFunction"]
