"""DxlBus against scripted bytes on a pseudo-terminal: transaction tags, late and broken replies, Fast Sync Read."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from na_driver.dxl_bus import TAGS, DxlBus
from na_sim import protocol2 as p2

IDS = [11, 12, 13]
LENGTH = 6


@pytest.fixture
def scripted(scripted_bus) -> Callable[..., tuple[Any, DxlBus]]:
    """``scripted(answer, retries=0)`` -> (the far end, a DxlBus on it): the far end answers each packet with
    ``answer(packet) -> bytes`` (conftest ``scripted_bus``)."""
    def start(answer: Callable[[p2.Packet], bytes], retries: int = 0) -> tuple[Any, DxlBus]:
        return scripted_bus(DxlBus, p2.PacketParser(), answer, retries=retries)

    return start


def requested_length(packet: p2.Packet) -> int:
    return int.from_bytes(packet.params[2:4], "little")


def data_for(servo_id: int, length: int) -> bytes:
    return bytes((servo_id + i) & 0xFF for i in range(length))


def answer_all(packet: p2.Packet) -> bytes:
    length = requested_length(packet)
    return b"".join(p2.build_status(sid, 0, data_for(sid, length)) for sid in packet.params[4:])


def test_consecutive_sync_reads_ask_for_different_lengths_and_strip_the_tag(scripted) -> None:
    fake, bus = scripted(answer_all)
    lengths = []
    for _ in range(2 * TAGS):
        result = bus.sync_read(IDS, 100, LENGTH)
        lengths.append(requested_length(fake.requests[-1]))
        start = int.from_bytes(fake.requests[-1].params[:2], "little")
        pad = lengths[-1] - LENGTH
        assert start == 100 - pad                                  # the tag bytes come before the block
        assert {sid: r.data for sid, r in result.replies.items()} == {
            sid: data_for(sid, LENGTH + pad)[pad:] for sid in IDS}
    assert all(a != b for a, b in itertools.pairwise(lengths))
    assert len(set(lengths)) == TAGS


def test_a_reply_of_another_length_is_late_and_never_used(scripted) -> None:
    def answer(packet: p2.Packet) -> bytes:
        length = requested_length(packet)
        stale = p2.build_status(12, 0, data_for(99, length + 1))     # an earlier transaction's answer
        return stale + answer_all(packet)

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, 100, LENGTH)
    assert set(result.replies) == set(IDS) and result.replies[12].data != data_for(99, LENGTH)[:LENGTH]
    assert bus.counters.late_replies == 1


def test_a_rejected_reply_does_not_end_the_wait_for_the_real_one(scripted) -> None:
    seen: list[int] = []

    def check(servo_id: int, data: bytes, sent_at: float, received_at: float) -> str | None:
        seen.append(servo_id)
        return "late" if servo_id == 12 and seen.count(12) == 1 else None

    def answer_twice(packet: p2.Packet) -> bytes:       # servo 12 answers twice; the check refuses the first
        return answer_all(packet) + p2.build_status(12, 0, data_for(12, requested_length(packet)))

    _, bus = scripted(answer_twice)
    result = bus.sync_read(IDS, 100, LENGTH, check=check)
    assert set(result.replies) == set(IDS) and bus.counters.late_replies == 1


def test_an_earlier_answer_after_the_accepted_one_unaccepts_it(scripted) -> None:
    def answer(packet: p2.Packet) -> bytes:
        length = requested_length(packet)
        # servo 12 works through a backlog: an answer with this length, then one to an older request
        return (p2.build_status(12, 0, data_for(12, length)) + p2.build_status(12, 0, data_for(12, length + 1))
                + p2.build_status(11, 0, data_for(11, length)) + p2.build_status(13, 0, data_for(13, length)))

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, 100, LENGTH)
    assert set(result.replies) == {11, 13} and result.missing == [12]
    assert bus.counters.late_replies == 2


def test_a_retry_the_deadline_stops_does_not_use_up_a_tag(scripted) -> None:
    fake, bus = scripted(lambda packet: answer_all(packet) if 12 not in packet.params[4:] else b"", retries=2)
    bus.sync_read(IDS, 100, LENGTH, deadline=time.monotonic())     # servo 12 silent; no retry fits the deadline
    bus.sync_read([11], 100, LENGTH)
    first, second = (requested_length(p) for p in fake.requests)
    assert second == LENGTH + (first - LENGTH + 1) % TAGS


def fast_reply(packet: p2.Packet, corrupt_at: int | None = None) -> bytes:
    length = requested_length(packet)
    frame = bytearray(p2.build_fast_status((0, sid, data_for(sid, length)) for sid in packet.params[4:]))
    if corrupt_at is not None:
        frame[corrupt_at] ^= 0x5A
    return bytes(frame)


def test_fast_sync_read_parts_before_a_corrupted_byte_are_kept(scripted) -> None:
    segment = LENGTH + 4                                             # ERR, ID, data, CRC

    def answer(packet: p2.Packet) -> bytes:
        pad = requested_length(packet) - LENGTH
        return fast_reply(packet, corrupt_at=8 + 2 * (segment + pad) + 3)     # inside servo 13's data

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, 100, LENGTH, fast=True, retries=0)
    assert set(result.replies) == {11, 12} and result.fast_replies == 2
    assert result.replies[11].data == data_for(11, LENGTH + 1)[1:]  # first tag: 1 byte before the block
    assert bus.counters.crc_errors == 1 and bus.counters.fast_reads == 1


def test_fast_sync_read_of_another_length_is_late(scripted) -> None:
    def answer(packet: p2.Packet) -> bytes:
        length = requested_length(packet) + 1
        return p2.build_fast_status((0, sid, data_for(sid, length)) for sid in packet.params[4:])

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, 100, LENGTH, fast=True, retries=0)
    assert result.replies == {} and bus.counters.late_replies == 1


def test_a_start_up_ping_outlasts_a_servo_silent_for_half_a_second(scripted) -> None:
    """A host busy at start-up answers late: each retry of a start-up ping waits twice as long as the one before, so
    six tries at the 50 ms reply timeout span well over 0.6 s (six equal waits would give up after 0.3 s)."""
    first_request: list[float] = []

    def late_ping(packet: p2.Packet) -> bytes:
        first_request[:] = first_request or [time.monotonic()]
        if packet.instruction != 0x01 or time.monotonic() - first_request[0] < 0.6:
            return b""
        return p2.build_status(packet.servo_id, 0, bytes([0xFC, 0x03, 0x2D]))     # model 1020 (XM430-W350), fw 45

    _, bus = scripted(late_ping)
    assert bus.ping(11) == 1020
    assert bus.counters.retries >= 3
