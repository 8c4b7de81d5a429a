package main

import (
	"context"
	"io/fs"
	"log/slog"

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
	return host.GuardFlags{
		Evidence:             p.flags["evidence"],
		EvidenceKey:          p.flags["evidence-key"],
		EvidenceSync:         p.flags["evidence-sync"],
		EvidenceHeadEvery:    p.flags["evidence-head-every"],
		EvidenceHeadInterval: p.flags["evidence-head-interval"],
		OperatorTokenFile:    p.flags["operator-token-file"],
		RequirePermits:       p.has("require-permits"),
	}.Options()
}

// readSmallFile reads a token file (host.ReadSmallFile).
func readSmallFile(path string) ([]byte, error) { return host.ReadSmallFile(path) }

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

// openSharedEvidence opens the shared evidence log of several served
// devices in dir (host.OpenSharedEvidence).
func openSharedEvidence(g guardOptions, dir string) (*evidence.Log, error) {
	return host.OpenSharedEvidence(g, dir)
}
