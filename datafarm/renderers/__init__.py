"""Renderers that turn sim episodes into multi-view video (composite, hosted). Not implemented yet (issue 7)."""
