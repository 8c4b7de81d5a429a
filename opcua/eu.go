package opcua

import (
	"context"
	"fmt"
	"strings"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
)

// nodeInfo is what a variable says of itself: its DataType and the
// EngineeringUnits and EURange properties of analog items.
type nodeInfo struct {
	dataType ua.TypeID
	unit     string // EngineeringUnits DisplayName (or UnitId when unnamed), "" when none
	hasRange bool
	low      float64
	high     float64
}

// readInfo reads a variable's DataType, EngineeringUnits and EURange.
// Missing properties are no error; an unreadable DataType is.
func readInfo(ctx context.Context, cl Client, node *ua.NodeID) (nodeInfo, error) {
	var info nodeInfo
	props, err := children(ctx, cl, node)
	if err != nil {
		return info, err
	}
	req := []*ua.ReadValueID{{NodeID: node, AttributeID: ua.AttributeIDDataType}}
	euAt, rangeAt := -1, -1
	if n, ok := props["EngineeringUnits"]; ok {
		euAt = len(req)
		req = append(req, &ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValue})
	}
	if n, ok := props["EURange"]; ok {
		rangeAt = len(req)
		req = append(req, &ua.ReadValueID{NodeID: n, AttributeID: ua.AttributeIDValue})
	}
	res, err := cl.Read(ctx, req)
	if err != nil {
		return info, err
	}
	if isBad(res[0].Status) || res[0].Value == nil {
		return info, fmt.Errorf("DataType unreadable: %s", StatusName(res[0].Status))
	}
	info.dataType = builtinOf(dataTypeOf(res[0].Value.Value()))
	if euAt > 0 && !isBad(res[euAt].Status) && res[euAt].Value != nil {
		if eo, ok := res[euAt].Value.Value().(*ua.ExtensionObject); ok && eo != nil {
			if eu, ok := eo.Value.(*ua.EUInformation); ok && eu != nil {
				switch {
				case eu.DisplayName != nil && eu.DisplayName.Text != "":
					info.unit = eu.DisplayName.Text
				case eu.UnitID != 0 && eu.UnitID != -1:
					info.unit = fmt.Sprintf("unece:%d", eu.UnitID)
				}
			}
		}
	}
	if rangeAt > 0 && !isBad(res[rangeAt].Status) && res[rangeAt].Value != nil {
		if eo, ok := res[rangeAt].Value.Value().(*ua.ExtensionObject); ok && eo != nil {
			if r, ok := eo.Value.(*ua.Range); ok && r != nil && r.Low <= r.High {
				info.hasRange, info.low, info.high = true, r.Low, r.High
			}
		}
	}
	return info, nil
}

// numericType reports whether t is a number type (EURange applies).
func numericType(t ua.TypeID) bool {
	switch t {
	case ua.TypeIDSByte, ua.TypeIDByte, ua.TypeIDInt16, ua.TypeIDUint16, ua.TypeIDInt32, ua.TypeIDUint32,
		ua.TypeIDInt64, ua.TypeIDUint64, ua.TypeIDFloat, ua.TypeIDDouble:
		return true
	}
	return false
}

