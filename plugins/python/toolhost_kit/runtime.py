"""The tool registry, the ``@tool`` decorator, ``Context``, ``ToolError``
and the dispatcher behind the component's ``call`` export.

Pure Python: no guest-only imports (``guest.py`` adapts this to the WIT
bindings), so a tool module also imports natively, e.g. for unit tests.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import posixpath
import re
import sys
import traceback
from typing import Any, Callable

from .schema import (
    DRAFT,
    KitError,
    convert,
    json_default,
    needs_convert,
    object_schema,
    path_access,
    schema_for,
    to_jsonable,
    _hints,
)

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SIDE_EFFECTS = ("read-only", "idempotent", "reversible", "irreversible")

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_MAX_OUTPUT_BYTES = 1 << 20

#: Codes the kit itself may return for every tool.
KIT_CODES = ("invalid_arguments", "internal_error")
#: Codes the kit may return for tools that touch files (exception mapping).
FILE_CODES = ("invalid_path", "not_found", "permission_denied", "io_error")


class ToolError(Exception):
    """A failure the tool reports itself (the WIT ``tool-error``).

    ``code`` must be one of the tool's declared error codes (``errors=`` of
    ``@tool``) or one the kit adds; ``field`` is a JSON Pointer to the
    argument at fault (``/path``); ``correctable`` says the caller can fix
    the call by changing its arguments; ``details`` is any JSON value.
    """

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        correctable: bool = False,
        details: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.correctable = correctable
        self.details = details

    def __str__(self) -> str:
        at = f" (at {self.field})" if self.field else ""
        return f"{self.code}: {self.message}{at}"


class Context:
    """Per-call facts: call id, where the workspace is mounted, idempotency key."""

    def __init__(
        self, call_id: str, workspace_root: str, idempotency_key: str | None = None
    ) -> None:
        self.call_id = call_id
        self.workspace_root = workspace_root
        self.idempotency_key = idempotency_key

    def path(self, relative: str, field: str | None = None) -> str:
        """The guest path of a workspace-relative path argument:
        ``<workspace_root>/<relative>``.

        The host already normalized and authorized every ``Path`` argument;
        this is defence in depth: an absolute path or a ``..`` component
        raises ``ToolError("invalid_path")``. ``""`` and ``"."`` name the
        workspace root itself.
        """
        parts = []
        if relative.startswith("/"):
            raise ToolError(
                "invalid_path",
                f"path {relative!r} is absolute; paths are relative to the workspace root",
                field=field,
                correctable=True,
            )
        for part in relative.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                raise ToolError(
                    "invalid_path",
                    f"path {relative!r} contains a '..' component",
                    field=field,
                    correctable=True,
                )
            parts.append(part)
        return posixpath.join(self.workspace_root, *parts) if parts else self.workspace_root


_current: Context | None = None


def workspace_path(relative: str) -> str:
    """``Context.path`` of the call in progress (for helpers that have no
    ``ctx`` at hand)."""
    if _current is None:
        raise RuntimeError("workspace_path() is only available during a call")
    return _current.path(relative)


@dataclasses.dataclass
class ToolSpec:
    """One registered tool: descriptor facts plus how to call it."""

    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    side_effect: str
    fs_read: bool
    fs_write: bool
    network_hosts: list[str]
    #: Programs run through the ``exec`` import (``needs.exec``).
    programs: list[str]
    error_codes: list[str]
    timeout_ms: int
    max_output_bytes: int
    fn: Callable[..., Any]
    #: Parameter name -> annotated type (the JSON arguments), or None when
    #: the function takes one dataclass.
    params: dict[str, Any] | None
    args_class: type | None
    args_param: str | None
    ctx_param: str | None
    #: Argument name -> "read"/"write" for Path fields (top level).
    path_fields: dict[str, str]
    #: Parameters whose JSON value must be converted (dataclass, enum, float).
    converted: frozenset = frozenset()
    #: Renders a result as model-facing text (``text=`` of ``@tool``).
    text: Callable[[Any], str] | None = None
    #: Text of the schemas, computed once.
    input_schema_json: str = ""
    output_schema_json: str | None = None
    #: Short task words (``keywords=`` of ``@tool``), for ``find_tools``.
    keywords: list[str] = dataclasses.field(default_factory=list)
    #: Whole task phrasings (``examples=`` of ``@tool``), for ``find_tools``.
    examples: list[str] = dataclasses.field(default_factory=list)

    def descriptor(self) -> dict[str, Any]:
        """The descriptor as plain data (snake_case keys, schemas as JSON text)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema_json,
            "output_schema": self.output_schema_json,
            "side_effect": self.side_effect,
            "needs": {
                "fs_read": self.fs_read,
                "fs_write": self.fs_write,
                "network_hosts": list(self.network_hosts),
                "exec": list(self.programs),
            },
            "error_codes": list(self.error_codes),
            "default_timeout_ms": self.timeout_ms,
            "max_output_bytes": self.max_output_bytes,
            "keywords": list(self.keywords),
            "examples": list(self.examples),
        }


