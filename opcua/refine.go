package opcua

import (
	"context"
	"math"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Units and ranges at every connection. [Probe] reads them when the file
// is loaded and Register hands them to the driver as its first refinement
// ([binding.Driver.Refine]), not as config; then every connection reads
// the settings' EngineeringUnits and EURange again (checkRanges) and
// refines the running driver with them: describe, /mhp.json,
// safety/limits and the limits gate show what the server says now. A
// later connection whose EURange narrowed, moved or widened replaces the
// range an earlier one gave; a signal's unit is read until one connection
// has read every signal. The rule is Probe's: a unit fills in an item the
// config leaves without one, an EURange becomes the limits of a numeric
// setting the config leaves without any, and a config range wider than
// the EURange is a conflict (checkRanges: its writes are refused), never
// widened or replaced. What the config states never moves.

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

// probeRefinement is what Probe read from the server (probed) beyond the
// config (cfg): the units and limits it filled in, as a refinement of the
// driver built from cfg, so that a later connection can replace them.
func probeRefinement(cfg, probed Config) binding.Refinement {
	r := binding.Refinement{SignalUnits: map[string]string{}, SettingUnits: map[string]string{}, Limits: map[string]*mhp.Limits{}}
	for i, s := range cfg.Signals {
		if s.Unit == "" && i < len(probed.Signals) && probed.Signals[i].Unit != "" {
			r.SignalUnits[s.Name] = probed.Signals[i].Unit
		}
	}
	for i, s := range cfg.Settings {
		if i >= len(probed.Settings) {
			break
		}
		p := probed.Settings[i]
		if s.Unit == "" && p.Unit != "" {
			r.SettingUnits[s.Name] = p.Unit
		}
		if s.Limits == nil && p.Limits != nil {
			r.Limits[s.Name] = p.Limits
		}
	}
	return r
}

// refineFromServer refines the driver from what this connection's server
// says of the items: the settings' units and EURanges as checkRanges read
// them (on this connection, or an earlier one when this one could not
// read a node), at every connection; the signals' units, read here for
// those without one in the config, until a connection has read them all.
// Refine changes nothing when the server says what the driver shows.
func (a *adapter) refineFromServer(ctx context.Context, cl Client) {
	if a.drv == nil {
		return
	}
	a.mu.Lock()
	signalsRead := a.refined
	a.mu.Unlock()
	r := binding.Refinement{SignalUnits: map[string]string{}, SettingUnits: map[string]string{}, Limits: map[string]*mhp.Limits{}}
	complete := true
	for _, s := range a.cfg.Signals {
		if signalsRead || s.Unit != "" {
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
		// and limits stand, and the range gate still holds the EURange; the
		// signals are not read again.
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
