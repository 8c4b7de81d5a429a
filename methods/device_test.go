package methods_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/methods"
)

// thermo is a device with run_protocol(steps[{temp 4..105, hold_s}], cycles 1..99).
func thermo(t *testing.T, got *[]map[string]any, mu *sync.Mutex) *binding.Driver {
	t.Helper()
	var params mhp.Params
	if err := params.UnmarshalJSON([]byte(`{"steps":{"type":"array","items":{"type":"object","properties":{"temp":{"type":"number","limits":{"min":4,"max":105}},"hold_s":{"type":"number","limits":{"min":0,"max":3600}}}}},"cycles":{"type":"integer","limits":{"min":1,"max":99}}}`)); err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "tc-01", Class: "thermocycler"},
		Actions: []binding.Action{{Spec: mhp.Action{Name: "run_protocol", Params: params},
			Run: func(ctx context.Context, j *binding.Job) (any, error) {
				mu.Lock()
				*got = append(*got, j.Params())
				mu.Unlock()
				return nil, nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

func copyPkg(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "methods"), 0o755)
	b, _ := os.ReadFile("testdata/pkg/methods/pcr-30.yaml")
	os.WriteFile(filepath.Join(dir, "methods", "pcr-30.yaml"), b, 0o644)
	return dir
}

func code(err error) mhp.Code {
	if e, ok := mhp.AsError(err); ok {
		return e.Code
	}
	return 0
}

func TestMethodsRoundTrip(t *testing.T) {
	var mu sync.Mutex
	var runs []map[string]any
	dir := copyPkg(t)
	store, err := methods.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	dev := methods.Wrap(thermo(t, &runs, &mu), store)
	var notes []string
	var nmu sync.Mutex
	stop := dev.Listen(func(n mhp.Notification) { nmu.Lock(); notes = append(notes, n.Method); nmu.Unlock() })
	defer stop()
	ctx := mhp.WithSession(context.Background(), "agent-1")

	l, _ := dev.List(ctx, methods.ListRequest{})
	if len(l.Methods) != 1 || l.Methods[0].Name != "pcr-30" || l.Methods[0].Revision != 3 {
		t.Fatalf("list = %+v", l.Methods)
	}
	f, _ := dev.Find(ctx, methods.FindRequest{Query: "pcr standard"})
	if len(f.Methods) != 1 || f.Methods[0].Score == 0 {
		t.Fatalf("find = %+v", f.Methods)
	}
	if f, _ := dev.Find(ctx, methods.FindRequest{Query: "western blot"}); len(f.Methods) != 0 {
		t.Fatalf("find of an unrelated query = %+v", f.Methods)
	}

	// Save a variant: checked against the action's params first.
	bad := methods.SaveRequest{Name: "pcr-hot", Action: "run_protocol", Params: map[string]any{
		"steps": []any{map[string]any{"temp": 200.0, "hold_s": 30.0}}, "cycles": 30.0}}
	if _, err := dev.Save(ctx, bad); code(err) != mhp.CodeLimitViolation {
		t.Fatalf("saving a 200 degC step: %v, want LimitViolation", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "methods", "pcr-hot.yaml")); err == nil {
		t.Fatal("a refused method was written")
	}
	good := methods.SaveRequest{Name: "pcr-35", Action: "run_protocol", Description: "35 cycles", Params: map[string]any{
		"steps": []any{map[string]any{"temp": 95.0, "hold_s": 30.0}, map[string]any{"temp": 60.0, "hold_s": 30.0}}, "cycles": 35.0}}
	s, err := dev.Save(ctx, good)
	if err != nil || s.Revision != 1 {
		t.Fatalf("save = %+v, %v", s, err)
	}
	if s, _ := dev.Save(ctx, good); s.Revision != 2 {
		t.Fatalf("second save revision = %d, want 2", s.Revision)
	}
	// A fresh store reads what was saved.
	again, err := methods.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := again.Get("pcr-35")
	again.Close()
	if err != nil || m.Revision != 2 || m.SavedBy != "agent-1" {
		t.Fatalf("reloaded = %+v, %v", m, err)
	}

	d, err := dev.Diff(ctx, methods.DiffRequest{A: "pcr-30", B: "pcr-35"})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, c := range d.Changes {
		paths[c.Path] = c.Kind
	}
	if paths["/cycles"] != "changed" || paths["/steps/1/temp"] != "changed" || paths["/steps/2"] != "removed" || paths["/steps/0/temp"] != "" {
		t.Fatalf("diff = %+v", d.Changes)
	}

	// Invoke by method, with an override.
	res, err := dev.Invoke(ctx, mhp.InvokeRequest{Method: "pcr-30", Params: map[string]any{"cycles": 2.0}})
	if err != nil || res.Job == nil || res.Job.Action != "run_protocol" {
		t.Fatalf("invoke by method = %+v, %v", res, err)
	}
	if _, err := dev.Invoke(ctx, mhp.InvokeRequest{Method: "pcr-30", Params: map[string]any{"cycles": 500.0}}); code(err) != mhp.CodeLimitViolation {
		t.Fatalf("an override past the limit: %v, want LimitViolation from the gates", err)
	}
	if _, err := dev.Invoke(ctx, mhp.InvokeRequest{Method: "nope"}); code(err) != mhp.CodeUnknownName {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := dev.Invoke(ctx, mhp.InvokeRequest{Name: "open_lid", Method: "pcr-30"}); code(err) != mhp.CodeInvalidParams {
		t.Fatalf("method for another action: %v", err)
	}
	if _, err := dev.Delete(ctx, methods.GetRequest{Name: "pcr-35"}); err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Get(ctx, methods.GetRequest{Name: "pcr-35"}); code(err) != mhp.CodeUnknownName {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := dev.Save(ctx, methods.SaveRequest{Name: "../escape", Action: "run_protocol"}); code(err) != mhp.CodeInvalidParams {
		t.Fatalf("a path in a method name: %v", err)
	}
	nmu.Lock()
	defer nmu.Unlock()
	count := map[string]int{}
	for _, n := range notes {
		count[n]++
	}
	if count[methods.NotifySaved] != 2 || count[methods.NotifyRetired] != 1 {
		t.Fatalf("notifications = %v", notes)
	}
	// The saved params reached the job, with the override.
	conformance.EventuallyWithin(t, "the method's job to finish", 10*time.Second, func() bool {
		j, err := dev.Job(ctx, res.Job.ID)
		return err == nil && j.State.Terminal()
	})
	mu.Lock()
	defer mu.Unlock()
	if c, _ := mhp.Number(runs[0]["cycles"]); len(runs) != 1 || c != 2 || len(runs[0]["steps"].([]any)) != 3 {
		t.Fatalf("job params = %+v", runs)
	}
}

func TestReadOnlyAndEmptyStores(t *testing.T) {
	var mu sync.Mutex
	var runs []map[string]any
	b, _ := os.ReadFile("testdata/pkg/methods/pcr-30.yaml")
	ro, err := methods.OpenFS(fstest.MapFS{"methods/pcr-30.yaml": {Data: b}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := methods.Wrap(thermo(t, &runs, &mu), ro)
	ctx := context.Background()
	if l, _ := dev.List(ctx, methods.ListRequest{}); len(l.Methods) != 1 {
		t.Fatal("read-only store lists nothing")
	}
	if _, err := dev.Save(ctx, methods.SaveRequest{Name: "x", Action: "run_protocol"}); code(err) != mhp.CodeNotSupported {
		t.Fatalf("save on a read-only package: %v, want NotSupported", err)
	}
	empty := methods.Wrap(thermo(t, &runs, &mu), nil)
	if l, _ := empty.List(ctx, methods.ListRequest{}); len(l.Methods) != 0 {
		t.Fatal("empty store lists methods")
	}
	if _, err := empty.Save(ctx, methods.SaveRequest{Name: "x", Action: "run_protocol"}); code(err) != mhp.CodeNotSupported {
		t.Fatalf("save on a device without methods: %v, want NotSupported", err)
	}
}

func TestStoreRefusesBadFiles(t *testing.T) {
	tests := map[string]func(dir string){
		"fifo": func(dir string) { syscall.Mkfifo(filepath.Join(dir, "methods", "slow.yaml"), 0o644) },
		"name mismatch": func(dir string) {
			os.WriteFile(filepath.Join(dir, "methods", "other.yaml"), []byte("name: x\naction: a\n"), 0o644)
		},
		"unknown field": func(dir string) {
			os.WriteFile(filepath.Join(dir, "methods", "y.yaml"), []byte("name: y\naction: a\nbogus: 1\n"), 0o644)
		},
		"too big": func(dir string) {
			os.WriteFile(filepath.Join(dir, "methods", "z.yaml"), make([]byte, methods.MaxFileBytes+10), 0o644)
		},
	}
	for name, mk := range tests {
		t.Run(name, func(t *testing.T) {
			dir := copyPkg(t)
			mk(dir)
			if s, err := methods.Open(dir, nil); err == nil {
				s.Close()
				t.Fatal("store opened")
			}
		})
	}
}
