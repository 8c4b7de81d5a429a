package opcua

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares: Depth
	// (default 6 levels below the root), Include/Exclude by browse path
	// ("Objects/Plant/Line1"), DeviceID, Logger.
	adapters.DiscoverOptions
	// Root is where browsing starts: "Objects" (default), a browse path
	// below it ("Objects/Plant") or a node id (ns=, nsu=, i=).
	Root string
	// Security, Auth and Timeouts connect as the config file will.
	Security Security
	Auth     Auth
	Timeouts Timeouts
	// Dial is the backend seam: it connects to the server of cfg and
	// returns the client and its close. Default: [Dial] over gopcua.
	Dial func(ctx context.Context, cfg Config) (Client, func(), error)
}

// discoverDepth is the default browse depth below the root.
const discoverDepth = 6

// discoverNodes bounds a walk: a server with a larger address space is
// narrowed with --root, --include or --depth.
const discoverNodes = 5000

// Discover browses the OPC UA server at target (opc.tcp://HOST:PORT) from
// opt.Root to opt.Depth and proposes the config that serves it:
//   - variables become signals (read-only) or settings (writable for this
//     user: AccessLevel and UserAccessLevel), with the type from DataType,
//     the unit from EngineeringUnits and a setting's limits from EURange;
//   - methods become actions, their InputArguments the params and their
//     OutputArguments the result's fields;
//   - LADS functional units become an action that runs their program
//     (StartProgram or Start, cancelled with Stop or Abort) and a signal
//     of their state; their functions' variables are mapped as variables;
//   - Part 10 programs become program actions;
//   - booleans named door, lid, guard, interlock or ready are proposed as
//     interlocks (comment and report), never applied;
//   - a method named like an emergency stop is proposed for estop.
//
// Node ids are written with nsu= (the namespace URI), so the file does not
// depend on namespace indexes; names are snake_case, a collision takes the
// parent's name, and each item's browse path is kept in a comment.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	cfg := Config{Endpoint: target, Security: opt.Security, Auth: opt.Auth, Timeouts: opt.Timeouts}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: "opcua-device", Class: "plc"}
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, err
	}
	dial := opt.Dial
	if dial == nil {
		dial = func(ctx context.Context, cfg Config) (Client, func(), error) {
			c, err := Dial(ctx, cfg, DialOptions{Logger: opt.Log(), KeepAlive: -1})
			if err != nil {
				return nil, nil, err
			}
			return c, func() { _ = c.Close() }, nil
		}
	}
	cl, closeCl, err := dial(ctx, cfg)
	if err != nil {
		return Config{}, rep, fmt.Errorf("opcua: discover %s: %w", target, err)
	}
	defer closeCl()
	ns, err := namespaceArray(ctx, cl)
	if err != nil {
		return Config{}, rep, err
	}
	d := &discovery{cl: cl, opt: opt, ns: ns, cfg: &cfg, rep: &rep, depth: opt.Depth, seen: map[string]bool{}}
	if d.depth <= 0 {
		d.depth = discoverDepth
	}
	d.identity(ctx)
	roots, err := d.roots(ctx)
	if err != nil {
		return Config{}, rep, err
	}
	for _, r := range roots {
		if err := d.walk(ctx, r.node, r.path, "", 0); err != nil {
			return Config{}, rep, err
		}
	}
	d.finish()
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("opcua: discovered config does not validate (a discovery bug): %w", err)
	}
	return cfg, rep, nil
}

type discovery struct {
	cl    Client
	opt   DiscoverOptions
	ns    []string
	cfg   *Config
	rep   *adapters.Report
	names adapters.Namer
	depth int
	seen  map[string]bool
	nodes int
	estop []string // comments proposing estop methods
}

type root struct {
	node *ua.NodeID
	path string
}

