package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/directory"
)

// serveAsync runs `mhp ARGS...` until the test ends and returns the URLs it listens on.
func serveAsync(t *testing.T, args ...string) []string {
	t.Helper()
	a, _, errb := testApp()
	urls := make(chan []string, 1)
	a.ready = func(u []string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, args) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case u := <-urls:
		return u
	case code := <-done:
		t.Fatalf("mhp %v exited %d: %s", args, code, errb.String())
	}
	return nil
}

func TestServeDirectoryFindsLiveDevices(t *testing.T) {
	thermo := serveAsync(t, "serve", "sim:thermocycler", "--http", "127.0.0.1:0")[0]
	arm := serveAsync(t, "serve", "sim:arm", "--http", "127.0.0.1:0")[0]
	manifest := filepath.Join(t.TempDir(), "lab.yaml")
	body := "devices:\n  - {id: dead-01, class: thermocycler, location: bay 3, tags: [pcr], target: 'http://127.0.0.1:1'}\n" +
		"targets:\n  - " + thermo + "\n  - " + arm + "\n"
	if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dirURL := serveAsync(t, "serve-directory", manifest, "--http", "127.0.0.1:0")[0]
	r := &directory.Remote{URL: dirURL}
	ctx := context.Background()
	res, err := r.Search(ctx, directory.Query{Query: "pcr thermocycler", Class: "thermocycler", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]mhp.DeviceState{}
	for _, x := range res {
		states[x.ID] = x.State
	}
	if states["dead-01"] != mhp.StateUnreachable || states["thermocycler-01"] != mhp.StateIdle {
		t.Fatalf("live states: %v", states)
	}
	idle, err := r.Search(ctx, directory.Query{Query: "pcr", State: "idle"})
	if err != nil || len(idle) != 1 || idle[0].ID != "thermocycler-01" {
		t.Fatalf("idle pcr search: %+v %v", idle, err)
	}
	got, err := r.Get(ctx, "arm-01")
	if err != nil || got.Target != arm || got.State != mhp.StateIdle {
		t.Fatalf("get arm: %+v %v", got, err)
	}
}
