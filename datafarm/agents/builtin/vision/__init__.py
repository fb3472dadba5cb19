"""Classic multi-view vision for the builtin grounding and the grounding check: pinhole cameras
(`camera`), ChArUco calibration (`charuco`), convex-primitive rasterization (`raster`), the robot's
silhouette at rest (`robot`), segmentation against the table and the robot (`segment`), multi-view
matching and primitive fitting (`objects`), colour naming (`colours`).

Pure NumPy and OpenCV: nothing here needs a GPU or a render device, and nothing knows any scene's
names, colours or coordinates.
"""
