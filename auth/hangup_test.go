package auth_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/conformance"
)

type countReload struct{ n atomic.Int32 }

func (c *countReload) Reload() error { c.n.Add(1); return nil }

// TestReloadOnHangup: SIGHUP re-reads every reloader given; a revoked token
// stops working at the signal even when the file's time did not change.
func TestReloadOnHangup(t *testing.T) {
	dir := t.TempDir()
	file := authtest.Credentials(t, dir, "bob=viewer:bob-token")
	a, err := auth.New(auth.Config{CredentialsFile: file, CheckEvery: 1 << 62}) // never by mtime: only the signal
	if err != nil {
		t.Fatal(err)
	}
	var nilTLS *auth.ServerTLS
	c := &countReload{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	auth.ReloadOnHangup(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), a, nilTLS, c)
	if err := os.WriteFile(filepath.Join(dir, "credentials.yaml"), []byte("- {name: carol, role: viewer, token_sha256: "+auth.HashToken("carol-token")+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	conformance.Eventually(t, "the reloaders ran at SIGHUP", func() bool { return c.n.Load() == 1 })
	if _, err := a.Authenticate(bearerRequest("bob-token")); err == nil {
		t.Fatal("bob's token still works after the SIGHUP reload")
	}
}
