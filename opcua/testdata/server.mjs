// The real OPC UA peer of the opcua adapter's integration tests:
// node-opcua 2.186.4 (install with ./install.sh).
//
//   node server.mjs <port> <pki-dir>
//
// Listens on 127.0.0.1:<port>, security None and Basic256Sha256
// SignAndEncrypt, anonymous or user "mhp" / password "secret"; prints
// "READY <port> <bound addresses>" once serving. Address space (namespace "urn:mhp:testserver",
// string ids):
//
//   Plant.Temperature   Double, read only, changes on Control.SetTemperature
//   Plant.DoorClosed    Boolean, read only
//   Plant.Counter       Int32, read only (writes: BadNotWritable)
//   Plant.Setpoint      Double, writable, an AnalogItem (EURange 0..100,
//                       EngineeringUnits degC); the server refuses values
//                       outside 0..100 with BadOutOfRange (environment
//                       MHP_EURANGE="low,high": that range instead)
//   Plant.Mode          String, writable
//   Plant.Add(a Double, b Double) -> sum Double
//   Plant.Slow(ms UInt32) -> done Boolean     answers after ms milliseconds
//   Plant.Fail()        answers BadDeviceFailure
//   Plant.EStop()       sets Plant.Stopped true; aborts a running Unit1,
//                       which stays Aborted until Clear
//   Plant.Stopped       Boolean
//   Control.SetTemperature(Double), Control.Exit()
//
//   Unit1: a LADS-style functional unit (browse names and state ids of LADS,
//   http://opcfoundation.org/UA/LADS/ from node-opcua's nodeset):
//     FunctionalUnitState { CurrentState { Id }, StartProgram, Stop, Abort,
//                           RunningStateMachine { CurrentState { Id } } }
//     ProgramManager { ActiveProgram { CurrentRuntime, EstimatedRuntime,
//                      DeviceProgramRunId }, ResultSet { Result<n> {
//                      DeviceProgramRunId, VariableSet { Yield } } } }
//   StartProgram(ProgramTemplateId, Properties, SupervisoryJobId,
//   SupervisoryTaskId, Samples) -> DeviceProgramRunId. Templates:
//     "ok"   runs duration_ms (property, default 600) then completes
//     "fail" runs 300 ms then the device aborts itself
//   Stop -> Stopping -> Stopped; Abort -> Aborting -> Aborted (then Clear
//   happens by itself after 300 ms); Clear: Aborted -> Clearing -> Stopped.
//   Start when not Stopped: BadInvalidState.
import net from "node:net";
import path from "node:path";
import {
    OPCUAServer, OPCUACertificateManager, nodesets, DataType, Variant, StatusCodes,
    SecurityPolicy, MessageSecurityMode, NodeId, LocalizedText, coerceNodeId, standardUnits,
} from "node-opcua";

// Loopback only, whatever node-opcua does with hostname (older releases
// named 127.0.0.1 in the endpoints but listened on every interface): every
// TCP listen of this process is bound to 127.0.0.1, and READY lists the
// bound addresses so that the Go side can check.
const listening = [];
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
    const cb = args.find((a) => typeof a === "function");
    const first = args[0];
    const opts = typeof first === "object" && first !== null ? { ...first } : { port: Number(first) || 0 };
    opts.host = "127.0.0.1";
    delete opts.path;
    listening.push(this);
    return cb ? listen.call(this, opts, cb) : listen.call(this, opts);
};

const port = Number(process.argv[2] || 4840);
const pki = process.argv[3] || path.join(process.cwd(), "pki");

const LADS = "http://opcfoundation.org/UA/LADS/";
const S = { Stopped: 5085, Running: 5099, Stopping: 5100, Aborting: 5159, Aborted: 5160, Clearing: 5143,
    Idle: 5120, Execute: 5168, Complete: 5128 };
const names = Object.fromEntries(Object.entries(S).map(([k, v]) => [v, k]));

