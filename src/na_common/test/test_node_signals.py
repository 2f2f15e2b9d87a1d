"""A node's entry point (``node_signals.run``) ends with 0 when a signal lands while it imports the node, also when
the interrupt comes out of the import as another error; an import that fails on its own still fails."""

from __future__ import annotations

import sys

import pytest

from na_common.node_signals import STOP, run

pytestmark = pytest.mark.unit


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    STOP.restore()
    for name in [n for n in sys.modules if n.startswith("signal_probe_")]:
        del sys.modules[name]


def _module(directory, name: str, body: str) -> str:
    (directory / f"{name}.py").write_text(body)
    return name


def test_an_import_broken_by_a_signal_ends_with_0(module_dir) -> None:
    # What CPython does when SIGINT lands while it builds an ImportError: the interrupt becomes a TypeError.
    name = _module(module_dir, "signal_probe_broken", (
        "import signal\n"
        "from na_common.node_signals import STOP\n"
        "STOP.requested = signal.SIGINT\n"
        "raise TypeError('expected a message argument')\n"))
    assert run(name) == 0


def test_an_import_that_fails_on_its_own_still_fails(module_dir) -> None:
    name = _module(module_dir, "signal_probe_faulty", "raise TypeError('a bug in the node module')\n")
    with pytest.raises(TypeError, match="a bug in the node module"):
        run(name)


def test_main_runs_and_gives_its_code(module_dir) -> None:
    name = _module(module_dir, "signal_probe_fine", "def main(argv):\n    return 3\n")
    assert run(name) == 3
