"""The prediction's figure under its documented name: ``predict_plot.figure(result)`` takes
``predict.build``'s dict and returns a matplotlib figure (written in plot/predict_fig.py)."""

from .plot.predict_fig import figure, save

__all__ = ["figure", "save"]
