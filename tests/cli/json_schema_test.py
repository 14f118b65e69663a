"""Unit tests of json_schema.py, the checker of schemas/*.json: the keywords it added for the
schema files ("number", $defs and "#/$defs/NAME", a $ref to another file's $id) and the ones the
inline schemas used before."""

import unittest

import json_schema
from json_schema import validate


class JsonSchemaTest(unittest.TestCase):

    def assert_rejects(self, schema, value, message):
        with self.assertRaises(AssertionError) as caught:
            validate(schema, value)
        self.assertIn(message, str(caught.exception))

    def test_number_is_an_int_or_a_float_but_not_a_bool(self):
        validate({"type": "number"}, 1)
        validate({"type": "number"}, 1.5)
        self.assert_rejects({"type": "number"}, True, "True is not ['number']")
        self.assert_rejects({"type": "number"}, "1", "'1' is not ['number']")
        self.assert_rejects({"type": "integer"}, 1.5, "1.5 is not ['integer']")
        validate({"type": ["number", "null"]}, None)

    def test_ref_to_defs_of_the_root(self):
        schema = {
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/side"}, "list": {"items": {"$ref": "#/$defs/side"}}
            },
            "$defs": {
                "side": {
                    "type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}
                }
            },
        }
        validate(schema, {"a": {"n": 1}, "list": [{"n": 2}]})
        self.assert_rejects(schema, {"a": {}}, "$.a: n missing")
        self.assert_rejects(schema, {"list": [{"n": 1}, {"n": "x"}]}, "$.list[1].n: 'x' is not")
        self.assert_rejects({"$ref": "#/$defs/none"}, 1, "unknown $ref '#/$defs/none'")

    def test_ref_to_another_files_id(self):
        report = json_schema.by_id()["rtb.hlo-overlap/1"]
        self.assertEqual(report["properties"]["schema"], {"enum": ["rtb.hlo-overlap/1"]})
        self.assert_rejects({"properties": {"a": {"$ref": "rtb.hlo-overlap/1"}}},
                            {"a": {"schema": "rtb.hlo-overlap/1"}}, "$.a: ")
        self.assert_rejects({"$ref": "rtb.no-such/1"}, 1, "unknown $ref 'rtb.no-such/1'")

    def test_ref_to_a_part_of_another_file(self):
        # A field of another document by its file's $id and a JSON pointer.
        schema = {"properties": {"mesh": {"$ref": "rtb.aot-check/1#/properties/mesh"}}}
        validate(schema, {"mesh": {"fsdp": 32, "tensor": 1, "expert": 2, "context": 4}})
        self.assert_rejects(schema, {"mesh": {"fsdp": 32}}, "$.mesh: tensor missing")
        self.assert_rejects({"$ref": "rtb.aot-check/1#/properties/none"}, 1,
                            "$ref 'rtb.aot-check/1#/properties/none': no 'none'")
        self.assert_rejects({"$ref": "rtb.no-such/1#/properties/mesh"}, 1,
                            "unknown $ref 'rtb.no-such/1#/properties/mesh'")

    def test_named_refs_still_resolve_through_refs(self):
        validate({"$ref": "side"}, 1, refs={"side": {"type": "integer"}})
        with self.assertRaises(AssertionError):
            validate({"$ref": "side"}, "x", refs={"side": {"type": "integer"}})

    def test_every_schema_file_loads_and_has_an_id(self):
        ids = json_schema.by_id()
        self.assertIn("rtb.diff-renders/1", ids)
        self.assertIn("check-payload.verify.json", ids)


if __name__ == "__main__":
    unittest.main()
