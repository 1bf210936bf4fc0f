// The official MCP TypeScript SDK client against an atoll MCP endpoint, schemas checked by AJV
// in strict mode (unknown keywords, unknown formats and bad $refs are errors, not warnings).
//
//   node client.mjs URL CALLS.json
//
// CALLS.json: [{"name": tool, "arguments": {...}, "expect_error": bool}]. Prints one JSON object
// {server, tools, compiled, calls: [{name, is_error, structured_keys}]} and exits 0; any
// schema that AJV refuses, or any result the SDK finds not to match its outputSchema, exits 1.
import { readFileSync } from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { Ajv } from "ajv";
import addFormatsModule from "ajv-formats";

const addFormats = addFormatsModule.default ?? addFormatsModule;

function strictAjv() {
  const ajv = new Ajv({ strict: true, allErrors: true, validateFormats: true });
  addFormats(ajv);
  return ajv;
}

const [url, callsFile] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(callsFile, "utf8"));

const client = new Client(
  { name: "atoll-ts-test", version: "1.0.0" },
  { jsonSchemaValidator: new AjvJsonSchemaValidator(strictAjv()) },
);
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const listed = await client.listTools();
// Listing compiles every output validator synchronously; let the event loop see any socket the
// server closed meanwhile (uvicorn's 5 s keep-alive) before the next request reuses it.
await new Promise((resolve) => setTimeout(resolve, 200));

const results = [];
for (const call of calls) {
  const result = await client.callTool({ name: call.name, arguments: call.arguments });
  if (Boolean(result.isError) !== Boolean(call.expect_error)) {
    throw new Error(`${call.name}: isError=${result.isError}: ${JSON.stringify(result.content).slice(0, 300)}`);
  }
  results.push({
    name: call.name,
    is_error: Boolean(result.isError),
    structured_keys: Object.keys(result.structuredContent ?? {}).sort(),
  });
}
await client.close();

// Every schema must compile under AJV strict mode (done last: compiling blocks the event loop).
const checker = strictAjv();
let compiled = 0;
for (const tool of listed.tools) {
  for (const [label, schema] of [["inputSchema", tool.inputSchema], ["outputSchema", tool.outputSchema]]) {
    if (schema === undefined) {
      throw new Error(`${tool.name}: no ${label}`);
    }
    try {
      checker.compile(schema);
      compiled += 1;
    } catch (error) {
      throw new Error(`${tool.name}: AJV strict refuses its ${label}: ${error.message}`);
    }
  }
}
console.log(JSON.stringify({ server: client.getServerVersion(), tools: listed.tools.length, compiled, calls: results }));
