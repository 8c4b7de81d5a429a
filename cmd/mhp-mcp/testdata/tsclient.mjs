// A real MCP peer for mhp-mcp: the official TypeScript SDK client. Run by
// TestTypeScriptSDKClient (see ts_test.go); prints one JSON object of what
// it saw. Usage: node tsclient.mjs URL TOKEN
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token] = process.argv.slice(2);

async function connect(name) {
  const c = new Client({ name, version: '1' });
  // Lowercase scheme on purpose: RFC 9110 makes it case-insensitive.
  await c.connect(new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: 'bearer ' + token } },
  }));
  return c;
}

async function call(c, name, args) {
  try {
    const r = await c.callTool({ name, arguments: args });
    return { isError: !!r.isError, structured: r.structuredContent ?? null, bytes: JSON.stringify(r).length };
  } catch (e) {
    return { thrown: String(e) };
  }
}

const out = {};
const a = await connect('ts-a');
const b = await connect('ts-b');
const tools = await a.listTools();
out.tools = tools.tools.map((t) => t.name);
out.toolsBytes = JSON.stringify(tools).length;
out.find = await call(a, 'mhp_find', { query: 'pcr', state: 'idle' });
out.acquireA = await call(a, 'mhp_lab', { op: 'acquire', device: 'thermo', ttl_s: 60 });
out.writeA = await call(a, 'mhp_write', { device: 'thermo', name: 'target_temperature', value: 50 });
out.writeB = await call(b, 'mhp_write', { device: 'thermo', name: 'target_temperature', value: 60 });
out.namesString = await call(a, 'mhp_read', { device: 'thermo', names: 'block_temperature' });
out.waitNegative = await call(a, 'mhp_job', { device: 'thermo', id: 'x', op: 'wait', wait_s: -5 });
out.limitMany = await call(a, 'mhp_find', { limit: 'many' });
out.describeFull = await call(a, 'mhp_describe', { device: 'thermo', detail: 'full' });
out.updates = await call(a, 'mhp_lab', { op: 'updates' });
out.script = await call(a, 'mhp_run', { script: 'fail("on purpose")' });
out.estop = await call(b, 'mhp_estop', { reason: 'ts drill' });
await a.close();
await b.close();
console.log(JSON.stringify(out));
