package pylabrobot_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

func buildExample(t *testing.T, file, fromURL, toURL string, cut string) mhp.Descriptor {
	t.Helper()
	path := filepath.Join("..", "examples", "plr-bridge", file)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), fromURL, toURL, 1)
	if cut != "" {
		text = text[:strings.Index(text, cut)] + "\n"
	}
	r := adapters.NewRegistry()
	if err := pylabrobot.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The descriptor cache goes to a temp dir, not into examples/.
	d, err := r.Build(ctx, adapters.Source{Path: path, Dir: t.TempDir(), Data: []byte(text)})
	if err != nil {
		t.Fatalf("build %s: %v", file, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.Descriptor()
}

func TestExampleConfigs(t *testing.T) {
	b := plrtest.NewBridge()
	defer b.Close()
	// The example names a liquid handler's methods; the fake has the fixture's.
	desc := buildExample(t, "bridge.yaml", "http://127.0.0.1:5050", b.URL, "\nactions:")
	if desc.ID != "starlet-01" || len(desc.Actions) == 0 || !desc.Safety.EStop {
		t.Fatalf("bridge example: %+v", desc)
	}
	l := plrtest.NewLegacyServer()
	defer l.Close()
	desc = buildExample(t, "legacy.yaml", "http://127.0.0.1:5001", l.URL, "")
	lw, ok := desc.Action("labware")
	if desc.ID != "lh-legacy-01" || !ok || lw.Approval != mhp.ApprovalConfirm {
		t.Fatalf("legacy example: %+v", desc)
	}
}

// TestExampleServesWithBridgeDown: `mhp serve bridge.yaml` after the bridge
// went away starts from the descriptor cache, serves, and reports the
// backend down.
func TestExampleServesWithBridgeDown(t *testing.T) {
	b := plrtest.NewBridge()
	path := filepath.Join("..", "examples", "plr-bridge", "bridge.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "http://127.0.0.1:5050", b.URL, 1)
	text = text[:strings.Index(text, "\nactions:")] + "\n"
	r := adapters.NewRegistry()
	if err := pylabrobot.Register(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src := adapters.Source{Path: path, Dir: t.TempDir(), Data: []byte(text)}
	up, err := r.Build(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	n := len(up.Descriptor().Actions)
	_ = up.Close()
	b.Close()
	down, err := r.Build(ctx, src)
	if err != nil {
		t.Fatalf("build with the bridge down: %v", err)
	}
	defer down.Close()
	if err := down.Start(ctx); err != nil {
		t.Fatalf("start with the bridge down: %v", err)
	}
	if l := down.Link(); l == nil || l.Connected {
		t.Fatalf("backend link %+v with the bridge down", l)
	}
	if len(down.Descriptor().Actions) != n {
		t.Fatalf("served %d actions from the cache, the bridge had %d", len(down.Descriptor().Actions), n)
	}
}

func TestConfigErrors(t *testing.T) {
	for name, yaml := range map[string]string{
		"typo":              "adapter: pylabrobot\ndevice: {id: a}\nurll: http://x\n",
		"legacy settings":   "adapter: pylabrobot\ndevice: {id: a}\nmode: legacy\nsettings: {t: {method: set_t, type: number}}\n",
		"bad mode":          "adapter: pylabrobot\ndevice: {id: a}\nmode: websocket\n",
		"setting no method": "adapter: pylabrobot\ndevice: {id: a}\nsettings: {t: {type: number}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := pylabrobot.Load(adapters.Source{Path: "x.yaml", Data: []byte(yaml)}); err == nil {
				t.Fatalf("accepted: %s", yaml)
			}
		})
	}
	b := plrtest.NewBridge()
	defer b.Close()
	cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
	cfg.Device.ID = "a"
	cfg.Actions = map[string]pylabrobot.ActionOverride{"aspriate": {Approval: mhp.ApprovalConfirm}}
	if _, err := pylabrobot.New(context.Background(), cfg, pylabrobot.Options{}); err == nil || !strings.Contains(err.Error(), "aspriate") {
		t.Fatalf("override of a missing method: %v", err)
	}
}

func TestExampleConfigsParseWhole(t *testing.T) {
	for _, file := range []string{"bridge.yaml", "legacy.yaml"} {
		path := filepath.Join("..", "examples", "plr-bridge", file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pylabrobot.Load(adapters.Source{Path: path, Data: data})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: Load returned a config Validate refuses: %v", file, err)
		}
	}
}

// TestValidateNamesTheField: Validate takes zero fields at their defaults
// (a config built in Go validates as its file would) and names the field it
// refuses.
func TestValidateNamesTheField(t *testing.T) {
	if err := (pylabrobot.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "device.id") {
		t.Fatalf("empty config: %v, want device.id required", err)
	}
	ok := pylabrobot.Config{Common: adapters.Common{Device: mhp.DeviceInfo{ID: "a"}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("zero fields take their defaults: %v", err)
	}
	for name, c := range map[string]struct {
		mut  func(*pylabrobot.Config)
		want string
	}{
		"adapter":         {func(c *pylabrobot.Config) { c.Adapter = "opcua" }, "adapter"},
		"mode":            {func(c *pylabrobot.Config) { c.Mode = "websocket" }, "mode"},
		"url":             {func(c *pylabrobot.Config) { c.URL = "ftp://x" }, "url"},
		"request_timeout": {func(c *pylabrobot.Config) { c.RequestTimeout = -time.Second }, "request_timeout"},
		"poll_failures":   {func(c *pylabrobot.Config) { c.PollFailures = -1 }, "poll_failures"},
		"poll_retry": {func(c *pylabrobot.Config) {
			c.PollRetry = adapters.PollRetry{Backoff: time.Minute, Window: time.Second}
		}, "poll_retry.window"},
		"poll_retry max": {func(c *pylabrobot.Config) {
			c.PollRetry = adapters.PollRetry{Backoff: time.Second, MaxBackoff: time.Millisecond}
		}, "poll_retry.max_backoff"},
		"long_poll_wait": {func(c *pylabrobot.Config) { c.LongPollWait = -time.Second }, "long_poll_wait"},
		"setting method": {func(c *pylabrobot.Config) { c.Settings = map[string]pylabrobot.SettingMapping{"t": {Type: "number"}} }, "method"},
		"setting type": {func(c *pylabrobot.Config) {
			c.Settings = map[string]pylabrobot.SettingMapping{"t": {Method: "set_t", Type: "float"}}
		}, "type"},
		"legacy settings": {func(c *pylabrobot.Config) {
			c.Mode = pylabrobot.ModeLegacy
			c.Settings = map[string]pylabrobot.SettingMapping{"t": {Method: "set_t", Type: "number"}}
		}, "settings need mode bridge"},
		"action timeout": {func(c *pylabrobot.Config) {
			c.Actions = map[string]pylabrobot.ActionOverride{"run": {Timeout: -time.Second}}
		}, "timeout"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			c.mut(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, c.want)
			}
			// New refuses the same config before any I/O.
			if _, nerr := pylabrobot.New(context.Background(), cfg, pylabrobot.Options{}); nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("New = %v, want Validate's %v", nerr, err)
			}
		})
	}
}

