"""Datasheet margins: the oracle figures are the datasheets' (docs/REFERENCES.md), written out here by hand."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_description.datasheet_margins import datasheet_reference, effort_margin, temperature_margin


def test_xm430_current_against_its_stall_current_and_temperature_limit() -> None:
    reference = datasheet_reference(load_spec())
    assert (reference.effort_signal, reference.effort_unit) == ("current", "A")
    # XM430-W350 at 12 V stalls at 2.3 A; 1.15 A is half of it, -2.3 A all of it, 3.45 A half again beyond.
    np.testing.assert_allclose(effort_margin([0.0, 1.15, -2.3, 3.45], reference), [1.0, 0.5, 0.0, -0.5])
    assert float(temperature_margin(55.0, reference)) == pytest.approx(80.0 - 55.0)


def test_sts3215_load_against_full_output_and_its_temperature_limit() -> None:
    reference = datasheet_reference(load_spec("so101"))
    assert reference.effort_signal == "load"
    np.testing.assert_allclose(effort_margin([0.25, -0.8], reference), [0.75, 0.2])
    assert float(temperature_margin(60.0, reference)) == pytest.approx(70.0 - 60.0)
    assert reference.describe_error(0x20) == ["overload"]          # Status bit 5


def test_xm430_error_bits_are_named() -> None:
    assert datasheet_reference(load_spec()).describe_error(0x04) == ["overheating"]   # Hardware Error Status bit 2
