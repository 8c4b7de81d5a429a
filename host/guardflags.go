package host

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go/evidence"
)

// GuardFlags are the command-line values of a device's guard, the same on
// every command that wraps devices (mhp serve, mhp demo, mhp-mcp hosting
// the fleet): --evidence, --evidence-key, --evidence-sync,
// --evidence-head-every, --evidence-head-interval, --operator-token-file
// and --require-permits. An empty string is a flag not given.
type GuardFlags struct {
	Evidence             string
	EvidenceKey          string
	EvidenceSync         string
	EvidenceHeadEvery    string
	EvidenceHeadInterval string
	OperatorTokenFile    string
	RequirePermits       bool
	// EvidenceDirDefault says an empty Evidence still keeps evidence (the
	// fleet keeps it under its home), so the key and cadence flags do not
	// need --evidence.
	EvidenceDirDefault bool
}

// Options checks the flags and returns the guard they describe; an error
// names the flag and what it accepts.
func (f GuardFlags) Options() (GuardOptions, error) {
	g := GuardOptions{EvidenceDir: f.Evidence}
	evidenceOn := f.Evidence != "" || f.EvidenceDirDefault
	if f.EvidenceKey != "" {
		if !evidenceOn {
			return g, fmt.Errorf("--evidence-key needs --evidence DIR")
		}
		k, err := evidence.LoadPrivateKey(f.EvidenceKey)
		if err != nil {
			return g, fmt.Errorf("--evidence-key: %w", err)
		}
		g.EvidenceKey = k
	}
	if v := f.EvidenceHeadEvery; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1_000_000 {
			return g, fmt.Errorf("--evidence-head-every is a count of entries between signed heads (1..1000000), not %q", v)
		}
		g.HeadEvery = n
	}
	if v := f.EvidenceHeadInterval; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return g, fmt.Errorf("--evidence-head-interval is a duration between 100ms and 1h (e.g. 10s), not %q", v)
		}
		g.HeadInterval = d
	}
	if (g.HeadEvery != 0 || g.HeadInterval != 0) && g.EvidenceKey == nil {
		return g, fmt.Errorf("--evidence-head-every and --evidence-head-interval need --evidence-key: heads are signed")
	}
	switch f.EvidenceSync {
	case "", "always":
	case "never":
		g.Sync = evidence.SyncNever
	default:
		return g, fmt.Errorf("--evidence-sync is always or never, not %q", f.EvidenceSync)
	}
	if f.EvidenceSync != "" && !evidenceOn {
		return g, fmt.Errorf("--evidence-sync needs --evidence DIR")
	}
	if f.OperatorTokenFile != "" {
		b, err := ReadSmallFile(f.OperatorTokenFile)
		if err != nil {
			return g, fmt.Errorf("--operator-token-file: %w", err)
		}
		g.OperatorToken = strings.TrimSpace(string(b))
		if len(g.OperatorToken) < 16 {
			return g, fmt.Errorf("--operator-token-file: the operator token must be at least 16 characters")
		}
	}
	g.Require = f.RequirePermits
	if g.Require && g.OperatorToken == "" {
		return g, fmt.Errorf("--require-permits needs --operator-token-file: without an operator nothing could approve")
	}
	return g, nil
}

// ReadSmallFile reads a token or key file: a regular file (not a pipe or
// device that could block) of at most 4 KiB.
func ReadSmallFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return nil, fmt.Errorf("%s is not a regular file of at most 4 KiB", path)
	}
	return ReadFileLimited(path, 4096)
}