// seam wraps the real bridge client, counting the calls that go through
// [pylabrobot.Options]' Machine and Tasks.
type seam struct {
	*pylabrobot.BridgeClient
	describes, submits atomic.Int32
}

func (s *seam) Describe(ctx context.Context) (*pylabrobot.Description, error) {
	s.describes.Add(1)
	return s.BridgeClient.Describe(ctx)
}

func (s *seam) Submit(ctx context.Context, method string, params map[string]any, timeoutS float64) (*pylabrobot.Task, error) {
	s.submits.Add(1)
	return s.BridgeClient.Submit(ctx, method, params, timeoutS)
}

// TestOptionsSeam: the backend seam in Options replaces the client of
// Config.URL (which here points nowhere), and Refine edits or refuses the
// generated bindings before the driver exists.
func TestOptionsSeam(t *testing.T) {
	b := plrtest.NewBridge()
	defer b.Close()
	c, err := pylabrobot.NewBridgeClient(b.URL, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &seam{BridgeClient: c}
	cfg := fastConfig(pylabrobot.ModeBridge, "http://127.0.0.1:9") // nothing listens: only the seam can answer
	cfg.Device.ID = "seam"
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()

	refused := errors.New("refused by the device package")
	if _, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{Machine: s, Tasks: s,
		Options: adapters.Options{Refine: func(*binding.Config) error { return refused }}}); !errors.Is(err, refused) {
		t.Fatalf("New with a refusing Refine = %v", err)
	}
	d, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{Machine: s, Tasks: s,
		Options: adapters.Options{Refine: func(bc *binding.Config) error { bc.Notes = "refined"; return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s.describes.Load() != 2 || d.Descriptor().Notes != "refined" {
		t.Fatalf("describes %d, notes %q", s.describes.Load(), d.Descriptor().Notes)
	}
	f := &fixture{drv: d, dev: mhp.AsSession(d, "s1")}
	if j := f.finish(t, f.invoke(t, conformance.ActionQuick, nil)); j.State != mhp.JobDone || s.submits.Load() != 1 {
		t.Fatalf("quick through the seam: %+v, %d submits", j, s.submits.Load())
	}
}

// TestPollKeysLoad: poll_retry, long_poll and long_poll_wait load from the
// file; the deprecated poll_failures still loads, bounds the policy and is
// warned about when the device is built.
func TestPollKeysLoad(t *testing.T) {
	b := plrtest.NewBridge()
	defer b.Close()
	text := "adapter: pylabrobot\ndevice: {id: p}\nurl: " + b.URL + "\nlong_poll: false\nlong_poll_wait: 2s\n" +
		"poll_failures: 4\npoll_retry: {backoff: 100ms, max_backoff: 1s, window: 30s}\n"
	cfg, err := pylabrobot.Load(adapters.Source{Path: "p.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.PollRetry; p.Backoff != 100*time.Millisecond || p.MaxBackoff != time.Second || p.Window != 30*time.Second ||
		*cfg.LongPoll || cfg.LongPollWait != 2*time.Second || cfg.PollFailures != 4 {
		t.Fatalf("loaded %+v", cfg)
	}
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	d, err := pylabrobot.New(context.Background(), cfg, pylabrobot.Options{Options: adapters.Options{Logger: log}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !strings.Contains(logged.String(), "poll_failures is deprecated") || !strings.Contains(logged.String(), "poll_retry.window") {
		t.Fatalf("no deprecation warning: %s", logged.String())
	}
	bad := strings.Replace(text, "backoff: 100ms", "backof: 100ms", 1)
	if _, err := pylabrobot.Load(adapters.Source{Path: "p.yaml", Data: []byte(bad)}); err == nil || !strings.Contains(err.Error(), "backof") {
		t.Fatalf("a misspelt poll_retry key: %v, want it refused", err)
	}
}
