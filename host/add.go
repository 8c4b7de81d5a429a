package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/examples/sim"
)

// Target prefixes of in-process devices.
const (
	prefixPackage = "pkg:"
	prefixTwin    = "twin:"
	prefixConfig  = "config:"
)

// AddOptions are the choices of an add.
type AddOptions struct {
	// Twin adds a package's simulated twin (id suffixed -sim) instead of
	// the package on its own driver.
	Twin bool
	// ID replaces the card's id in the fleet (a second unit of a model).
	ID string
	// Location is where the device stands.
	Location string
}

// Prepare resolves what spec names into an entry, fetching or building its
// card, without changing the fleet: the caller shows the person what will
// become reachable (Entry.Reach) and then calls Commit. spec is an
// http(s):// URL (or host:port), a package folder, an adapter config file,
// sim:thermocycler / sim:arm, or the id of a package under HOME/devices.
func (f *Fleet) Prepare(ctx context.Context, spec string, opt AddOptions) (Entry, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "add: name what to add (a URL, a package folder, a config file, sim:thermocycler)").
			With(mhp.DataField, "target")
	}
	e, err := f.resolve(ctx, spec, opt.Twin)
	if err != nil {
		return Entry{}, err
	}
	if opt.ID != "" {
		e.ID = opt.ID
	}
	if opt.Location != "" {
		e.Location = opt.Location
	}
	if err := ValidID(e.ID); err != nil {
		return Entry{}, err
	}
	return e, nil
}

func (f *Fleet) resolve(ctx context.Context, spec string, twin bool) (Entry, error) {
	if sim.IsDriver(spec) {
		return f.fromHosted(ctx, spec, KindSim, true)
	}
	if !strings.Contains(spec, "://") && looksLikeHostPort(spec) {
		spec = hostPortURL(spec)
	}
	if strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://") {
		if twin {
			return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "add: a twin is made from a package folder, not from a URL").With(mhp.DataField, "twin")
		}
		return f.fromRemote(ctx, strings.TrimRight(spec, "/"))
	}
	path := spec
	if ValidID(spec) == nil {
		if _, err := os.Stat(spec); errors.Is(err, os.ErrNotExist) {
			path = filepath.Join(f.cfg.Home, DevicesDir, spec) // a package the host owns, by id
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Entry{}, err
	}
	info, err := os.Stat(abs)
	if err != nil {
		return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "add %q: not a URL, sim:thermocycler/sim:arm, a package folder, a config file "+
			"or a package under %s: %v", mhp.Truncate(spec, 200), filepath.Join(f.cfg.Home, DevicesDir), err).With(mhp.DataField, "target")
	}
	rel := f.relative(abs)
	if !info.IsDir() {
		if twin {
			return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "add: a twin is made from a package folder; %s is a file", spec).With(mhp.DataField, "twin")
		}
		return f.fromHosted(ctx, prefixConfig+rel, KindAdapter, false)
	}
	if probs := devicepkg.Validate(abs); len(probs) > 0 {
		return Entry{}, problemsError(spec, probs)
	}
	if twin {
		return f.fromHosted(ctx, prefixTwin+rel, KindTwin, true)
	}
	pkg, err := devicepkg.Load(abs)
	if err != nil {
		return Entry{}, err
	}
	simulated := sim.IsDriver(pkg.Card.Driver)
	pkg.Close()
	return f.fromHosted(ctx, prefixPackage+rel, KindPackage, simulated)
}

// problemsError lists a package's problems in an InvalidParams refusal.
func problemsError(spec string, probs []devicepkg.Problem) *mhp.Error {
	lines := make([]string, 0, len(probs))
	for i, p := range probs {
		if i == 10 {
			lines = append(lines, fmt.Sprintf("… and %d more", len(probs)-10))
			break
		}
		lines = append(lines, p.String())
	}
	return mhp.Errorf(mhp.CodeInvalidParams, "package %s does not validate (mhp validate shows every problem):\n%s",
		mhp.Truncate(spec, 200), strings.Join(lines, "\n")).With(mhp.DataReason, "invalid_package").With("problems", probs[:min(len(probs), 10)])
}

// relative names a path inside the home relative to it (so the home can
// move), any other absolutely.
func (f *Fleet) relative(abs string) string {
	if r, err := filepath.Rel(f.cfg.Home, abs); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) && !filepath.IsAbs(r) {
		return filepath.ToSlash(r)
	}
	return abs
}

// abs resolves a path of a target against the home.
func (f *Fleet) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.cfg.Home, filepath.FromSlash(p))
}

