"""Native unit tests of toolhost_kit (no component needed):

    python -m unittest discover -s plugins/python/tests

The integration tests (tests/integration/languages.rs) run them too.
"""

import dataclasses
import enum
import json
import os
import sys
import tempfile
import unittest
from typing import Annotated, List, Literal, Optional, TypedDict

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from toolhost_kit import (  # noqa: E402
    Context,
    Doc,
    KitError,
    MaxItems,
    MaxLen,
    MinLen,
    Path,
    Pattern,
    Range,
    ToolError,
    runtime,
    tool,
)


def fresh():
    runtime._REGISTRY.clear()


def spec(name):
    return runtime._REGISTRY[name]


def call(name, args, root="/workspace"):
    return runtime.dispatch(name, json.dumps(args), "c1", root, None)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Out(TypedDict):
    n: int


class SchemaTest(unittest.TestCase):
    def setUp(self):
        fresh()

    def test_parameters_become_a_closed_schema_with_bounds(self):
        @tool(side_effect="read-only", errors=["bad"])
        def file_scan(
            ctx: Context,
            path: Annotated[str, Path(read=True), MaxLen(100)],
            limit: Annotated[int, Range(1, 500)] = 10,
            ratio: Annotated[float, Range(0, 1), Doc("A ratio.")] = 0.5,
            mode: Literal["a", "b"] = "a",
            color: Optional[Color] = None,
            tags: Annotated[List[Annotated[str, MaxLen(8)]], MaxItems(3)] = (),
            word: Annotated[str, MinLen(1), MaxLen(5), Pattern("^[a-z]+$")] = "x",
        ) -> Out:
            """Scans a file.

            More text.

            Args:
                path: The file,
                    relative.
                limit: Most lines.
            """
            return {"n": limit}

        s = spec("file_scan")
        schema = s.input_schema
        self.assertEqual(schema["$schema"], "https://json-schema.org/draft/2020-12/schema")
        self.assertEqual(schema["type"], "object")
        self.assertIs(schema["additionalProperties"], False)
        self.assertEqual(schema["required"], ["path"])
        p = schema["properties"]
        self.assertEqual(
            p["path"],
            {"type": "string", "x-toolhost-path": "read", "maxLength": 100, "description": "The file, relative."},
        )
        self.assertEqual(p["limit"], {"type": "integer", "minimum": 1, "maximum": 500, "description": "Most lines.", "default": 10})
        self.assertEqual(p["ratio"]["description"], "A ratio.")
        self.assertEqual(p["mode"], {"type": "string", "enum": ["a", "b"], "default": "a"})
        self.assertEqual(p["color"], {"type": ["string", "null"], "enum": ["red", "blue", None], "default": None})
        self.assertEqual(p["tags"], {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3, "default": []})
        self.assertEqual(p["word"]["pattern"], "^[a-z]+$")
        self.assertNotIn("ctx", p)
        self.assertEqual(s.description, "Scans a file.\n\nMore text.")
        self.assertEqual(s.path_fields, {"path": "read"})
        self.assertTrue(s.fs_read)
        self.assertFalse(s.fs_write)
        self.assertEqual(
            s.error_codes,
            ["bad", "invalid_arguments", "internal_error", "invalid_path", "not_found", "permission_denied", "io_error"],
        )
        self.assertEqual(s.output_schema["properties"], {"n": {"type": "integer"}})
        # A TypedDict output is closed, as docs/python.md says.
        self.assertIs(s.output_schema["additionalProperties"], False)

    def test_a_dataclass_argument(self):
        @dataclasses.dataclass
        class Args:
            """Arguments."""

            out: Annotated[str, Path(write=True), "Where to write."]
            count: Annotated[int, Range(0, 9)] = 3
            inner: Optional[Out] = None

        @tool(side_effect="reversible")
        def file_write(args: Args) -> Out:
            """Writes."""
            return {"n": args.count}

        s = spec("file_write")
        self.assertEqual(s.input_schema["required"], ["out"])
        self.assertEqual(s.input_schema["properties"]["out"]["x-toolhost-path"], "write")
        self.assertEqual(s.input_schema["properties"]["inner"]["type"], ["object", "null"])
        self.assertIs(s.input_schema["properties"]["inner"]["additionalProperties"], False)
        self.assertTrue(s.fs_write)
        self.assertEqual(call("file_write", {"out": "a"}), (True, '{"n":3}'))

    def test_refusals(self):
        with self.assertRaisesRegex(KitError, "dict"):

            @tool
            def open_bag(x: dict) -> Out:
                """Bag."""

        with self.assertRaisesRegex(KitError, "type hint"):

            @tool
            def no_hint(x) -> Out:
                """No hint."""

        with self.assertRaisesRegex(KitError, "docstring"):

            @tool
            def no_doc(x: int) -> Out:
                pass

        with self.assertRaisesRegex(KitError, "name"):

            @tool(name="Bad-Name")
            def bad(x: int) -> Out:
                """Bad."""

        with self.assertRaisesRegex(KitError, "read-only"):

            @tool(side_effect="read-only")
            def writes(p: Annotated[str, Path(write=True)]) -> Out:
                """Writes."""


