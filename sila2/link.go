package sila2

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go/adapters"
)

// serverDescription is what the descriptor cache keeps of a server: the
// Feature Definitions the device was built from (SiLAService excluded).
type serverDescription struct {
	Features []string `json:"features"`
}

// serverDown reports whether err from reading the server's features means
// the server is not there (any connection error), as opposed to a server
// that answered with an error.
func serverDown(err error) bool {
	var ce *ConnectionError
	return errors.As(err, &ce)
}

// cachedFeatures is the start without the server: the cached definitions,
// or an error saying how to start anyway.
func cachedFeatures(cfg *Config, cause error) ([]string, error) {
	if cfg.Link.FailFast {
		return nil, fmt.Errorf("sila2: %s: %w (link.fail_fast is set: not starting without the server)", cfg.Endpoint, cause)
	}
	if cfg.Link.DescriptorCache == "" {
		return nil, adapters.NeverReached(fmt.Errorf("sila2: %s: %w; the device's items come from the server's Feature Definitions, so starting before the server needs link.descriptor_cache (written on the first start with the server up)", cfg.Endpoint, cause))
	}
	var d serverDescription
	if _, err := adapters.LoadDescriptor(cfg.Link.DescriptorCache, Kind, cfg.Endpoint, &d); err != nil {
		return nil, adapters.NeverReached(fmt.Errorf("sila2: %s: %w; and no usable descriptor cache: %v", cfg.Endpoint, cause, err))
	}
	return d.Features, nil
}

// sameFeatures compares two sets of definitions, ignoring order and
// surrounding white space.
func sameFeatures(a, b []string) bool {
	norm := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = strings.TrimSpace(s)
		}
		sort.Strings(out)
		return out
	}
	return adapters.SameDescription(norm(a), norm(b))
}

// probe is the link's reconnect attempt: the server answers, serves the
// definitions the device was built from, and takes the call metadata and
// the lifetime lock again.
func (a *adapter) probe(ctx context.Context) error {
	texts, err := a.client.FeatureDefinitions(ctx)
	if err != nil {
		return err
	}
	if !sameFeatures(texts, a.fdls) {
		return adapters.DescriptionChanged("SiLA 2 server "+a.cfg.Endpoint, "its Feature Definitions")
	}
	if err := a.applyMetadata(ctx); err != nil {
		return err
	}
	if a.lockMode == LockLifetime {
		a.lockMu.Lock()
		defer a.lockMu.Unlock()
		if a.held == nil && !a.lockClosed {
			id := a.cfg.Lock.Identifier
			if id == "" {
				id = randomID()
			}
			if err := a.takeLockLocked(ctx, "", id, a.lockTimeout); err != nil {
				return fmt.Errorf("lifetime lock: %w", err)
			}
		}
	}
	return nil
}

// applyMetadata sends the config's metadata values to the client (which
// asks the server which calls each affects).
func (a *adapter) applyMetadata(ctx context.Context) error {
	if a.client == nil {
		return nil
	}
	keys := make([]string, 0, len(a.cfg.Metadata))
	for k := range a.cfg.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := a.client.SetMetadata(ctx, k, a.cfg.Metadata[k]); err != nil {
			return err
		}
	}
	return nil
}

// lost marks the link down when err is a connection-level failure and the
// channel has no live connection (a server that ends a stream UNAVAILABLE
// on a healthy connection is not a lost link).
func (a *adapter) lost(err error) {
	if a.link != nil && linkLost(err) && (neverSent(err) || !a.client.Connected()) {
		a.link.Down(fmt.Errorf("SiLA 2 server %s: %w", a.cfg.Endpoint, err))
	}
}