_REGISTRY: dict[str, ToolSpec] = {}


def tools() -> list[ToolSpec]:
    """Every registered tool, in registration order."""
    return list(_REGISTRY.values())


def _split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Google-style docstring -> (description without the Args section,
    {parameter: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    keep: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            i += 1
            current = None
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                text = lines[i].strip()
                m = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", text)
                indent = len(lines[i]) - len(lines[i].lstrip())
                if m and (current is None or indent <= args_indent):
                    current = m.group(1)
                    args_indent = indent
                    args[current] = m.group(2)
                elif current and text:
                    args[current] += " " + text
                i += 1
            continue
        keep.append(line)
        i += 1
    paragraphs = "\n".join(keep).strip().split("\n\n")
    text = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return text, {k: " ".join(v.split()) for k, v in args.items()}


def _is_context(tp: Any) -> bool:
    return tp is Context or (isinstance(tp, str) and tp == "Context")


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    side_effect: str = "irreversible",
    errors: list[str] | tuple[str, ...] = (),
    fs_read: bool | None = None,
    fs_write: bool | None = None,
    network_hosts: list[str] | tuple[str, ...] = (),
    programs: list[str] | tuple[str, ...] = (),
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    text: Callable[[Any], str] | None = None,
    keywords: list[str] | tuple[str, ...] = (),
    examples: list[str] | tuple[str, ...] = (),
) -> Any:
    """Registers a function as a tool. Use as ``@tool`` or ``@tool(...)``.

    - The arguments are the function's parameters (type hints with
      ``Annotated`` bounds; defaults make a parameter optional), or one
      parameter whose type is a dataclass. A parameter typed ``Context``
      receives the call context and is not an argument.
    - ``description`` defaults to the docstring without its ``Args:``
      section; ``Args:`` entries describe the parameters.
    - ``side_effect``: ``read-only``, ``idempotent``, ``reversible`` or
      ``irreversible`` (the default, the safe assumption).
    - ``fs_read``/``fs_write`` default to whether any argument is a
      ``Path(read=True)``/``Path(write=True)``.
    - ``errors``: the codes the tool raises itself with ``ToolError``.
      The kit adds ``invalid_arguments`` and ``internal_error`` (any other
      exception), and for file tools ``invalid_path``, ``not_found``
      (``FileNotFoundError``), ``permission_denied`` and ``io_error``.
    - ``text``: a function from the tool's result to the compact text a
      model reads (e.g. numbered lines under a one-line header); the JSON
      result stays the exact data. Without it the host shows compact JSON.
    - ``programs``: native programs the tool runs through the ``exec``
      import (``needs.exec``): names on the host's PATH, absolute paths, or
      ``"any"``.
    - ``keywords``: short words of the tasks the tool is for (``"rename"``,
      ``"move"``), at most 24 of at most 40 bytes and three words each;
      ``examples``: whole task phrasings a user would write (``"move the
      old logs into archive/"``), at most 12 of at most 200 bytes, one line
      each. The host's ``find_tools`` indexes both (the component exports
      them through ``discovery``).
    """

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        spec = _make_spec(
            f,
            name=name or f.__name__,
            title=title,
            description=description,
            side_effect=side_effect,
            errors=list(errors),
            fs_read=fs_read,
            fs_write=fs_write,
            network_hosts=list(network_hosts),
            programs=list(programs),
            timeout_ms=timeout_ms,
            max_output_bytes=max_output_bytes,
            text=text,
            keywords=list(keywords),
            examples=list(examples),
        )
        if spec.name in _REGISTRY:
            raise KitError(f"two tools are named {spec.name!r}")
        _REGISTRY[spec.name] = spec
        return f

    if fn is not None:
        return register(fn)
    return register


def _task_words(
    where: str, what: str, items: list[str], most: int, max_bytes: int, max_words: int | None
) -> list[str]:
    """Checks keywords or examples against the host's bounds (its lint
    refuses a tool beyond them), so a mistake fails at build time."""
    if len(items) > most:
        raise KitError(f"{where}: {what} has {len(items)} entries; at most {most}")
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            raise KitError(f"{where}: {what}[{i}] must be a non-empty string")
        size = len(item.encode("utf-8"))
        if size > max_bytes:
            raise KitError(f"{where}: {what}[{i}] is {size} bytes; at most {max_bytes}")
        if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in item):
            raise KitError(f"{where}: {what}[{i}] contains a control character or line break")
        if max_words is not None and len(item.split()) > max_words:
            raise KitError(
                f"{where}: {what}[{i}] {item!r} has more than {max_words} words; "
                "a whole phrasing is an example"
            )
        key = item.strip().lower()
        if key in seen:
            raise KitError(f"{where}: {what}[{i}] {item!r} is listed twice")
        seen.add(key)
    return list(items)


