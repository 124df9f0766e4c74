// toolhost-kit: write toolhost tools in JavaScript.
//
// A tool is an object literal: its name, description, side effect, error
// codes, its input schema as an object literal of JSON Schema properties
// (the `s` helpers are optional sugar) and a `run(args, ctx)` function.
// `plugin([...tools])` makes the `toolhost:plugin/tools` export (and the
// build adds the `discovery` export of the tools' `keywords` and
// `examples`, the words of the tasks each is for):
//
//     import { plugin, readText, s, tool, ToolError } from "toolhost-kit";
//
//     const lineCount = tool({
//       name: "line_count",
//       description: "Counts the lines of one UTF-8 text file. ...",
//       sideEffect: "read-only",
//       keywords: ["count", "lines"],
//       examples: ["how many lines does main.rs have"],
//       input: { path: s.path("read", "File, relative to the workspace root.") },
//       run(args, ctx) {
//         return { lines: readText(ctx, args.path, { field: "/path" }).split("\n").length };
//       },
//       // Optional: the compact text a model reads (the JSON stays the data).
//       text: (out) => `${out.lines} lines`,
//     });
//
//     export const tools = plugin([lineCount]);
//
// `node plugins/js/build.mjs app.js -o app.wasm` builds the component (see
// docs/js.md). This file runs inside the component (StarlingMonkey); the
// build copies it next to the tool module as `toolhost-kit.js`.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

// Replaced by build.mjs: true adds the hidden test tools (TOOLHOST_KIT_TEST_TOOLS=1).
const TEST_TOOLS = false;

const DRAFT = "https://json-schema.org/draft/2020-12/schema";
const NAME_RE = /^[a-z][a-z0-9_]{0,63}$/;
const SIDE_EFFECTS = ["read-only", "idempotent", "reversible", "irreversible"];
const KIT_CODES = ["invalid_arguments", "internal_error"];
const FILE_CODES = ["invalid_path", "not_found", "permission_denied", "io_error"];

export const DEFAULT_TIMEOUT_MS = 30000;
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** maxLength given to a path string that names no bound of its own. */
export const DEFAULT_PATH_MAX_LENGTH = 4096;

/**
 * A failure the tool reports itself (the WIT `tool-error`). `code` must be
 * declared in the tool's `errors` (or be one the kit adds); `field` is a
 * JSON Pointer to the argument at fault; `details` is any JSON value.
 */
export class ToolError extends Error {
  constructor(code, message, { field, correctable = false, details } = {}) {
    super(message);
    this.name = "ToolError";
    this.code = code;
    this.field = field;
    this.correctable = correctable;
    this.details = details;
  }
}

/** A definition the kit cannot turn into a descriptor. */
export class KitError extends Error {}

function withDoc(schema, description, extra) {
  const out = { ...schema, ...(extra || {}) };
  if (description !== undefined) out.description = description;
  return out;
}

/**
 * Optional helpers for property schemas. Each returns a plain JSON Schema
 * object; `extra` adds or overrides keywords (e.g. `{ default: 10 }`).
 */
export const s = {
  /** A workspace-relative path the host authorizes: access "read" or "write". */
  path(access, description, extra) {
    if (access !== "read" && access !== "write") {
      throw new KitError(`s.path: access must be "read" or "write", not ${JSON.stringify(access)}`);
    }
    return withDoc(
      { type: "string", maxLength: DEFAULT_PATH_MAX_LENGTH, "x-toolhost-path": access },
      description,
      extra,
    );
  },
  string(description, extra) {
    return withDoc({ type: "string" }, description, extra);
  },
  integer(minimum, maximum, description, extra) {
    return withDoc({ type: "integer", minimum, maximum }, description, extra);
  },
  number(minimum, maximum, description, extra) {
    return withDoc({ type: "number", minimum, maximum }, description, extra);
  },
  boolean(description, extra) {
    return withDoc({ type: "boolean" }, description, extra);
  },
  enum(values, description, extra) {
    const type = typeof values[0] === "number" ? "integer" : "string";
    return withDoc({ type, enum: values }, description, extra);
  },
  array(items, maxItems, description, extra) {
    return withDoc({ type: "array", items, maxItems }, description, extra);
  },
};

function isNullable(schema) {
  const t = schema.type;
  return Array.isArray(t) ? t.includes("null") : t === "null";
}

/** The closed input schema of a tool from its `input` literal. */
function inputSchema(name, input) {
  let schema;
  if (input && input.type === "object" && input.properties) {
    schema = { ...input };
  } else {
    const properties = input || {};
    const required = Object.keys(properties).filter(
      (k) => !("default" in properties[k]) && !isNullable(properties[k]),
    );
    schema = { type: "object", properties, required, additionalProperties: false };
  }
  if (schema.additionalProperties !== false) {
    throw new KitError(`${name}: the input schema must be closed (additionalProperties: false)`);
  }
  if (!Array.isArray(schema.required)) schema.required = [];
  return { $schema: DRAFT, ...schema };
}

