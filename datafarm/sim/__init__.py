"""Simulation backends (SAPIEN; Unreal Engine over UnrealCV): worlds from a grounding, robots, recording."""
