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
	"sync"
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
	// EvidenceDir holds the evidence ("": no evidence): a new directory
	// becomes a shared log (one chain for every device written there, see
	// package evidence); a directory already holding a device's own chain
	// keeps being that device's chain.
	EvidenceDir string
	// Evidence is a shared log the host opened for all its devices
	// ([OpenSharedEvidence]); when set, EvidenceDir is not opened and the
	// device records through its handle. Its owner closes it.
	Evidence *evidence.Log
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
	// Log is the evidence log, nil when evidence is off (a shared log is
	// shared with the host's other devices).
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
	lg, owned := g.Evidence, false
	switch {
	case lg != nil:
		cfg.Evidence = lg.For(id)
	case g.EvidenceDir != "":
		var err error
		if lg, err = openEvidence(g, id); err != nil {
			return nil, err
		}
		owned = true
		cfg.Evidence = lg.For(id)
		log.Info("evidence on", "dir", g.EvidenceDir, "shared", lg.Shared(), "signed", g.EvidenceKey != nil, "head", lg.Head().Seq)
	}
	if g.OperatorToken != "" {
		cfg.Permits = guard.NewPermits(id, nil)
	}
	gd, err := guard.New(dev, cfg)
	if err != nil {
		if owned {
			lg.Close()
		}
		return nil, err
	}
	return &Wrapped{Device: methods.Wrap(gd, g.Methods), Log: lg, Close: func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		gd.Flush(fctx)
		cancel()
		gd.Close()
		if owned {
			if err := lg.Close(); err != nil {
				log.Error("evidence log close", "err", err)
			}
		}
		if g.Methods != nil {
			g.Methods.Close()
		}
	}}, nil
}

// openEvidence opens the evidence directory of one served device: the
// device's own chain when the directory already holds one (an earlier
// version's layout, kept and continued), else a shared log.
func openEvidence(g GuardOptions, id string) (*evidence.Log, error) {
	if _, ok, err := evidence.ChainDevice(g.EvidenceDir); err != nil {
		return nil, err
	} else if ok { // Open refuses a chain of another device, naming both
		return evidence.Open(evidence.Config{Dir: g.EvidenceDir, Device: id, Key: g.EvidenceKey, Sync: g.Sync,
			HeadEvery: g.HeadEvery, HeadInterval: g.HeadInterval})
	}
	return OpenSharedEvidence(g, g.EvidenceDir)
}

