package serial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.bug.st/serial"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/examples/devices"
)

// DiscoverOptions tune [Discover].
type DiscoverOptions struct {
	// DiscoverOptions are the options every discovery shares (DeviceID,
	// Logger, Flags: "baud" and "profile").
	adapters.DiscoverOptions
	// Open opens the port for each probe; default [OpenPort]. A test
	// passes a pty opener or a fake Port.
	Open func(ctx context.Context, path string, mode *serial.Mode) (Port, error)
	// ByID is the folder of stable port names searched for an alias of the
	// target; default /dev/serial/by-id.
	ByID string
	// ReplyTimeout bounds each identity query; default 0.5 s.
	ReplyTimeout time.Duration
}

// DefaultByID is where Linux's udev names serial ports by the adapter's
// vendor, product and serial number.
const DefaultByID = "/dev/serial/by-id"

// discoverFlags are the `mhp init serial` options Discover takes.
var discoverFlags = []string{"baud", "profile"}

// identity is what a profile's identity queries said.
type identity struct {
	reply, model, serial string
}

// profile is an instrument family Discover knows: its shipped config (the
// template, which carries the line settings and the identity check) and
// the identity queries it sends. The queries only ask who is there: they
// never set, start or move anything.
type profile struct {
	name  string
	file  string // in devices.SerialConfigs
	bauds []int  // tried in turn; the "baud" flag replaces them
	ident func(ctx context.Context, p *prober, cfg Config) (identity, error)
}

// profiles are probed in this order: NAMUR first (it answers nothing it
// does not know, so the later probes' queries cannot confuse it), the
// pump last (its two line speeds).
var profiles = []profile{
	{name: "namur", file: "ika-cmag-hs7/hotplate.yaml", bauds: []int{9600}, ident: identNAMUR},
	{name: "mtsics", file: "mettler-balance/balance.yaml", bauds: []int{9600}, ident: identMTSICS},
	{name: "ne1000", file: "ne1000-pump/pump.yaml", bauds: []int{19200, 9600}, ident: identNE1000},
}

// Profiles lists the names of the instrument profiles [Discover] probes, in
// order (the values of the "profile" flag).
func Profiles() []string {
	out := make([]string, len(profiles))
	for i, p := range profiles {
		out[i] = p.name
	}
	return out
}

// Template returns the shipped config of a profile (examples/devices), the
// one [Discover] fills in.
func Template(name string) (Config, error) {
	for _, p := range profiles {
		if p.name == name {
			return p.template()
		}
	}
	return Config{}, mhp.Errorf(mhp.CodeInvalidParams, "serial: no instrument profile %q (have %v)", name, Profiles())
}

func (p profile) template() (Config, error) {
	data, err := devices.SerialConfigs.ReadFile(p.file)
	if err != nil {
		return Config{}, fmt.Errorf("serial: profile %s: %w", p.name, err)
	}
	return Load(adapters.Source{Path: "examples/devices/" + p.file, Data: data})
}

