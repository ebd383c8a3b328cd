"""The HTML report under its documented name: ``report.build(runs, sources, ...)`` returns the
page (``dtbench-analyze report``; written in commands/report_cmd.py, beside the text it embeds)."""

from .commands.report_cmd import SECTIONS, build, display_names

__all__ = ["build", "SECTIONS", "display_names"]
