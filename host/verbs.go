package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/examples/sim"
)

// Config configures a Fleet.
type Config struct {
	// Home is the folder holding fleet.yaml and devices/; default Home().
	Home string
	// Registry builds adapter config files (a package's `driver: x.yaml`, or
	// an adapter config added directly); nil: none can be hosted.
	Registry *adapters.Registry
	// Sim are the options of simulated devices.
	Sim sim.Options
	// Client are the options of connections to remote devices (and the
	// client name of in-process ones).
	Client client.Options
	// Logger logs hosted devices' warnings; default discards.
	Logger *slog.Logger
	// CardTimeout bounds fetching a remote card on add; default 5s.
	CardTimeout time.Duration
	// Guard is what every hosted device is wrapped in, as `mhp serve`
	// wraps its device: command ids, permits (with OperatorToken), evidence
	// and the package's saved methods. EvidenceDir is the folder of the
	// hosted devices' shared evidence log (default HOME/evidence; see
	// guarded.go for earlier per-device folders); Methods is ignored (each
	// package's own methods/ folder is served).
	Guard GuardOptions
}

// Fleet is the host's fleet over one home folder. It is safe for concurrent
// use, and other processes may change the same files: every change re-reads
// the file under the lock.
type Fleet struct {
	cfg   Config
	store store

	mu     sync.Mutex
	hosted map[string]*hosted // by target
	closed bool

	evidence fleetEvidence // the hosted devices' shared evidence log
}

// Open makes the home folder (and devices/) if missing and returns its fleet.
func Open(cfg Config) (*Fleet, error) {
	if cfg.Home == "" {
		h, err := Home()
		if err != nil {
			return nil, err
		}
		cfg.Home = h
	}
	abs, err := filepath.Abs(cfg.Home)
	if err != nil {
		return nil, err
	}
	cfg.Home = abs
	if err := os.MkdirAll(filepath.Join(abs, DevicesDir), 0o700); err != nil {
		return nil, fmt.Errorf("host: home %s: %w", abs, err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CardTimeout <= 0 {
		cfg.CardTimeout = 5 * time.Second
	}
	if cfg.Client.ClientName == "" {
		cfg.Client.ClientName = "mhp-host"
	}
	return &Fleet{cfg: cfg, store: store{home: abs}, hosted: map[string]*hosted{}}, nil
}

// Home is the fleet's home folder (absolute).
func (f *Fleet) Home() string { return f.cfg.Home }

// DeviceDir is the folder of a package the host owns: HOME/devices/<id>.
func (f *Fleet) DeviceDir(id string) (string, error) {
	if err := ValidID(id); err != nil {
		return "", err
	}
	return filepath.Join(f.cfg.Home, DevicesDir, id), nil
}

// List returns the fleet's entries, sorted by id.
func (f *Fleet) List() ([]Entry, error) {
	doc, err := f.store.read()
	if err != nil {
		return nil, err
	}
	return doc.Devices, nil
}

// Entry returns the entry with the id.
func (f *Fleet) Entry(id string) (Entry, error) {
	list, err := f.List()
	if err != nil {
		return Entry{}, err
	}
	for _, e := range list {
		if e.ID == id {
			return e, nil
		}
	}
	return Entry{}, unknown(id, list)
}

func unknown(id string, list []Entry) *mhp.Error {
	ids := make([]string, 0, len(list))
	for _, e := range list {
		if len(ids) == 20 {
			ids = append(ids, "…")
			break
		}
		ids = append(ids, e.ID)
	}
	return mhp.Errorf(mhp.CodeUnknownName, "no device %q in the fleet (it has %v)", mhp.Truncate(id, 80), ids).
		With(mhp.DataKind, "device").With(mhp.DataName, mhp.Truncate(id, 80))
}

// Commit adds a prepared entry (see Prepare). An entry with the same id
// at the same target is replaced (its card refreshed, its location kept
// unless the new one says another); the same id at another target is
// refused: a second unit takes another id.
func (f *Fleet) Commit(e Entry) (Entry, error) {
	if err := ValidID(e.ID); err != nil {
		return Entry{}, err
	}
	if e.Added.IsZero() {
		e.Added = time.Now().UTC().Truncate(time.Second)
	}
	err := f.store.update(func(doc *fleetDoc) error {
		for i, old := range doc.Devices {
			if old.ID != e.ID {
				continue
			}
			if NormalizeTarget(old.Target) != NormalizeTarget(e.Target) {
				return mhp.Errorf(mhp.CodeInvalidParams, "device id %q is already in the fleet at %s; this one is at %s: "+
					"remove the old entry first, or add this one under another id (a second unit gets its own id)",
					e.ID, old.Target, e.Target).With(mhp.DataField, "id").With(mhp.DataReason, "id_taken")
			}
			if e.Location == "" {
				e.Location = old.Location
			}
			e.Added = old.Added
			doc.Devices[i] = e
			return nil
		}
		doc.Devices = append(doc.Devices, e)
		return nil
	})
	if err != nil {
		return Entry{}, err
	}
	f.forget(e.Target) // a re-added package is built afresh on next use
	return e, nil
}

// Remove takes a device out of the fleet. A hosted device running a job is
// refused unless force; with force it is stopped (estop) first. The
// package folder of a device the host owns stays on disk.
func (f *Fleet) Remove(ctx context.Context, id string, force bool) (Entry, error) {
	e, err := f.Entry(id)
	if err != nil {
		return Entry{}, err
	}
	if h := f.running(e.Target); h != nil {
		if p, err := h.dev.Ping(ctx); err == nil && p.State == mhp.StateBusy {
			if !force {
				return Entry{}, mhp.Errorf(mhp.CodeDeviceBusy, "%s is running a job: wait for it, cancel it, or remove with force (which stops the device first)", id).
					With(mhp.DataReason, "busy")
			}
			if _, err := h.dev.EStop(ctx, "removed from the fleet"); err != nil {
				return Entry{}, fmt.Errorf("host: remove %s: estop failed, the device stays: %w", id, err)
			}
		}
	}
	var removed Entry
	err = f.store.update(func(doc *fleetDoc) error {
		for i, old := range doc.Devices {
			if old.ID == id {
				removed = old
				doc.Devices = append(doc.Devices[:i], doc.Devices[i+1:]...)
				return nil
			}
		}
		return unknown(id, doc.Devices)
	})
	if err != nil {
		return Entry{}, err
	}
	f.forget(removed.Target)
	return removed, nil
}

// Locate records where a device stands (a shared package cannot know).
func (f *Fleet) Locate(id, location string) (Entry, error) {
	location = strings.TrimSpace(location)
	if location == "" || len(location) > 256 || strings.ContainsAny(location, "\n\r\x00") {
		return Entry{}, mhp.Errorf(mhp.CodeInvalidParams, "location: say where the device stands in one line of at most 256 bytes").
			With(mhp.DataField, "location")
	}
	var out Entry
	err := f.store.update(func(doc *fleetDoc) error {
		for i := range doc.Devices {
			if doc.Devices[i].ID == id {
				doc.Devices[i].Location = location
				out = doc.Devices[i]
				return nil
			}
		}
		return unknown(id, doc.Devices)
	})
	return out, err
}

// Close stops every hosted device.
func (f *Fleet) Close() error {
	f.mu.Lock()
	hs := f.hosted
	f.hosted = map[string]*hosted{}
	f.closed = true
	f.mu.Unlock()
	for _, h := range hs {
		h.close()
	}
	return f.evidence.close() // after every device: it signs the shutdown head over all of them
}