// OpenSharedEvidence opens (or creates) the shared evidence log in dir with
// g's key, durability and head cadence: one chain, one committer and one
// fsync per batch for every device the host records into it.
func OpenSharedEvidence(g GuardOptions, dir string) (*evidence.Log, error) {
	return evidence.Open(evidence.Config{Dir: dir, Shared: true, Key: g.EvidenceKey, Sync: g.Sync,
		HeadEvery: g.HeadEvery, HeadInterval: g.HeadInterval})
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

// The fleet's evidence: one shared log in the evidence folder
// (Config.Guard.EvidenceDir, default HOME/evidence) for every device this
// process hosts, so their receipts share each fsync. A device hosted here
// still takes its lock, EvidenceDir/<id>.lock, so another process on the
// same home never keeps evidence of the same device at the same time.
//
// Upgrading: an earlier version kept each device's chain in
// EvidenceDir/<id>. Those chains are never written again by a host that
// holds the shared log, and never abandoned silently: when the device is
// hosted, its chain is closed (a torn last line cut and recorded, a signed
// head with a key), the shared log records an evidence/continued receipt of
// the device naming that folder and the chain's last seq and hash, the
// folder gets continued.json saying the same, and the host logs where the
// receipts go now. Both chains keep verifying on their own.
//
// When another process holds the shared log (another bridge on this home),
// a device hosted here keeps its receipts in its own folder EvidenceDir/<id>
// as before (logged), and is handed over the same way once this host gets
// the shared log.

// fleetEvidence is the fleet's shared log, opened on first use.
type fleetEvidence struct {
	mu  sync.Mutex
	log *evidence.Log
}

// shared returns the shared log in root, opening it if needed; nil (and
// why) when it cannot be had.
func (fe *fleetEvidence) shared(root string, g GuardOptions) (*evidence.Log, error) {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.log != nil {
		return fe.log, nil
	}
	lg, err := OpenSharedEvidence(g, root)
	if err != nil {
		return nil, err
	}
	fe.log = lg
	return lg, nil
}

// close closes the shared log (after every hosted device is closed).
func (fe *fleetEvidence) close() error {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.log == nil {
		return nil
	}
	err := fe.log.Close()
	fe.log = nil
	return err
}

// evidenceRoot is the fleet's evidence folder: Config.Guard.EvidenceDir,
// default HOME/evidence. It is not inside HOME/devices, the package folders
// the agent may write files into.
func (f *Fleet) evidenceRoot() string {
	if root := f.cfg.Guard.EvidenceDir; root != "" {
		return root
	}
	return filepath.Join(f.cfg.Home, "evidence")
}

// evidenceDirOf is the folder of the hosted device id's own chain:
// EvidenceDir/<id> (an earlier version's layout, and where its receipts go
// while another process holds the shared log).
func (f *Fleet) evidenceDirOf(id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`) || strings.HasPrefix(id, ".") {
		return "", mhp.Errorf(mhp.CodeInvalidParams, "device id %q cannot name an evidence folder", mhp.Truncate(id, 120))
	}
	return filepath.Join(f.evidenceRoot(), id), nil
}

// guarded wraps a started hosted device as `mhp serve` would: saved methods
// of its package (read-only for a twin) and the guard recording into the
// fleet's shared log. The returned release closes the wrapping, then the
// device.
func (f *Fleet) guarded(ctx context.Context, target string, dev Device, release func() error) (Device, func() error, error) {
	g := f.cfg.Guard
	g.Methods, g.EvidenceDir = nil, ""
	id := DeviceID(ctx, dev)
	dir, err := f.evidenceDirOf(id)
	if err != nil {
		return nil, nil, err
	}
	// One process keeps a device's evidence: a second one hosting the same
	// device (another bridge on this home) serves it without evidence
	// rather than split or fork it.
	unlockEv := func() {}
	log := f.cfg.Logger
	if err := os.MkdirAll(f.evidenceRoot(), 0o750); err != nil {
		return nil, nil, fmt.Errorf("guarding %s: %w", id, err)
	}
	if u, lerr := lock(dir+".lock", 0); lerr != nil {
		log.Warn("hosted without evidence: another process keeps this device's evidence", "device", id, "dir", dir, "err", lerr)
	} else if shared, serr := f.evidence.shared(f.evidenceRoot(), g); serr != nil {
		log.Warn("the shared evidence log is not available: this device's receipts go to its own folder", "device", id,
			"shared", f.evidenceRoot(), "dir", dir, "err", serr)
		g.EvidenceDir, unlockEv = dir, u
	} else {
		g.Evidence, unlockEv = shared, u
		c, moved, cerr := evidence.Continue(shared.For(id), dir, evidence.ContinueOptions{Key: g.EvidenceKey, Sync: g.Sync})
		switch {
		case cerr != nil && !moved:
			u()
			return nil, nil, fmt.Errorf("guarding %s: %w", id, cerr)
		case cerr != nil:
			log.Error("evidence: the device's earlier chain could not be closed; its new receipts go to the shared log", "device", id,
				"earlier", dir, "shared", f.evidenceRoot(), "err", cerr)
		case moved:
			log.Info("evidence: the device's receipts now go to the shared log; its earlier chain is kept and verifies on its own",
				"device", id, "shared", f.evidenceRoot(), "earlier", dir, "earlier_seq", c.Seq, "earlier_hash", c.Hash)
		}
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