// identity names the device after the server's BuildInfo.
func (d *discovery) identity(ctx context.Context) {
	ids := []uint32{id.Server_ServerStatus_BuildInfo_ProductName, id.Server_ServerStatus_BuildInfo_ManufacturerName}
	req := make([]*ua.ReadValueID, len(ids))
	for i, n := range ids {
		req[i] = &ua.ReadValueID{NodeID: ua.NewNumericNodeID(0, n), AttributeID: ua.AttributeIDValue}
	}
	res, err := d.cl.Read(ctx, req)
	text := func(i int) string {
		if err != nil || i >= len(res) || res[i] == nil || res[i].Value == nil || isBad(res[i].Status) {
			return ""
		}
		s, _ := res[i].Value.Value().(string)
		return strings.TrimSpace(s)
	}
	dev := &d.cfg.Device
	dev.Model, dev.Make = text(0), text(1)
	switch {
	case d.opt.DeviceID != "":
		dev.ID = d.opt.DeviceID
	case dev.Model != "":
		dev.ID = strings.ReplaceAll(adapters.SnakeName(dev.Model), "_", "-")
	}
	dev.Description = "OPC UA server at " + d.cfg.Endpoint + " (generated by mhp init: say what the device is and what an agent should use it for)."
}

// roots resolves opt.Root. The default Objects folder also takes the
// Objects folders some servers keep per namespace (gopcua's server puts
// each namespace's nodes under ns=N;i=85).
func (d *discovery) roots(ctx context.Context) ([]root, error) {
	r := strings.Trim(d.opt.Root, "/")
	objects := []root{{ua.NewNumericNodeID(0, id.ObjectsFolder), "Objects"}}
	for i := 1; i < len(d.ns); i++ {
		n := ua.NewNumericNodeID(uint16(i), id.ObjectsFolder)
		if refs, err := d.cl.Browse(ctx, n); err == nil && len(refs) > 0 {
			objects = append(objects, root{n, "Objects"})
		}
	}
	if r == "" || r == "Objects" {
		return objects, nil
	}
	if rest, ok := strings.CutPrefix(r, "Objects/"); ok {
		var out []root // walk down the path by browse names
		for _, base := range objects {
			n, err := d.descend(ctx, base.node, strings.Split(rest, "/"))
			if err == nil {
				out = append(out, root{n, r})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("opcua: discover: --root %q: no such browse path on the server", d.opt.Root)
		}
		return out, nil
	}
	if err := checkNodeID(r); err != nil {
		return nil, fmt.Errorf("opcua: discover: --root %q is neither a browse path (Objects/...) nor a node id: %w", d.opt.Root, err)
	}
	return []root{{resolveNode(r, d.ns), r}}, nil
}

func (d *discovery) descend(ctx context.Context, n *ua.NodeID, names []string) (*ua.NodeID, error) {
	for _, name := range names {
		kids, err := children(ctx, d.cl, n)
		if err != nil {
			return nil, err
		}
		next, ok := kids[name]
		if !ok {
			return nil, fmt.Errorf("no child %q", name)
		}
		n = next
	}
	return n, nil
}

// nodeString writes a node id with its namespace URI (nsu=).
func (d *discovery) nodeString(n *ua.NodeID) string {
	s := n.String()
	idx := int(n.Namespace())
	if idx == 0 || idx >= len(d.ns) {
		return s
	}
	_, rest, ok := strings.Cut(s, ";")
	if !ok {
		return s
	}
	return "nsu=" + d.ns[idx] + ";" + rest
}

// browse returns a node's children once each (servers list a child once
// per reference type), in browse order.
func (d *discovery) browse(ctx context.Context, n *ua.NodeID) ([]*ua.ReferenceDescription, error) {
	refs, err := d.cl.Browse(ctx, n)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	out := refs[:0:0]
	for _, r := range refs {
		if r.BrowseName == nil || r.NodeID == nil || r.NodeID.NodeID == nil || seen[r.NodeID.NodeID.String()] {
			continue
		}
		seen[r.NodeID.NodeID.String()] = true
		out = append(out, r)
	}
	return out, nil
}

func (d *discovery) walk(ctx context.Context, n *ua.NodeID, path, parent string, depth int) error {
	refs, err := d.browse(ctx, n)
	if err != nil {
		if depth == 0 || connectionTrouble(err) || ctx.Err() != nil {
			return fmt.Errorf("opcua: discover: browse %s: %w", path, err)
		}
		d.rep.Skip("object", path, "not browsable: "+err.Error()) // e.g. BadUserAccessDenied: the rest is walked
		return nil
	}
	for _, r := range refs {
		child, name := r.NodeID.NodeID, r.BrowseName.Name
		p := path + "/" + name
		if d.seen[child.String()] {
			continue
		}
		d.seen[child.String()] = true
		if depth == 0 && path == "Objects" && child.Namespace() == 0 {
			d.rep.Skip("object", p, "the server's own node (namespace 0), not a device item")
			continue
		}
		if !d.opt.Selected(p) {
			if excluded(d.opt.Exclude, p) {
				d.rep.Skip(className(r.NodeClass), p, "excluded by --exclude")
			}
			continue
		}
		if d.nodes++; d.nodes > discoverNodes {
			d.rep.Warn("stopped after %d nodes: narrow the walk with --root, --include or --depth", discoverNodes)
			return nil
		}
		switch r.NodeClass {
		case ua.NodeClassVariable:
			if d.opt.Included(p) {
				d.variable(ctx, child, name, p, parent)
			}
		case ua.NodeClassMethod:
			if d.opt.Included(p) {
				d.method(ctx, n, child, name, p, parent)
			}
		case ua.NodeClassObject:
			if err := d.object(ctx, child, name, p, depth); err != nil {
				return err
			}
		default:
			d.rep.Skip(className(r.NodeClass), p, "not a variable, method or object")
		}
	}
	return nil
}

func excluded(patterns []string, p string) bool {
	return !(adapters.DiscoverOptions{Exclude: patterns}).Selected(p)
}

func className(c ua.NodeClass) string {
	return strings.ToLower(strings.TrimPrefix(c.String(), "NodeClass"))
}

// object maps a LADS functional unit or a Part 10 program, or walks into
// a folder or plain object.
func (d *discovery) object(ctx context.Context, n *ua.NodeID, name, p string, depth int) error {
	kids, err := children(ctx, d.cl, n)
	if err != nil {
		if connectionTrouble(err) || ctx.Err() != nil {
			return fmt.Errorf("opcua: discover: browse %s: %w", p, err)
		}
		d.rep.Skip("object", p, "not browsable: "+err.Error())
		return nil
	}
	if sm, ok := kids["FunctionalUnitState"]; ok {
		if d.opt.Included(p) {
			d.ladsUnit(ctx, n, sm, kids, name, p)
		}
		// Functions (controls, sensors) are variables under FunctionSet.
		if fs, ok := kids["FunctionSet"]; ok && depth+1 < d.depth {
			return d.walk(ctx, fs, p+"/FunctionSet", name, depth+1)
		}
		return nil
	}
	if _, ok := kids["CurrentState"]; ok && kids["Start"] != nil && kids["Halt"] != nil {
		if d.opt.Included(p) {
			d.program(ctx, n, kids, name, p)
		}
		return nil
	}
	if depth+1 >= d.depth {
		d.rep.Skip("object", p, fmt.Sprintf("deeper than --depth %d", d.depth))
		return nil
	}
	return d.walk(ctx, n, p, name, depth+1)
}

// varAttrs are the attributes discovery reads of a variable.
type varAttrs struct {
	builtin   ua.TypeID
	dataType  string
	writable  bool
	array     bool
	unit      string
	hasRange  bool
	low, high float64
}

func (d *discovery) readVar(ctx context.Context, n *ua.NodeID) (varAttrs, error) {
	var v varAttrs
	info, err := readInfo(ctx, d.cl, n)
	if err != nil {
		return v, err
	}
	v.builtin, v.unit, v.hasRange, v.low, v.high = info.dataType, adapters.UnitName(info.unit), info.hasRange, info.low, info.high
	res, err := d.cl.Read(ctx, []*ua.ReadValueID{
		{NodeID: n, AttributeID: ua.AttributeIDDataType},
		{NodeID: n, AttributeID: ua.AttributeIDAccessLevel},
		{NodeID: n, AttributeID: ua.AttributeIDUserAccessLevel},
		{NodeID: n, AttributeID: ua.AttributeIDValueRank},
	})
	if err != nil {
		return v, err
	}
	if len(res) == 4 {
		if res[0] != nil && res[0].Value != nil {
			if dt := dataTypeOf(res[0].Value.Value()); dt != nil {
				v.dataType = d.nodeString(dt)
			}
		}
		access := func(dv *ua.DataValue) (byte, bool) {
			if dv == nil || dv.Value == nil || isBad(dv.Status) {
				return 0, false
			}
			b, ok := dv.Value.Value().(uint8)
			return b, ok
		}
		al, okA := access(res[1])
		ul, okU := access(res[2])
		if !okU {
			ul = al // servers without UserAccessLevel: the node's own
		}
		v.writable = okA && al&2 != 0 && ul&2 != 0
		if res[3] != nil && res[3].Value != nil && !isBad(res[3].Status) {
			if r, ok := res[3].Value.Value().(int32); ok && r >= 1 {
				v.array = true
			}
		}
	}
	return v, nil
}

func (d *discovery) variable(ctx context.Context, n *ua.NodeID, browseName, p, parent string) {
	v, err := d.readVar(ctx, n)
	if err != nil {
		d.rep.Skip("variable", p, "attributes unreadable: "+err.Error())
		return
	}
	typ := mhpTypeOf(v.builtin)
	if v.array {
		typ = mhp.TypeArray
	}
	if v.builtin == 0 {
		d.rep.Skip("variable", p, fmt.Sprintf("DataType %s is a structure or custom type the adapter does not map", v.dataType))
		return
	}
	name := d.names.Name(browseName, parent)
	node := d.nodeString(n)
	where := "browse path " + p
	if v.writable && (typ == mhp.TypeAny || typ == mhp.TypeArray) {
		d.rep.Skip("setting", p, fmt.Sprintf("writable, but the adapter writes no %s values (DataType %s): mapped read-only as signal %s", typ, v.dataType, name))
		v.writable = false
	}
	if !v.writable {
		s := SignalItem{Signal: mhp.Signal{Name: name, Type: typ, Unit: v.unit}, Node: node}
		d.cfg.Signals = append(d.cfg.Signals, s)
		note := ""
		if v.hasRange {
			note = fmt.Sprintf("EURange %g..%g", v.low, v.high)
			where += fmt.Sprintf("; the server's EURange is %g..%g", v.low, v.high)
		}
		d.rep.Map("signal", name, p, note)
		d.rep.Comment("signals."+name, where)
		if typ == mhp.TypeBoolean && adapters.InterlockCandidate(browseName) {
			d.rep.Proposals = append(d.rep.Proposals, fmt.Sprintf("interlock %s (%s): a boolean named like a door, lid, guard, interlock or ready; add `interlocks: [%s]` to the settings and actions it must guard", name, p, name))
			d.rep.Comment("signals."+name, fmt.Sprintf("PROPOSED INTERLOCK (not applied): add `interlocks: [%s]` to each setting and action that must wait for it to read true.", name))
		}
		return
	}
	s := SettingItem{Setting: mhp.Setting{Name: name, Type: typ, Unit: v.unit, Approval: mhp.ApprovalConfirm}, Node: node}
	note := ""
	numeric := typ == mhp.TypeNumber || typ == mhp.TypeInteger
	switch {
	case numeric && v.hasRange:
		lo, hi := v.low, v.high
		s.Limits = &mhp.Limits{Min: &lo, Max: &hi}
		note = "limits from EURange"
		where += "; limits from the server's EURange"
	}
	d.rep.Comment("settings."+name, where)
	if numeric && !v.hasRange {
		note = "NO LIMITS: the server gives no EURange"
		d.rep.Warn("setting %s (%s) is writable and has no range at the server: it has no limits until you add them", name, p)
		d.rep.Comment("settings."+name, adapters.NoLimitsNote)
	}
	d.cfg.Settings = append(d.cfg.Settings, s)
	d.rep.Map("setting", name, p, note)
}

// arguments reads a method's InputArguments or OutputArguments.
func (d *discovery) arguments(ctx context.Context, kids map[string]*ua.NodeID, which string) ([]*ua.Argument, error) {
	prop, ok := kids[which]
	if !ok {
		return nil, nil
	}
	res, err := d.cl.Read(ctx, []*ua.ReadValueID{{NodeID: prop, AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 || res[0] == nil || isBad(res[0].Status) || res[0].Value == nil {
		return nil, fmt.Errorf("%s unreadable", which)
	}
	var eos []*ua.ExtensionObject
	switch v := res[0].Value.Value().(type) {
	case []*ua.ExtensionObject:
		eos = v
	case *ua.ExtensionObject:
		eos = []*ua.ExtensionObject{v}
	default:
		return nil, fmt.Errorf("%s is %T", which, v)
	}
	out := make([]*ua.Argument, 0, len(eos))
	for _, eo := range eos {
		a, ok := eo.Value.(*ua.Argument)
		if !ok || a == nil {
			return nil, fmt.Errorf("%s holds %T, not Argument", which, eo.Value)
		}
		out = append(out, a)
	}
	return out, nil
}

// argShape is the MHP shape of a method argument.
func argShape(a *ua.Argument) (*mhp.Shape, bool) {
	t := mhpTypeOf(builtinOf(a.DataType))
	if t == mhp.TypeAny {
		return nil, false
	}
	sh := &mhp.Shape{Type: t}
	if a.Description != nil && a.Description.Text != "" {
		sh.Notes = a.Description.Text
	}
	if a.ValueRank >= 1 {
		return &mhp.Shape{Type: mhp.TypeArray, Items: &mhp.Shape{Type: t}, Notes: sh.Notes}, true
	}
	return sh, true
}

func isEStopName(name string) bool {
	s := "_" + adapters.SnakeName(name) + "_"
	return strings.Contains(s, "_estop_") || strings.Contains(s, "_e_stop_") || strings.Contains(s, "emergency")
}

func (d *discovery) method(ctx context.Context, object, m *ua.NodeID, browseName, p, parent string) {
	if isEStopName(browseName) {
		d.estop = append(d.estop, fmt.Sprintf("method %s looks like an emergency stop:\n  estop:\n    method: {object: %q, method: %q}", p, d.nodeString(object), d.nodeString(m)))
		d.rep.Skip("method", p, "named like an emergency stop: proposed for `estop:` (see the TODO in the file), not an action")
		return
	}
	kids, err := children(ctx, d.cl, m)
	if err != nil {
		d.rep.Skip("method", p, "unbrowsable: "+err.Error())
		return
	}
	in, err := d.arguments(ctx, kids, "InputArguments")
	if err != nil {
		d.rep.Skip("method", p, err.Error())
		return
	}
	outs, err := d.arguments(ctx, kids, "OutputArguments")
	if err != nil {
		d.rep.Skip("method", p, err.Error())
		return
	}
	var params mhp.Params
	var pn adapters.Namer
	for i, a := range in {
		sh, ok := argShape(a)
		if !ok {
			d.rep.Skip("method", p, fmt.Sprintf("input argument %d %q has DataType %s, which the adapter cannot build", i, a.Name, d.nodeString(a.DataType)))
			return
		}
		params = append(params, mhp.Param{Name: pn.Name(argName(a, i, "in"), ""), Shape: sh})
	}
	name := d.names.Name(browseName, parent)
	act := ActionItem{Action: mhp.Action{Name: name, Duration: mhp.DurationShort, Approval: mhp.ApprovalConfirm, Params: params},
		Method: &MethodSpec{Object: d.nodeString(object), Method: d.nodeString(m)}}
	if len(outs) > 0 {
		var on adapters.Namer
		props := map[string]*mhp.Shape{}
		for i, a := range outs {
			o := on.Name(argName(a, i, "out"), "")
			act.Method.Outputs = append(act.Method.Outputs, o)
			if sh, ok := argShape(a); ok {
				props[o] = sh
			} else {
				props[o] = &mhp.Shape{Type: mhp.TypeAny}
			}
		}
		act.Returns = &mhp.Shape{Type: mhp.TypeObject, Properties: props}
	}
	d.cfg.Actions = append(d.cfg.Actions, act)
	d.rep.Map("action", name, p, fmt.Sprintf("method, %d in, %d out", len(in), len(outs)))
	d.rep.Comment("actions."+name, "browse path "+p)
}

func argName(a *ua.Argument, i int, prefix string) string {
	if a.Name != "" {
		return a.Name
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

// ladsUnit maps a LADS functional unit: an action running its program and
// a signal of its state.
func (d *discovery) ladsUnit(ctx context.Context, unit, sm *ua.NodeID, kids map[string]*ua.NodeID, browseName, p string) {
	smc, err := children(ctx, d.cl, sm)
	if err != nil {
		d.rep.Skip("functional unit", p, "FunctionalUnitState unbrowsable: "+err.Error())
		return
	}
	spec := &LADSSpec{FunctionalUnit: d.nodeString(unit)}
	switch {
	case smc["StartProgram"] != nil:
		spec.Start = "StartProgram"
	case smc["Start"] != nil:
		spec.Start = "Start"
	default:
		d.rep.Skip("functional unit", p, "no Start or StartProgram method")
		return
	}
	switch {
	case smc["Stop"] != nil:
		spec.CancelWith = "Stop"
	case smc["Abort"] != nil:
		spec.CancelWith = "Abort"
	}
	name := d.names.Name(browseName, "")
	act := ActionItem{Action: mhp.Action{Name: name, Duration: mhp.DurationLong, Approval: mhp.ApprovalConfirm}, LADS: spec}
	note := "LADS functional unit, " + spec.Start
	if spec.Start == "StartProgram" {
		sh := &mhp.Shape{Type: mhp.TypeString, Notes: "the ProgramTemplateId to run"}
		if templates := d.templates(ctx, kids); len(templates) > 0 {
			sh.Limits = mhp.Enum(templates...)
		} else {
			d.rep.Comment("actions."+name, "The unit lists no ProgramTemplateSet: TODO(integrator): put the templates it runs in program_template's limits: {enum: [...]}.")
		}
		act.Params = mhp.Params{{Name: "program_template", Shape: sh}}
	}
	d.cfg.Actions = append(d.cfg.Actions, act)
	d.rep.Map("action", name, p, note)
	d.rep.Comment("actions."+name, "browse path "+p+" (LADS functional unit; the job ends with FunctionalUnitState)")
	if cs, ok := smc["CurrentState"]; ok {
		sig := d.names.Name("state", name)
		if sig == "state" { // always say whose state it is
			d.names.Take(sig)
			sig = d.names.Name(name+"_state", "")
		}
		d.cfg.Signals = append(d.cfg.Signals, SignalItem{Signal: mhp.Signal{Name: sig, Type: mhp.TypeString}, Node: d.nodeString(cs)})
		d.rep.Map("signal", sig, p+"/FunctionalUnitState/CurrentState", "LADS state")
		d.rep.Comment("signals."+sig, "browse path "+p+"/FunctionalUnitState/CurrentState")
	}
}

// templates lists a unit's ProgramTemplateSet by browse name.
func (d *discovery) templates(ctx context.Context, kids map[string]*ua.NodeID) []any {
	pm, ok := kids["ProgramManager"]
	if !ok {
		return nil
	}
	pmc, err := children(ctx, d.cl, pm)
	if err != nil || pmc["ProgramTemplateSet"] == nil {
		return nil
	}
	set, err := children(ctx, d.cl, pmc["ProgramTemplateSet"])
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]any, len(names))
	for i, n := range names {
		out[i] = n
	}
	return out
}

// program maps a Part 10 program (ProgramStateMachineType).
func (d *discovery) program(ctx context.Context, n *ua.NodeID, kids map[string]*ua.NodeID, browseName, p string) {
	spec := &ProgramSpec{Node: d.nodeString(n)}
	if r, ok := kids["Result"]; ok {
		if v, err := d.readVar(ctx, r); err == nil && v.builtin == ua.TypeIDBoolean {
			spec.Result = d.nodeString(r)
		}
	}
	names := make([]string, 0, len(kids))
	for k := range kids {
		names = append(names, k)
	}
	sort.Strings(names)
	var on adapters.Namer
	for _, k := range names {
		switch k {
		case "CurrentState", "Result", "LastTransition", "Start", "Suspend", "Resume", "Halt", "Reset":
			continue
		}
		if v, err := d.readVar(ctx, kids[k]); err == nil && !v.array && mhpTypeOf(v.builtin) != mhp.TypeAny {
			if spec.Outputs == nil {
				spec.Outputs = map[string]string{}
			}
			spec.Outputs[on.Name(k, "")] = d.nodeString(kids[k])
		}
	}
	name := d.names.Name(browseName, "")
	d.cfg.Actions = append(d.cfg.Actions, ActionItem{Action: mhp.Action{Name: name, Duration: mhp.DurationLong, Approval: mhp.ApprovalConfirm}, Program: spec})
	d.rep.Map("action", name, p, "Part 10 program")
	d.rep.Comment("actions."+name, "browse path "+p+" (OPC UA Part 10 program)")
}

// finish writes the file's head and the safety TODOs.
func (d *discovery) finish() {
	c := d.cfg
	c.Safety.Notes = adapters.SafetyNotes
	head := "Generated by `mhp init opcua " + c.Endpoint + "`. Review every item before serving it:\n" +
		"names, units and limits come from what the server says about itself.\n" + adapters.ApprovalNote
	d.rep.Comment("", head)
	todo := adapters.TODOEStop + "\nAdd an `estop:` block: a method to call and/or safe values to write."
	for _, e := range d.estop {
		todo += "\nProposed: " + e
	}
	if len(d.estop) == 0 {
		todo += "\nNo method named like an emergency stop was found."
	}
	d.rep.Comment("safety", todo+"\n"+adapters.TODOWatchdog)
	if len(c.Signals)+len(c.Settings)+len(c.Actions) == 0 {
		d.rep.Warn("nothing was mapped: check --root, --include and --depth")
	}
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
// Its flags: root, security-policy (None or Basic256Sha256), username and
// password-env (the password's environment variable), server-certificate.
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	if err := o.CheckFlags(Kind, "root", "security-policy", "username", "password-env", "server-certificate"); err != nil {
		return Config{}, adapters.Report{}, err
	}
	opt := DiscoverOptions{DiscoverOptions: o, Root: o.Flags["root"]}
	opt.Security.Policy = o.Flags["security-policy"]
	opt.Security.ServerCertificate = o.Flags["server-certificate"]
	if u := o.Flags["username"]; u != "" {
		opt.Auth = Auth{Type: AuthUsername, Username: u, PasswordEnv: o.Flags["password-env"]}
	}
	return Discover(ctx, target, opt)
}, Load)