function pathFields(schema) {
  const out = {};
  for (const [key, prop] of Object.entries(schema.properties || {})) {
    if (prop && (prop["x-toolhost-path"] === "read" || prop["x-toolhost-path"] === "write")) {
      out[key] = prop["x-toolhost-path"];
    }
  }
  return out;
}

/**
 * Defines one tool. Fields: `name` (verb_object), `title`, `description`
 * (when to use it and when not, inputs, output and its size, errors, side
 * effect), `sideEffect` ("read-only" | "idempotent" | "reversible" |
 * "irreversible", the default), `errors` (codes `run` throws itself),
 * `input` (property schemas, or a whole closed object schema), `output`
 * (optional output schema), `fsRead`/`fsWrite` (default: from the path
 * properties), `networkHosts`, `timeoutMs`, `maxOutputBytes`, `keywords`
 * (short words of the tasks the tool is for: "rename", "move"; at most 24
 * of at most 40 bytes and three words), `examples` (whole task phrasings a
 * user would write: "move the old logs into archive/"; at most 12 of at
 * most 200 bytes, one line each), and `run(args, ctx)` returning a
 * JSON-serializable object.
 *
 * A property is required unless it has a `default` (applied by the kit)
 * or its type includes "null".
 */
export function tool(def) {
  const name = def.name;
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new KitError(`tool name ${JSON.stringify(name)} must match ^[a-z][a-z0-9_]{0,63}$`);
  }
  const sideEffect = def.sideEffect ?? "irreversible";
  if (!SIDE_EFFECTS.includes(sideEffect)) {
    throw new KitError(`${name}: sideEffect must be one of ${SIDE_EFFECTS.join(", ")}`);
  }
  if (typeof def.description !== "string" || !def.description.trim()) {
    throw new KitError(`${name}: give the tool a description`);
  }
  if (typeof def.run !== "function") throw new KitError(`${name}: run(args, ctx) is missing`);
  if (def.text !== undefined && typeof def.text !== "function") {
    throw new KitError(`${name}: text must be a function from the result to a string`);
  }
  const programs = [...(def.programs || [])];
  for (const p of programs) {
    if (typeof p !== "string" || !p) throw new KitError(`${name}: programs must be program names, absolute paths or "any"`);
  }
  const keywords = taskWords(name, "keywords", def.keywords, 24, 40, 3);
  const examples = taskWords(name, "examples", def.examples, 12, 200, 0);
  const input = inputSchema(name, def.input);
  const paths = pathFields(input);
  const fsWrite = def.fsWrite ?? Object.values(paths).includes("write");
  const fsRead = def.fsRead ?? (Object.keys(paths).length > 0 && !fsWrite);
  if (fsWrite && sideEffect === "read-only") {
    throw new KitError(`${name}: a read-only tool cannot write files; raise sideEffect`);
  }
  const codes = [];
  for (const code of [...(def.errors || []), ...KIT_CODES, ...(fsRead || fsWrite ? FILE_CODES : [])]) {
    if (!NAME_RE.test(code)) throw new KitError(`${name}: error code ${JSON.stringify(code)} is not snake_case`);
    if (!codes.includes(code)) codes.push(code);
  }
  let output;
  if (def.output) {
    if (def.output.type !== "object") throw new KitError(`${name}: the output schema must be an object`);
    output = { $schema: DRAFT, ...def.output };
  }
  const defaults = {};
  for (const [k, prop] of Object.entries(input.properties)) {
    if ("default" in prop) defaults[k] = prop.default;
  }
  return {
    name,
    run: def.run,
    text: def.text,
    defaults,
    paths,
    codes,
    words: { name, keywords, examples },
    descriptor: {
      name,
      title: def.title,
      description: def.description.trim(),
      inputSchema: JSON.stringify(input),
      outputSchema: output ? JSON.stringify(output) : undefined,
      sideEffect,
      needs: {
        fsRead: Boolean(fsRead),
        fsWrite: Boolean(fsWrite),
        networkHosts: [...(def.networkHosts || [])],
        exec: programs,
      },
      errorCodes: codes,
      defaultTimeoutMs: def.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      maxOutputBytes: def.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
      // The kit exports no planner or prober.
      supportsDryRun: false,
      supportsProbe: false,
    },
  };
}

/**
 * Checks keywords or examples against the host's bounds (its lint refuses
 * a tool beyond them), so a mistake fails at build time. `maxWords` 0: no
 * word limit.
 */
