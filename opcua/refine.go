package opcua

import (
	"context"
	"math"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Units and ranges at every connection. [Probe] reads them once, when the
// driver is built; when the server was not reachable then, the first
// connection that succeeds reads them instead and refines the running
// driver's descriptor ([binding.Driver.Refine]): describe, /mhp.json,
// safety/limits and the limits gate show the server's EngineeringUnits and
// EURange from then on. The rule is Probe's: a unit fills in an item
// without one, an EURange becomes the limits of a numeric setting the
// config left without any, and a config range wider than the EURange is a
// conflict (checkRanges: its writes are refused), never widened or
// replaced.

// euLimits is the limits a setting takes from its node's EURange: the
// range, when the config gives the setting no limits, the node is numeric,
// the setting a number or an integer and both bounds finite; nil otherwise.
func (info nodeInfo) euLimits(s SettingItem) *mhp.Limits {
	if s.Limits != nil || !info.hasRange || !numericType(info.dataType) || (s.Type != mhp.TypeNumber && s.Type != mhp.TypeInteger) ||
		math.IsInf(info.low, 0) || math.IsInf(info.high, 0) {
		return nil
	}
	return mhp.Range(info.low, info.high)
}

// refineFromServer refines the driver from what this connection's server
// says of the items (after checkRanges read the settings' nodes), until a
// connection has read every item's node. It reads the signals' nodes
// itself, those without a unit only.
func (a *adapter) refineFromServer(ctx context.Context, cl Client) {
	a.mu.Lock()
	done := a.refined
	a.mu.Unlock()
	if done || a.drv == nil {
		return
	}
	r := binding.Refinement{SignalUnits: map[string]string{}, SettingUnits: map[string]string{}, Limits: map[string]*mhp.Limits{}}
	complete := true
	for _, s := range a.cfg.Signals {
		if s.Unit != "" {
			continue
		}
		info, err := readInfo(ctx, cl, a.node(s.Node))
		if err != nil {
			a.log.Warn("opcua: signal's node properties unreadable; its unit is read at the next connection", "signal", s.Name, "node", s.Node, "err", err)
			complete = false
			continue
		}
		if info.unit != "" {
			r.SignalUnits[s.Name] = info.unit
		}
	}
	a.mu.Lock()
	for _, s := range a.cfg.Settings {
		info, ok := a.info[s.Node] // read by checkRanges on this connection or an earlier one
		if !ok {
			complete = false
			continue
		}
		if s.Unit == "" && info.unit != "" {
			r.SettingUnits[s.Name] = info.unit
		}
		if _, conflict := a.badRange[s.Name]; !conflict {
			if l := info.euLimits(s); l != nil {
				r.Limits[s.Name] = l
			}
		}
	}
	a.mu.Unlock()
	changed, err := a.drv.Refine(r)
	if err != nil {
		// Not expected (the entries are checked above): the config's units
		// and limits stand, the range gate still holds the EURange, and the
		// refinement is not tried again.
		a.log.Warn("opcua: the server's units and ranges were not applied", "endpoint", a.cfg.Endpoint, "err", err)
		complete = true
	}
	if err == nil && len(changed) > 0 {
		a.log.Info("opcua: units and ranges read from the server", "endpoint", a.cfg.Endpoint, "items", changed)
	}
	if complete {
		a.mu.Lock()
		a.refined = true
		a.mu.Unlock()
	}
}
