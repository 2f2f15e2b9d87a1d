"""StsBus (scservo_sdk) against scripted bytes on a pseudo-terminal: per-ID dispatch, tags, late and broken replies."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from na_driver.serial_bus import TAGS, BusError
from na_driver.sts_bus import StsBus
from na_sim import protocol0 as p0

IDS = [1, 2, 3]
ADDRESS, LENGTH = 56, 15


@pytest.fixture
def scripted(scripted_bus) -> Callable[..., tuple[Any, StsBus]]:
    """``scripted(answer, retries=0)`` -> (the far end, an StsBus on it): the far end answers each packet with
    ``answer(packet) -> bytes`` (conftest ``scripted_bus``)."""
    def start(answer: Callable[[p0.Packet], bytes], retries: int = 0) -> tuple[Any, StsBus]:
        return scripted_bus(StsBus, p0.PacketParser(), answer, retries=retries)

    return start


def data_for(servo_id: int, length: int) -> bytes:
    return bytes((servo_id * 16 + i) & 0xFF for i in range(length))


def status(servo_id: int, error: int, params: bytes) -> bytes:
    """FF FF ID LEN ERR P.. CHK, written out here from the Feetech protocol description."""
    length = len(params) + 2
    return bytes([0xFF, 0xFF, servo_id, length, error, *params, ~(servo_id + length + error + sum(params)) & 0xFF])


def sync_read_ids(packet: p0.Packet) -> list[int]:
    assert packet.instruction == 0x82 and packet.servo_id == 0xFE
    return list(packet.params[2:])


def answer_all(packet: p0.Packet) -> bytes:
    return b"".join(status(sid, 0, data_for(sid, packet.params[1])) for sid in sync_read_ids(packet))


def test_consecutive_sync_reads_carry_transaction_tags_that_are_stripped(scripted) -> None:
    fake, bus = scripted(answer_all)
    pads = []
    for _ in range(2 * TAGS):
        result = bus.sync_read(IDS, ADDRESS, LENGTH)
        start, length = fake.requests[-1].params[:2]
        pads.append(length - LENGTH)
        assert start == ADDRESS - pads[-1]                          # the tag bytes come before the block
        assert {sid: r.data for sid, r in result.replies.items()} == {
            sid: data_for(sid, length)[pads[-1]:] for sid in IDS}
    assert len(set(pads)) == TAGS and all(a != b for a, b in itertools.pairwise(pads))


def test_a_silent_servo_costs_only_its_own_reply_and_is_retried(scripted) -> None:
    asked: list[list[int]] = []

    def answer(packet: p0.Packet) -> bytes:
        asked.append(sync_read_ids(packet))
        return b"".join(status(sid, 0, data_for(sid, packet.params[1])) for sid in sync_read_ids(packet) if sid != 2)

    _, bus = scripted(answer, retries=1)
    result = bus.sync_read(IDS, ADDRESS, LENGTH)
    assert set(result.replies) == {1, 3} and result.missing == [2]
    assert asked == [[1, 2, 3], [2]]                                # the retry asks only the missing servo
    assert bus.counters.partial_replies == 1 and bus.counters.timeouts == 2 and bus.counters.retries == 1


def test_a_bad_checksum_is_counted_and_the_other_replies_are_kept(scripted) -> None:
    def answer(packet: p0.Packet) -> bytes:
        replies = [bytearray(status(sid, 0, data_for(sid, packet.params[1]))) for sid in sync_read_ids(packet)]
        replies[1][7] ^= 0x5A                                       # a data byte of servo 2
        return b"".join(replies)

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, ADDRESS, LENGTH)
    assert set(result.replies) == {1, 3} and bus.counters.crc_errors == 1


def test_a_reply_of_another_length_is_late_and_never_used(scripted) -> None:
    def answer(packet: p0.Packet) -> bytes:
        stale = status(2, 0, data_for(9, packet.params[1] + 1))      # an earlier Sync Read's answer
        return stale + answer_all(packet)

    fake, bus = scripted(answer)
    result = bus.sync_read(IDS, ADDRESS, LENGTH)
    length = fake.requests[-1].params[1]
    assert set(result.replies) == set(IDS) and bus.counters.late_replies == 1
    assert result.replies[2].data == data_for(2, length)[length - LENGTH:]


def test_status_bits_in_err_keep_the_data_and_reach_the_caller(scripted) -> None:
    overload = 0x20                                                 # Feetech Status bit 5

    def answer(packet: p0.Packet) -> bytes:
        return b"".join(status(sid, overload if sid == 3 else 0, data_for(sid, packet.params[1]))
                        for sid in sync_read_ids(packet))

    _, bus = scripted(answer)
    result = bus.sync_read(IDS, ADDRESS, LENGTH)
    assert set(result.replies) == set(IDS) and result.replies[3].error == overload
    assert bus.counters.status_errors == 0


def test_input_left_from_an_earlier_exchange_is_discarded_before_a_request(scripted) -> None:
    fake, bus = scripted(answer_all)
    fake.send(status(1, 0, data_for(7, LENGTH)))                    # a late reply, arrived between transactions
    result = bus.sync_read([1], ADDRESS, LENGTH)
    length = fake.requests[-1].params[1]
    assert result.replies[1].data == data_for(1, length)[length - LENGTH:] and bus.counters.late_replies == 0


def test_write_returns_the_status_bits_and_a_silent_servo_raises(scripted) -> None:
    def answer(packet: p0.Packet) -> bytes:
        return status(packet.servo_id, 0x04, b"") if packet.servo_id == 1 else b""

    fake, bus = scripted(answer)
    assert bus.write(1, 42, b"\x00\x08") == 0x04                    # overheat bit reported, write acknowledged
    assert fake.requests[0].params == bytes([42, 0x00, 0x08])
    bus.setup_retries = 1
    with pytest.raises(BusError, match="servo 5"):
        bus.write(5, 42, b"\x00\x08")
    assert bus.ping(5) is None


def test_a_start_up_ping_outlasts_a_servo_silent_for_half_a_second(scripted) -> None:
    """A host busy at start-up answers late: each retry of a start-up read (a ping reads the model number at
    address 3) waits twice as long as the one before, so six tries at the 50 ms reply timeout span well over 0.6 s
    (six equal waits would give up after 0.3 s)."""
    first_request: list[float] = []

    def late_model_number(packet: p0.Packet) -> bytes:
        first_request[:] = first_request or [time.monotonic()]
        if packet.instruction != 0x02 or time.monotonic() - first_request[0] < 0.6:
            return b""
        return status(packet.servo_id, 0, bytes([0x09, 0x03]))                     # model 777 (STS3215)

    _, bus = scripted(late_model_number)
    assert bus.ping(1) == 777
    assert bus.counters.retries >= 3
