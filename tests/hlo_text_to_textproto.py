#!/usr/bin/env python3
"""Converts an HLO text dump into a text-format xla.HloProto of the fields hlo-overlap reads
(tests/hlo/hlo_subset.proto), so that tests can encode it with
  protoc --encode=xla.HloProto --proto_path=tests/hlo tests/hlo/hlo_subset.proto
and check that hlo-overlap reports the same for the text and for the binary proto.

  tests/hlo_text_to_textproto.py DUMP.hlo.txt > DUMP.textproto

Like XLA's protos, the result stores the instructions of a scheduled computation in a different
order than the schedule (reversed here) and the schedule in HloScheduleProto, so that a reader
that ignored the schedule would get different windows; computations that a fusion calls have no
schedule sequence (as in XLA) and keep the text order. Instruction ids are XLA-style unique ids
(computation id << 32 | position). Only the HLO the fixtures use is handled: one statement per
line or continued on the next lines while brackets are open or the line ends with ','.
"""

import re
import sys
from typing import Any, Optional

TYPES = {
    "pred": "PRED", "s8": "S8", "s16": "S16", "s32": "S32", "s64": "S64", "u8": "U8", "u16": "U16",
    "u32": "U32", "u64": "U64", "f16": "F16", "f32": "F32", "f64": "F64", "c64": "C64",
    "bf16": "BF16", "token": "TOKEN", "c128": "C128", "f8e5m2": "F8E5M2", "f8e4m3fn": "F8E4M3FN",
    "s4": "S4", "u4": "U4"
}

CALLEE_KEYS = {
    "calls", "to_apply", "body", "condition", "branch_computations", "true_computation",
    "false_computation", "called_computations", "select", "scatter"
}


def strip_comments(line):
  out, in_string, i = [], False, 0
  while i < len(line):
    c = line[i]
    if in_string:
      out.append(c)
      if c == "\\" and i + 1 < len(line):
        out.append(line[i + 1])
        i += 1
      elif c == '"':
        in_string = False
    elif c == '"':
      in_string = True
      out.append(c)
    elif line.startswith("//", i):
      break
    elif line.startswith("/*", i):
      end = line.find("*/", i + 2)
      i = len(line) if end < 0 else end + 2
      continue
    else:
      out.append(c)
    i += 1
  return "".join(out)


def outside_strings(text, depth=0):
  """Yields (index, character, bracket depth after it) for the characters of text outside
    double-quoted strings; depth is the depth before text."""
  in_string, i = False, 0
  while i < len(text):
    c = text[i]
    if in_string:
      if c == "\\":
        i += 1
      elif c == '"':
        in_string = False
    elif c == '"':
      in_string = True
    else:
      depth += (c in "([{") - (c in ")]}")
      yield i, c, depth
    i += 1


def depth_change(text):
  depth = 0
  for _, _, depth in outside_strings(text):
    pass
  return depth


def statements(text):
  """Yields the statements: module header, computation headers, instructions, '}'."""
  pending, depth, in_computation = "", 0, False
  for raw in text.splitlines():
    line = strip_comments(raw).strip()
    if not line and not pending:
      continue
    pending = (pending + " " + line).strip() if pending else line
    depth += depth_change(line)
    if pending.endswith(",") or pending.endswith("="):
      continue
    if in_computation:
      if depth == 0:
        in_computation = False
      elif depth != 1:
        continue
      elif "=" in pending and opcode_missing(pending):
        continue  # a shape alone on its line: the opcode follows
    elif depth == 1 and pending.endswith("{"):
      in_computation = True
    elif depth != 0:
      continue
    yield pending
    pending = ""


def opcode_missing(statement):
  rest = statement.partition("=")[2].strip()
  return not rest or shape_end(rest) == len(rest)


def split_top(text, sep=","):
  parts, start = [], 0
  for i, c, depth in outside_strings(text):
    if c == sep and depth == 0:
      parts.append(text[start:i].strip())
      start = i + 1
  if text[start:].strip():
    parts.append(text[start:].strip())
  return parts


def shape_end(text):
  """Length of the shape at the start of text."""
  if text.startswith("("):
    depth = 0
    for i, c in enumerate(text):
      depth += c == "("
      depth -= c == ")"
      if depth == 0:
        return i + 1
  m = re.match(r"[a-z0-9]+\[[^\]]*\]", text)
  assert m, text
  end = m.end()
  if text[end:end + 1] == "{":
    end = text.index("}", end) + 1
  return end


