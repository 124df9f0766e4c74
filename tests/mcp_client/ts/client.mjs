// A scripted MCP session with the official TypeScript SDK client
// (`@modelcontextprotocol/sdk`, pinned in package.json), speaking the step
// language of ../sdk_client.py (the Python SDK's client): see that file for
// the steps and the report lines.
//
// Every tools/call goes through `Client.callTool`, which parses the answer
// and checks an ok answer's `structuredContent` against the tool's
// `outputSchema` from the last tools/list (so the script lists before it
// calls a tool it has not seen listed); a step the SDK refuses is reported
// with ok false.
//
// Usage:
//   node client.mjs --steps steps.json -- toolhost serve --stdio ...
//   node client.mjs --steps steps.json --url http://127.0.0.1:8080/mcp \
//       [--header "Authorization: Bearer TOKEN"]
// `--steps -` reads the steps from stdin. Exits 0 when every step ran, 2 on
// bad usage.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

// toolhost's envelope key in a tools/call result's _meta.
const ENVELOPE = "dev.toolhost/observation";
// The _meta key that approves an irreversible call with its dry run's plan.
const PLAN_TOKEN = "dev.toolhost/plan_token";
// Most calls one paging step makes.
const MAX_CALLS = 10_000;

function usage(message) {
  process.stderr.write(`client.mjs: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { headers: {}, command: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      args.command = argv.slice(i + 1);
      break;
    } else if (a === "--steps") {
      args.steps = argv[++i];
    } else if (a === "--url") {
      args.url = argv[++i];
    } else if (a === "--header") {
      const h = argv[++i] ?? "";
      const at = h.indexOf(":");
      if (at < 0) usage(`--header ${JSON.stringify(h)}: expected NAME: VALUE`);
      args.headers[h.slice(0, at).trim()] = h.slice(at + 1).trim();
    } else {
      usage(`unknown argument ${JSON.stringify(a)}`);
    }
  }
  if (!args.steps) usage("--steps is required");
  if ((args.command.length > 0) === Boolean(args.url)) {
    usage("give either --url or a server command (after --)");
  }
  return args;
}

// The URIs of the resource_link blocks of a tools/call result.
const linksOf = (result) =>
  (result.content ?? []).filter((b) => b.type === "resource_link").map((b) => b.uri);

async function listAll(client) {
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

async function runStep(client, step, results, listed, steps) {
  // Lists first when a tool was never listed, so its output is validated.
  const call = async (name, args, meta) => {
    if (!listed.has(name)) {
      for (const t of await listAll(client)) listed.add(t.name);
    }
    const params = { name, arguments: args ?? {} };
    if (meta) params._meta = meta;
    return client.callTool(params);
  };
  switch (step.op) {
    case "list": {
      const tools = await listAll(client);
      for (const t of tools) listed.add(t.name);
      return { tools };
    }
    case "call":
      return call(step.tool, step.arguments, step.meta);
    case "read":
      return client.readResource({ uri: step.uri });
    case "read_links": {
      const earlier = results[step.of];
      if (!earlier.ok) throw new Error(`step ${step.of} failed: nothing to read`);
      const reads = [];
      for (const uri of linksOf(earlier.result)) reads.push(await client.readResource({ uri }));
      return { reads };
    }
    case "follow_ups": {
      const earlier = results[step.of];
      if (!earlier.ok) throw new Error(`step ${step.of} failed: nothing to follow`);
      let follow = earlier.result.structuredContent?.follow_up;
      const answers = [];
      while (follow && answers.length < MAX_CALLS) {
        const result = await call(follow.tool, follow.arguments);
        answers.push(result);
        follow = result._meta?.[ENVELOPE]?.truncated?.follow_up;
      }
      return { answers };
    }
    case "pages": {
      const args = { ...(step.arguments ?? {}) };
      const answers = [];
      while (answers.length < MAX_CALLS) {
        const result = await call(step.tool, args);
        answers.push(result);
        const next = result.structuredContent?.[step.next];
        if (next && typeof next === "object") Object.assign(args, next);
        else if (typeof next === "string") args.cursor = next;
        else break;
      }
      return { answers };
    }
    case "bad": {
      let result;
      try {
        result = await call(step.tool, step.arguments);
      } catch (e) {
        // A JSON-RPC error answer. The SDK's own refusal of a result (its
        // output schema check) is an McpError too: that one fails the step.
        if (e instanceof McpError && !/structured content|output schema/i.test(e.message)) {
          return { jsonrpc_error: { code: e.code, message: e.message } };
        }
        throw e;
      }
      if (!result.isError) throw new Error(`expected an error, got an ok answer: ${JSON.stringify(result)}`);
      return result;
    }
    case "approve": {
      const earlier = results[step.of];
      if (!earlier.ok) throw new Error(`step ${step.of} failed: no plan to approve`);
      const token = earlier.result.structuredContent?.plan_token;
      if (!token) throw new Error(`step ${step.of} answered no plan_token`);
      const planned = steps[step.of];
      return call(planned.tool, planned.arguments, { [PLAN_TOKEN]: token });
    }
    case "find": {
      const found = await call("find_tools", { query: step.query });
      const hits = (found.structuredContent?.tools ?? []).map((t) => t.name);
      const name = hits.find((h) => Object.hasOwn(step.calls, h));
      if (name === undefined) {
        throw new Error(`find_tools found none of ${Object.keys(step.calls)}: ${hits}`);
      }
      const tools = await listAll(client);
      for (const t of tools) listed.add(t.name);
      const result = await call(name, step.calls[name]);
      return { found, hits, listed: tools.map((t) => t.name), called: name, result };
    }
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const steps = JSON.parse(readFileSync(args.steps === "-" ? 0 : args.steps, "utf8"));
  const transport = args.url
    ? new StreamableHTTPClientTransport(new URL(args.url), {
        requestInit: { headers: args.headers },
      })
    : new StdioClientTransport({
        command: args.command[0],
        args: args.command.slice(1),
        stderr: "inherit",
      });
  const client = new Client({ name: "toolhost-ts-sdk-client", version: "1" });
  await client.connect(transport);
  const results = [];
  const listed = new Set();
  for (const [n, step] of steps.entries()) {
    const line = { step: n, op: step.op };
    try {
      line.result = await runStep(client, step, results, listed, steps);
      line.ok = true;
    } catch (e) {
      // Reported, so the caller sees the SDK's refusal.
      line.ok = false;
      line.error = `${e?.name ?? "Error"}: ${e?.message ?? e}`;
    }
    results.push(line);
    process.stdout.write(JSON.stringify(line) + "\n");
  }
  await client.close();
}

await main();
