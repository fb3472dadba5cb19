"""A small derivative-free minimizer (Nelder-Mead), enough for fitting a handful of primitive
parameters to silhouettes; deterministic, NumPy only."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def nelder_mead(f: Callable[[np.ndarray], float], x0: Sequence[float], steps: Sequence[float],
                iterations: int = 300, tolerance: float = 1e-4) -> tuple[np.ndarray, float]:
    """Minimize `f` from `x0`, with initial simplex steps `steps` per parameter; returns (x, f(x))."""
    x0 = np.asarray(x0, float)
    n = len(x0)
    simplex = [x0] + [x0 + np.eye(n)[i] * steps[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < tolerance and np.max(np.abs(np.array(simplex) - simplex[0])) < 1e-5:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        worst = simplex[-1]
        reflected = centroid + (centroid - worst)
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2.0 * (centroid - worst)
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (worst - centroid) if fr >= values[-1] else centroid + 0.5 * (reflected - centroid)
            fc = f(contracted)
            if fc < min(fr, values[-1]):
                simplex[-1], values[-1] = contracted, fc
            else:  # shrink towards the best
                best = simplex[0]
                simplex = [best] + [best + 0.5 * (x - best) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    i = int(np.argmin(values))
    return simplex[i], float(values[i])
