// The official TypeScript SDK client over stdio: it spawns mhp-mcp and
// drives it through LineTransport. Run by TestTypeScriptSDKClientStdio.
// Usage: node tsstdio.mjs MHP_MCP_BINARY DEVICE_URL
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [bin, device] = process.argv.slice(2);
const c = new Client({ name: 'ts-stdio', version: '1' });
await c.connect(new StdioClientTransport({ command: bin, args: ['thermo=' + device], stderr: 'ignore' }));
const out = {};
out.tools = (await c.listTools()).tools.length;
const r = await c.callTool({ name: 'mhp_read', arguments: { device: 'thermo', names: ['lid_closed'] } });
out.read = { isError: !!r.isError, structured: r.structuredContent };
const bad = await c.callTool({ name: 'mhp_read', arguments: { device: 'thermo', names: 'lid_closed' } });
out.bad = { isError: !!bad.isError, structured: bad.structuredContent };
await c.close();
console.log(JSON.stringify(out));
