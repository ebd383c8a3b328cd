"""``dtbench-analyze predict`` as a library: ``build(runs, nodes, ...)`` fits a performance model
(compute, communication per topology level, stragglers) to measured runs, validates it on the
largest measured scale and predicts other scales; it returns the whole result as a dict (what
``--json`` prints). Modules: coll (the collectives' cost terms), fit (the fits), sim (the
replay), model (validation and prediction)."""

from .model import DEFAULT_MAX_ERROR, build
from .sim import STRATEGIES

__all__ = ["build", "DEFAULT_MAX_ERROR", "STRATEGIES"]
