"""Waiting for a device path that appears late (pure)."""

from __future__ import annotations

import threading
import time

from na_driver.devices import wait_for_device


def test_a_path_that_appears_while_waiting_ends_the_wait_at_once(tmp_path):
    path = tmp_path / "ttyLATE"
    told: list[str] = []
    threading.Timer(0.3, path.write_text, args=("",)).start()
    begin = time.monotonic()
    assert wait_for_device(str(path), 10.0, told.append)
    assert 0.25 <= time.monotonic() - begin < 5.0          # waited for it, and not for the whole timeout
    assert len(told) == 1 and "up to 10 s" in told[0]


def test_a_missing_path_is_false_after_the_timeout_and_zero_does_not_wait(tmp_path):
    missing = str(tmp_path / "nothing")
    begin = time.monotonic()
    assert not wait_for_device(missing, 0.3)
    assert time.monotonic() - begin >= 0.3
    told: list[str] = []
    assert not wait_for_device(missing, 0, told.append) and told == []
    (tmp_path / "there").write_text("")
    assert wait_for_device(str(tmp_path / "there"), 0, told.append) and told == []
