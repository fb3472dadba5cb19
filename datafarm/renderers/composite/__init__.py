"""The `composite` renderer: the real static background from the clip, the sim's robot and objects
with appearance transferred from the real frames, contact shadows, live scale readouts and the ood
variations the contract allows."""

from datafarm.renderers.composite.renderer import CompositeParameters, CompositeRenderer

__all__ = ["CompositeParameters", "CompositeRenderer"]
