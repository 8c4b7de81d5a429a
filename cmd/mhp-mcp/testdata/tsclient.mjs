// A real MCP peer for mhp-mcp: the official TypeScript SDK client. Run by
// TestTypeScriptSDKClient (see ts_test.go); prints one JSON object of what
// it saw. Usage: node tsclient.mjs URL TOKEN
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, token] = process.argv.slice(2);

const asked = [];

// connect makes a client; with person set, it answers confirmations yes
// (elicitation), as a host whose user clicked "Go ahead".
async function connect(name, person) {
  const c = new Client({ name, version: '1' }, person ? { capabilities: { elicitation: {} } } : undefined);
  if (person) {
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return { action: 'accept', content: { confirm: true } };
    });
  }
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
const a = await connect('ts-a', true);
const b = await connect('ts-b');
const tools = await a.listTools();
out.tools = tools.tools.map((t) => t.name);
out.toolsBytes = JSON.stringify(tools).length;
out.find = await call(a, 'mhp_find', { query: 'pcr', state: 'idle' });
out.acquireA = await call(a, 'mhp_lab', { op: 'acquire', device: 'thermo', ttl_s: 60 });
out.writeA = await call(a, 'mhp_write', { device: 'thermo', name: 'target_temperature', value: 50 });
out.writeB = await call(b, 'mhp_write', { device: 'thermo', name: 'target_temperature', value: 60 });
out.closeLid = await call(a, 'mhp_invoke', { device: 'thermo', action: 'close_lid', wait_s: 30 });
out.closeLidB = await call(b, 'mhp_invoke', { device: 'thermo', action: 'close_lid', wait_s: 30 });
out.asked = asked;
{
  // Progress, then cancel: the SDK sends notifications/cancelled on abort.
  const ac = new AbortController();
  const fallback = setTimeout(() => ac.abort(), 20000);
  const progress = [];
  const started = Date.now();
  try {
    const r = await a.callTool({ name: 'mhp_invoke', arguments: { device: 'thermo', action: 'run_protocol',
      params: { steps: [{ temp: 95, hold_s: 3600 }], cycles: 1 }, wait_s: 600 } }, undefined,
    { signal: ac.signal, timeout: 120000, onprogress: (p) => { progress.push(p.progress); ac.abort(); } });
    out.cancel = { aborted: false, result: r };
  } catch (e) {
    out.cancel = { aborted: true, error: String(e) };
  }
  clearTimeout(fallback);
  out.cancel.progress = progress;
  out.cancel.ms = Date.now() - started;
}
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
