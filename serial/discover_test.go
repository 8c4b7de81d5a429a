//go:build linux

package serial_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.bug.st/serial"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	mhpserial "github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/serial/serialtest"
)

// byID makes a by-id folder with name pointing at the fake's node.
func byID(t *testing.T, name string, fake *serialtest.Fake) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(fake.Path(), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func discoverOpts(byIDDir string, flags map[string]string) mhpserial.DiscoverOptions {
	return mhpserial.DiscoverOptions{DiscoverOptions: adapters.DiscoverOptions{Logger: quiet(), Flags: flags},
		ByID: byIDDir, ReplyTimeout: 150 * time.Millisecond}
}

// identityQueries are the only commands a probe may send.
var identityQueries = []string{"IN_NAME", "@", "I2", "VER"}

// onlyIdentity fails when the fake received anything but identity queries.
func onlyIdentity(t *testing.T, fake *serialtest.Fake) {
	t.Helper()
	for _, c := range fake.Commands() {
		if c = strings.TrimSpace(c); !slices.Contains(identityQueries, c) {
			t.Errorf("discovery sent %q: only identity queries %v may be sent", c, identityQueries)
		}
	}
}

// roundTrip renders the discovered config as `mhp init` writes it, loads
// it back (strict Load, Validate) and serves it with New against the fake.
func roundTrip(t *testing.T, cfg mhpserial.Config, rep adapters.Report) mhp.Device {
	t.Helper()
	data, err := adapters.Render(cfg, rep.Comments)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	back, err := mhpserial.Load(adapters.Source{Path: "gen.yaml", Data: data})
	if err != nil {
		t.Fatalf("Load of the generated file: %v\n%s", err, data)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	back.InterCommandDelayS = 0
	back.Timeouts.ReplyS = 0.3
	drv, _ := start(t, back, nil)
	return mhp.AsSession(drv, "s1")
}

func TestDiscoverIdentifiesEachInstrument(t *testing.T) {
	cases := []struct {
		name, alias, profile string
		proto                serialtest.Protocol
		opt                  serialtest.Options
		baud, dataBits       int
		model, serial        string
		signal               string
		want                 any
	}{
		{name: "hotplate", alias: "usb-IKA_C-MAG_HS7-if00-port0", profile: "namur", proto: serialtest.NewHotplate(),
			baud: 9600, dataBits: 7, model: "C-MAG HS7", signal: "plate_temperature", want: 25.0},
		{name: "balance", alias: "usb-FTDI_USB_Serial-if00-port0", profile: "mtsics", proto: serialtest.NewBalance(),
			baud: 9600, dataBits: 8, model: "XS205", serial: "B123456789", signal: "tare_weight", want: 0.0},
		{name: "pump", alias: "usb-Prolific_USB-Serial_Controller-if00-port0", profile: "ne1000", proto: serialtest.NewPump(),
			opt: serialtest.Options{Terminator: "\r"}, baud: 19200, dataBits: 8, model: "NE-1000 (NE1000V3.928)",
			signal: "syringe_diameter", want: 14.43},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := serialtest.New(t, tc.proto, tc.opt)
			dir := byID(t, tc.alias, fake)
			cfg, rep, err := mhpserial.Discover(context.Background(), fake.Path(), discoverOpts(dir, nil))
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			onlyIdentity(t, fake)
			if want := filepath.Join(dir, tc.alias); cfg.Port != want {
				t.Errorf("port %q, want the by-id alias %q", cfg.Port, want)
			}
			if cfg.Baud != tc.baud || cfg.DataBits != tc.dataBits || cfg.Device.Model != tc.model || cfg.Device.Serial != tc.serial {
				t.Errorf("got %d baud %d data bits, model %q serial %q; want %d, %d, %q, %q",
					cfg.Baud, cfg.DataBits, cfg.Device.Model, cfg.Device.Serial, tc.baud, tc.dataBits, tc.model, tc.serial)
			}
			tmpl, err := mhpserial.Template(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Identify == nil || *cfg.Identify != *tmpl.Identify {
				t.Errorf("identify %+v, want the package's %+v", cfg.Identify, tmpl.Identify)
			}
			for _, s := range cfg.Settings {
				if s.Approval != mhp.ApprovalConfirm {
					t.Errorf("setting %s approval %q, want confirm", s.Name, s.Approval)
				}
			}
			for _, a := range cfg.Actions {
				if a.Approval != mhp.ApprovalConfirm {
					t.Errorf("action %s approval %q, want confirm", a.Name, a.Approval)
				}
			}
			if len(rep.Mapped) != len(cfg.Signals)+len(cfg.Settings)+len(cfg.Actions) {
				t.Errorf("report mapped %d items, the config has %d", len(rep.Mapped), len(cfg.Signals)+len(cfg.Settings)+len(cfg.Actions))
			}
			d := roundTrip(t, cfg, rep)
			if v, why := read(t, d, tc.signal); v != tc.want {
				t.Errorf("served %s = %v (%s), want %v", tc.signal, v, why, tc.want)
			}
		})
	}
}

// TestDiscoverSkipsWhatDidNotAnswer: the balance answers ES to the NAMUR
// query; the report says so, and the balance's own probe still wins.
func TestDiscoverSkipsWhatDidNotAnswer(t *testing.T) {
	fake := serialtest.New(t, serialtest.NewBalance(), serialtest.Options{})
	_, rep, err := mhpserial.Discover(context.Background(), fake.Path(), discoverOpts(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || !strings.HasPrefix(rep.Skipped[0].Source, "namur at 9600 7E1") ||
		!strings.Contains(rep.Skipped[0].Why, `garbage ("IN_NAME" answered "ES`) {
		t.Errorf("skipped %+v, want namur's garbage", rep.Skipped)
	}
	// No by-id alias points at the fake: said, and left to the integrator.
	if len(rep.Warnings) == 0 || !strings.Contains(rep.Comments["port"], "TODO(integrator)") {
		t.Errorf("warnings %v, port comment %q: want the missing stable name said", rep.Warnings, rep.Comments["port"])
	}
}

func TestDiscoverSilentPortNamesEveryProfile(t *testing.T) {
	fake := serialtest.New(t, serialtest.NewHotplate(), serialtest.Options{})
	fake.Silent(true)
	// A pty ignores the line settings: record the modes each probe opened with.
	var modes []string
	o := discoverOpts(t.TempDir(), nil)
	o.Open = func(ctx context.Context, path string, m *serial.Mode) (mhpserial.Port, error) {
		modes = append(modes, fmt.Sprintf("%d %d %v %v", m.BaudRate, m.DataBits, m.Parity, m.StopBits))
		return mhpserial.OpenPort(ctx, path, m)
	}
	_, _, err := mhpserial.Discover(context.Background(), fake.Path(), o)
	e, n := fmt.Sprint(serial.EvenParity), fmt.Sprint(serial.NoParity)
	want := []string{"9600 7 " + e + " 0", "9600 8 " + n + " 0", "19200 8 " + n + " 0", "9600 8 " + n + " 0"}
	if !slices.Equal(modes, want) {
		t.Errorf("probes opened with %q, want %q (NAMUR 7E1, MT-SICS 8N1, NE-1000 8N1 at 19200 then 9600)", modes, want)
	}
	if err == nil {
		t.Fatal("a silent port was identified")
	}
	msg := err.Error()
	for _, want := range []string{fake.Path(), "namur at 9600 7E1: silence", "mtsics at 9600 8N1: silence",
		"ne1000 at 19200 8N1: silence", "ne1000 at 9600 8N1: silence"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if me, _ := mhp.AsError(err); me == nil || me.Code != mhp.CodeServerError {
		t.Errorf("error %v is not an *mhp.Error server_error", err)
	}
	onlyIdentity(t, fake)
}

// garbled answers every line with bytes that end nothing.
type garbled struct{}

func (garbled) Handle(string) ([]byte, bool) { return []byte{0xff, 0xfe, 0x81}, true }

func TestDiscoverGarbageIsSaid(t *testing.T) {
	fake := serialtest.New(t, garbled{}, serialtest.Options{})
	_, _, err := mhpserial.Discover(context.Background(), fake.Path(), discoverOpts(t.TempDir(), map[string]string{"profile": "namur"}))
	if err == nil || !strings.Contains(err.Error(), `namur at 9600 7E1: garbage ("IN_NAME" answered "\xff\xfe\x81")`) {
		t.Fatalf("Discover of a garbling port: %v, want the garbage named", err)
	}
}

func TestDiscoverFlags(t *testing.T) {
	pump := serialtest.NewPump()
	pump.Alarm("R") // the first reply after power-up
	fake := serialtest.New(t, pump, serialtest.Options{Terminator: "\r"})
	cfg, _, err := mhpserial.Discover(context.Background(), fake.Path(),
		discoverOpts(t.TempDir(), map[string]string{"profile": "ne1000", "baud": "9600"}))
	if err != nil {
		t.Fatalf("Discover --profile ne1000 --baud 9600: %v", err)
	}
	if cfg.Baud != 9600 {
		t.Errorf("baud %d, want 9600 from the flag", cfg.Baud)
	}
	// Only the pump's query, asked again after the alarm.
	if got := fake.Commands(); len(got) != 2 || got[0] != "VER" || got[1] != "VER" {
		t.Errorf("commands %q, want VER twice (the alarm, then the version)", got)
	}

	// Refused before any I/O: an unknown flag, an unknown profile, a bad
	// baud, an empty target.
	opened := 0
	open := func(context.Context, string, *serial.Mode) (mhpserial.Port, error) {
		opened++
		return nil, errors.New("not reached")
	}
	for _, c := range []struct {
		target string
		flags  map[string]string
		want   string
	}{
		{fake.Path(), map[string]string{"listen": "10s"}, "--listen"},
		{fake.Path(), map[string]string{"profile": "modbus"}, `"modbus"`},
		{fake.Path(), map[string]string{"baud": "fast"}, `"fast"`},
		{"  ", nil, "give the serial port"},
	} {
		o := discoverOpts(t.TempDir(), c.flags)
		o.Open = open
		_, _, err := mhpserial.Discover(context.Background(), c.target, o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Discover(%q, %v): %v, want it refused naming %s", c.target, c.flags, err, c.want)
		}
		if me, _ := mhp.AsError(err); me == nil || me.Code != mhp.CodeInvalidParams {
			t.Errorf("Discover(%q, %v): %v is not invalid_params", c.target, c.flags, err)
		}
	}
	if opened != 0 {
		t.Errorf("a refused discovery opened the port %d times", opened)
	}
}

func TestDiscoverPermissionDenied(t *testing.T) {
	opened := 0
	o := discoverOpts(t.TempDir(), nil)
	o.Open = func(_ context.Context, path string, _ *serial.Mode) (mhpserial.Port, error) {
		opened++
		return nil, fmt.Errorf("open %s: %w", path, os.ErrPermission)
	}
	_, _, err := mhpserial.Discover(context.Background(), "/dev/ttyUSB7", o)
	if err == nil || !strings.Contains(err.Error(), "/dev/ttyUSB7") || !strings.Contains(err.Error(), "dialout") {
		t.Fatalf("Discover of a port without permission: %v, want the port and the permission named", err)
	}
	if opened != 1 {
		t.Errorf("opened %d times, want 1 (the same open fails for every profile)", opened)
	}
}

// TestDiscoverRegistry: `mhp init serial PORT` reaches Discover through the
// registry, which renders the file and loads it back; the generated file
// carries the TODOs `mhp validate` reports.
func TestDiscoverRegistry(t *testing.T) {
	r := adapters.NewRegistry()
	if err := mhpserial.Register(r); err != nil {
		t.Fatal(err)
	}
	fake := serialtest.New(t, serialtest.NewBalance(), serialtest.Options{})
	g, err := r.Discover(context.Background(), mhpserial.Kind, fake.Path(),
		adapters.DiscoverOptions{Logger: quiet(), Flags: map[string]string{"profile": "mtsics"}})
	if err != nil {
		t.Fatalf("registry Discover: %v", err)
	}
	text := string(g.YAML)
	for _, want := range []string{"adapter: serial", "approval: confirm", "TODO(integrator): watchdog", "# The estop sends @"} {
		if !strings.Contains(text, want) {
			t.Errorf("generated file lacks %q:\n%s", want, text)
		}
	}
	if _, err := r.Discover(context.Background(), mhpserial.Kind, fake.Path(),
		adapters.DiscoverOptions{Flags: map[string]string{"depth": "3"}}); err == nil {
		t.Error("a flag serial discovery does not know was accepted")
	}
}

// TestTemplatesAreTheShippedFiles: the profiles' templates are the
// packages' config files on disk (one source of truth).
func TestTemplatesAreTheShippedFiles(t *testing.T) {
	files := map[string]string{"namur": "ika-cmag-hs7/hotplate.yaml", "mtsics": "mettler-balance/balance.yaml",
		"ne1000": "ne1000-pump/pump.yaml"}
	if got := mhpserial.Profiles(); !slices.Equal(got, []string{"namur", "mtsics", "ne1000"}) {
		t.Fatalf("profiles %v", got)
	}
	names := func(c mhpserial.Config) string {
		var b strings.Builder
		for _, s := range c.Signals {
			b.WriteString("signal " + s.Name + " " + s.Query + ";")
		}
		for _, s := range c.Settings {
			b.WriteString("setting " + s.Name + " " + s.Command + ";")
		}
		for _, a := range c.Actions {
			b.WriteString("action " + a.Name + ";")
		}
		for _, s := range c.EStop {
			b.WriteString("estop " + s.Send + ";")
		}
		return fmt.Sprintf("%s %d %d %s %q", b.String(), c.Baud, c.DataBits, c.Parity, c.LineEnding)
	}
	for profile, file := range files {
		src, err := adapters.ReadSource(filepath.Join("..", "examples", "devices", file))
		if err != nil {
			t.Fatal(err)
		}
		shipped, err := mhpserial.Load(src)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := mhpserial.Template(profile)
		if err != nil {
			t.Fatal(err)
		}
		if names(tmpl) != names(shipped) {
			t.Errorf("%s: template %s\nshipped %s", profile, names(tmpl), names(shipped))
		}
	}
}

// echoing is an instrument behind a port that echoes every command (a
// line not in raw mode) before the instrument's reply.
type echoing struct{ serialtest.Protocol }

func (e echoing) Handle(cmd string) ([]byte, bool) {
	reply, ok := e.Protocol.Handle(cmd)
	_ = ok
	return append([]byte(cmd+"\r\n"), reply...), true
}

func TestDiscoverIgnoresAnEcho(t *testing.T) {
	fake := serialtest.New(t, echoing{serialtest.NewHotplate()}, serialtest.Options{})
	cfg, _, err := mhpserial.Discover(context.Background(), fake.Path(), discoverOpts(t.TempDir(), map[string]string{"profile": "namur"}))
	if err != nil || cfg.Device.Model != "C-MAG HS7" {
		t.Fatalf("Discover behind an echo: model %q, %v; want the plate's IN_NAME", cfg.Device.Model, err)
	}
}