def _make_spec(f: Callable[..., Any], **o: Any) -> ToolSpec:
    name = o["name"]
    where = name
    if not NAME_RE.match(name):
        raise KitError(f"tool name {name!r} must match ^[a-z][a-z0-9_]{{0,63}}$ (verb_object)")
    side_effect = str(o["side_effect"]).replace("_", "-").lower()
    if side_effect not in SIDE_EFFECTS:
        raise KitError(f"{where}: side_effect must be one of {', '.join(SIDE_EFFECTS)}")
    doc_text, arg_docs = _split_docstring(f.__doc__)
    description = o["description"] if o["description"] is not None else doc_text
    if not description.strip():
        raise KitError(
            f"{where}: give the tool a docstring (or description=): when to use it, when "
            "not, its inputs, its output and its size, its errors and side effects"
        )
    hints = _hints(f)
    sig = inspect.signature(f)
    ctx_param = None
    params: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise KitError(f"{where}: *args/**kwargs cannot be described; name every argument")
        tp = hints.get(p.name)
        if _is_context(tp) or (tp is None and p.name == "ctx"):
            ctx_param = p.name
            continue
        if tp is None:
            raise KitError(f"{where}: parameter {p.name!r} needs a type hint")
        params[p.name] = tp
        if p.default is not inspect.Parameter.empty:
            defaults[p.name] = p.default

    args_class = None
    args_param = None
    if (
        len(params) == 1
        and not defaults
        and dataclasses.is_dataclass(next(iter(params.values())))
    ):
        args_param, args_class = next(iter(params.items()))
        input_schema = object_schema(args_class, where)
        arg_hints = _hints(args_class)
        fields = {
            f_.name: arg_hints[f_.name] for f_ in dataclasses.fields(args_class) if f_.init
        }
        used_params = None
    else:
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, tp in params.items():
            s = schema_for(tp, f"{where}.{pname}")
            if "description" not in s and pname in arg_docs:
                s["description"] = arg_docs[pname]
            if pname in defaults:
                s["default"] = to_jsonable(defaults[pname])
            else:
                required.append(pname)
            props[pname] = s
        input_schema = {"type": "object", "properties": props, "required": required}
        input_schema["additionalProperties"] = False
        fields = params
        used_params = params
    input_schema = {"$schema": DRAFT, **input_schema}

    path_fields = {k: a for k, tp in fields.items() if (a := path_access(tp))}
    fs_write = o["fs_write"] if o["fs_write"] is not None else "write" in path_fields.values()
    fs_read = o["fs_read"] if o["fs_read"] is not None else bool(path_fields) and not fs_write
    if fs_write and side_effect == "read-only":
        raise KitError(f"{where}: a read-only tool cannot write files; raise side_effect")

    ret = hints.get("return")
    output_schema = None
    if ret is not None and ret is not type(None):
        output_schema = schema_for(ret, f"{where}.return", closed=False)
        if output_schema.get("type") != "object":
            raise KitError(
                f"{where}: the return type must be an object (a dataclass, a TypedDict or "
                "dict), not {ret!r}"
            )
        output_schema = {"$schema": DRAFT, **output_schema}

    codes: list[str] = []
    for code in list(o["errors"]) + list(KIT_CODES) + (
        list(FILE_CODES) if (fs_read or fs_write) else []
    ):
        if not NAME_RE.match(code):
            raise KitError(f"{where}: error code {code!r} must match ^[a-z][a-z0-9_]{{0,63}}$")
        if code not in codes:
            codes.append(code)

    spec = ToolSpec(
        name=name,
        title=o["title"],
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        side_effect=side_effect,
        fs_read=bool(fs_read),
        fs_write=bool(fs_write),
        network_hosts=o["network_hosts"],
        programs=o["programs"],
        keywords=_task_words(where, "keywords", o["keywords"], 24, 40, 3),
        examples=_task_words(where, "examples", o["examples"], 12, 200, None),
        error_codes=codes,
        timeout_ms=int(o["timeout_ms"]),
        max_output_bytes=int(o["max_output_bytes"]),
        fn=f,
        params=used_params,
        args_class=args_class,
        args_param=args_param,
        ctx_param=ctx_param,
        path_fields=path_fields,
        text=o["text"],
    )
    if o["text"] is not None and not callable(o["text"]):
        raise KitError(f"{where}: text= must be a function from the result to a str")
    if used_params is not None:
        spec.converted = frozenset(k for k, tp in used_params.items() if needs_convert(tp))
    spec.input_schema_json = json.dumps(input_schema, separators=(",", ":"))
    spec.output_schema_json = (
        json.dumps(output_schema, separators=(",", ":")) if output_schema else None
    )
    return spec