// rangeConflict says why a setting's configured limits are wider than the
// server's EURange, or "" when they fit (or either is absent).
func rangeConflict(item SettingItem, info nodeInfo) string {
	if !info.hasRange || item.Limits == nil {
		return ""
	}
	l := item.Limits
	lo, hi := l.Min, l.Max
	if lo == nil {
		lo = l.ExclusiveMin
	}
	if hi == nil {
		hi = l.ExclusiveMax
	}
	if (lo == nil || *lo >= info.low) && (hi == nil || *hi <= info.high) {
		return ""
	}
	show := func(p *float64) string {
		if p == nil {
			return "unbounded"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("setting %s: the config's limits %s..%s are wider than node %s's EURange %g..%g on the server; narrow the limits to the server's range",
		item.Name, show(lo), show(hi), item.Node, info.low, info.high)
}

// RangeError is a setting whose config limits are wider than its node's
// EURange on the server.
type RangeError struct{ Why string }

func (e *RangeError) Error() string { return "opcua: " + e.Why }

// Probe connects to the server once and completes cfg from what its
// variables say: a signal or setting without unit takes the node's
// EngineeringUnits, a numeric setting without limits takes its EURange,
// and a setting whose limits are wider than the EURange is refused (a
// [RangeError] naming the node, the config range and the server range), as
// is a lads action pointed at a LADS control function (a [KindError]). A server
// that cannot be reached is an error wrapping the connection failure; the
// caller may go on with cfg as it is: the driver enforces the EURange at
// every connection, and every connection refines its descriptor with the
// units and ranges it reads, by the same rule (refine.go).
func Probe(ctx context.Context, cfg Config, opt DialOptions) (Config, error) {
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	opt.Background = false
	opt.OnConnect = nil
	opt.KeepAlive = -1
	c, err := Dial(ctx, cfg, opt)
	if err != nil {
		return cfg, err
	}
	defer c.Close()
	nsArr, err := namespaceArray(ctx, c)
	if err != nil {
		return cfg, err
	}
	resolve := func(s string) *ua.NodeID { return resolveNode(s, nsArr) }
	out := cfg
	out.Signals = append([]SignalItem(nil), cfg.Signals...)
	out.Settings = append([]SettingItem(nil), cfg.Settings...)
	for i, s := range out.Signals {
		if s.Unit != "" {
			continue
		}
		info, err := readInfo(ctx, c, resolve(s.Node))
		if err == nil && info.unit != "" {
			out.Signals[i].Unit = info.unit
		}
	}
	for i, s := range out.Settings {
		info, err := readInfo(ctx, c, resolve(s.Node))
		if err != nil {
			continue // the driver reports it when the setting is used
		}
		if why := rangeConflict(s, info); why != "" {
			return cfg, &RangeError{Why: why}
		}
		if s.Unit == "" && info.unit != "" {
			out.Settings[i].Unit = info.unit
		}
		if l := info.euLimits(s); l != nil {
			out.Settings[i].Limits = l
		}
	}
	if err := checkKinds(ctx, c, cfg, resolve); err != nil {
		return cfg, err
	}
	return out, nil
}

// checkRanges reads the settings' EURanges at a connection: a config limit
// wider than the server's range makes the setting refuse every write with
// the reason; a setting without limits is held to the server's range.
func (a *adapter) checkRanges(ctx context.Context, cl Client) error {
	var conflicts []string
	for _, s := range a.cfg.Settings {
		info, err := readInfo(ctx, cl, a.node(s.Node))
		if err != nil {
			a.log.Warn("opcua: setting's node properties unreadable", "setting", s.Name, "node", s.Node, "err", err)
			continue
		}
		why := rangeConflict(s, info)
		a.mu.Lock()
		a.info[s.Node] = info
		if why != "" {
			a.badRange[s.Name] = why
		} else {
			delete(a.badRange, s.Name)
		}
		a.mu.Unlock()
		if why != "" {
			conflicts = append(conflicts, why)
		}
	}
	if len(conflicts) > 0 {
		a.log.Error("opcua: setting limits wider than the server's EURange; their writes are refused", "conflicts", conflicts)
		return &RangeError{Why: conflicts[0]}
	}
	return nil
}

// rangeGate refuses a write the server's EURange rules out: every write of
// a setting whose config limits are wider than the range (the config is
// wrong), and a value outside the range of a setting without limits.
func (a *adapter) rangeGate(item SettingItem, value any) error {
	a.mu.Lock()
	why, bad := a.badRange[item.Name]
	info, ok := a.info[item.Node]
	a.mu.Unlock()
	if bad {
		return mhp.Errorf(mhp.CodeServerError, "%s (nothing was written)", why).With("reason", "config_range").With("node", item.Node)
	}
	if !ok || !info.hasRange || item.Limits != nil {
		return nil
	}
	x, isNum := mhp.Number(value)
	if isNum && (x < info.low || x > info.high) {
		return mhp.Errorf(mhp.CodeLimitViolation, "setting %s: %v is outside node %s's EURange %g..%g on the server (nothing was written)",
			item.Name, value, item.Node, info.low, info.high).With("min", info.low).With("max", info.high).With("node", item.Node)
	}
	return nil
}

// namespaceArray reads the server's namespace URIs.
func namespaceArray(ctx context.Context, cl Client) ([]string, error) {
	res, err := cl.Read(ctx, []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, id.Server_NamespaceArray), AttributeID: ua.AttributeIDValue}})
	if err != nil {
		return nil, fmt.Errorf("opcua: read the namespace array: %w", err)
	}
	if res[0].Value == nil || isBad(res[0].Status) {
		return nil, fmt.Errorf("opcua: namespace array unreadable: %s", StatusName(res[0].Status))
	}
	arr, _ := res[0].Value.Value().([]string)
	return arr, nil
}

// resolveNode parses a config node id; an nsu= id is resolved against the
// server's namespace array, and one whose namespace the server lacks
// becomes an id no server knows (requests are refused BadNodeIdUnknown).
func resolveNode(s string, nsArr []string) *ua.NodeID {
	if strings.HasPrefix(s, "nsu=") {
		x, err := ua.ParseExpandedNodeID(s, nsArr)
		if err != nil || x.NodeID == nil || x.NamespaceURI == "" {
			return ua.NewStringNodeID(0xFFFF, s)
		}
		return x.NodeID
	}
	return ua.MustParseNodeID(s)
}
