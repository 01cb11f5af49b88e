"""Rendering of the paper's result tables (Table 2 layout) from per-run metrics files.

`write_table` loads on first use: the workflow imports wscat.report.paper and .labels while it
builds the DAG, which needs neither pandas nor jinja2.
"""
from __future__ import annotations

from typing import Any

__all__ = ["write_table"]


def __getattr__(name: str) -> Any:
    if name == "write_table":
        from wscat.report.table import write_table

        return write_table
    raise AttributeError(f"module 'wscat.report' has no attribute '{name}'")
