"""Type hints -> closed JSON Schemas (draft 2020-12), and back to values.

Pure Python, no guest-only imports: runs natively (``python -m toolhost_kit
describe``) and inside the component at build time, where the result is
snapshotted, so ``describe()`` and ``call()`` never redo this work.
"""

from __future__ import annotations

import dataclasses
import enum
import types as _pytypes
import typing
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"

#: maxLength given to a ``Path`` string that names no bound of its own.
DEFAULT_PATH_MAX_LEN = 4096


class KitError(Exception):
    """A tool definition the kit cannot turn into a descriptor."""


# ----- markers for ``Annotated[...]`` ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number: ``Annotated[int, Range(1, 500)]``."""

    minimum: float | int | None = None
    maximum: float | int | None = None


@dataclasses.dataclass(frozen=True)
class MinLen:
    """Smallest string length (characters)."""

    value: int


@dataclasses.dataclass(frozen=True)
class MaxLen:
    """Largest string length (characters): ``Annotated[str, MaxLen(1024)]``."""

    value: int


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A regular expression the string must match (JSON Schema ``pattern``)."""

    regex: str


@dataclasses.dataclass(frozen=True)
class MinItems:
    """Smallest list length."""

    value: int


@dataclasses.dataclass(frozen=True)
class MaxItems:
    """Largest list length."""

    value: int


@dataclasses.dataclass(frozen=True)
class Doc:
    """A field's description (a plain string in ``Annotated`` works too)."""

    text: str


@dataclasses.dataclass(frozen=True)
class Path:
    """Marks a string as a workspace-relative path the host authorizes.

    ``Path(read=True)`` adds ``"x-toolhost-path": "read"``;
    ``Path(write=True)`` adds ``"write"`` (write implies read). The host
    checks the path against the caller's grants before the tool runs; the
    tool opens it with ``ctx.path(value)`` (``<workspace_root>/<value>``).
    """

    read: bool = False
    write: bool = False

    @property
    def access(self) -> str:
        return "write" if self.write else "read"


# ----- helpers over typing ----------------------------------------------------

_NOT_REQUIRED = tuple(
    x for x in (getattr(typing, "NotRequired", None), getattr(typing, "Required", None)) if x
)


def _unwrap_annotated(tp: Any) -> tuple[Any, list[Any]]:
    metas: list[Any] = []
    while typing.get_origin(tp) is typing.Annotated:
        args = typing.get_args(tp)
        tp = args[0]
        metas.extend(args[1:])
    if typing.get_origin(tp) in _NOT_REQUIRED:
        return _unwrap_annotated(typing.get_args(tp)[0])[0], metas
    return tp, metas


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, _pytypes.UnionType)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """``Optional[T]`` / ``T | None`` -> ``(T, True)``."""
    if _is_union(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            inner = args[0] if len(args) == 1 else typing.Union[tuple(args)]
            return inner, True
    return tp, False


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception as e:  # a forward reference that does not resolve, ...
        raise KitError(f"cannot read the type hints of {obj!r}: {e}") from e


def class_doc(cls: type) -> str | None:
    doc = cls.__doc__
    if not doc:
        return None
    # dataclasses invent "Name(a: int, b: str)" when there is no docstring.
    if dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        return None
    return " ".join(doc.split()) or None


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


# ----- schema generation ------------------------------------------------------


def schema_for(tp: Any, where: str, *, closed: bool = True) -> dict[str, Any]:
    """The JSON Schema of one annotated type.

    ``where`` names the place for error messages (``csv_summary.path``).
    ``closed`` makes every object schema ``"additionalProperties": false``
    (input schemas must be closed; output schemas are closed too when
    they come from a dataclass or TypedDict, which list every key).
    """
    tp, metas = _unwrap_annotated(tp)
    inner, nullable = _split_optional(tp)
    inner, more = _unwrap_annotated(inner)
    metas = more + metas
    schema = _base(inner, where, closed)
    if nullable:
        t = schema.get("type")
        if isinstance(t, str):
            schema["type"] = [t, "null"]
            if "enum" in schema:
                schema["enum"] = list(schema["enum"]) + [None]
        else:
            schema = {"anyOf": [schema, {"type": "null"}]}
    for meta in metas:
        _apply(schema, meta, where)
    return schema


def _base(tp: Any, where: str, closed: bool) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if origin is typing.Literal:
        values = list(typing.get_args(tp))
        return _enum_schema(values, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp], where)
    if origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        args = typing.get_args(tp)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = args[:1]
        if len(args) != 1:
            raise KitError(f"{where}: use list[T] (or tuple[T, ...]) for arrays, not {tp!r}")
        return {"type": "array", "items": schema_for(args[0], f"{where}[]", closed=closed)}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return object_schema(tp, where, closed=closed)
    if _is_typeddict(tp):
        return object_schema(tp, where, closed=closed)
    if _is_union(tp):
        raise KitError(
            f"{where}: a union ({tp!r}) is not supported; use one type, Optional[T], "
            "a Literal or an Enum"
        )
    if tp is dict or origin is dict:
        if closed:
            raise KitError(
                f"{where}: a dict is an open object; use a dataclass or TypedDict that "
                "names every key"
            )
        return {"type": "object"}
    if tp is Any or tp is object:
        raise KitError(f"{where}: give the value a concrete type (not Any)")
    raise KitError(f"{where}: unsupported type {tp!r}")


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    if not values:
        raise KitError(f"{where}: an empty Literal/Enum")
    kinds = {type(v) for v in values}
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    schema: dict[str, Any] = {}
    if len(kinds) == 1 and next(iter(kinds)) in names:
        schema["type"] = names[next(iter(kinds))]
    else:
        raise KitError(f"{where}: Literal/Enum values must all be str, or all int")
    schema["enum"] = values
    return schema


