package adapters

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
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

// Check loads a config file with its kind's Load (strict keys, Validate;
// no I/O) and returns what the integrator has still to decide: every TODO
// comment (those `mhp init` writes: estop, watchdog, limits, templates), a
// writable number without limits, no estop, no watchdog. Warnings do not
// make the file invalid; a Load error does.
func (r *Registry) Check(src Source) (kind string, warnings []string, err error) {
	var head struct {
		Adapter string `yaml:"adapter"`
	}
	if err := yaml.Unmarshal(src.Data, &head); err != nil {
		return "", nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	r.mu.RLock()
	d, ok := r.d[head.Adapter]
	_, known := r.m[head.Adapter]
	r.mu.RUnlock()
	switch {
	case !ok && known:
		// A kind without discovery (serial) has no Load here: its file is
		// checked when it is served.
		return head.Adapter, append([]string{"the " + head.Adapter + " adapter's own checks run when the file is served (`mhp serve`)"},
			ConfigWarnings(src.Data)...), nil
	case !ok:
		return head.Adapter, nil, fmt.Errorf("%s: adapter %q is not registered (have %v)", src.Path, head.Adapter, r.Kinds())
	}
	if err := d.Load(src); err != nil {
		return head.Adapter, nil, err
	}
	return head.Adapter, ConfigWarnings(src.Data), nil
}

// ConfigWarnings lists what a config leaves to the integrator (see
// [Registry.Check]).
func ConfigWarnings(data []byte) []string {
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "#") && strings.Contains(t, "TODO") {
			out = append(out, fmt.Sprintf("line %d: %s", i+1, strings.TrimSpace(strings.TrimLeft(t, "#"))))
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 {
		return out
	}
	top := root.Content[0]
	get := func(m *yaml.Node, key string) *yaml.Node {
		if m == nil || m.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		return nil
	}
	if s := get(top, "settings"); s != nil && s.Kind == yaml.SequenceNode {
		for _, it := range s.Content {
			t := get(it, "type")
			if t != nil && (t.Value == "number" || t.Value == "integer") && get(it, "limits") == nil {
				name := ""
				if n := get(it, "name"); n != nil {
					name = n.Value
				}
				out = append(out, fmt.Sprintf("line %d: setting %s has no limits: any %s is sent", it.Line, name, t.Value))
			}
		}
	}
	safety := get(top, "safety")
	if est := get(safety, "estop"); get(top, "estop") == nil && (est == nil || est.Value != "true") {
		out = append(out, "no estop: safety/estop stops only the MHP side, nothing at the backend")
	}
	if w := get(safety, "watchdog_s"); (w == nil || w.Value == "0") && get(top, "watchdog") == nil { // serial: a hardware watchdog
		out = append(out, "no watchdog (safety.watchdog_s): the device is not made safe when its agent goes quiet")
	}
	return out
}
