"""Rendering of the paper's result tables (Table 2 layout) from per-run metrics files."""
from wscat.report.table import write_table

__all__ = ["write_table"]
