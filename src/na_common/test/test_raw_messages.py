"""Raw message reading (``read_raw_messages``, ``na_common.mcap_raw``) against rosbags' own reader: same
messages, bytes, bag times and order, for MCAP bags (indexed or not, plain or zstd chunks) and sqlite3."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode

from na_common import episode_bag as eb
from na_common.episode_bag.messages import bag_fielddefs, schema_typestore
from na_common.mcap_raw import Schema, read_mcap_messages

T0 = 1_700_000_000_000_000_000
BOOL = "std_msgs/msg/Bool"


def _flag(value: bool) -> bytes:
    return eb.serialize(eb.message_class(BOOL)(data=value), BOOL)


def _wrench(stamp: int, fz: float) -> bytes:
    vector = eb.message_class("geometry_msgs/msg/Vector3")
    wrench = eb.message_class("geometry_msgs/msg/Wrench")(force=vector(x=0.0, y=1.0, z=fz),
                                                          torque=vector(x=0.0, y=0.0, z=0.0))
    message = eb.message_class(eb.WRENCH_STAMPED)(header=eb.make_header(stamp, "ft"), wrench=wrench)
    return eb.serialize(message, eb.WRENCH_STAMPED)


def _records() -> list[tuple[str, int, bytes]]:
    """(topic, bag time, CDR) in writing order: bag times out of order across topics, a tie and a step back
    within a topic."""
    out = []
    for k in range(40):
        out.append(("/ft", T0 + k * 1000 + 500, _wrench(T0 + k * 1000, float(k))))
        out.append(("/flag", T0 + k * 1000, _flag(k % 3 == 0)))
    out.append(("/flag", T0 + 5000, _flag(True)))          # same time as an earlier /flag message
    out.append(("/ft", T0 + 100, _wrench(T0, -1.0)))         # earlier than most /ft messages
    return out


def _write_episode_bag(out: Path) -> Path:
    """An episode bag written in three chunks (flushed twice)."""
    meta = {"task": "push", "payload_grams": 0.0, "force_source": "ft_sensor", "condition": "nominal",
            "source": "generated"}
    types = {"/ft": eb.WRENCH_STAMPED, "/flag": BOOL, "/silent": BOOL}
    with eb.EpisodeWriter(out, meta) as writer:
        for topic, msgtype in types.items():
            writer.add_topic(topic, msgtype)
        for k, (topic, stamp, raw) in enumerate(_records()):
            writer.write_raw(topic, stamp, raw)
            if k in (30, 61):
                writer.flush()
    return writer.path


def _rosbags_messages(bag: Path) -> dict[str, list[tuple[int, bytes]]]:
    out: dict[str, list[tuple[int, bytes]]] = {}
    with AnyReader([bag], default_typestore=eb.typestore()) as reader:
        for connection, stamp, raw in reader.messages(connections=reader.connections):
            out.setdefault(connection.topic, []).append((stamp, bytes(raw)))
    return out


def _assert_same_as_rosbags(bag: Path, expected: dict[str, list[tuple[int, bytes]]] | None = None) -> None:
    expected = _rosbags_messages(bag) if expected is None else expected
    topics = list(eb.topic_summaries(eb.read_rosbag2_info(bag)))
    raw = eb.read_raw_messages(bag, topics)
    assert set(raw) == set(topics)
    for topic in topics:
        messages = expected.get(topic, [])
        assert raw[topic].log_times.tolist() == [stamp for stamp, _ in messages], topic
        assert [raw[topic].message(k) for k in range(len(raw[topic]))] == [data for _, data in messages], topic


def _drop_message_indexes(mcap: Path) -> None:
    """Rewrite an MCAP file without its Message Index records (readers must then walk the chunks)."""
    data = mcap.read_bytes()
    out, at, end = bytearray(data[:8]), 8, len(data) - 8
    while at < end:
        (length,) = struct.unpack_from("<Q", data, at + 1)
        if data[at] != 0x07:
            out += data[at:at + 9 + length]
        at += 9 + length
    mcap.write_bytes(bytes(out + data[end:]))


def test_episode_bag_matches_rosbags_order_and_bytes(tmp_path: Path) -> None:
    bag = _write_episode_bag(tmp_path)
    _assert_same_as_rosbags(bag)
    raw = eb.read_raw_messages(bag, ["/silent"])
    assert len(raw["/silent"]) == 0 and raw["/silent"].msgtype == BOOL


def test_chunks_without_message_index_are_walked(tmp_path: Path) -> None:
    bag = _write_episode_bag(tmp_path)
    expected = _rosbags_messages(bag)
    _drop_message_indexes(next(bag.glob("*.mcap")))
    _assert_same_as_rosbags(bag, expected)


@pytest.mark.parametrize("mode", [CompressionMode.STORAGE, CompressionMode.MESSAGE, CompressionMode.FILE])
def test_compressed_bags(tmp_path: Path, mode: CompressionMode) -> None:
    bag = tmp_path / "compressed"
    writer = Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.set_compression(mode, CompressionFormat.ZSTD)
    with writer:
        connections = {t: writer.add_connection(t, eb.WRENCH_STAMPED if t == "/ft" else BOOL,
                                                typestore=eb.typestore()) for t in ("/ft", "/flag")}
        for topic, stamp, raw in sorted(_records(), key=lambda r: r[1]):
            writer.write(connections[topic], stamp, raw)
    _assert_same_as_rosbags(bag)


def test_sqlite3_bag_goes_through_rosbags(tmp_path: Path) -> None:
    bag = tmp_path / "plain_sqlite"
    with Writer(bag, version=8, storage_plugin=StoragePlugin.SQLITE3) as writer:
        connection = writer.add_connection("/flag", BOOL, typestore=eb.typestore())
        for k in range(5):
            writer.write(connection, T0 + k, _flag(k == 2))
    _assert_same_as_rosbags(bag)
    raw = eb.read_raw_messages(bag, ["/flag"])["/flag"]
    assert np.array_equal(raw.log_times, T0 + np.arange(5))


def test_truncated_and_missing_storage_files_are_named(tmp_path: Path) -> None:
    bag = _write_episode_bag(tmp_path)
    mcap = next(bag.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[:-100])
    with pytest.raises(eb.EpisodeBagError, match="truncated"):
        eb.read_raw_messages(bag, ["/ft"])
    mcap.unlink()
    with pytest.raises(eb.EpisodeBagError, match=f"cannot read episode bag {bag}.*No such file"):
        eb.read_raw_messages(bag, ["/ft"])
    with pytest.raises(eb.EpisodeBagError, match="has no topic"):
        eb.read_raw_messages(bag, ["/nothing"])


def test_corrupt_chunk_is_an_error_naming_the_file(tmp_path: Path) -> None:
    bag = _write_episode_bag(tmp_path)
    mcap = next(bag.glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    at = 8
    while data[at] != 0x06:                                   # the first chunk record
        at += 9 + struct.unpack_from("<Q", data, at + 1)[0]
    (compression_length,) = struct.unpack_from("<I", data, at + 9 + 28)
    first_record = at + 9 + 28 + 4 + compression_length + 8
    data[first_record + 1: first_record + 9] = b"\xff" * 8    # its first record claims to be huge
    mcap.write_bytes(bytes(data))
    with pytest.raises(eb.EpisodeBagError, match=rf"cannot read episode bag {bag}: {mcap.name} chunk at byte {at}"):
        eb.read_raw_messages(bag, ["/ft"])


def test_stored_message_definitions_come_with_the_messages(tmp_path: Path) -> None:
    bag = _write_episode_bag(tmp_path)
    with AnyReader([bag], default_typestore=eb.typestore()) as reader:
        stored = {c.topic: c.msgdef.data for c in reader.connections}
    read = read_mcap_messages(next(bag.glob("*.mcap")))
    for channel in read.channels.values():
        assert channel.schema is not None and channel.schema.encoding == "ros2msg"
        assert channel.schema.text == stored[channel.topic]
    raw = eb.read_raw_messages(bag, ["/ft", "/silent"])
    assert raw["/ft"].schema.name == eb.WRENCH_STAMPED and raw["/ft"].schema.text == stored["/ft"]
    assert raw["/silent"].schema is None                     # no messages: no channel met in the file
    assert raw["/ft"].fielddefs()[eb.WRENCH_STAMPED] == eb.typestore().fielddefs[eb.WRENCH_STAMPED]


def test_schema_typestore_reads_dependency_sections_and_prefers_the_stored_definition() -> None:
    separator = "=" * 80
    text = (f"std_msgs/Header header\nfloat64[] position\nna_msgs/Extra extra\n{separator}\nMSG: na_msgs/Extra\n"
            f"uint8 flag\n{separator}\nMSG: std_msgs/msg/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
            f"{separator}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n")
    store = schema_typestore("na_msgs/msg/Probe", text)
    assert [name for name, _ in store.fielddefs["na_msgs/msg/Probe"][1]] == ["header", "position", "extra"]
    assert [name for name, _ in store.fielddefs["na_msgs/msg/Extra"][1]] == ["flag"]
    assert schema_typestore("na_msgs/msg/Probe", text) is store           # cached per definition
    # A stored definition that differs from the installed one wins (here: ArmState without fields).
    assert schema_typestore(eb.ARM_STATE, "uint8 only\n").fielddefs[eb.ARM_STATE][1][0][0] == "only"
    assert "load" in [name for name, _ in eb.typestore().fielddefs[eb.ARM_STATE][1]]
    other = Schema(name="x", encoding="ros2idl", text="module x {};")
    assert bag_fielddefs(eb.ARM_STATE, other) is eb.typestore().fielddefs
    assert bag_fielddefs(eb.ARM_STATE, None) is eb.typestore().fielddefs
    with pytest.raises(eb.EpisodeBagError, match="cannot parse the stored definition"):
        schema_typestore("na_msgs/msg/Bad", "float64[ broken\n")