const serverCertificateManager = new OPCUACertificateManager({
    automaticallyAcceptUnknownCertificate: true, rootFolder: path.join(pki, "server"),
});
const server = new OPCUAServer({
    port,
    hostname: "127.0.0.1",
    alternateHostname: ["127.0.0.1"],
    nodeset_filename: [nodesets.standard, nodesets.di, nodesets.ia, nodesets.amb, nodesets.machinery, nodesets.lads],
    securityPolicies: [SecurityPolicy.None, SecurityPolicy.Basic256Sha256],
    securityModes: [MessageSecurityMode.None, MessageSecurityMode.SignAndEncrypt],
    allowAnonymous: true,
    userManager: { isValidUser: (user, password) => user === "mhp" && password === "secret" },
    serverCertificateManager,
    buildInfo: { productName: "mhp-go opcua test server" },
});
await server.initialize();

const as = server.engine.addressSpace;
const ns = as.registerNamespace("urn:mhp:testserver");
const ladsNs = as.getNamespaceIndex(LADS);
const ladsId = (n) => new NodeId(NodeId.NodeIdType.NUMERIC, n, ladsNs);
const objects = as.rootFolder.objects;

// ---- Plant: variables and methods ----
const plant = ns.addObject({ organizedBy: objects, browseName: "Plant", nodeId: "s=Plant" });
let temperature = 21.5;
const tempVar = ns.addVariable({ componentOf: plant, browseName: "Temperature", nodeId: "s=Plant.Temperature",
    dataType: "Double", minimumSamplingInterval: 50, accessLevel: "CurrentRead", userAccessLevel: "CurrentRead",
    value: { get: () => new Variant({ dataType: DataType.Double, value: temperature }) } });
ns.addVariable({ componentOf: plant, browseName: "DoorClosed", nodeId: "s=Plant.DoorClosed", dataType: "Boolean",
    accessLevel: "CurrentRead", userAccessLevel: "CurrentRead",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Boolean, value: true }) } });
ns.addVariable({ componentOf: plant, browseName: "Counter", nodeId: "s=Plant.Counter", dataType: "Int32",
    accessLevel: "CurrentRead", userAccessLevel: "CurrentRead",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Int32, value: 7 }) } });
let setpoint = 20;
// MHP_EURANGE="low,high" moves Setpoint's EURange (and the range the server
// accepts), as a reconfigured server restarted on its port would have it.
const [euLow, euHigh] = (process.env.MHP_EURANGE || "0,100").split(",").map(Number);
ns.addAnalogDataItem({ componentOf: plant, browseName: "Setpoint", nodeId: "s=Plant.Setpoint", dataType: "Double",
    engineeringUnitsRange: { low: euLow, high: euHigh }, engineeringUnits: standardUnits.degree_celsius,
    accessLevel: "CurrentRead | CurrentWrite", userAccessLevel: "CurrentRead | CurrentWrite", minimumSamplingInterval: 50,
    value: {
        get: () => new Variant({ dataType: DataType.Double, value: setpoint }),
        set: (v) => {
            if (v.value < euLow || v.value > euHigh) return StatusCodes.BadOutOfRange;
            setpoint = v.value;
            return StatusCodes.Good;
        },
    } });
let mode = "idle";
ns.addVariable({ componentOf: plant, browseName: "Mode", nodeId: "s=Plant.Mode", dataType: "String",
    accessLevel: "CurrentRead | CurrentWrite", userAccessLevel: "CurrentRead | CurrentWrite", minimumSamplingInterval: 50,
    value: {
        get: () => new Variant({ dataType: DataType.String, value: mode }),
        set: (v) => { mode = v.value; return StatusCodes.Good; },
    } });
let stopped = false;
ns.addVariable({ componentOf: plant, browseName: "Stopped", nodeId: "s=Plant.Stopped", dataType: "Boolean",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Boolean, value: stopped }) } });

function method(parent, name, inputs, outputs, fn) {
    const m = ns.addMethod(parent, { browseName: name, nodeId: `s=${parent.browseName.name}.${name}`,
        inputArguments: inputs, outputArguments: outputs });
    m.bindMethod(async (inputArguments, context) => fn(inputArguments, context));
    return m;
}
const arg = (name, dataType) => ({ name, dataType, valueRank: -1, description: name });
method(plant, "Add", [arg("a", DataType.Double), arg("b", DataType.Double)], [arg("sum", DataType.Double)],
    (args) => ({ statusCode: StatusCodes.Good,
        outputArguments: [{ dataType: DataType.Double, value: args[0].value + args[1].value }] }));
