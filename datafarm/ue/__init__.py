"""Unreal Engine track over UnrealCV (first/third-person world-model data). Not implemented yet."""
