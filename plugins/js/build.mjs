#!/usr/bin/env node
// Builds a JavaScript tool module into a toolhost component:
//
//     node plugins/js/build.mjs app.js -o app.wasm [--wit DIR]
//
// 1. stages the tool module's directory (its .js/.mjs files) with the kit
//    next to it as `toolhost-kit.js`, rewriting `from "toolhost-kit"`;
//    and an entry module that re-exports it and adds the `discovery` export
//    (the task words of the tools `plugin([...])` was given);
// 2. assembles the WIT: plugins/js/wit/kit.wit (world `js-plugin` = the
//    toolhost `plugin-with-discovery` world + the WASI filesystem imports), the toolhost
//    contract (the repository's wit/toolhost.wit) and WASI 0.2.12 deps;
// 3. runs componentize-js with the `http` and `fetch-event` features
//    disabled, so the component imports no wasi:http.
//
// Set TOOLHOST_KIT_TEST_TOOLS=1 to add the kit's hidden test tools
// (toolhost's own sandbox tests use them).

import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const KIT_DIR = dirname(fileURLToPath(import.meta.url));
const PINNED = JSON.parse(readFileSync(join(KIT_DIR, "package.json"), "utf8")).dependencies["@bytecodealliance/componentize-js"];

function die(message) {
  console.error(`toolhost-kit: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const out = { apps: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "-o" || a === "--output") out.output = argv[++i];
    else if (a === "--wit") out.wit = argv[++i];
    else if (a === "-h" || a === "--help") {
      console.log("usage: node plugins/js/build.mjs APP.js -o OUT.wasm [--wit DIR]");
      process.exit(0);
    } else if (a.startsWith("-")) die(`unknown option ${a}`);
    else out.apps.push(a);
  }
  if (out.apps.length !== 1) die("name exactly one tool module (APP.js)");
  if (!out.output) die("-o OUT.wasm is required");
  return out;
}

function witDir(given) {
  for (const c of [given, process.env.TOOLHOST_WIT, join(KIT_DIR, "..", "..", "wit")]) {
    if (c && existsSync(join(c, "toolhost.wit"))) return resolve(c);
  }
  die("cannot find the toolhost WIT (wit/toolhost.wit of the toolhost repository); pass --wit DIR or set TOOLHOST_WIT");
}

const KIT_IMPORT = /(\bfrom\s*|\bimport\s*)(["'])toolhost-kit\2/g;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const app = resolve(args.apps[0]);
  if (!existsSync(app)) die(`${args.apps[0]}: no such file`);
  let componentize;
  try {
    ({ componentize } = await import("@bytecodealliance/componentize-js"));
  } catch {
    die(`componentize-js is not installed: run \`npm ci\` in ${KIT_DIR}`);
  }
  const out = resolve(args.output);
  const stage = mkdtempSync(join(tmpdir(), "toolhost-kit-js-"));
  try {
    // The tool module's directory, with the kit import pointed at the copy.
    const srcDir = join(stage, "src");
    mkdirSync(srcDir);
    for (const name of readdirSync(dirname(app))) {
      const from = join(dirname(app), name);
      if (!/\.m?js$/.test(name) || !statSync(from).isFile()) continue;
      const text = readFileSync(from, "utf8").replace(KIT_IMPORT, "$1$2./toolhost-kit.js$2");
      writeFileSync(join(srcDir, name), text);
    }
    const testTools = process.env.TOOLHOST_KIT_TEST_TOOLS === "1";
    const kit = readFileSync(join(KIT_DIR, "toolhost-kit.js"), "utf8").replace(
      "const TEST_TOOLS = false;",
      `const TEST_TOOLS = ${testTools};`,
    );
    writeFileSync(join(srcDir, "toolhost-kit.js"), kit);
    // The component's `discovery` export: the task words `plugin([...])`
    // keeps beside the `tools` export (none when `tools` was not made by it).
    const entry = join(srcDir, "__toolhost_entry.js");
    const appModule = JSON.stringify(`./${basename(app)}`);
    writeFileSync(
      entry,
      `export * from ${appModule};\n` +
        `import { tools as __tools } from ${appModule};\n` +
        `export const discovery = (__tools && __tools.discovery) || { describeWords() { return []; } };\n`,
    );

    const wit = join(stage, "wit");
    mkdirSync(join(wit, "deps"), { recursive: true });
    copyFileSync(join(KIT_DIR, "wit", "kit.wit"), join(wit, "kit.wit"));
    copyFileSync(join(witDir(args.wit), "toolhost.wit"), join(wit, "deps", "toolhost.wit"));
    for (const dep of readdirSync(join(KIT_DIR, "wit", "deps"))) {
      copyFileSync(join(KIT_DIR, "wit", "deps", dep), join(wit, "deps", dep));
    }

    const start = Date.now();
    const { component } = await componentize({
      sourcePath: entry,
      witPath: wit,
      worldName: "js-plugin",
      // No wasi:http: the host links it only for tools that need the network.
      disableFeatures: ["http", "fetch-event"],
    });
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, component);
    const secs = Math.round((Date.now() - start) / 1000);
    console.error(
      `toolhost-kit: built ${args.output} (${(component.length / 1e6).toFixed(1)} MB, ${secs} s, componentize-js ${PINNED})`,
    );
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

main().catch((e) => die(e && e.stack ? e.stack : String(e)));