def parse_shape(text):
  text = text.strip()
  if text.startswith("("):
    inner = text[1:-1].strip()
    return {"tuple": [parse_shape(p) for p in split_top(inner)] if inner else []}
  m = re.match(r"([a-z0-9]+)\[([^\]]*)\](\{([^}]*)\})?$", text)
  assert m, text
  dims, dynamic = [], []
  for d in [d.strip() for d in m.group(2).split(",") if d.strip()]:
    dynamic.append(d.startswith("<="))
    dims.append(int(d[2:] if d.startswith("<=") else d))
  shape: dict[str, Any] = {"type": TYPES[m.group(1)], "dims": dims, "dynamic": dynamic}
  if m.group(4) is not None:
    m2m, _, rest = m.group(4).partition(":")
    layout: dict[str, Any] = {"m2m": [int(x) for x in m2m.split(",") if x.strip()]}
    tiles = re.findall(r"\(([0-9,]+)\)", re.sub(r"[ES]\(\d+\)", "", rest))
    layout["tiles"] = [[int(x) for x in t.split(",")] for t in tiles]
    e = re.search(r"E\((\d+)\)", rest)
    s = re.search(r"S\((\d+)\)", rest)
    layout["bits"] = int(e.group(1)) if e else 0
    layout["space"] = int(s.group(1)) if s else 0
    shape["layout"] = layout
  return shape


def unquote(value):
  """The bytes of an HLO double-quoted string."""
  assert value.startswith('"') and value.endswith('"'), value
  out, i, body = bytearray(), 0, value[1:-1]
  while i < len(body):
    c = body[i]
    if c == "\\":
      n = body[i + 1]
      if n in "01234567":
        out.append(int(body[i + 1:i + 4], 8))
        i += 4
        continue
      out += {"n": b"\n", "t": b"\t", "r": b"\r"}.get(n, n.encode())
      i += 2
      continue
    out += c.encode()
    i += 1
  return bytes(out)


def metadata_strings(value):
  fields = {}
  for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*")', value):
    fields[m.group(1)] = unquote(m.group(2))
  return fields


def parse_instruction(text):
  m = re.match(r"(ROOT\s+)?%?([\w.\-]+)\s*=\s*", text)
  assert m, text
  rest = text[m.end():]
  end = shape_end(rest)
  shape, rest = rest[:end], rest[end:].strip()
  opcode, _, rest = rest.partition("(")
  close = next(i for i, _, depth in outside_strings(rest, depth=1) if depth == 0)
  operands, attributes = rest[:close], rest[close + 1:].lstrip(", ")
  instr: dict[str, Any] = {
      "root": bool(m.group(1)), "name": m.group(2), "shape": parse_shape(shape),
      "opcode": opcode.strip(), "operands": [], "attrs": {}
  }
  if instr["opcode"] == "parameter":
    instr["parameter_number"] = int(operands)
  elif instr["opcode"] != "constant":
    for operand in split_top(operands):
      instr["operands"].append(operand.split()[-1].lstrip("%"))
  for attribute in split_top(attributes):
    key, _, value = attribute.partition("=")
    instr["attrs"][key.strip()] = value.strip()
  return instr


def parse_module(text):
  module: dict[str, Any] = {"computations": []}
  current: Optional[dict[str, Any]] = None
  for statement in statements(text):
    if statement.startswith("HloModule"):
      header = re.match(r"HloModule\s+([\w.\-]+)", statement)
      assert header, statement
      module["name"] = header.group(1)
      module["scheduled"] = "is_scheduled=true" in statement
    elif statement.endswith("{") and current is None:
      entry = statement.startswith("ENTRY")
      head = re.match(r"(ENTRY\s+)?%?([\w.\-]+)", statement)
      assert head, statement
      current = {"name": head.group(2), "entry": entry, "instructions": []}
      module["computations"].append(current)
    elif statement == "}":
      current = None
    else:
      assert current is not None, f"an instruction outside a computation: {statement}"
      current["instructions"].append(parse_instruction(statement))
  return module


def refs(value):
  return [r.strip().lstrip("%") for r in value.strip("{}").split(",") if r.strip()]


def q(data):
  if isinstance(data, str):
    data = data.encode()
  out = []
  for b in data:
    c = chr(b)
    if c in '"\\':
      out.append("\\" + c)
    elif 0x20 <= b < 0x7f:
      out.append(c)
    else:
      out.append("\\%03o" % b)
  return '"' + "".join(out) + '"'