# ----- calls --------------------------------------------------------------------


def _error(
    code: str,
    message: str,
    field: str | None = None,
    correctable: bool = False,
    details: Any = None,
) -> dict[str, Any]:
    return {
        "code": code,
        "message": message,
        "field": field,
        "correctable": correctable,
        "details": None if details is None else json.dumps(to_jsonable(details)),
    }


def _field_of(spec: ToolSpec, ctx: Context, filename: Any) -> str | None:
    """The argument whose path an OSError names, as a JSON Pointer."""
    if not isinstance(filename, str):
        return None
    for arg in spec.path_fields:
        value = _call_args.get(arg)
        if isinstance(value, str):
            try:
                if ctx.path(value) == filename:
                    return "/" + arg
            except ToolError:
                pass
    return None


_call_args: dict[str, Any] = {}


def dispatch(
    name: str, args_json: str, call_id: str, workspace_root: str, idempotency_key: str | None
) -> tuple[bool, Any]:
    """Runs tool ``name``. Returns ``(True, output_json)`` or
    ``(False, tool_error_fields)``."""
    ok, value = dispatch_output(name, args_json, call_id, workspace_root, idempotency_key)
    return (True, value[0]) if ok else (False, value)


def dispatch_output(
    name: str, args_json: str, call_id: str, workspace_root: str, idempotency_key: str | None
) -> tuple[bool, Any]:
    """Runs tool ``name``. Returns ``(True, (output_json, text_or_None))``
    or ``(False, tool_error_fields)``: what the component's ``call`` export
    answers."""
    global _current, _call_args
    spec = _REGISTRY.get(name)
    if spec is None:
        return False, _error("unknown_tool", f"this plugin has no tool named {name!r}")
    ctx = Context(call_id, workspace_root, idempotency_key)
    try:
        raw = json.loads(args_json)
        if not isinstance(raw, dict):
            raise ValueError("the arguments are not a JSON object")
    except ValueError as e:
        return False, _error("invalid_arguments", f"arguments are not a JSON object: {e}", correctable=True)
    _call_args = raw
    _current = ctx
    try:
        kwargs: dict[str, Any] = {}
        try:
            if spec.args_class is not None:
                kwargs[spec.args_param] = convert(raw, spec.args_class)  # type: ignore[index]
            else:
                assert spec.params is not None
                for key, value in raw.items():
                    if key not in spec.params:
                        raise TypeError(f"unknown argument {key!r}")
                    if key in spec.converted:
                        value = convert(value, spec.params[key])
                    kwargs[key] = value
        except (TypeError, ValueError, KeyError) as e:
            return False, _error(
                "invalid_arguments",
                f"arguments do not match the tool's input schema: {e}",
                correctable=True,
            )
        if spec.ctx_param:
            kwargs[spec.ctx_param] = ctx
        result = spec.fn(**kwargs)
        try:
            out = json.dumps(
                result,
                default=json_default,
                ensure_ascii=False,
                allow_nan=False,
                separators=(",", ":"),
            )
        except (TypeError, ValueError) as e:
            raise RuntimeError(f"the tool's output is not JSON: {e}") from e
        text = None
        if spec.text is not None:
            text = spec.text(result)
            if not isinstance(text, str):
                raise RuntimeError(
                    f"the tool's text= function returned {type(text).__name__}, not str"
                )
        return True, (out, text)
    except ToolError as e:
        if e.code not in spec.error_codes:
            return False, _error(
                "internal_error",
                f"the tool raised the undeclared error code {e.code!r}: {e.message}",
            )
        return False, _error(e.code, e.message, e.field, e.correctable, e.details)
    except FileNotFoundError as e:
        return False, _os_error(spec, ctx, e, "not_found", True)
    except (NotADirectoryError, IsADirectoryError) as e:
        return False, _os_error(spec, ctx, e, "not_found", True)
    except PermissionError as e:
        return False, _os_error(spec, ctx, e, "permission_denied", False)
    except OSError as e:
        return False, _os_error(spec, ctx, e, "io_error", False)
    except Exception as e:  # noqa: BLE001 - every other failure is the tool's bug
        traceback.print_exc(file=sys.stderr)
        hint = ""
        if isinstance(e, ImportError):
            hint = (
                " (import every module at the top of the tool module: the build runs the "
                "top level and keeps what it imported; a call cannot load library files)"
            )
        return False, _error("internal_error", f"{type(e).__name__}: {e}{hint}")
    finally:
        _current = None
        _call_args = {}


def _os_error(
    spec: ToolSpec, ctx: Context, e: OSError, code: str, correctable: bool
) -> dict[str, Any]:
    if code not in spec.error_codes:
        traceback.print_exc(file=sys.stderr)
        return _error("internal_error", f"{type(e).__name__}: {e}")
    filename = e.filename
    where = filename
    if isinstance(filename, str) and filename.startswith(ctx.workspace_root + "/"):
        where = filename[len(ctx.workspace_root) + 1 :]
    text = e.strerror or str(e)
    message = f"{where}: {text}" if where else text
    return _error(code, message, _field_of(spec, ctx, filename), correctable)
