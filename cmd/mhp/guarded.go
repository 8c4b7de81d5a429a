package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/methods"
)

// guardFlags are serve's flags for evidence, permits and saved methods.
var guardFlags = flagSpec{"evidence": true, "evidence-key": true, "evidence-sync": true, "operator-token-file": true,
	"evidence-head-every": true, "evidence-head-interval": true,
	"require-permits": false}

// guardOptions is what serve and demo put around a device.
type guardOptions struct {
	EvidenceDir string
	EvidenceKey ed25519.PrivateKey
	Sync        evidence.SyncPolicy
	// HeadEvery and HeadInterval are the signed-head cadence (0: the defaults).
	HeadEvery     int
	HeadInterval  time.Duration
	OperatorToken string
	Require       bool
	// Methods is the device's saved-methods store (nil: none).
	Methods *methods.Store
}

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
func methodsFor(target string, log *slog.Logger) *methods.Store {
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		return nil
	}
	st, err := methods.Open(target, nil)
	if err != nil {
		log.Warn("saved methods not served", "package", filepath.Base(target), "err", err)
		return nil
	}
	return st
}

// methodsFS opens the saved methods of a read-only (embedded) package.
func methodsFS(fsys fs.FS, log *slog.Logger) *methods.Store {
	st, err := methods.OpenFS(fsys, nil)
	if err != nil {
		log.Warn("saved methods not served", "err", err)
		return nil
	}
	return st
}

// wrappedDevice is a device behind saved methods and the guard.
type wrappedDevice struct {
	Device mhp.Device
	// Log is the evidence log, nil when evidence is off.
	Log *evidence.Log
	// Close ends the evidence log (signing its head) and the methods store.
	Close func()
}

// wrapDevice puts saved methods and the guard (command ids, permits,
// evidence) around dev: methods outside, so the guard sees and records the
// action a method resolves to.
func wrapDevice(ctx context.Context, dev mhp.Device, g guardOptions, log *slog.Logger) (*wrappedDevice, error) {
	id := describeID(ctx, dev)
	cfg := guard.Config{Log: log, RequirePermits: g.Require}
	var lg *evidence.Log
	if g.EvidenceDir != "" {
		var err error
		lg, err = evidence.Open(evidence.Config{Dir: g.EvidenceDir, Device: id, Key: g.EvidenceKey, Sync: g.Sync,
			HeadEvery: g.HeadEvery, HeadInterval: g.HeadInterval})
		if err != nil {
			return nil, err
		}
		cfg.Evidence = lg
		log.Info("evidence on", "dir", g.EvidenceDir, "signed", g.EvidenceKey != nil, "head", lg.Head().Seq)
	}
	if g.OperatorToken != "" {
		cfg.Permits = guard.NewPermits(id, nil)
	}
	gd, err := guard.New(dev, cfg)
	if err != nil {
		if lg != nil {
			lg.Close()
		}
		return nil, err
	}
	return &wrappedDevice{Device: methods.Wrap(gd, g.Methods), Log: lg, Close: func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5e9)
		gd.Flush(fctx)
		cancel()
		gd.Close()
		if lg != nil {
			if err := lg.Close(); err != nil {
				log.Error("evidence log close", "err", err)
			}
		}
		if g.Methods != nil {
			g.Methods.Close()
		}
	}}, nil
}