def shape_text(shape, indent):
  pad = " " * indent
  if "tuple" in shape:
    lines = [pad + "element_type: TUPLE"]
    for element in shape["tuple"]:
      lines += [pad + "tuple_shapes {", shape_text(element, indent + 2), pad + "}"]
    return "\n".join(lines)
  lines = [pad + "element_type: " + shape["type"]]
  lines += [pad + "dimensions: %d" % d for d in shape["dims"]]
  if any(shape["dynamic"]):
    lines += [pad + "is_dynamic_dimension: %s" % str(d).lower() for d in shape["dynamic"]]
  layout = shape.get("layout")
  if layout:
    lines.append(pad + "layout {")
    lines += [pad + "  minor_to_major: %d" % d for d in layout["m2m"]]
    for tile in layout["tiles"]:
      lines.append(pad + "  tiles { " + " ".join("dimensions: %d" % d for d in tile) + " }")
    if layout["bits"]:
      lines.append(pad + "  element_size_in_bits: %d" % layout["bits"])
    if layout["space"]:
      lines.append(pad + "  memory_space: %d" % layout["space"])
    lines.append(pad + "}")
  return "\n".join(lines)


def to_textproto(module):
  ids = {c["name"]: n + 1 for n, c in enumerate(module["computations"])}
  fused = {
      ref for c in module["computations"] for i in c["instructions"] if i["opcode"] == "fusion"
      for ref in refs(i["attrs"].get("calls", ""))
  }
  entry = next(c for c in module["computations"] if c["entry"])
  out = [
      "hlo_module {", "  name: " + q(module["name"]),
      "  entry_computation_name: " + q(entry["name"])
  ]
  sequences = []
  for computation in module["computations"]:
    cid = ids[computation["name"]]
    iid = {i["name"]: (cid << 32) | (n + 1) for n, i in enumerate(computation["instructions"])}
    stored = list(computation["instructions"])
    if module["scheduled"] and computation["name"] not in fused:
      sequences.append((cid, [iid[i["name"]] for i in stored]))
      stored.reverse()
    out += ["  computations {", "    name: " + q(computation["name"])]
    root = None
    for instr in stored:
      a = instr["attrs"]
      out += [
          "    instructions {", "      name: " + q(instr["name"]),
          "      opcode: " + q(instr["opcode"]), "      shape {",
          shape_text(instr["shape"], 8), "      }"
      ]
      meta = metadata_strings(a["metadata"]) if "metadata" in a else {}
      if meta.get("op_type") or meta.get("op_name"):
        out.append("      metadata {")
        if meta.get("op_type"):
          out.append("        op_type: " + q(meta["op_type"]))
        if meta.get("op_name"):
          out.append("        op_name: " + q(meta["op_name"]))
        out.append("      }")
      if "parameter_number" in instr:
        out.append("      parameter_number: %d" % instr["parameter_number"])
      if "index" in a:
        out.append("      tuple_index: %s" % a["index"])
      if "channel_id" in a:
        out.append("      channel_id: %s" % a["channel_id"])
      if "custom_call_target" in a:
        out.append("      custom_call_target: " + q(unquote(a["custom_call_target"])))
      out.append("      id: %d" % iid[instr["name"]])
      # An operand the computation does not define (only a handwritten fixture has one) has
      # no id to refer to: left out.
      out += ["      operand_ids: %d" % iid[o] for o in instr["operands"] if o in iid]
      callees = []
      if instr["opcode"] == "while":
        callees = refs(a["body"]) + refs(a["condition"])
      elif instr["opcode"] == "select-and-scatter":
        callees = refs(a["select"]) + refs(a["scatter"])
      elif "true_computation" in a:
        callees = refs(a["true_computation"]) + refs(a["false_computation"])
      else:
        for key in CALLEE_KEYS:
          if key in a:
            callees += refs(a[key])
      out += ["      called_computation_ids: %d" % ids[c] for c in callees]
      if "backend_config" in a:
        value = a["backend_config"]
        data = unquote(value) if value.startswith('"') else value.encode()
        out.append("      backend_config: " + q(data))
      if a.get("is_host_transfer") == "true":
        out.append("      is_host_transfer: true")
      out.append("    }")
      if instr["root"]:
        root = iid[instr["name"]]
    out.append("    id: %d" % cid)
    if root is not None:
      out.append("    root_id: %d" % root)
    out.append("  }")
  out.append("  entry_computation_id: %d" % ids[entry["name"]])
  if module["scheduled"]:
    out.append("  schedule {")
    for cid, sequence in sequences:
      out.append("    sequences { key: %d value {" % cid)
      out += ["      instruction_ids: %d" % i for i in sequence]
      out.append("    } }")
    out.append("  }")
  out.append("}")
  return "\n".join(out) + "\n"


def main():
  if len(sys.argv) != 2:
    sys.exit(__doc__)
  with open(sys.argv[1], encoding="utf-8") as f:
    sys.stdout.write(to_textproto(parse_module(f.read())))


if __name__ == "__main__":
  main()
