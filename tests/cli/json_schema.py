"""A small JSON Schema checker shared by the CLI tests that pin a tool's --json schema.

Supports type (incl. "integer" and lists of types), enum, required, properties,
additionalProperties: false, items, and {"$ref": NAME} resolved through `refs`.
"""

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def validate(schema, value, where="$", refs=None):
    """Raises AssertionError naming the path of the first value that does not fit `schema`."""
    refs = refs or {}
    if "$ref" in schema:
        schema = refs[schema["$ref"]]
    if "enum" in schema and value not in schema["enum"]:
        raise AssertionError(f"{where}: {value!r} not in {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        is_integer = isinstance(value, int) and not isinstance(value, bool)
        ok = any(is_integer if t == "integer" else isinstance(value, TYPES[t]) for t in types)
        if not ok:
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
