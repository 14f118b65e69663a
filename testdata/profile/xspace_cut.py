#!/usr/bin/env python3
"""Writes a small copy of an XSpace capture: each line keeps its first N events, every plane kept
its metadata; with PREFIX only the planes whose name starts with it (fuzz seeds:
fuzz/seeds/profile/). A wire-level walk, no protobuf package needed.

  testdata/profile/xspace_cut.py IN.xplane.pb OUT.xplane.pb N [PREFIX]
"""
import sys
from typing import Iterator, Tuple, Union

Value = Union[int, bytes]


def varint(buf: bytes, i: int) -> Tuple[int, int]:
  value, shift = 0, 0
  while True:
    byte = buf[i]
    i += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, i


def fields(buf: bytes) -> Iterator[Tuple[int, int, bytes]]:
  """(field number, wire type, the field's whole encoding) for each field of a message."""
  i = 0
  while i < len(buf):
    start = i
    key, i = varint(buf, i)
    wire_type = key & 7
    if wire_type == 0:
      _, i = varint(buf, i)
    elif wire_type == 2:
      length, i = varint(buf, i)
      i += length
    elif wire_type == 1:
      i += 8
    elif wire_type == 5:
      i += 4
    else:
      raise ValueError(f"wire type {wire_type} at byte {start}")
    yield key >> 3, wire_type, buf[start:i]


def payload(encoded: bytes) -> bytes:
  _, i = varint(encoded, 0)
  _, i = varint(encoded, i)
  return encoded[i:]


def put_varint(value: int) -> bytes:
  out = bytearray()
  while True:
    byte = value & 0x7F
    value >>= 7
    out.append(byte | (0x80 if value else 0))
    if not value:
      return bytes(out)


def length_field(number: int, body: bytes) -> bytes:
  return put_varint(number << 3 | 2) + put_varint(len(body)) + body


def plane_name(plane: bytes) -> bytes:
  for number, _, encoded in fields(plane):
    if number == 2:  # XPlane.name
      return payload(encoded)
  return b""


def cut(space: bytes, keep: int, prefix: bytes) -> bytes:
  out = bytearray()
  for number, _, encoded in fields(space):
    if number != 1:  # XSpace.planes
      out += encoded
      continue
    if not plane_name(payload(encoded)).startswith(prefix):
      continue
    plane = bytearray()
    for plane_field, _, plane_encoded in fields(payload(encoded)):
      if plane_field != 3:  # XPlane.lines
        plane += plane_encoded
        continue
      line = bytearray()
      kept = 0
      for line_field, _, line_encoded in fields(payload(plane_encoded)):
        if line_field == 4:  # XLine.events
          kept += 1
          if kept > keep:
            continue
        line += line_encoded
      plane += length_field(3, bytes(line))
    out += length_field(1, bytes(plane))
  return bytes(out)


def main() -> None:
  source, target, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
  prefix = sys.argv[4].encode() if len(sys.argv) > 4 else b""
  with open(source, "rb") as f:
    space = f.read()
  with open(target, "wb") as f:
    f.write(cut(space, keep, prefix))


if __name__ == "__main__":
  main()
