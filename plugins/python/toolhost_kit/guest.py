"""The component's ``toolhost:plugin/tools`` export over the registry, and
its ``discovery`` export (the tools' task words) when the world has one.

Imported only inside the component: ``wit_world`` and
``componentize_py_types`` are the bindings componentize-py generates from
``wit/toolhost.wit`` at build time. The build command's entry module
imports the tool module(s) and then this one; componentize-py runs both at
build time and snapshots the result, so every schema is already computed
when the host calls ``describe``.
"""

import dataclasses

# Codecs Python imports lazily by name. At call time the sandbox holds no
# Python library files, so only modules imported at build time exist:
# import the usual ones now so `open(..., encoding="utf-8-sig")` works.
import encodings.ascii  # noqa: F401
import encodings.cp1252  # noqa: F401
import encodings.latin_1  # noqa: F401
import encodings.utf_16  # noqa: F401
import encodings.utf_8_sig  # noqa: F401

from componentize_py_types import Err
from wit_world.imports import types

try:  # The world `plugin-with-discovery` (the default) exports `discovery`.
    from wit_world.exports import discovery as _discovery
except ImportError:  # A build for the world `plugin`: no task words.
    _discovery = None

from . import runtime

_SIDE_EFFECTS = {
    "read-only": types.SideEffect.READ_ONLY,
    "idempotent": types.SideEffect.IDEMPOTENT,
    "reversible": types.SideEffect.REVERSIBLE,
    "irreversible": types.SideEffect.IRREVERSIBLE,
}


def _descriptor(spec: "runtime.ToolSpec") -> "types.ToolDescriptor":
    d = spec.descriptor()
    known = dict(d)
    known["side_effect"] = _SIDE_EFFECTS[d["side_effect"]]
    known["needs"] = types.Needs(**d["needs"])
    kwargs = {}
    for f in dataclasses.fields(types.ToolDescriptor):
        if f.name in known:
            kwargs[f.name] = known[f.name]
        elif f.name.startswith("supports_"):
            # Capabilities of the optional planner/prober interfaces, which
            # the kit does not export.
            kwargs[f.name] = False
        else:
            raise RuntimeError(
                f"toolhost_kit does not know the descriptor field {f.name!r}; "
                "update the kit to this WIT"
            )
    return types.ToolDescriptor(**kwargs)


_DESCRIPTORS = [_descriptor(s) for s in runtime.tools()]


class Tools:
    """``toolhost:plugin/tools``."""

    def describe(self):
        return list(_DESCRIPTORS)

    def call(self, name, args_json, context):
        ok, value = runtime.dispatch_output(
            name, args_json, context.call_id, context.workspace_root, context.idempotency_key
        )
        if ok:
            json_text, text = value
            return types.ToolOutput(json=json_text, text=text)
        raise Err(types.ToolError(**value))


_WORDS = [
    (s.name, list(s.keywords), list(s.examples))
    for s in runtime.tools()
    if s.keywords or s.examples
]


class Discovery:
    """``toolhost:plugin/discovery``: the task words of the tools that have
    some."""

    def describe_words(self):
        return [
            _discovery.ToolWords(name=name, keywords=keywords, examples=examples)
            for name, keywords, examples in _WORDS
        ]