// Discover identifies the instrument on the serial port target (a device
// node: /dev/ttyUSB0, or a /dev/serial/by-id name) and returns the config
// that serves it: the shipped package's config of the profile that
// answered, on the port's stable by-id name when one points at target,
// at the line speed that answered, with every setting and action at
// approval confirm. It probes the profiles in turn ([Profiles]), each
// with its own line settings, sending only identity queries (IKA NAMUR
// IN_NAME; MT-SICS @ then I2; NE-1000 VER at 19200 then 9600 baud) with
// short timeouts; the port is closed and its input flushed between probes.
// Flags: "baud" (only this line speed), "profile" (only this profile).
// When nothing answers, the error names the port and what each profile
// got (silence, garbage, an open error such as permission denied).
func Discover(ctx context.Context, target string, opt DiscoverOptions) (Config, adapters.Report, error) {
	var rep adapters.Report
	target = strings.TrimSpace(target)
	if target == "" {
		return Config{}, rep, mhp.Errorf(mhp.CodeInvalidParams,
			"serial: discover: give the serial port (/dev/ttyUSB0 or %s/...); nothing was opened", DefaultByID)
	}
	if err := opt.CheckFlags(Kind, discoverFlags...); err != nil {
		return Config{}, rep, mhp.Errorf(mhp.CodeInvalidParams, "%v", err)
	}
	todo, baud, err := chosen(opt.Flags)
	if err != nil {
		return Config{}, rep, err
	}
	if opt.Open == nil {
		opt.Open = OpenPort
	}
	if opt.ReplyTimeout <= 0 {
		opt.ReplyTimeout = 500 * time.Millisecond
	}
	if opt.ByID == "" {
		opt.ByID = DefaultByID
	}
	var tried []string
	for _, pf := range todo {
		tmpl, err := pf.template()
		if err != nil {
			return Config{}, rep, err
		}
		bauds := pf.bauds
		if baud > 0 {
			bauds = []int{baud}
		}
		for _, b := range bauds {
			if err := ctx.Err(); err != nil {
				return Config{}, rep, mhp.Errorf(mhp.CodeServerError, "serial: discover %s: %v (tried %s)",
					target, context.Cause(ctx), strings.Join(tried, "; "))
			}
			cfg := tmpl
			cfg.Port, cfg.Baud = target, b
			at := fmt.Sprintf("%s at %d %s", pf.name, b, lineName(cfg))
			opt.Log().Debug("serial: discover: probing", "port", target, "profile", at)
			id, err := probe(ctx, pf, cfg, opt)
			if err == nil {
				return fill(cfg, pf, id, target, opt, rep)
			}
			tried = append(tried, at+": "+err.Error())
			rep.Skip("profile", at, err.Error())
			var oe *openError
			if errors.As(err, &oe) {
				// The same open fails for every profile: stop here.
				return Config{}, rep, mhp.Errorf(mhp.CodeServerError, "serial: discover %s: the port did not open: %v",
					target, oe.err).With("port", target)
			}
		}
	}
	return Config{}, rep, mhp.Errorf(mhp.CodeServerError, "serial: discover %s: no known instrument answered (%s)",
		target, strings.Join(tried, "; ")).With("port", target)
}

// chosen applies the "profile" and "baud" flags.
func chosen(flags map[string]string) ([]profile, int, error) {
	todo := profiles
	if name, ok := flags["profile"]; ok {
		todo = nil
		for _, p := range profiles {
			if p.name == name || (name == "namurs" && p.name == "namur") {
				todo = []profile{p}
			}
		}
		if todo == nil {
			return nil, 0, mhp.Errorf(mhp.CodeInvalidParams, "serial: discover: --profile %q is not one of %v", name, Profiles())
		}
	}
	baud := 0
	if s, ok := flags["baud"]; ok {
		b, err := strconv.Atoi(s)
		if err != nil || b <= 0 || b > 4000000 {
			return nil, 0, mhp.Errorf(mhp.CodeInvalidParams, "serial: discover: --baud %q is not a line speed (e.g. 9600)", s)
		}
		baud = b
	}
	return todo, baud, nil
}

// lineName spells a config's framing: 7E1, 8N1.
func lineName(c Config) string {
	c = c.Defaults()
	return fmt.Sprintf("%d%s%v", c.DataBits, strings.ToUpper(c.Parity[:1]), c.StopBits)
}

// openError is a probe whose port did not open.
type openError struct{ err error }

func (e *openError) Error() string { return "open: " + e.err.Error() }

// prober is one probe's open port.
type prober struct {
	l       *line
	port    Port
	gen     uint64
	timeout time.Duration
}

// probe opens the port with the profile's line settings, runs its
// identity queries and closes the port.
func probe(ctx context.Context, pf profile, cfg Config, opt DiscoverOptions) (identity, error) {
	cfg = cfg.Defaults()
	mode, err := cfg.Mode()
	if err != nil {
		return identity{}, err
	}
	l := newLine(cfg, mode, opt.Open)
	p, err := l.connect(ctx)
	if err != nil {
		cause := err
		var pe *serial.PortError
		if errors.As(err, &pe) && pe.Code() == serial.PermissionDenied || errors.Is(err, fs.ErrPermission) {
			cause = fmt.Errorf("%w (permission denied: is this user in the dialout group?)", err)
		}
		return identity{}, &openError{cause}
	}
	defer l.closePort()
	_, gen := l.current()
	return pf.ident(ctx, &prober{l: l, port: p, gen: gen, timeout: opt.ReplyTimeout}, cfg)
}

