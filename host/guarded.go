package host

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/methods"
)

// GuardOptions is what is put around every served device, by `mhp serve`,
// `mhp demo` and the fleet's in-process hosting alike: evidence, permits
// and saved methods.
type GuardOptions struct {
	// EvidenceDir holds the device's evidence chain ("": no evidence).
	EvidenceDir string
	// EvidenceKey signs the chain's heads (nil: unsigned).
	EvidenceKey ed25519.PrivateKey
	// Sync is the evidence durability policy.
	Sync evidence.SyncPolicy
	// HeadEvery and HeadInterval are the signed-head cadence (0: the defaults).
	HeadEvery    int
	HeadInterval time.Duration
	// OperatorToken, when set, turns on single-use operator permits.
	OperatorToken string
	// Require refuses a confirm-gated write without a permit.
	Require bool
	// Methods is the device's saved-methods store (nil: none).
	Methods *methods.Store
}

// Wrapped is a device behind saved methods and the guard.
type Wrapped struct {
	// Device is the wrapped device to serve.
	Device mhp.Device
	// Log is the evidence log, nil when evidence is off.
	Log *evidence.Log
	// Close flushes the guard and ends the evidence log (signing its head)
	// and the methods store; the inner device is the caller's to close.
	Close func()
}

// DeviceID is the id dev describes itself with ("device" when it cannot).
func DeviceID(ctx context.Context, dev mhp.Device) string {
	d, err := dev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil {
		return "device"
	}
	return d.ID
}

// Wrap puts saved methods and the guard (command ids, permits, evidence)
// around dev: methods outside, so the guard sees and records the action a
// method resolves to. It is the one wrapping every served device gets.
func Wrap(ctx context.Context, dev mhp.Device, g GuardOptions, log *slog.Logger) (*Wrapped, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	id := DeviceID(ctx, dev)
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
	return &Wrapped{Device: methods.Wrap(gd, g.Methods), Log: lg, Close: func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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

// MethodsFor opens the saved methods of a package folder: a writable store
// on the folder, none for a target that is not a folder (or whose methods
// do not load, logged).
func MethodsFor(dir string, log *slog.Logger) *methods.Store {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil
	}
	st, err := methods.Open(dir, nil)
	if err != nil {
		if log != nil {
			log.Warn("saved methods not served", "package", filepath.Base(dir), "err", err)
		}
		return nil
	}
	return st
}

// MethodsFS opens the saved methods of a read-only package (embedded, or a
// twin sharing its package's folder).
func MethodsFS(fsys fs.FS, log *slog.Logger) *methods.Store {
	st, err := methods.OpenFS(fsys, nil)
	if err != nil {
		if log != nil {
			log.Warn("saved methods not served", "err", err)
		}
		return nil
	}
	return st
}

// evidenceDirOf is the folder of the evidence of the hosted device id:
// Config.EvidenceDir/<id>, default HOME/evidence/<id>. It is not inside
// HOME/devices/<id>, the package folder the agent may write files into.
func (f *Fleet) evidenceDirOf(id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return "", mhp.Errorf(mhp.CodeInvalidParams, "device id %q cannot name an evidence folder", mhp.Truncate(id, 120))
	}
	root := f.cfg.Guard.EvidenceDir
	if root == "" {
		root = filepath.Join(f.cfg.Home, "evidence")
	}
	return filepath.Join(root, id), nil
}

// guarded wraps a started hosted device as `mhp serve` would: saved methods
// of its package (read-only for a twin) and the guard with the device's own
// evidence. The returned release closes the wrapping, then the device.
func (f *Fleet) guarded(ctx context.Context, target string, dev Device, release func() error) (Device, func() error, error) {
	g := f.cfg.Guard
	g.Methods = nil
	id := DeviceID(ctx, dev)
	dir, err := f.evidenceDirOf(id)
	if err != nil {
		return nil, nil, err
	}
	// One process appends to a device's chain: a second one hosting the
	// same device (another bridge on this home) serves it without evidence
	// rather than fork the chain.
	unlockEv := func() {}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return nil, nil, fmt.Errorf("guarding %s: %w", id, err)
	}
	if u, lerr := lock(dir+".lock", 0); lerr != nil {
		if f.cfg.Logger != nil {
			f.cfg.Logger.Warn("hosted without evidence: another process keeps this device's evidence", "device", id, "dir", dir, "err", lerr)
		}
		g.EvidenceDir = ""
	} else {
		g.EvidenceDir, unlockEv = dir, u
	}
	switch {
	case strings.HasPrefix(target, prefixPackage):
		g.Methods = MethodsFor(f.abs(strings.TrimPrefix(target, prefixPackage)), f.cfg.Logger)
	case strings.HasPrefix(target, prefixTwin):
		g.Methods = MethodsFS(os.DirFS(f.abs(strings.TrimPrefix(target, prefixTwin))), f.cfg.Logger)
	}
	w, err := Wrap(ctx, dev, g, f.cfg.Logger)
	if err != nil {
		if g.Methods != nil {
			g.Methods.Close()
		}
		unlockEv()
		return nil, nil, fmt.Errorf("guarding %s: %w", id, err)
	}
	return wrappedHosted{w.Device}, func() error { w.Close(); unlockEv(); return release() }, nil
}

// wrappedHosted is a hosted device behind its wrapping; the device is
// started before it is wrapped and closed by the hosted record's release.
type wrappedHosted struct{ mhp.Device }

// Start implements Device (the inner device is already started).
func (w wrappedHosted) Start(ctx context.Context) error { return nil }

// Close implements Device: the hosted record's release closes both.
func (w wrappedHosted) Close() error { return nil }

// Unwrap implements mhp.Unwrapper, so the wrapping's wire methods
// (evidence, permits, saved methods) are found through the hosted device.
func (w wrappedHosted) Unwrap() mhp.Device { return w.Device }
