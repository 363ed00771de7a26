# SPDX-License-Identifier: GPL-3.0-or-later
"""The solver core: kinematic trees, objectives and solvers. Pure numpy/scipy, no bpy."""

from .joints import BoneJoint, FreeJoint, Joint
from .objectives import Displacement, Distance, JointFunction, JointValue, LookAt, Objective, Orientation, Pose, Position
from .problem import Problem, Result
from .methods import METHODS, Method, method, register_method
from .solve import solve
from .tracking import Frames, Tracker
from .tree import State, Tree

__all__ = [
    "Tree", "State", "Joint", "BoneJoint", "FreeJoint",
    "Objective", "Position", "Orientation", "Pose", "LookAt", "Distance", "Displacement", "JointValue", "JointFunction",
    "solve", "Tracker", "Frames", "Result", "Problem", "METHODS", "Method", "method", "register_method",
]