method(plant, "Slow", [arg("ms", DataType.UInt32)], [arg("done", DataType.Boolean)], async (args) => {
    await new Promise((r) => setTimeout(r, args[0].value));
    return { statusCode: StatusCodes.Good, outputArguments: [{ dataType: DataType.Boolean, value: true }] };
});
method(plant, "Fail", [], [], () => ({ statusCode: StatusCodes.BadDeviceFailure }));
method(plant, "EStop", [], [], () => {
    stopped = true;
    // As LADS devices do, the emergency stop aborts a running unit, which
    // stays Aborted until a client calls Clear.
    if (state === S.Running || state === S.Stopping) {
        clearTimers();
        setState(S.Aborting);
        later(hold, () => setState(S.Aborted, S.Idle));
    }
    return { statusCode: StatusCodes.Good };
});

const control = ns.addObject({ organizedBy: objects, browseName: "Control", nodeId: "s=Control" });
method(control, "SetTemperature", [arg("value", DataType.Double)], [], (args) => {
    temperature = args[0].value;
    tempVar.touchValue();
    return { statusCode: StatusCodes.Good };
});
method(control, "Exit", [], [], () => { setTimeout(() => process.exit(3), 50); return { statusCode: StatusCodes.Good }; });

// ---- Unit1: a LADS-style functional unit ----
const unit = ns.addObject({ organizedBy: objects, browseName: "Unit1", nodeId: "s=Unit1" });
const fus = ns.addObject({ componentOf: unit, browseName: "FunctionalUnitState", nodeId: "s=Unit1.FunctionalUnitState" });
let state = S.Stopped, runState = S.Idle;
function stateVars(parent, key, get) {
    const cs = ns.addVariable({ componentOf: parent, browseName: "CurrentState", nodeId: `s=${key}.CurrentState`,
        dataType: "LocalizedText", minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.LocalizedText, value: new LocalizedText({ text: names[get()] }) }) } });
    const id = ns.addVariable({ propertyOf: cs, browseName: "Id", nodeId: `s=${key}.CurrentState.Id`, dataType: "NodeId",
        minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.NodeId, value: ladsId(get()) }) } });
    return [cs, id];
}
const [fusCS, fusId] = stateVars(fus, "Unit1.FunctionalUnitState", () => state);
const rsm = ns.addObject({ componentOf: fus, browseName: "RunningStateMachine", nodeId: "s=Unit1.RunningStateMachine" });
const [rsmCS, rsmId] = stateVars(rsm, "Unit1.RunningStateMachine", () => runState);
const pm = ns.addObject({ componentOf: unit, browseName: "ProgramManager", nodeId: "s=Unit1.ProgramManager" });
const ap = ns.addObject({ componentOf: pm, browseName: "ActiveProgram", nodeId: "s=Unit1.ActiveProgram" });
let runtime = 0, estimate = 0, runId = "", runs = 0;
const rtVar = ns.addVariable({ componentOf: ap, browseName: "CurrentRuntime", nodeId: "s=Unit1.CurrentRuntime", dataType: "Double",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Double, value: runtime }) } });
const estVar = ns.addVariable({ componentOf: ap, browseName: "EstimatedRuntime", nodeId: "s=Unit1.EstimatedRuntime", dataType: "Double",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.Double, value: estimate }) } });
ns.addVariable({ componentOf: ap, browseName: "DeviceProgramRunId", nodeId: "s=Unit1.DeviceProgramRunId", dataType: "String",
    minimumSamplingInterval: 50, value: { get: () => new Variant({ dataType: DataType.String, value: runId }) } });
const resultSet = ns.addObject({ componentOf: pm, browseName: "ResultSet", nodeId: "s=Unit1.ResultSet" });

