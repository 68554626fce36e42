#!/usr/bin/env python3
"""Decodes TensorBoard event files with the protobuf library, for tests/cpu/test_tensorboard.cpp.

The message types are written here from the facts of TensorBoard's schema
(tensorboard/compat/proto/event.proto and summary.proto: field numbers and types), the subset a
scalar log uses, and compiled by protoc (Debian's protobuf-compiler) into Python (Debian's
python3-protobuf). Each file of DIR whose name holds "tfevents", in name order, is read as
TFRecords: every length and payload must match its masked CRC-32C (computed here, bit by bit),
every payload must parse as an Event and serialize back to the same bytes (the canonical
encoding), the first event of a file names its version "brain.Event:2", and the others' scalars,
over all files in order, must be EXPECTED's. Where TensorBoard itself is installed, its reader
(EventAccumulator) must read the same scalars from DIR.

  tensorboard_check.py DIR EXPECTED.json   (EXPECTED: {"files": N, "events": [[step, {tag: value}], ...]})
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

SUMMARY_PROTO = """syntax = "proto3";
package tbcheck;
message Summary {
  message Value {
    string tag = 1;
    oneof value { float simple_value = 2; }
  }
  repeated Value value = 1;
}
"""

EVENT_PROTO = """syntax = "proto3";
package tbcheck;
import "summary.proto";
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    Summary summary = 5;
  }
}
"""


def compile_protos():
    out = tempfile.mkdtemp()
    for name, text in (("summary.proto", SUMMARY_PROTO), ("event.proto", EVENT_PROTO)):
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    subprocess.run(["protoc", "-I", out, "--python_out", out, "event.proto", "summary.proto"], check=True)
    sys.path.insert(0, out)
    import event_pb2  # noqa: E402
    return event_pb2


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked(header), f"{path}: record at {at}: the length's CRC is wrong"
        payload = data[at + 12:at + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert len(payload) == length and payload_crc == masked(payload), f"{path}: record at {at}: the payload's CRC"
        yield payload
        at += 16 + length


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    directory, expected_path = sys.argv[1], sys.argv[2]
    expected = json.load(open(expected_path))
    event_pb2 = compile_protos()
    files = sorted(glob.glob(os.path.join(directory, "*tfevents*")))
    print(f"{len(files)} event files: {[os.path.basename(f) for f in files]}")
    assert len(files) == expected["files"], f"expected {expected['files']} files"
    events = []
    for path in files:
        for i, payload in enumerate(records(path)):
            event = event_pb2.Event.FromString(payload)
            assert event.SerializeToString() == payload, f"{path}: event {i} is not in the canonical encoding"
            assert abs(event.wall_time - time.time()) < 86400, f"{path}: event {i}: wall_time {event.wall_time}"
            if i == 0:
                assert event.WhichOneof("what") == "file_version" and event.file_version == "brain.Event:2", event
                continue
            assert event.WhichOneof("what") == "summary", f"{path}: event {i} holds no summary"
            events.append([event.step, {v.tag: v.simple_value for v in event.summary.value}])
    want = [[step, {tag: as_float32(v) for tag, v in values.items()}] for step, values in expected["events"]]
    print(f"{len(events)} scalar events, decoded: {events}")
    assert events == want, f"expected {want}"
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        print("tensorboard: not installed here, its reader not run")
        return 0
    acc = EventAccumulator(directory)
    acc.Reload()
    for tag in sorted({t for _, values in want for t in values}):
        theirs = [(s.step, s.value) for s in acc.Scalars(tag)]
        ours = [(step, values[tag]) for step, values in want if tag in values]
        print(f"tensorboard's reader: {tag}: {theirs}")
        assert theirs == ours, f"{tag}: expected {ours}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
