"""A small JSON Schema checker shared by the CLI tests that pin a tool's --json schema.

Supports type (incl. "integer", "number" and lists of types), enum, required, properties,
additionalProperties: false, items, and $ref: "#/$defs/NAME" (resolved in the root schema's $defs),
the $id of another file in schemas/ (e.g. "rtb.hlo-overlap/1"), such an $id with a JSON pointer
into that file ("rtb.aot-check/1#/properties/mesh"), or a NAME resolved through `refs`. Other keywords of schemas/*.json are annotations ($schema, $id,
title, description, $comment); json_schemas_test.py fails on any keyword not in KEYWORDS, so that
a schema file never relies on a check this checker does not make.

The schemas live in schemas/ at the repository root, one file per --json document (load()).
"""

import json
import os

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
# Every keyword a schema file may use: the checked ones, then the annotations.
KEYWORDS = {
    "type", "enum", "required", "properties", "additionalProperties", "items", "$ref", "$defs",
    "$schema", "$id", "title", "description", "$comment"
}
# schemas/ at the repository root (this file is tests/cli/json_schema.py).
SCHEMA_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "schemas")


def load(file_name):
    """The schema in schemas/<file_name> (e.g. "rtb.diff-renders.1.json")."""
    with open(os.path.join(SCHEMA_DIR, file_name), encoding="utf-8") as f:
        return json.load(f)


def by_id():
    """Every schema file in schemas/, by its $id."""
    schemas = {}
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if name.endswith(".json"):
            schema = load(name)
            schemas[schema["$id"]] = schema
    return schemas


def _is_type(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def _at_pointer(root, pointer, where, ref):
    """The part of `root` a JSON pointer ("/properties/mesh") names."""
    part = root
    for token in pointer.split("/")[1:] if pointer else []:
        token = token.replace("~1", "/").replace("~0", "~")
        if not isinstance(part, dict) or token not in part:
            raise AssertionError(f"{where}: $ref {ref!r}: no {token!r}")
        part = part[token]
    return part


def validate(schema, value, where="$", refs=None):
    """Raises AssertionError naming the path of the first value that does not fit `schema`.

    A $ref is "#/$defs/NAME" (the root schema's $defs), a schema file's $id, a schema file's $id
    and a JSON pointer into it ("rtb.aot-check/1#/properties/mesh": a field of another document,
    for a document that holds the same fields), or a key of `refs`."""
    if refs is None:
        refs = {}
    if "$defs" in schema:
        refs = dict(refs)
        refs.update({"#/$defs/" + name: item for name, item in schema["$defs"].items()})
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref not in refs and not ref.startswith("#"):
            refs = dict(refs)
            refs.update(by_id())
        file_id, hash_sign, pointer = ref.partition("#")
        if ref not in refs and hash_sign and file_id in refs:
            root = refs[file_id]
            schema = _at_pointer(root, pointer, where, ref)
            if "$defs" in root:  # the pointed-to part may use its file's own $defs
                refs = dict(refs)
                refs.update({"#/$defs/" + name: item for name, item in root["$defs"].items()})
        elif ref not in refs:
            raise AssertionError(f"{where}: unknown $ref {ref!r}")
        else:
            schema = refs[ref]
        if "$defs" in schema:  # another file's own $defs
            refs = dict(refs)
            refs.update({"#/$defs/" + name: item for name, item in schema["$defs"].items()})
    if "enum" in schema and value not in schema["enum"]:
        raise AssertionError(f"{where}: {value!r} not in {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            raise AssertionError(f"{where}: {value!r} is not {types}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                raise AssertionError(f"{where}: {key} missing")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                validate(props[key], item, f"{where}.{key}", refs)
            elif schema.get("additionalProperties") is False:
                raise AssertionError(f"{where}: unexpected {key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            validate(schema["items"], item, f"{where}[{i}]", refs)