function touch() { for (const v of [fusCS, fusId, rsmCS, rsmId]) v.touchValue(); }
function setState(s, r) {
    if (s !== undefined) state = s;
    if (r !== undefined) runState = r;
    touch();
}
function addResult(id, yieldValue) {
    const r = ns.addObject({ componentOf: resultSet, browseName: `Result${runs}`, nodeId: `s=Unit1.Result.${id}` });
    ns.addVariable({ componentOf: r, browseName: "DeviceProgramRunId", nodeId: `s=Unit1.Result.${id}.DeviceProgramRunId`, dataType: "String",
        value: new Variant({ dataType: DataType.String, value: id }) });
    const vs = ns.addObject({ componentOf: r, browseName: "VariableSet", nodeId: `s=Unit1.Result.${id}.VariableSet` });
    ns.addVariable({ componentOf: vs, browseName: "Yield", nodeId: `s=Unit1.Result.${id}.Yield`, dataType: "Double",
        value: new Variant({ dataType: DataType.Double, value: yieldValue }) });
}

let timers = [];
const later = (ms, fn) => timers.push(setTimeout(fn, ms));
function clearTimers() { timers.forEach(clearTimeout); timers = []; }
const hold = 200;

function startProgram(args) {
    if (state !== S.Stopped) return { statusCode: StatusCodes.BadInvalidState };
    const template = args[0].value;
    const props = {};
    for (const kv of args[1].value || []) props[kv.key] = kv.value;
    if (template !== "ok" && template !== "fail") return { statusCode: StatusCodes.BadInvalidArgument };
    runs += 1;
    const id = `run-${runs}`;
    runId = id;
    const duration = Number(props.duration_ms || 600);
    runtime = 0; estimate = template === "ok" ? duration : 300;
    setState(S.Running, S.Execute);
    const started = Date.now();
    const tick = setInterval(() => { runtime = Math.min(Date.now() - started, estimate); rtVar.touchValue(); }, 100);
    timers.push(tick);
    estVar.touchValue();
    if (template === "ok") {
        later(duration, () => {
            clearInterval(tick);
            addResult(id, 42.5);
            setState(undefined, S.Complete);
            later(hold, () => setState(S.Stopped, S.Idle));
        });
    } else {
        later(300, () => {
            clearInterval(tick);
            setState(S.Aborting);
            later(hold, () => { setState(S.Aborted, S.Idle); later(300, () => setState(S.Stopped)); });
        });
    }
    return { statusCode: StatusCodes.Good, outputArguments: [{ dataType: DataType.String, value: id }] };
}
const kvType = as.findDataType("KeyValueType", ladsNs);
const sampleType = as.findDataType("SampleInfoType", ladsNs);
method(fus, "StartProgram", [
    arg("ProgramTemplateId", DataType.String),
    { name: "Properties", dataType: kvType.nodeId, valueRank: 1, description: "Properties" },
    arg("SupervisoryJobId", DataType.String),
    arg("SupervisoryTaskId", DataType.String),
    { name: "Samples", dataType: sampleType.nodeId, valueRank: 1, description: "Samples" },
], [arg("DeviceProgramRunId", DataType.String)], (args) => startProgram(args));
method(fus, "Stop", [], [], () => {
    if (state !== S.Running) return { statusCode: StatusCodes.BadInvalidState };
    clearTimers();
    setState(S.Stopping);
    later(hold, () => setState(S.Stopped, S.Idle));
    return { statusCode: StatusCodes.Good };
});
method(fus, "Abort", [], [], () => {
    if (state !== S.Running && state !== S.Stopping) return { statusCode: StatusCodes.BadInvalidState };
    clearTimers();
    setState(S.Aborting);
    later(hold, () => { setState(S.Aborted, S.Idle); later(300, () => setState(S.Stopped)); });
    return { statusCode: StatusCodes.Good };
});
method(fus, "Clear", [], [], () => {
    if (state !== S.Aborted) return { statusCode: StatusCodes.BadInvalidState };
    setState(S.Clearing);
    later(hold, () => setState(S.Stopped, S.Idle));
    return { statusCode: StatusCodes.Good };
});

await server.start();
const bound = listening.map((l) => l.address()).filter(Boolean).map((a) => `${a.address}:${a.port}`);
process.stdout.write(`READY ${port} ${bound.join(",")}\n`);
process.on("SIGTERM", async () => { await server.shutdown(100); process.exit(0); });