func looksLikeHostPort(s string) bool {
	h, p, err := net.SplitHostPort(s)
	return err == nil && h != "" && p != "" && !strings.ContainsAny(s, `/\`)
}

// hostPortURL is the http:// URL of a typed host:port: directory.TargetURL,
// so that a link-local IPv6 address's zone ([fe80::1%eth0]:18900) is
// written %25 (RFC 6874); a port that is no number is left for the dial to
// refuse.
func hostPortURL(s string) string {
	h, p, _ := net.SplitHostPort(s)
	if port, err := strconv.Atoi(p); err == nil && port > 0 && port < 1<<16 {
		return directory.TargetURL(h, port)
	}
	return "http://" + s
}

func (f *Fleet) fromRemote(ctx context.Context, target string) (Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.CardTimeout)
	defer cancel()
	opts := f.cfg.Client
	opts.AllowStdio = false
	d, err := client.Dial(ctx, target, opts)
	if err != nil {
		return Entry{}, mhp.Errorf(mhp.CodeServerError, "add %s: cannot reach it: %v", target, err).With(mhp.DataReason, "unreachable")
	}
	defer d.Close()
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailSummary})
	if err != nil {
		return Entry{}, mhp.Errorf(mhp.CodeServerError, "add %s: it answered but gave no card: %v", target, err)
	}
	if desc.ID == "" {
		return Entry{}, mhp.Errorf(mhp.CodeServerError, "add %s: its card has no device id", target)
	}
	return Entry{ID: desc.ID, Target: target, Kind: KindRemote, Simulated: false, Card: cardOf(desc)}, nil
}

// fromHosted builds the device of an in-process target (not started) for
// its card, so an add refuses a package that does not build.
func (f *Fleet) fromHosted(ctx context.Context, target, kind string, simulated bool) (Entry, error) {
	dev, closeDev, err := f.build(ctx, target)
	if err != nil {
		return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "add %s: it does not build: %v", target, err).With(mhp.DataReason, "build_failed")
	}
	defer closeDev()
	desc, err := dev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailSummary})
	if err != nil {
		return Entry{}, err
	}
	e := Entry{ID: desc.ID, Target: target, Kind: kind, Simulated: simulated, Card: cardOf(desc)}
	if kind == KindTwin {
		e.Location = "simulated"
	}
	return e, nil
}

func cardOf(d *mhp.Description) Card {
	c := Card{DeviceInfo: d.DeviceInfo}
	for _, s := range d.Signals {
		c.Signals = append(c.Signals, s.Name)
	}
	for _, s := range d.Settings {
		c.Settings = append(c.Settings, s.Name)
	}
	for _, a := range d.Actions {
		c.Actions = append(c.Actions, a.Name)
	}
	return c
}

// Reach says, for the person deciding, what adding the entry makes
// reachable to the agent.
func (e Entry) Reach() string {
	what := "hardware"
	if e.Simulated {
		what = "a simulation (nothing physical moves)"
	}
	name := e.ID
	if m := strings.TrimSpace(e.Card.Make + " " + e.Card.Model); m != "" {
		name += " (" + m + ")"
	}
	var parts []string
	if len(e.Card.Settings) > 0 {
		parts = append(parts, "change the settings "+list(e.Card.Settings))
	}
	if len(e.Card.Actions) > 0 {
		parts = append(parts, "run the actions "+list(e.Card.Actions))
	}
	if len(e.Card.Signals) > 0 {
		parts = append(parts, "read "+list(e.Card.Signals))
	}
	do := "use it"
	if len(parts) > 0 {
		do = strings.Join(parts, "; ")
	}
	return fmt.Sprintf("Adding %s at %s makes %s reachable to the agent: it may %s, within the device's limits and approvals "+
		"and the host policy.", name, e.Target, what, do)
}

func list(names []string) string {
	if len(names) > 8 {
		return strings.Join(names[:8], ", ") + fmt.Sprintf(" and %d more", len(names)-8)
	}
	return strings.Join(names, ", ")
}

// NormalizeTarget is the form of a target used to compare two: for a URL,
// the scheme and host lowercased, loopback names made one, the default
// port made explicit and a trailing slash or /mhp.json dropped; an
// in-process target as written, its path cleaned.
func NormalizeTarget(t string) string {
	t = strings.TrimSpace(t)
	for _, p := range []string{prefixPackage, prefixTwin, prefixConfig} {
		if strings.HasPrefix(t, p) {
			return p + filepath.ToSlash(filepath.Clean(strings.TrimPrefix(t, p)))
		}
	}
	u, err := url.Parse(t)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return t
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		host = "loopback"
	}
	path := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/mhp.json")
	return u.Scheme + "://" + net.JoinHostPort(host, port) + strings.TrimSuffix(path, "/")
}

// inFleet reports whether a target is already a member (normalized).
func inFleet(list []Entry, target string) bool {
	n := NormalizeTarget(target)
	return slices.ContainsFunc(list, func(e Entry) bool { return NormalizeTarget(e.Target) == n })
}
