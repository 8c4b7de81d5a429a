package pylabrobot

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
	// seam (Machine, Tasks, HTTP) a test fills with its fake.
	Options Options
}

// Discover reads the plrbridge at target (its URL) as `mhp serve` would and
// proposes the config that serves it: the bridge URL, the descriptor
// snapshot of its /describe beside it (link.descriptor_cache, in the
// report's Files), and an override per action the machine offers, each at
// approval confirm. Settings are methods the integrator maps (settings:
// name -> method); the file says so. The bridge must be up.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	if target == "" {
		return Config{}, rep, fmt.Errorf("pylabrobot: discover: give the bridge's URL (http://HOST:5050)")
	}
	cfg := Config{Mode: ModeBridge, URL: target}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: "plr-machine", Class: "liquid_handler"}
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
		return Config{}, rep, fmt.Errorf("pylabrobot: discover %s: %w", target, err)
	}
	var file struct {
		Description Description `json:"description"`
	}
	if err := json.Unmarshal(snap, &file); err != nil {
		return Config{}, rep, fmt.Errorf("pylabrobot: discover %s: unreadable snapshot: %w", target, err)
	}
	m := file.Description.Machine
	cfg.Device.ID = opt.DeviceIDFrom(m.Class, cfg.Device.ID)
	cfg.Device.Model, cfg.Device.Description = m.Class, m.Doc
	cfg.Link.DescriptorCache = opt.SnapshotFile(cfg.Device.ID)
	rep.File(cfg.Link.DescriptorCache, snap)
	cfg.Safety.Notes = adapters.SafetyNotes
	cfg.Actions = map[string]ActionOverride{}
	for _, a := range desc.Actions {
		cfg.Actions[a.Name] = ActionOverride{Approval: mhp.ApprovalConfirm}
	}
	note := ""
	if m.Stop {
		note = "The adapter's estop calls the machine's stop() through the bridge."
	} else {
		rep.Warn("the machine has no stop(): an estop does not stop it")
	}
	rep.Review("plr", target, desc, "bridge /describe of "+m.Class, note)
	rep.Comment("actions", "One entry per machine method. Settings are methods you map yourself:\n"+
		"settings: {NAME: {method: set_temperature, type: number, unit: degC, limits: {min: 4, max: 95}, approval: confirm}}")
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("pylabrobot: discovered config does not validate (a discovery bug): %w", err)
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