function taskWords(name, what, items, most, maxBytes, maxWords) {
  if (items === undefined) return [];
  if (!Array.isArray(items)) throw new KitError(`${name}: ${what} must be an array of strings`);
  if (items.length > most) throw new KitError(`${name}: ${what} has ${items.length} entries; at most ${most}`);
  const seen = new Set();
  items.forEach((item, i) => {
    if (typeof item !== "string" || !item.trim()) throw new KitError(`${name}: ${what}[${i}] must be a non-empty string`);
    const bytes = new TextEncoder().encode(item).length;
    if (bytes > maxBytes) throw new KitError(`${name}: ${what}[${i}] is ${bytes} bytes; at most ${maxBytes}`);
    if (/[\u0000-\u001f\u007f-\u009f]/.test(item)) {
      throw new KitError(`${name}: ${what}[${i}] contains a control character or line break`);
    }
    if (maxWords && item.trim().split(/\s+/).length > maxWords) {
      throw new KitError(`${name}: ${what}[${i}] has more than ${maxWords} words; a whole phrasing is an example`);
    }
    const key = item.trim().toLowerCase();
    if (seen.has(key)) throw new KitError(`${name}: ${what}[${i}] ${JSON.stringify(item)} is listed twice`);
    seen.add(key);
  });
  return [...items];
}

/** Per-call facts, and workspace-relative paths turned into guest paths. */
export class Context {
  constructor(callId, workspaceRoot, idempotencyKey) {
    this.callId = callId;
    this.workspaceRoot = workspaceRoot;
    this.idempotencyKey = idempotencyKey;
  }

  /**
   * `<workspaceRoot>/<relative>`. The host already authorized every path
   * argument; this is defence in depth: an absolute path or a `..`
   * component throws `invalid_path`.
   */
  path(relative, field) {
    if (relative.startsWith("/")) {
      throw new ToolError("invalid_path", `path ${JSON.stringify(relative)} is absolute; paths are relative to the workspace root`, { field, correctable: true });
    }
    const parts = [];
    for (const part of relative.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") {
        throw new ToolError("invalid_path", `path ${JSON.stringify(relative)} contains a '..' component`, { field, correctable: true });
      }
      parts.push(part);
    }
    return parts.length ? `${this.workspaceRoot}/${parts.join("/")}` : this.workspaceRoot;
  }
}

// ----- files ---------------------------------------------------------------

function fsError(err, shown, field) {
  const code = err && typeof err === "object" && "payload" in err ? err.payload : err;
  const what = typeof code === "string" ? code : String(err);
  switch (what) {
    case "no-entry":
    case "not-directory":
    case "is-directory":
      return new ToolError("not_found", `${shown}: ${what.replace("-", " ")}`, { field, correctable: true });
    case "access":
    case "not-permitted":
    case "read-only":
      return new ToolError("permission_denied", `${shown}: ${what}`, { field });
    default:
      return new ToolError("io_error", `${shown}: ${what}`, { field });
  }
}

/** Opens an absolute guest path through the preopen that holds it. */
function openGuest(guestPath, shown, field) {
  let best;
  for (const [desc, dir] of getDirectories()) {
    const root = dir.endsWith("/") ? dir.slice(0, -1) : dir;
    if ((guestPath === root || guestPath.startsWith(root + "/")) && (!best || root.length > best[1].length)) {
      best = [desc, root];
    }
  }
  if (!best) {
    throw new ToolError("not_found", `${shown}: no such file (only granted directories are visible)`, { field, correctable: true });
  }
  const rel = guestPath.slice(best[1].length + 1) || ".";
  try {
    return best[0].openAt({ symlinkFollow: true }, rel, {}, { read: true });
  } catch (e) {
    throw fsError(e, shown, field);
  }
}

/**
 * Reads a file: `path` is workspace-relative (a path argument) or, with
 * `{ guest: true }`, an absolute guest path. Throws `not_found`,
 * `permission_denied`, `io_error` or, past `maxBytes`, `too_large`
 * (declare it in `errors` if you pass `maxBytes`).
 */
export function readBytes(ctx, path, { field, maxBytes, guest = false } = {}) {
  const guestPath = guest ? path : ctx.path(path, field);
  const file = openGuest(guestPath, path, field);
  try {
    const size = Number(file.stat().size);
    if (maxBytes !== undefined && size > maxBytes) {
      throw new ToolError("too_large", `${path} is ${size} bytes; the limit is ${maxBytes}`, {
        field,
        details: { bytes: size, limit: maxBytes },
      });
    }
    const chunks = [];
    let offset = 0n;
    let total = 0;
    for (;;) {
      const [chunk, eof] = file.read(1048576n, offset);
      if (chunk.length) {
        chunks.push(chunk);
        total += chunk.length;
        offset += BigInt(chunk.length);
      }
      if (eof || chunk.length === 0) break;
      if (maxBytes !== undefined && total > maxBytes) {
        throw new ToolError("too_large", `${path} is over ${maxBytes} bytes`, { field });
      }
    }
    const out = new Uint8Array(total);
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  } catch (e) {
    if (e instanceof ToolError) throw e;
    throw fsError(e, path, field);
  }
}

