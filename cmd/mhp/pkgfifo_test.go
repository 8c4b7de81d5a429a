//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO as DEVICE.md made `mhp validate` and `mhp serve` hang for ever;
// both now refuse it at once.
func TestValidateAndServeRefuseAFIFOCard(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "DEVICE.md"), 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	for _, args := range [][]string{{"validate", dir}, {"serve", dir, "--http", "127.0.0.1:0"}} {
		done := make(chan result, 1)
		go func() { done <- runCLI(t, args...) }()
		select {
		case r := <-done:
			if r.code == exitOK || !strings.Contains(r.stdout+r.stderr, "named pipe") {
				t.Fatalf("mhp %v: %+v", args, r)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("mhp %v hung on a FIFO", args)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "DEVICE.md")); err != nil {
		t.Fatal(err)
	}
}
