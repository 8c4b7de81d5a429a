package adapters

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
)

// Options are the in-process options every adapter shares: what a program,
// not a config file, gives an adapter's New. Each adapter's own Options
// embeds them next to its backend seam (a client interface or a dial
// function, so that a test passes a fake from the adapter's <name>test
// package).
type Options struct {
	// Clock is the driver's clock (timestamps, staleness, job deadlines);
	// default the system clock.
	Clock clock.Clock
	// LinkClock times the reconnect backoff of the backend link; default
	// the system clock.
	LinkClock clock.Clock
	// PollClock times the waits of a polling adapter's job polls and its
	// [PollRetry] window; default the system clock.
	PollClock clock.Clock
	// Logger receives connection and mapping events; default
	// slog.Default().
	Logger *slog.Logger
	// Refine, when set, edits the generated bindings before the driver is
	// built and may refuse them: a device package merges its descriptor
	// (notes, narrower limits, stricter approval), a test shortens a
	// timeout. Register passes the config file's [Source.Refine].
	Refine func(*binding.Config) error
}

// Log returns the logger, slog.Default() when none was given.
func (o Options) Log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// NewDriver builds the driver of an adapter's generated bindings: the
// options' Clock and Logger fill the config's when it has none, then
// Refine edits it, then [binding.New] checks and builds it. Every adapter's
// New ends here.
func (o Options) NewDriver(cfg binding.Config) (*binding.Driver, error) {
	if cfg.Clock == nil && o.Clock != nil {
		cfg.Clock = o.Clock
	}
	if cfg.Logger == nil && o.Logger != nil {
		cfg.Logger = o.Logger
	}
	if o.Refine != nil {
		if err := o.Refine(&cfg); err != nil {
			return nil, err
		}
	}
	return binding.New(cfg)
}

// ReadSource reads an adapter config file into a [Source] whose relative
// paths resolve against the file's folder, for an adapter's Load.
func ReadSource(path string) (Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Source{}, err
	}
	return Source{Path: path, Dir: filepath.Dir(path), Data: data}, nil
}
