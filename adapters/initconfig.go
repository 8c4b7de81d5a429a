package adapters

import (
	"context"
	"fmt"
	"sort"
)

// RegisterDiscovery adds a kind's discovery (an adapter's Register calls it
// beside Register); a kind registered twice is an error.
func (r *Registry) RegisterDiscovery(kind string, d Discovery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind == "" || d.Discover == nil || d.Load == nil {
		return fmt.Errorf("adapters: register discovery needs a kind, a Discover and a Load")
	}
	if _, ok := r.d[kind]; ok {
		return fmt.Errorf("adapters: discovery of kind %q registered twice", kind)
	}
	r.d[kind] = d
	return nil
}

// Discoverable lists the kinds with a discovery, sorted.
func (r *Registry) Discoverable() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.d))
	for k := range r.d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Generated is a discovered config: the adapter's Config, the file
// rendered from it, and the report.
type Generated struct {
	Kind, Target string
	// Config is the adapter's Config value.
	Config any
	// YAML is the rendered file; it has passed the adapter's Load.
	YAML []byte
	// Report says what was mapped and skipped; its Files go beside YAML.
	Report Report
}

// Discover reads the backend at target with the kind's discovery, renders
// the config ([Render], with the report's comments) and checks that the
// adapter's Load accepts the file it wrote. The file is the integrator's
// starting point: `mhp serve` serves it unchanged.
func (r *Registry) Discover(ctx context.Context, kind, target string, opt DiscoverOptions) (*Generated, error) {
	r.mu.RLock()
	d, ok := r.d[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("adapters: no discovery for kind %q (have %v)", kind, r.Discoverable())
	}
	cfg, rep, err := d.Discover(ctx, target, opt)
	if err != nil {
		return nil, err
	}
	b, err := Render(cfg, rep.Comments)
	if err != nil {
		return nil, err
	}
	if err := d.Load(Source{Path: kind + " config generated from " + target, Data: b}); err != nil {
		return nil, fmt.Errorf("adapters: the %s config discovered at %s does not load (a discovery bug): %w", kind, target, err)
	}
	return &Generated{Kind: kind, Target: target, Config: cfg, YAML: b, Report: rep}, nil
}

// DiscoverConfig is the discovery hook of the onboarding interview (its
// "ecosystem adapter" kind): the config file discovered at target and the
// summary to show the person who confirms it. Files beside the config
// (the descriptor snapshot) are not returned: a config without its
// snapshot serves with the backend down all the same (the identity and the
// link) and adopts the backend's description when it first connects.
func (r *Registry) DiscoverConfig(ctx context.Context, kind, target string) (configYAML []byte, summary string, err error) {
	g, err := r.Discover(ctx, kind, target, DiscoverOptions{})
	if err != nil {
		return nil, "", err
	}
	return g.YAML, g.Report.Summary(), nil
}