def _apply(schema: dict[str, Any], meta: Any, where: str) -> None:
    if isinstance(meta, str):
        schema["description"] = " ".join(meta.split())
    elif isinstance(meta, Doc):
        schema["description"] = " ".join(meta.text.split())
    elif isinstance(meta, Range):
        if meta.minimum is not None:
            schema["minimum"] = meta.minimum
        if meta.maximum is not None:
            schema["maximum"] = meta.maximum
    elif isinstance(meta, MinLen):
        schema["minLength"] = meta.value
    elif isinstance(meta, MaxLen):
        schema["maxLength"] = meta.value
    elif isinstance(meta, Pattern):
        schema["pattern"] = meta.regex
    elif isinstance(meta, MinItems):
        schema["minItems"] = meta.value
    elif isinstance(meta, MaxItems):
        schema["maxItems"] = meta.value
    elif isinstance(meta, Path):
        types_ = schema.get("type")
        if types_ != "string" and not (isinstance(types_, list) and "string" in types_):
            raise KitError(f"{where}: Path(...) marks a string, not {types_!r}")
        schema["x-toolhost-path"] = meta.access
        schema.setdefault("maxLength", DEFAULT_PATH_MAX_LEN)
    # Other metadata (e.g. from other libraries) is ignored.


def path_access(tp: Any) -> str | None:
    """``"read"``/``"write"`` when the annotated type carries ``Path``."""
    _, metas = _unwrap_annotated(tp)
    inner, _ = _split_optional(_unwrap_annotated(tp)[0])
    metas += _unwrap_annotated(inner)[1]
    for meta in metas:
        if isinstance(meta, Path):
            return meta.access
    return None


def object_schema(cls: type, where: str, *, closed: bool = True) -> dict[str, Any]:
    """A closed object schema for a dataclass or a TypedDict."""
    hints = _hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            s = schema_for(hints[f.name], f"{where}.{f.name}", closed=closed)
            if "description" in f.metadata:
                s.setdefault("description", " ".join(str(f.metadata["description"]).split()))
            if f.default is not dataclasses.MISSING:
                s["default"] = _json_default(f.default)
            elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
                s["default"] = _json_default(f.default_factory())  # type: ignore[misc]
            else:
                required.append(f.name)
            props[f.name] = s
    else:
        req_keys = getattr(cls, "__required_keys__", frozenset(hints))
        for name, tp in hints.items():
            props[name] = schema_for(tp, f"{where}.{name}", closed=closed)
            if name in req_keys:
                required.append(name)
    schema: dict[str, Any] = {"type": "object"}
    doc = class_doc(cls)
    if doc:
        schema["description"] = doc
    schema["properties"] = props
    schema["required"] = required
    # Closed whether it is an argument or an output: a dataclass or a
    # TypedDict names every key (only a plain `dict` output stays open).
    schema["additionalProperties"] = False
    return schema


# ----- values -----------------------------------------------------------------


def convert(value: Any, tp: Any) -> Any:
    """Turns validated JSON into the annotated Python type (dataclasses,
    enums, floats); everything else passes through."""
    tp, _ = _unwrap_annotated(tp)
    inner, nullable = _split_optional(tp)
    if value is None:
        return None
    inner, _ = _unwrap_annotated(inner)
    if inner is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return inner(value)
    if dataclasses.is_dataclass(inner) and isinstance(inner, type) and isinstance(value, dict):
        hints = _hints(inner)
        return inner(**{k: convert(v, hints[k]) for k, v in value.items()})
    origin = typing.get_origin(inner)
    if origin in (list, tuple, set, frozenset) and isinstance(value, list):
        (item,) = typing.get_args(inner)[:1]
        items = [convert(v, item) for v in value]
        return origin(items) if origin is not list else items
    return value


def needs_convert(tp: Any) -> bool:
    """Whether ``convert`` does anything for values of this type (JSON
    strings, integers, booleans, lists and literals arrive as they are)."""
    tp, _ = _unwrap_annotated(tp)
    inner, _ = _split_optional(tp)
    inner, _ = _unwrap_annotated(inner)
    if inner in (str, int, bool):
        return False
    if typing.get_origin(inner) is typing.Literal:
        return False
    if typing.get_origin(inner) is list:
        return needs_convert(typing.get_args(inner)[0])
    return True


def json_default(value: Any) -> Any:
    """``json.dumps(default=...)`` for dataclasses, enums, sets."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and tuples as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
