package pylabrobot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
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
			cfg, err := pylabrobot.Load(adapters.Source{Path: "x.yaml", Data: []byte(yaml)})
			if err == nil {
				err = cfg.Defaults().Validate()
			}
			if err == nil {
				t.Fatalf("accepted: %s", yaml)
			}
		})
	}
	b := plrtest.NewBridge()
	defer b.Close()
	cfg := fastConfig(pylabrobot.ModeBridge, b.URL)
	cfg.Device.ID = "a"
	cfg.Actions = map[string]pylabrobot.ActionOverride{"aspriate": {Approval: mhp.ApprovalConfirm}}
	if _, err := pylabrobot.New(context.Background(), cfg, pylabrobot.Deps{}); err == nil || !strings.Contains(err.Error(), "aspriate") {
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
			t.Fatal(err)
		}
		if err := cfg.Defaults().Validate(); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}
