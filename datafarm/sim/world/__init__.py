"""Worlds built from a grounding G: a SAPIEN scene with G's table, robot and objects, the quantities a
variation z drew, and the sampler that draws z."""

from datafarm.sim.world.bodies import SimObject
from datafarm.sim.world.settings import WorldSettings
from datafarm.sim.world.variation import drawn_paths, sample_variation
from datafarm.sim.world.world import World, build_world, load_grams, robot_spec

__all__ = [
    "SimObject",
    "World",
    "WorldSettings",
    "build_world",
    "drawn_paths",
    "load_grams",
    "robot_spec",
    "sample_variation",
]