class TaskWordsTest(unittest.TestCase):
    def setUp(self):
        fresh()

    def test_keywords_and_examples_reach_the_descriptor(self):
        @tool(
            side_effect="read-only",
            keywords=["rename", "move file"],
            examples=["move the old logs into archive/"],
        )
        def path_move(x: int) -> Out:
            """Moves a file."""

        d = spec("path_move").descriptor()
        self.assertEqual(d["keywords"], ["rename", "move file"])
        self.assertEqual(d["examples"], ["move the old logs into archive/"])

        @tool(side_effect="read-only")
        def plain(x: int) -> Out:
            """Reads nothing."""

        self.assertEqual(spec("plain").descriptor()["keywords"], [])

    def test_words_beyond_the_hosts_bounds_are_refused_at_build_time(self):
        for kwargs, says in [
            ({"keywords": ["w%d" % i for i in range(25)]}, "at most 24"),
            ({"keywords": ["x" * 41]}, "41 bytes; at most 40"),
            ({"keywords": ["one two three four"]}, "more than 3 words"),
            ({"keywords": ["a", "A"]}, "listed twice"),
            ({"examples": ["line\nbreak"]}, "control character"),
            ({"examples": [""]}, "non-empty"),
            ({"examples": ["y" * 201]}, "201 bytes; at most 200"),
        ]:
            fresh()
            with self.assertRaisesRegex(KitError, says):

                @tool(side_effect="read-only", **kwargs)
                def words_tool(x: int) -> Out:
                    """Reads."""


class DispatchTest(unittest.TestCase):
    def setUp(self):
        fresh()

        @tool(side_effect="read-only", errors=["too_big"])
        def file_size(ctx: Context, path: Annotated[str, Path(read=True)], limit: int = 100) -> Out:
            """Size of a file."""
            with open(ctx.path(path), "rb") as f:
                n = len(f.read())
            if n > limit:
                raise ToolError("too_big", f"{n} bytes", field="/limit", correctable=True, details={"n": n})
            if n == 1:
                raise ToolError("undeclared", "x")
            if n == 2:
                raise RuntimeError("boom")
            return {"n": n}

    def test_results_and_errors(self):
        with tempfile.TemporaryDirectory() as root:
            for name, data in [("a", b"abc"), ("one", b"x"), ("two", b"xy"), ("big", b"x" * 200)]:
                with open(os.path.join(root, name), "wb") as f:
                    f.write(data)
            self.assertEqual(call("file_size", {"path": "a"}, root), (True, '{"n":3}'))
            ok, e = call("file_size", {"path": "big"}, root)
            self.assertEqual((ok, e["code"], e["field"], e["correctable"], e["details"]), (False, "too_big", "/limit", True, '{"n": 200}'))
            ok, e = call("file_size", {"path": "missing"}, root)
            self.assertEqual((e["code"], e["field"], e["correctable"]), ("not_found", "/path", True))
            self.assertEqual(e["message"], "missing: No such file or directory")
            ok, e = call("file_size", {"path": "one"}, root)
            self.assertEqual(e["code"], "internal_error")
            self.assertIn("undeclared", e["message"])
            ok, e = call("file_size", {"path": "two"}, root)
            self.assertEqual((e["code"], e["message"]), ("internal_error", "RuntimeError: boom"))
            ok, e = call("file_size", {"path": "../a"}, root)
            self.assertEqual(e["code"], "invalid_path")
            ok, e = call("nope", {})
            self.assertEqual(e["code"], "unknown_tool")

    def test_dataclass_and_enum_values_in_and_out(self):
        @dataclasses.dataclass
        class Result:
            color: Color
            ratio: float
            tags: List[str]

        @tool(side_effect="read-only")
        def color_pick(color: Color, ratio: float, tags: List[str]) -> Result:
            """Echoes typed values."""
            assert isinstance(color, Color) and isinstance(ratio, float)
            return Result(color, ratio, tags)

        self.assertEqual(spec("color_pick").converted, frozenset({"color", "ratio"}))
        self.assertEqual(
            call("color_pick", {"color": "blue", "ratio": 1, "tags": ["a"]}),
            (True, '{"color":"blue","ratio":1.0,"tags":["a"]}'),
        )

    def test_context_paths(self):
        ctx = Context("c", "/workspace")
        self.assertEqual(ctx.path("a/./b"), "/workspace/a/b")
        self.assertEqual(ctx.path("."), "/workspace")
        self.assertEqual(ctx.path(""), "/workspace")
        for bad in ["/etc", "a/../b", ".."]:
            with self.assertRaises(ToolError) as e:
                ctx.path(bad)
            self.assertEqual(e.exception.code, "invalid_path")


class TextTest(unittest.TestCase):
    def setUp(self):
        fresh()

    def test_text_renders_the_result_for_a_model(self):
        @tool(side_effect="read-only", text=lambda r: f"{r['n']} items", programs=["make"])
        def count_items(n: int) -> Out:
            """Counts."""
            return {"n": n}

        self.assertEqual(
            runtime.dispatch_output("count_items", '{"n": 2}', "c1", "/workspace", None),
            (True, ('{"n":2}', "2 items")),
        )
        # dispatch keeps answering the JSON alone.
        self.assertEqual(call("count_items", {"n": 2}), (True, '{"n":2}'))
        self.assertEqual(spec("count_items").descriptor()["needs"]["exec"], ["make"])

    def test_without_text_there_is_none(self):
        @tool(side_effect="read-only")
        def plain(n: int) -> Out:
            """Plain."""
            return {"n": n}

        self.assertEqual(
            runtime.dispatch_output("plain", '{"n": 1}', "c1", "/workspace", None),
            (True, ('{"n":1}', None)),
        )
        self.assertEqual(spec("plain").descriptor()["needs"]["exec"], [])

    def test_a_text_function_that_returns_no_str_is_an_internal_error(self):
        @tool(side_effect="read-only", text=lambda r: 3)
        def bad_text(n: int) -> Out:
            """Bad."""
            return {"n": n}

        ok, e = call("bad_text", {"n": 1})
        self.assertFalse(ok)
        self.assertEqual(e["code"], "internal_error")
        self.assertIn("not str", e["message"])


if __name__ == "__main__":
    unittest.main()
