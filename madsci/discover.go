package madsci

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares (DeviceID,
	// Snapshot, Logger).
	adapters.DiscoverOptions
	// Options are New's options for the discovery's own start: the backend
	// seam (Node, Actions, HTTP) a test fills with its fake.
	Options Options
}

// Discover reads the MADSci node at target (its URL) as `mhp serve` would,
// and proposes the config that serves it: the node URL, the descriptor
// snapshot beside it (link.descriptor_cache, in the report's Files), and
// an override per action and setting the node describes, each at approval
// confirm. The node must be up.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	if target == "" {
		return Config{}, rep, fmt.Errorf("madsci: discover: give the node's URL (http://HOST:2000)")
	}
	cfg := Config{NodeURL: target}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: "madsci-node", Class: "instrument"}
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, err
	}
	o := opt.Options
	if o.Logger == nil {
		o.Logger = opt.Log()
	}
	desc, snap, err := adapters.Snapshot(ctx, func(cache string) (*binding.Driver, error) {
		c := cfg
		c.Link.DescriptorCache = cache
		c.Link.FailFast = true
		return New(ctx, c, o)
	})
	if err != nil {
		return Config{}, rep, fmt.Errorf("madsci: discover %s: %w", target, err)
	}
	var file struct {
		Description nodeDescription `json:"description"`
	}
	if err := json.Unmarshal(snap, &file); err != nil || file.Description.Info == nil {
		return Config{}, rep, fmt.Errorf("madsci: discover %s: unreadable snapshot: %v", target, err)
	}
	info := file.Description.Info
	cfg.Device.ID = opt.DeviceIDFrom(info.NodeName, cfg.Device.ID)
	cfg.Device.Model, cfg.Device.Description = info.ModuleName, info.NodeDescription
	cfg.Link.DescriptorCache = opt.SnapshotFile(cfg.Device.ID)
	rep.File(cfg.Link.DescriptorCache, snap)
	cfg.Safety.Notes = adapters.SafetyNotes
	cfg.Actions = map[string]ActionOverride{}
	for _, a := range desc.Actions {
		cfg.Actions[a.Name] = ActionOverride{Approval: mhp.ApprovalConfirm}
	}
	cfg.Settings = map[string]SettingOverride{}
	for _, s := range desc.Settings {
		cfg.Settings[s.Name] = SettingOverride{Approval: mhp.ApprovalConfirm}
	}
	note := ""
	if info.Capabilities.Has(AdminSafetyStop) {
		note = "The adapter's estop posts the node's safety_stop admin command."
	} else {
		rep.Warn("the node does not implement safety_stop: an estop only cancels and locks it")
	}
	rep.Review("madsci", target, desc, "node "+info.NodeName+" /info", note)
	rep.Comment("link", "The node's /info as of `mhp init`: the device serves it while the node is down.")
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("madsci: discovered config does not validate (a discovery bug): %w", err)
	}
	return cfg, rep, nil
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	if err := o.CheckFlags(Kind); err != nil {
		return Config{}, adapters.Report{}, err
	}
	return Discover(ctx, target, DiscoverOptions{DiscoverOptions: o})
}, Load)
