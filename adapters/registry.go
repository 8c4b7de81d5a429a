// Package adapters holds what the ecosystem adapters share: the one shape
// every adapter package has, the registry of config-file kinds behind
// `mhp serve plc.yaml`, the common parts of their config files, and the
// backend link.
//
// # The adapter shape
//
// Every adapter package (opcua, sila2, ros2, madsci, pylabrobot, mqtt) has
// the same public face, so a user who learned one knows all six and a new
// ecosystem starts as a copy:
//
//	const Kind = "opcua"                                   // the config file's `adapter:`
//	func Load(src adapters.Source) (Config, error)          // strict YAML, paths resolved, validated
//	func (c Config) Validate() error                        // no I/O: what the file says is coherent
//	func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error)
//	func Register(r *adapters.Registry) error               // Kind -> Load, then New; Discover
//	func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error)
//
// New validates cfg again (a program may build it in Go), builds the
// bindings and returns an unstarted [binding.Driver]; the caller Starts and
// Closes it. The adapter's Options embed [Options] (clock, logger, Refine)
// next to its backend seam: a small client interface or a dial function,
// nil for the real backend. Fakes of each backend live in a <name>test
// package (opcuatest, silatest, rosbridgetest, madscitest, plrtest,
// mqtttest) that tests and users import alike. From a file:
//
//	src, err := adapters.ReadSource("plc.yaml")
//	cfg, err := opcua.Load(src)
//	drv, err := opcua.New(ctx, cfg, opcua.Options{})
//	err = drv.Start(ctx)
//	defer drv.Close()
//
// or through a registry, as cmd/mhp does:
//
//	r := adapters.NewRegistry()
//	_ = opcua.Register(r)
//	drv, err := r.Open(ctx, "plc.yaml")
//
// A config file names its adapter at the top:
//
//	adapter: opcua
//	device: {id: plc-01, class: plc, make: Siemens, model: S7-1500}
//	...adapter-specific fields...
//
// The registry is a value the program builds (cmd/mhp registers every
// adapter package it links); library code never registers itself in init.
//
// An adapter that follows its backend link takes a `link:` block
// ([LinkConfig], a field of its own config, so that an adapter that does not
// honour it refuses the key instead of ignoring it): the adapter starts
// whether or not its backend is up, reports the link to the driver
// ([binding.Driver.SetLink]) and reconnects with bounded, jittered backoff
// ([Link], [Backoff]); self-describing adapters serve a descriptor cache
// while the backend is down and never adopt a description that changed.
//
// # Discovery
//
// Discover reads a live backend and proposes the config file the
// integrator then edits (`mhp init KIND TARGET`). Its DiscoverOptions embed
// [DiscoverOptions] (depth, include/exclude, listen window, device id,
// logger) next to the adapter's own backend seam, so that a test passes
// the fake it gives New. target is what the integrator types after the
// kind: opc.tcp://HOST:PORT, ws://HOST:9090, mqtt://BROKER/PREFIX, a SiLA 2
// server's HOST:PORT, a MADSci node's or a PyLabRobot bridge's URL.
//
// The Config returned is complete: [Render] writes it, with the
// [Report]'s comments, into YAML that the adapter's Load accepts, Validate
// passes and New builds unchanged; the report also says what was mapped,
// what was skipped and why, and carries the files to write beside the
// config (the descriptor snapshot of a self-describing backend). The
// safety defaults are conservative and said in the file: every setting and
// action `approval: confirm`; a writable number without a range gets no
// limits and a loud comment ([NoLimitsNote]); estop and watchdog are left
// to the integrator with TODOs ([TODOEStop], [TODOWatchdog]) that `mhp
// validate` reports; interlock candidates ([InterlockCandidate]) are
// proposed in comments, never applied.
//
// Register adds the discovery beside the factory
// ([Registry.RegisterDiscovery], [NewDiscovery]); `mhp init` and the
// onboarding interview's hook ([Registry.DiscoverConfig]) reach every
// adapter through [Registry.Discover].
package adapters

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

// Source is one adapter config file.
type Source struct {
	// Path is the file's path; Dir its folder, for resolving relative paths
	// (certificates, FDL files).
	Path, Dir string
	// Data is the file's bytes.
	Data []byte
	// Refine, when set, edits the bindings an adapter generated before the
	// driver is built: a device package merges its descriptor (notes,
	// narrower limits, stricter approval, examples) this way.
	Refine func(*binding.Config) error
}

// Decode decodes the config strictly into v: an unknown field is an error
// naming its line, so a typo never silently drops a limit.
func (s Source) Decode(v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(s.Data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", s.Path, err)
	}
	return nil
}

// Resolve makes a path from the config relative to the config's folder.
func (s Source) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Dir, p)
}

// Factory builds an unstarted driver from a config file. The caller Starts
// and Closes it.
type Factory func(ctx context.Context, src Source) (*binding.Driver, error)

// Registry maps adapter kinds ("opcua", "sila2", ...) to factories.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Factory
	d  map[string]Discovery // see RegisterDiscovery (discover.go)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Factory{}, d: map[string]Discovery{}} }

// Register adds a kind; registering a kind twice is an error.
func (r *Registry) Register(kind string, f Factory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind == "" || f == nil {
		return fmt.Errorf("adapters: register needs a kind and a factory")
	}
	if _, ok := r.m[kind]; ok {
		return fmt.Errorf("adapters: kind %q registered twice", kind)
	}
	r.m[kind] = f
	return nil
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for k := range r.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Open reads a config file and builds its driver with the factory its
// `adapter:` field names.
func (r *Registry) Open(ctx context.Context, path string) (*binding.Driver, error) {
	return r.OpenRefined(ctx, path, nil)
}

// OpenRefined is Open with the generated bindings edited by refine before
// the driver is built (see Source.Refine); a device package uses it.
func (r *Registry) OpenRefined(ctx context.Context, path string, refine func(*binding.Config) error) (*binding.Driver, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return r.Build(ctx, Source{Path: path, Dir: filepath.Dir(path), Data: data, Refine: refine})
}

// Build builds a driver from an in-memory config.
func (r *Registry) Build(ctx context.Context, src Source) (*binding.Driver, error) {
	var head struct {
		Adapter string `yaml:"adapter"`
	}
	if err := yaml.Unmarshal(src.Data, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	if head.Adapter == "" {
		return nil, fmt.Errorf("%s: no `adapter:` field (one of %v)", src.Path, r.Kinds())
	}
	r.mu.RLock()
	f, ok := r.m[head.Adapter]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%s: adapter %q is not registered (have %v)", src.Path, head.Adapter, r.Kinds())
	}
	return f(ctx, src)
}

// Common is the MHP part every adapter config shares; adapters embed it
// with `yaml:",inline"`.
type Common struct {
	Adapter      string         `yaml:"adapter"`
	Device       mhp.DeviceInfo `yaml:"device"`
	Notes        string         `yaml:"notes,omitempty"`
	Instructions string         `yaml:"instructions,omitempty"`
	Physical     *mhp.Physical  `yaml:"physical,omitempty"`
	Safety       mhp.Safety     `yaml:"safety,omitempty"`
}

// Apply copies the common fields into a binding config.
func (c Common) Apply(cfg *binding.Config) {
	cfg.Device = c.Device
	cfg.Notes = c.Notes
	cfg.Instructions = c.Instructions
	cfg.Physical = c.Physical
	cfg.Safety = c.Safety
}