/**
 * Reads a UTF-8 text file (see `readBytes`); invalid UTF-8 throws
 * `not_text` (declare it in `errors`). A leading BOM is dropped.
 */
export function readText(ctx, path, options = {}) {
  const bytes = readBytes(ctx, path, options);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new ToolError("not_text", `${path} is not UTF-8 text`, { field: options.field, correctable: true });
  }
}

// ----- the export ------------------------------------------------------------

function toolError(code, message, { field, correctable = false, details } = {}) {
  const payload = {
    code,
    message,
    field: field ?? undefined,
    correctable: Boolean(correctable),
    details: details === undefined ? undefined : JSON.stringify(details),
  };
  // componentize-js lowers a thrown value's `payload` as the `err` case.
  const e = new Error(message);
  e.payload = payload;
  return e;
}

function testTools() {
  return [
    tool({
      name: "kit_js_echo",
      description: "Test only: returns the number it is given, to measure call overhead.",
      sideEffect: "read-only",
      input: { value: s.integer(0, 1000000, "The number to echo back") },
      timeoutMs: 1000,
      maxOutputBytes: 64,
      run(args) {
        return { value: args.value };
      },
    }),
    tool({
      name: "kit_js_spin",
      description: "Test only: loops forever, to show that fuel and the deadline stop a runaway guest. Never returns.",
      sideEffect: "read-only",
      input: {},
      timeoutMs: 60000,
      maxOutputBytes: 256,
      run() {
        let n = 0;
        for (;;) n++;
      },
    }),
    tool({
      name: "kit_js_open",
      description: "Test only: reads any guest path the sandbox may hold, to show that only granted directories are visible. Returns the size read.",
      sideEffect: "read-only",
      fsRead: true,
      maxOutputBytes: 256,
      input: { guest_path: s.string("Absolute guest path to read", { maxLength: 4096 }) },
      run(args, ctx) {
        return { bytes: readBytes(ctx, args.guest_path, { guest: true, field: "/guest_path" }).length };
      },
    }),
  ];
}

/**
 * The `toolhost:plugin/tools` export over a list of `tool(...)`s:
 * `export const tools = plugin([a, b]);`
 */
export function plugin(list) {
  const all = TEST_TOOLS ? [...list, ...testTools()] : [...list];
  const byName = new Map();
  for (const t of all) {
    if (byName.has(t.name)) throw new KitError(`two tools are named ${t.name}`);
    byName.set(t.name, t);
  }
  const descriptors = all.map((t) => t.descriptor);
  const words = all.map((t) => t.words).filter((w) => w.keywords.length || w.examples.length);
  return {
    // The `discovery` export, which the build's entry module exports.
    discovery: {
      describeWords() {
        return words;
      },
    },
    describe() {
      return descriptors;
    },
    call(name, argsJson, context) {
      const t = byName.get(name);
      if (!t) throw toolError("unknown_tool", `this plugin has no tool named ${JSON.stringify(name)}`);
      let args;
      try {
        args = JSON.parse(argsJson);
      } catch (e) {
        throw toolError("invalid_arguments", `arguments are not JSON: ${e.message}`, { correctable: true });
      }
      if (args === null || typeof args !== "object" || Array.isArray(args)) {
        throw toolError("invalid_arguments", "arguments are not a JSON object", { correctable: true });
      }
      for (const [k, v] of Object.entries(t.defaults)) {
        if (!(k in args)) args[k] = JSON.parse(JSON.stringify(v));
      }
      const ctx = new Context(context.callId, context.workspaceRoot, context.idempotencyKey);
      let out;
      let text;
      try {
        const result = t.run(args, ctx);
        out = JSON.stringify(result);
        if (typeof out !== "string") throw new TypeError("run() returned nothing serializable");
        if (t.text) {
          text = t.text(result);
          if (typeof text !== "string") throw new TypeError("text() did not return a string");
        }
      } catch (e) {
        if (e instanceof ToolError) {
          if (!t.codes.includes(e.code)) {
            throw toolError("internal_error", `the tool threw the undeclared error code ${JSON.stringify(e.code)}: ${e.message}`);
          }
          throw toolError(e.code, e.message, e);
        }
        console.error(e && e.stack ? `${e}\n${e.stack}` : String(e));
        throw toolError("internal_error", `${e && e.name ? e.name : "Error"}: ${e && e.message ? e.message : String(e)}`);
      }
      return { json: out, text };
    },
  };
}
