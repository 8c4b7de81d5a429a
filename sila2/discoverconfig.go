package sila2

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// DiscoverOptions tune [Discover] (`mhp init sila2`; the mDNS browse of
// servers on the network is [Browse], in discover.go).
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares (DeviceID,
	// Snapshot, Include/Exclude by feature identifier, Logger).
	adapters.DiscoverOptions
	// TLS is how to reach the server, written into the file as given: a CA
	// file (its PEM set with WithCAPEM), a pin, or plaintext.
	TLS TLSFileConfig
	// Options are New's options for the discovery's own start (a test's
	// Backend and Features go here).
	Options Options
}

// Discover reads the Feature Definitions of the SiLA 2 server at target
// (HOST:PORT) as `mhp serve` would and proposes the config that serves
// them: the features outside the core categories (selected by
// Include/Exclude on their identifiers), default_approval confirm, the
// descriptor snapshot beside it, and an unobservable command without
// parameters named like a stop proposed for estop. The server must be up.
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	if target == "" {
		return Config{}, rep, fmt.Errorf("sila2: discover: give the server's HOST:PORT")
	}
	cfg := Config{Endpoint: target, TLS: opt.TLS, DefaultApproval: mhp.ApprovalConfirm}
	cfg.Adapter = Kind
	cfg.Device = mhp.DeviceInfo{ID: "sila2-instrument", Class: "instrument"}
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, err
	}
	o := opt.Options
	if o.Logger == nil {
		o.Logger = opt.Log()
	}
	build := func(c Config) (mhp.Descriptor, []byte, error) {
		return adapters.Snapshot(ctx, func(cache string) (*binding.Driver, error) {
			c.Link.DescriptorCache = cache
			c.Link.FailFast = true
			return New(ctx, c, o)
		})
	}
	// First every feature, to learn them; then the selected ones.
	_, snap, err := build(cfg)
	if err != nil {
		return Config{}, rep, fmt.Errorf("sila2: discover %s: %w", target, err)
	}
	var file struct {
		Description serverDescription `json:"description"`
	}
	if err := json.Unmarshal(snap, &file); err != nil {
		return Config{}, rep, fmt.Errorf("sila2: discover %s: unreadable snapshot: %w", target, err)
	}
	var estops []string
	for _, text := range file.Description.Features {
		f, err := ParseFDL([]byte(text))
		if err != nil {
			rep.Skip("feature", "?", "unparsable Feature Definition: "+err.Error())
			continue
		}
		switch {
		case isCore(f):
			rep.Skip("feature", f.Identifier, "a core feature (category "+f.Category+"): the adapter uses it, it is not exposed")
			continue
		case !opt.Included(f.Identifier):
			rep.Skip("feature", f.Identifier, "not selected by --include/--exclude")
			continue
		}
		cfg.Features = append(cfg.Features, f.Identifier)
		for _, c := range f.Commands {
			if !c.IsObservable() && len(c.Parameters) == 0 && stopName(c.Identifier) {
				estops = append(estops, f.Identifier+"/"+c.Identifier)
			}
		}
	}
	sort.Strings(cfg.Features)
	if len(cfg.Features) == 0 {
		return Config{}, rep, fmt.Errorf("sila2: discover %s: no feature to expose (every one is core or not selected)", target)
	}
	desc, snap, err := build(cfg)
	if err != nil {
		return Config{}, rep, fmt.Errorf("sila2: discover %s: %w", target, err)
	}
	cfg.Device.ID = opt.DeviceIDFrom(desc.Model, cfg.Device.ID)
	if desc.Make != "" {
		cfg.Device.Make = desc.Make
	}
	cfg.Device.Model, cfg.Device.Description = desc.Model, desc.Description
	cfg.Link.DescriptorCache = opt.SnapshotFile(cfg.Device.ID)
	rep.File(cfg.Link.DescriptorCache, snap)
	cfg.Safety.Notes = adapters.SafetyNotes
	rep.Review("sila2", target, desc, "Feature Definitions of "+target, "")
	if len(estops) > 0 {
		rep.Comment("safety", "Proposed estop (an unobservable command without parameters named like a stop): estop: "+strings.Join(estops, " or "))
	}
	rep.Comment("default_approval", "Commands without an entry need a person's approval; give commands: entries (setting:, action:, approval:) to map and relax them.")
	rep.Comment("features", "The features exposed whole; core features (SiLAService, LockController, ...) are used by the adapter, not exposed.")
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("sila2: discovered config does not validate (a discovery bug): %w", err)
	}
	return cfg, rep, nil
}

func stopName(id string) bool {
	for _, w := range strings.Split(adapters.SnakeName(id), "_") {
		if w == "stop" || w == "estop" || w == "emergency" || w == "abort" {
			return true
		}
	}
	return false
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
// Its flags: ca (a PEM file, written as given), pin (SHA-256 hex),
// plaintext.
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	if err := o.CheckFlags(Kind, "ca", "pin", "plaintext"); err != nil {
		return Config{}, adapters.Report{}, err
	}
	opt := DiscoverOptions{DiscoverOptions: o}
	opt.TLS.PinSHA256 = o.Flags["pin"]
	opt.TLS.InsecurePlaintext = o.Flags["plaintext"] == "true"
	if ca := o.Flags["ca"]; ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return Config{}, adapters.Report{}, fmt.Errorf("sila2: --ca: %w", err)
		}
		opt.TLS.CA = ca
		opt.TLS.WithCAPEM(pem)
	}
	return Discover(ctx, target, opt)
}, Load)
