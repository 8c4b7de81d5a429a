package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/methods"
)

// guardFlags are serve's flags for evidence, permits and saved methods.
var guardFlags = flagSpec{"evidence": true, "evidence-key": true, "evidence-sync": true, "operator-token-file": true,
	"evidence-head-every": true, "evidence-head-interval": true,
	"require-permits": false}

// guardOptions is what serve and demo put around a device: the host's
// wrapping, shared with the fleet's hosted devices.
type guardOptions = host.GuardOptions

// parseGuardFlags reads --evidence DIR, --evidence-key FILE,
// --evidence-sync always|never, --evidence-head-every N,
// --evidence-head-interval DURATION, --operator-token-file FILE and
// --require-permits.
func parseGuardFlags(p parsed) (guardOptions, error) {
	var g guardOptions
	g.EvidenceDir = p.flags["evidence"]
	if f, ok := p.flags["evidence-key"]; ok {
		if g.EvidenceDir == "" {
			return g, fmt.Errorf("--evidence-key needs --evidence DIR")
		}
		k, err := evidence.LoadPrivateKey(f)
		if err != nil {
			return g, err
		}
		g.EvidenceKey = k
	}
	if v, ok := p.flags["evidence-head-every"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return g, fmt.Errorf("--evidence-head-every is a count of entries between signed heads (1..1000000), not %q", v)
		}
		g.HeadEvery = n
	}
	if v, ok := p.flags["evidence-head-interval"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return g, fmt.Errorf("--evidence-head-interval is a duration between 100ms and 1h (e.g. 10s), not %q", v)
		}
		g.HeadInterval = d
	}
	if (g.HeadEvery != 0 || g.HeadInterval != 0) && g.EvidenceKey == nil {
		return g, fmt.Errorf("--evidence-head-every and --evidence-head-interval need --evidence-key: heads are signed")
	}
	switch p.flags["evidence-sync"] {
	case "", "always":
	case "never":
		g.Sync = evidence.SyncNever
	default:
		return g, fmt.Errorf("--evidence-sync is always or never, not %q", p.flags["evidence-sync"])
	}
	if f, ok := p.flags["operator-token-file"]; ok {
		b, err := readSmallFile(f)
		if err != nil {
			return g, fmt.Errorf("--operator-token-file: %w", err)
		}
		g.OperatorToken = strings.TrimSpace(string(b))
		if len(g.OperatorToken) < 16 {
			return g, fmt.Errorf("--operator-token-file: the operator token must be at least 16 characters")
		}
	}
	g.Require = p.has("require-permits")
	if g.Require && g.OperatorToken == "" {
		return g, fmt.Errorf("--require-permits needs --operator-token-file: without an operator nothing could approve")
	}
	return g, nil
}

func readSmallFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return nil, fmt.Errorf("%s is not a regular file of at most 4 KiB", path)
	}
	return os.ReadFile(path)
}

// methodsFor opens the saved methods of a package target: a writable store
// on a package folder, none for other targets.
func methodsFor(target string, log *slog.Logger) *methods.Store { return host.MethodsFor(target, log) }

// methodsFS opens the saved methods of a read-only (embedded) package.
func methodsFS(fsys fs.FS, log *slog.Logger) *methods.Store { return host.MethodsFS(fsys, log) }

// wrapDevice puts saved methods and the guard (command ids, permits,
// evidence) around dev, as every served device is wrapped (host.Wrap).
func wrapDevice(ctx context.Context, dev mhp.Device, g guardOptions, log *slog.Logger) (*host.Wrapped, error) {
	return host.Wrap(ctx, dev, g, log)
}
