package sila2

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

func isCore(f *Feature) bool {
	return f.category() == "core" || strings.HasPrefix(f.category(), "core.")
}

type featureIndex map[string]*Compiled

func (ix featureIndex) find(id string) (*Compiled, bool) {
	f, ok := ix[strings.ToLower(strings.TrimSpace(id))]
	return f, ok
}

func (ix featureIndex) names() string {
	seen := map[*Compiled]bool{}
	var out []string
	for _, f := range ix {
		if !seen[f] {
			seen[f] = true
			out = append(out, f.Feature.FullyQualifiedID())
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func itemKey(f *Compiled, id string) string {
	return strings.ToLower(f.Feature.FullyQualifiedID() + "/" + id)
}

// build maps the selected features onto bindings.
func (a *adapter) build(feats []*Compiled) (binding.Config, error) {
	cfg := a.cfg
	bc := binding.Config{
		PollInterval: seconds(cfg.PollIntervalS, time.Second),
		JobTimeout:   seconds(cfg.JobTimeoutS, time.Hour),
		Setup:        a.setup,
		Close:        a.close,
	}
	cfg.Common.Apply(&bc)
	ix := featureIndex{}
	for _, f := range feats {
		ix[strings.ToLower(f.Feature.FullyQualifiedID())] = f
		ix[strings.ToLower(f.Feature.Identifier)] = f
	}
	resolve := func(ref string) (*Compiled, string, error) {
		fid, item, err := splitRef(ref)
		if err != nil {
			return nil, "", err
		}
		f, ok := ix.find(fid)
		if !ok {
			return nil, "", fmt.Errorf("sila2: %s: the server does not implement feature %q (it has: %s)", ref, fid, ix.names())
		}
		return f, item, nil
	}
	propEntries := map[string]*PropertyEntry{}
	cmdEntries := map[string]*CommandEntry{}
	type pick struct {
		f    *Compiled
		id   string
		prop bool
	}
	var picks []pick
	picked := map[string]bool{}
	add := func(f *Compiled, id string, prop bool) {
		k := itemKey(f, id)
		if prop {
			k = "p:" + k
		} else {
			k = "c:" + k
		}
		if !picked[k] {
			picked[k] = true
			picks = append(picks, pick{f, id, prop})
		}
	}
	var selected []*Compiled
	for _, id := range cfg.Features {
		f, ok := ix.find(id)
		if !ok {
			return bc, fmt.Errorf("sila2: features: the server does not implement %q (it has: %s)", id, ix.names())
		}
		selected = append(selected, f)
	}
	if len(cfg.Features) == 0 && len(cfg.Properties) == 0 && len(cfg.Commands) == 0 {
		for _, f := range feats {
			if !isCore(f.Feature) {
				selected = append(selected, f)
			}
		}
	}
	for i := range cfg.Properties {
		e := &cfg.Properties[i]
		f, id, err := resolve(e.Property)
		if err != nil {
			return bc, err
		}
		p, ok := f.Feature.Property(id)
		if !ok {
			return bc, fmt.Errorf("sila2: properties: feature %s has no property %q", f.Feature.Identifier, id)
		}
		propEntries[itemKey(f, p.Identifier)] = e
	}
	for i := range cfg.Commands {
		e := &cfg.Commands[i]
		f, id, err := resolve(e.Command)
		if err != nil {
			return bc, err
		}
		c, ok := f.Feature.Command(id)
		if !ok {
			return bc, fmt.Errorf("sila2: commands: feature %s has no command %q", f.Feature.Identifier, id)
		}
		cmdEntries[itemKey(f, c.Identifier)] = e
	}
	for _, ref := range cfg.CancelledErrors {
		if strings.Contains(strings.ToLower(ref), "/definedexecutionerror/") {
			a.cancelledErrors[strings.ToLower(ref)] = true
			continue
		}
		f, id, err := resolve(ref)
		if err != nil {
			return bc, fmt.Errorf("sila2: cancelled_errors: %w", err)
		}
		known := false
		for _, e := range f.Feature.Errors {
			if strings.EqualFold(e.Identifier, id) {
				known = true
				id = e.Identifier
			}
		}
		if !known {
			return bc, fmt.Errorf("sila2: cancelled_errors: feature %s declares no error %q", f.Feature.Identifier, id)
		}
		a.cancelledErrors[strings.ToLower(f.FQID("DefinedExecutionError", id))] = true
	}
	var estopKey string
	if cfg.EStop != "" {
		f, id, err := resolve(cfg.EStop)
		if err != nil {
			return bc, err
		}
		c, ok := f.Feature.Command(id)
		if !ok {
			return bc, fmt.Errorf("sila2: estop: feature %s has no command %q", f.Feature.Identifier, id)
		}
		if c.IsObservable() || len(c.Parameters) > 0 {
			return bc, fmt.Errorf("sila2: estop: %s must be an unobservable command without parameters", cfg.EStop)
		}
		estopKey = itemKey(f, c.Identifier)
		fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
		bc.EStop = func(ctx context.Context) error {
			_, err := a.b.Call(ctx, fid, cid, map[string]any{})
			if err != nil {
				return fmt.Errorf("sila2: estop command %s: %w", cid, err)
			}
			return nil
		}
	}
	for _, f := range selected {
		for _, p := range f.Feature.Properties {
			add(f, p.Identifier, true)
		}
		for _, c := range f.Feature.Commands {
			add(f, c.Identifier, false)
		}
	}
	for i := range cfg.Properties {
		f, id, _ := resolve(cfg.Properties[i].Property)
		p, _ := f.Feature.Property(id)
		add(f, p.Identifier, true)
	}
	for i := range cfg.Commands {
		f, id, _ := resolve(cfg.Commands[i].Command)
		c, _ := f.Feature.Command(id)
		add(f, c.Identifier, false)
	}
	for _, pk := range picks {
		k := itemKey(pk.f, pk.id)
		if pk.prop {
			e := propEntries[k]
			if e != nil && e.Hide {
				continue
			}
			p, _ := pk.f.Feature.Property(pk.id)
			bc.Signals = append(bc.Signals, a.signal(pk.f, p, e))
			continue
		}
		if k == estopKey {
			continue
		}
		e := cmdEntries[k]
		if e != nil && e.Hide {
			continue
		}
		c, _ := pk.f.Feature.Command(pk.id)
		if e != nil && e.Setting != "" {
			s, err := a.setting(pk.f, c, e)
			if err != nil {
				return bc, err
			}
			bc.Settings = append(bc.Settings, s)
			continue
		}
		act, err := a.action(pk.f, c, e)
		if err != nil {
			return bc, err
		}
		bc.Actions = append(bc.Actions, act)
	}
	return bc, nil
}

func describeText(display, desc string) string {
	d := strings.Join(strings.Fields(desc), " ")
	if display != "" && d != "" {
		return display + ": " + d
	}
	return display + d
}

func (a *adapter) signal(f *Compiled, p *Property, e *PropertyEntry) binding.Signal {
	shape := f.Shape(&p.DataType)
	spec := mhp.Signal{Name: SnakeCase(p.Identifier), Type: shape.Type, Unit: shape.Unit,
		Notes: describeText(strings.TrimSpace(p.DisplayName), p.Description)}
	if e != nil {
		if e.Signal != "" {
			spec.Name = e.Signal
		}
		if e.Unit != "" {
			spec.Unit = e.Unit
		}
		if e.Notes != "" {
			spec.Notes = e.Notes
		}
		spec.RequiredForRecovery = e.RequiredForRecovery
	}
	fid, pid := f.Feature.FullyQualifiedID(), p.Identifier
	if !p.IsObservable() {
		return binding.Signal{Spec: spec, Read: func(ctx context.Context) (binding.Sample, error) {
			v, err := a.b.Property(ctx, fid, pid)
			if err != nil {
				// A read changes nothing at the instrument: any failure is "no value".
				if ctx.Err() == nil {
					a.lost(err)
				}
				return binding.Sample{}, binding.Unavailable("%s: %v", spec.Name, err)
			}
			return binding.Sample{Value: v}, nil
		}}
	}
	name := spec.Name
	a.subs = append(a.subs, subscription{signal: name, feature: fid, property: pid})
	return binding.Signal{Spec: spec, Pushed: true, Read: func(ctx context.Context) (binding.Sample, error) {
		a.mu.Lock()
		c := a.cache[name]
		a.mu.Unlock()
		if c == nil || !c.ok {
			reason := "no value received yet"
			if c != nil && c.err != nil {
				reason = c.err.Error()
			}
			return binding.Sample{}, binding.Unavailable("%s: subscription: %s", name, reason)
		}
		return binding.Sample{Value: c.value, Time: c.at}, nil
	}}
}

// narrow intersects the server's limits with the config's: the config may
// only narrow. It returns an error when the config would widen a bound.
func narrow(where string, server, cfg *mhp.Limits) (*mhp.Limits, error) {
	if cfg == nil || cfg.Empty() {
		return server, nil
	}
	if server == nil || server.Empty() {
		c := *cfg
		return &c, nil
	}
	out := *server
	lower := func(name string, dst **float64, v *float64) error {
		if v == nil {
			return nil
		}
		if *dst != nil && *v < **dst {
			return fmt.Errorf("%s: %s %v would widen the server's %v", where, name, *v, **dst)
		}
		*dst = v
		return nil
	}
	upper := func(name string, dst **float64, v *float64) error {
		if v == nil {
			return nil
		}
		if *dst != nil && *v > **dst {
			return fmt.Errorf("%s: %s %v would widen the server's %v", where, name, *v, **dst)
		}
		*dst = v
		return nil
	}
	if err := lower("min", &out.Min, cfg.Min); err != nil {
		return nil, err
	}
	if err := upper("max", &out.Max, cfg.Max); err != nil {
		return nil, err
	}
	if err := lower("exclusiveMin", &out.ExclusiveMin, cfg.ExclusiveMin); err != nil {
		return nil, err
	}
	if err := upper("exclusiveMax", &out.ExclusiveMax, cfg.ExclusiveMax); err != nil {
		return nil, err
	}
	if len(cfg.Enum) > 0 {
		if len(server.Enum) > 0 {
			for _, v := range cfg.Enum {
				found := false
				for _, s := range server.Enum {
					if fmt.Sprint(s) == fmt.Sprint(v) {
						found = true
					}
				}
				if !found {
					return nil, fmt.Errorf("%s: enum value %v is not in the server's set %v", where, v, server.Enum)
				}
			}
		}
		out.Enum = cfg.Enum
	}
	if cfg.Pattern != "" {
		if server.Pattern != "" && server.Pattern != cfg.Pattern {
			return nil, fmt.Errorf("%s: the server already constrains the pattern to %q", where, server.Pattern)
		}
		out.Pattern = cfg.Pattern
	}
	if cfg.MinLength != nil {
		if server.MinLength != nil && *cfg.MinLength < *server.MinLength {
			return nil, fmt.Errorf("%s: minLength %d would widen the server's %d", where, *cfg.MinLength, *server.MinLength)
		}
		out.MinLength = cfg.MinLength
	}
	if cfg.MaxLength != nil {
		if server.MaxLength != nil && *cfg.MaxLength > *server.MaxLength {
			return nil, fmt.Errorf("%s: maxLength %d would widen the server's %d", where, *cfg.MaxLength, *server.MaxLength)
		}
		out.MaxLength = cfg.MaxLength
	}
	return &out, nil
}

func (a *adapter) approval(e *CommandEntry) mhp.Approval {
	if e != nil && e.Approval != "" {
		return e.Approval
	}
	if a.cfg.DefaultApproval != "" {
		return a.cfg.DefaultApproval
	}
	return mhp.ApprovalConfirm
}

func (a *adapter) setting(f *Compiled, c *Command, e *CommandEntry) (binding.Setting, error) {
	if c.IsObservable() || len(c.Parameters) != 1 {
		return binding.Setting{}, fmt.Errorf("sila2: commands: %s can be a setting only if it is unobservable with exactly one parameter", c.Identifier)
	}
	p := c.Parameters[0]
	shape := f.Shape(&p.DataType)
	lim, err := narrow("sila2: setting "+e.Setting, shape.Limits, e.Limits)
	if err != nil {
		return binding.Setting{}, err
	}
	spec := mhp.Setting{Name: e.Setting, Type: shape.Type, Unit: shape.Unit, Limits: lim, Approval: a.approval(e),
		Interlocks: e.Interlocks, DuringJob: e.DuringJob, Notes: describeText(strings.TrimSpace(c.DisplayName), c.Description)}
	if e.Unit != "" {
		spec.Unit = e.Unit
	}
	if e.Notes != "" {
		spec.Notes = e.Notes
	}
	pname := SnakeCase(p.Identifier)
	a.params[strings.ToLower(f.FQID("Command", c.Identifier, "Parameter", p.Identifier))] = paramInfo{name: e.Setting, limited: !lim.Empty()}
	fid, cid := f.Feature.FullyQualifiedID(), c.Identifier
	return binding.Setting{Spec: spec, Write: func(ctx context.Context, value any) (binding.WriteStatus, error) {
		_, err := a.b.Call(ctx, fid, cid, map[string]any{pname: value})
		if err == nil {
			return binding.Applied, nil
		}
		if me := a.refusal(e.Setting, err); me != nil {
			return binding.Applied, me
		}
		if se, ok := AsSiLAError(err); ok && (se.Kind == KindDefined || se.Kind == KindUndefined) {
			// The server answered that the command failed: it says what
			// happened, so the state is known and nothing was applied.
			return binding.Applied, mhp.Errorf(mhp.CodeServerError, "%s: the server reported: %s", e.Setting, se.Message).
				With("sila_error", silaErrorData(se))
		}
		return binding.Sent, fmt.Errorf("%s: write %v: outcome unknown: %w", e.Setting, value, err)
	}}, nil
}

func silaErrorData(se *Error) map[string]any {
	d := map[string]any{"kind": se.Kind.String(), "message": se.Message}
	if se.Identifier != "" {
		d["identifier"] = se.Identifier
	}
	if se.Parameter != "" {
		d["parameter"] = se.Parameter
	}
	if se.Kind == KindFramework {
		d["type"] = FrameworkErrorName(se.FrameworkType)
	}
	return d
}

// refusal maps the errors that mean "nothing was executed" to an *mhp.Error:
// encoding errors, ValidationErrors and the framework errors of an
// initiating call. Anything else returns nil.
func (a *adapter) refusal(item string, err error) *mhp.Error {
	if me, ok := mhp.AsError(err); ok {
		return me
	}
	if neverSent(err) {
		// No connection: gRPC sent nothing, the server never saw the call.
		a.lost(err)
		return adapters.NotSent("sila2: "+item, err)
	}
	se, ok := AsSiLAError(err)
	if !ok {
		return nil
	}
	if isLockRefusal(err) && (se.Kind == KindDefined || strings.Contains(strings.ToLower(se.Message), "lock")) {
		return mhp.Errorf(mhp.CodeNotLeased, "%s: the SiLA server is locked by another client: %s", item, se.Message).
			With("reason", "server_locked").With("sila_error", silaErrorData(se))
	}
	switch se.Kind {
	case KindValidation:
		info, known := a.params[strings.ToLower(se.Parameter)]
		field := info.name
		if !known {
			field = SnakeCase(lastPart(se.Parameter))
		}
		code := mhp.CodeInvalidValue
		if info.limited {
			code = mhp.CodeLimitViolation
		}
		return mhp.Errorf(code, "%s: the server refused %s: %s", item, field, se.Message).
			With("field", field).With("sila_error", silaErrorData(se))
	case KindFramework:
		switch se.FrameworkType {
		case FrameworkCommandExecutionNotAccepted:
			return mhp.Errorf(mhp.CodeServerError, "%s: the server did not accept the command: %s", item, se.Message).
				With("sila_error", silaErrorData(se))
		case FrameworkInvalidMetadata, FrameworkNoMetadataAllowed:
			code := mhp.CodeServerError
			a.mu.Lock()
			locked := a.lockID != ""
			a.mu.Unlock()
			if locked || strings.Contains(strings.ToLower(se.Message), "lock") {
				code = mhp.CodeNotLeased
			}
			return mhp.Errorf(code, "%s: the server refused the call's metadata: %s", item, se.Message).
				With("sila_error", silaErrorData(se))
		}
	}
	return nil
}

func lastPart(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

// intermediateNote lists an observable command's intermediate responses
// with their types: the job's progress carries each as
// detail.intermediate.<name>.
func intermediateNote(f *Compiled, c *Command) string {
	parts := make([]string, 0, len(c.Intermediate))
	for _, r := range c.Intermediate {
		parts = append(parts, SnakeCase(r.Identifier)+" ("+shapeText(f.Shape(&r.DataType))+")")
	}
	return "Intermediate responses, in job progress detail.intermediate: " + strings.Join(parts, ", ") + "."
}

// shapeText is a shape in a few words: type, unit, limits, item type.
func shapeText(sh *mhp.Shape) string {
	if sh == nil {
		return mhp.TypeAny
	}
	t := sh.Type
	if sh.Type == mhp.TypeArray && sh.Items != nil {
		t = "array of " + shapeText(sh.Items)
	}
	if sh.Type == mhp.TypeObject && len(sh.Properties) > 0 {
		names := make([]string, 0, len(sh.Properties))
		for k := range sh.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		t = "object {" + strings.Join(names, ", ") + "}"
	}
	if sh.Unit != "" {
		t += ", " + sh.Unit
	}
	if l := sh.Limits; l != nil {
		if l.Min != nil {
			t += fmt.Sprintf(", min %g", *l.Min)
		}
		if l.Max != nil {
			t += fmt.Sprintf(", max %g", *l.Max)
		}
		if len(l.Enum) > 0 {
			t += fmt.Sprintf(", one of %v", l.Enum)
		}
	}
	return t
}