// errSilence: no byte came back.
var errSilence = errors.New("silence")

// ask flushes the input, sends cmd and returns the first reply line
// (trimmed), or errSilence, or garbage: bytes without the reply ending.
func (p *prober) ask(ctx context.Context, cmd string) (string, error) {
	if err := p.port.ResetInputBuffer(); err != nil {
		return "", fmt.Errorf("flush: %w", err)
	}
	if err := p.l.write(p.port, p.gen, []byte(cmd+p.l.cfg.LineEnding)); err != nil {
		return "", err
	}
	end := []byte(p.l.cfg.ReplyEnding)
	deadline := time.Now().Add(p.timeout)
	var buf []byte
	chunk := make([]byte, 128)
	for {
		if i := bytes.Index(buf, end); i >= 0 {
			// An echo of the command (a port not in raw mode) is not its reply.
			if text := string(bytes.TrimSpace(buf[:i])); text != "" && text != cmd {
				return text, nil
			}
			buf = buf[i+len(end):]
			continue
		}
		if len(buf) > p.l.cfg.MaxReply || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		n, err := p.port.Read(chunk)
		if err != nil {
			return "", fmt.Errorf("read: %w", err)
		}
		buf = append(buf, chunk[:n]...)
	}
	if err := ctx.Err(); err != nil {
		return "", context.Cause(ctx)
	}
	if len(bytes.TrimSpace(buf)) == 0 {
		return "", fmt.Errorf("%w (no reply to %q within %v)", errSilence, cmd, p.timeout)
	}
	return "", garbage(cmd, string(buf))
}

func garbage(cmd, got string) error {
	if len(got) > 40 {
		got = got[:40] + "..."
	}
	return fmt.Errorf("garbage (%q answered %q)", cmd, got)
}

func identNAMUR(ctx context.Context, p *prober, cfg Config) (identity, error) {
	name, err := p.ask(ctx, cfg.Identify.Command)
	if err != nil {
		return identity{}, err
	}
	if !regexp.MustCompile(cfg.Identify.Reply).MatchString(name) {
		return identity{}, garbage(cfg.Identify.Command, name)
	}
	return identity{reply: name, model: name}, nil
}

var (
	mtI4 = regexp.MustCompile(`^I4 A "([^"]*)"$`)
	mtI2 = regexp.MustCompile(`^I2 A "([^"]*)"$`)
)

func identMTSICS(ctx context.Context, p *prober, cfg Config) (identity, error) {
	sn, err := p.ask(ctx, cfg.Identify.Command) // @: resets the balance's pending work, keeps zero and tare
	if err != nil {
		return identity{}, err
	}
	m := mtI4.FindStringSubmatch(sn)
	if m == nil {
		return identity{}, garbage(cfg.Identify.Command, sn)
	}
	id := identity{reply: sn, serial: m[1]}
	// I2 is "<type> <capacity> <unit>": the type is what is left of the
	// last two fields.
	if ty, err := p.ask(ctx, "I2"); err == nil {
		if m := mtI2.FindStringSubmatch(ty); m != nil {
			if f := strings.Fields(m[1]); len(f) > 2 {
				id.model = strings.Join(f[:len(f)-2], " ")
			}
		}
	}
	return id, nil
}

var neVer = regexp.MustCompile(`^\x02\d\d[A-Z](NE1000.*)$`)

func identNE1000(ctx context.Context, p *prober, cfg Config) (identity, error) {
	var last error
	// The first reply after a power cut is the alarm A?R: ask again once.
	for range max(cfg.Identify.Attempts, 1) {
		ver, err := p.ask(ctx, cfg.Identify.Command)
		if err != nil {
			if errors.Is(err, errSilence) {
				return identity{}, err
			}
			last = err
			continue
		}
		m := neVer.FindStringSubmatch(ver)
		if m == nil || !regexp.MustCompile(cfg.Identify.Reply).MatchString(ver) {
			last = garbage(cfg.Identify.Command, ver)
			continue
		}
		return identity{reply: m[1], model: "NE-1000 (" + m[1] + ")"}, nil
	}
	return identity{}, last
}

