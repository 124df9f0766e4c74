// markdown_outline: a toolhost tool written in JavaScript with the kit.
//
// Build it into a component and call it (see docs/js.md):
//
//     node plugins/js/build.mjs plugins/js/examples/markdown_outline.js -o markdown_outline.wasm
//     toolhost --plugin markdown_outline.wasm call markdown_outline '{"path":"docs/guide.md"}' --allow-read docs

import { plugin, readText, s, tool } from "toolhost-kit";

const MAX_FILE_BYTES = 8 * 1024 * 1024;
const MAX_TEXT_CHARS = 200;

/** Headings of a Markdown text: ATX (`## Title`) and setext (`Title` over `===`/`---`), outside code fences and front matter. */
function outline(text, maxLevel) {
  const lines = text.split(/\r\n|\n|\r/);
  const headings = [];
  let fence = null; // the opening fence ("```" or "~~~", with its length) while inside a code block
  let start = 0;
  if (lines[0] === "---") {
    // YAML front matter: skip to the closing line.
    const end = lines.indexOf("---", 1);
    if (end > 0) start = end + 1;
  }
  for (let i = start; i < lines.length; i++) {
    const line = lines[i];
    const f = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (f) {
      if (!fence) fence = f[1];
      else if (f[1][0] === fence[0] && f[1].length >= fence.length && line.trim() === f[1]) fence = null;
      continue;
    }
    if (fence) continue;
    const atx = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (atx) {
      headings.push({ level: atx[1].length, text: (atx[2] || "").trim(), line: i + 1 });
      continue;
    }
    const next = lines[i + 1];
    if (next !== undefined && line.trim() && !/^ {0,3}([-*_>]|\d+[.)]|\s*$)/.test(line)) {
      const u = /^ {0,3}(=+|-+)[ \t]*$/.exec(next);
      if (u) {
        headings.push({ level: u[1][0] === "=" ? 1 : 2, text: line.trim(), line: i + 1 });
        i++;
      }
    }
  }
  return headings.filter((h) => h.level <= maxLevel);
}

const markdownOutline = tool({
  name: "markdown_outline",
  title: "Outline a Markdown file",
  keywords: ["outline", "headings", "table of contents", "sections", "markdown", "structure"],
  examples: [
    "list the sections of the README",
    "show the table of contents of docs/guide.md",
    "which headings does the changelog have",
  ],
  description:
    "Lists the headings of one Markdown file with their level (1-6) and 1-based line number, in " +
    "document order: ATX (# Title) and setext (underlined) headings, skipping fenced code blocks " +
    "and YAML front matter. Use it to find the section to read before viewing a long document; " +
    "do not use it for non-Markdown files. Reads at most 8 MiB of UTF-8 text. Output: {path, " +
    "headings: [{level, text (clipped to 200 characters), line}] (at most max_headings), total " +
    "(headings found at or above max_level), omitted}, under 128 KiB. Errors: not_found, not_text " +
    "(not UTF-8), too_large. Read-only.",
  sideEffect: "read-only",
  errors: ["not_text", "too_large"],
  timeoutMs: 5000,
  maxOutputBytes: 128 * 1024,
  input: {
    path: s.path("read", "Markdown file, relative to the workspace root.", { minLength: 1, maxLength: 1024 }),
    max_level: s.integer(1, 6, "Deepest heading level to list (1 = only top-level headings).", { default: 6 }),
    max_headings: s.integer(1, 1000, "Most headings to return; the rest are counted in omitted.", { default: 200 }),
  },
  output: {
    type: "object",
    properties: {
      path: { type: "string" },
      headings: {
        type: "array",
        items: {
          type: "object",
          properties: {
            level: { type: "integer", minimum: 1, maximum: 6 },
            text: { type: "string" },
            line: { type: "integer", minimum: 1 },
          },
          required: ["level", "text", "line"],
          additionalProperties: false,
        },
      },
      total: { type: "integer" },
      omitted: { type: "integer" },
    },
    required: ["path", "headings", "total", "omitted"],
    additionalProperties: false,
  },
  run(args, ctx) {
    const text = readText(ctx, args.path, { field: "/path", maxBytes: MAX_FILE_BYTES });
    const all = outline(text.replace(/^\uFEFF/, ""), args.max_level);
    const headings = all.slice(0, args.max_headings).map((h) => ({ ...h, text: h.text.slice(0, MAX_TEXT_CHARS) }));
    return { path: args.path, headings, total: all.length, omitted: all.length - headings.length };
  },
  // What the model reads: one line per heading, indented by level, with its line number.
  text(out) {
    const rows = out.headings.map((h) => `${"  ".repeat(h.level - 1)}${"#".repeat(h.level)} ${h.text} (line ${h.line})`);
    const more = out.omitted ? `; ${out.omitted} more not shown (raise max_headings)` : "";
    return `${out.path}: ${out.total} headings${more}\n${rows.join("\n")}`;
  },
});

export const tools = plugin([markdownOutline]);
