"""The front every GPU backend's pass pipeline starts with, whatever the vendor.

Before anything is lowered, a GPU kernel is checked, normalized, given its layouts and its
software-pipeline and shared-memory plans; only the passes after these are a vendor's.
A backend states its pipeline as ``(*PLANNING_PASSES, <its own passes>...)``.

Example::

    >>> [p.name for p in PLANNING_PASSES][:3]
    ['check_resources_unplanned', 'normalize', 'infer_layout']
"""

from __future__ import annotations

from ..transform import (
    CHECK_PLANNED_SHARED,
    CHECK_RESOURCES_UNPLANNED,
    INFER_LAYOUT,
    NORMALIZE,
    PLAN_PIPELINE,
    PLAN_STORAGE,
    Pass,
)

PLANNING_PASSES: tuple[Pass, ...] = (
    CHECK_RESOURCES_UNPLANNED,  # shared memory is checked once planned
    NORMALIZE,
    INFER_LAYOUT,
    PLAN_PIPELINE,
    PLAN_STORAGE,
    CHECK_PLANNED_SHARED,  # buffers with disjoint lifetimes share bytes
)
"""Checks, normalization, layout inference, pipeline and storage plans (in contract order)."""