// stablePath returns the by-id name pointing at the same node as target
// ("" when none does, or when target is itself a by-id name).
func stablePath(target, byID string) string {
	if filepath.Dir(target) == filepath.Clean(byID) {
		return ""
	}
	node, err := filepath.EvalSymlinks(target)
	if err != nil {
		return ""
	}
	entries, err := os.ReadDir(byID)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		alias := filepath.Join(byID, e.Name())
		if n, err := filepath.EvalSymlinks(alias); err == nil && n == node {
			return alias
		}
	}
	return ""
}

// fill makes the template into the discovered instrument's config, with
// the report and the file's comments.
func fill(cfg Config, pf profile, id identity, target string, opt DiscoverOptions, rep adapters.Report) (Config, adapters.Report, error) {
	stable := stablePath(target, opt.ByID)
	switch {
	case stable != "":
		cfg.Port = stable
		rep.Comment("port", fmt.Sprintf("The stable name of %s (%s): it survives re-enumeration.", target, opt.ByID))
	case filepath.Dir(target) == filepath.Clean(opt.ByID):
		rep.Comment("port", "A stable name: it survives re-enumeration.")
	default:
		rep.Warn("no %s name points at %s: the port may get another name when adapters are replugged", opt.ByID, target)
		rep.Comment("port", fmt.Sprintf("TODO(integrator): no %s name points at %s; a ttyUSBn name can change when adapters are replugged: use a stable name (by-id or by-path).", opt.ByID, target))
	}
	if opt.DeviceID != "" {
		cfg.Device.ID = opt.DeviceID
	}
	if id.model != "" {
		cfg.Device.Model = id.model
	}
	cfg.Device.Serial = id.serial
	cfg.Safety.Notes = adapters.SafetyNotes
	for i := range cfg.Settings {
		cfg.Settings[i].Approval = mhp.ApprovalConfirm
	}
	for i := range cfg.Actions {
		cfg.Actions[i].Approval = mhp.ApprovalConfirm
	}
	rep.Comment("", fmt.Sprintf("Generated by `mhp init serial %s`: the %s profile answered at %d baud %s (%q).\n"+
		"Template: examples/devices/%s (the shipped package; its DEVICE.md says what each item does).\n"+
		"Review before serving: approvals, limits, estop, watchdog.", target, pf.name, cfg.Baud, lineName(cfg), id.reply, pf.file))
	if len(cfg.Settings) > 0 {
		rep.Comment("settings", adapters.ApprovalNote)
	}
	if len(cfg.Actions) > 0 {
		rep.Comment("actions", adapters.ApprovalNote)
	}
	steps := make([]string, len(cfg.EStop))
	for i, s := range cfg.EStop {
		steps[i] = s.Send
	}
	if len(steps) > 0 {
		rep.Comment("estop", fmt.Sprintf("The estop sends %s, as the shipped package does; check that it makes the instrument safe as installed.", strings.Join(steps, ", ")))
	} else {
		rep.Comment("safety", adapters.TODOEStop)
	}
	if w := cfg.Watchdog; w != nil {
		rep.Comment("watchdog", fmt.Sprintf("The instrument's own watchdog: %q is sent at every connect and every %gs.", w.Command, w.Seconds/2))
	} else {
		rep.Comment("safety", adapters.TODOWatchdog+" This instrument's watchdog is not driven by the adapter.")
	}
	for _, s := range cfg.Signals {
		rep.Map("signal", s.Name, s.Query, "")
	}
	for _, s := range cfg.Settings {
		rep.Map("setting", s.Name, s.Command, "")
	}
	for _, a := range cfg.Actions {
		sends := make([]string, len(a.Commands))
		for i, c := range a.Commands {
			sends[i] = c.Send
		}
		rep.Map("action", a.Name, strings.Join(sends, ", "), "")
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, rep, fmt.Errorf("serial: discover %s: the generated config: %w", target, err)
	}
	return cfg, rep, nil
}

// discoveryEntry is the registry's entry for [Discover] (see Register).
var discoveryEntry = adapters.NewDiscovery(func(ctx context.Context, target string, o adapters.DiscoverOptions) (Config, adapters.Report, error) {
	return Discover(ctx, target, DiscoverOptions{DiscoverOptions: o})
}, Load)
