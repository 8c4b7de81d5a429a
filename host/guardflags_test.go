package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/evidence"
)

func TestGuardFlagsOptions(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "head.key")
	if err := evidence.GenerateKey(key, key+".pub"); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "op.token")
	if err := os.WriteFile(tok, []byte("operator-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.token")
	_ = os.WriteFile(short, []byte("short"), 0o600)
	for _, c := range []struct {
		name string
		f    GuardFlags
		want string // error substring; "" for none
		ok   func(GuardOptions) bool
	}{
		{"none", GuardFlags{}, "", func(g GuardOptions) bool { return g.EvidenceDir == "" && g.Sync == evidence.SyncAlways }},
		{"evidence never", GuardFlags{Evidence: dir, EvidenceSync: "never"}, "", func(g GuardOptions) bool { return g.Sync == evidence.SyncNever }},
		{"sync without evidence", GuardFlags{EvidenceSync: "never"}, "--evidence-sync needs --evidence", nil},
		{"sync with the fleet's default dir", GuardFlags{EvidenceSync: "never", EvidenceDirDefault: true}, "", nil},
		{"key without evidence", GuardFlags{EvidenceKey: key}, "--evidence-key needs --evidence", nil},
		{"cadence", GuardFlags{Evidence: dir, EvidenceKey: key, EvidenceHeadEvery: "10", EvidenceHeadInterval: "2s"}, "",
			func(g GuardOptions) bool {
				return g.HeadEvery == 10 && g.HeadInterval == 2*time.Second && g.EvidenceKey != nil
			}},
		{"cadence unsigned", GuardFlags{Evidence: dir, EvidenceHeadEvery: "10"}, "need --evidence-key", nil},
		{"interval too short", GuardFlags{Evidence: dir, EvidenceKey: key, EvidenceHeadInterval: "1ms"}, "between 100ms and 1h", nil},
		{"permits", GuardFlags{OperatorTokenFile: tok, RequirePermits: true}, "",
			func(g GuardOptions) bool { return g.Require && g.OperatorToken == "operator-token-0123456789" }},
		{"permits without operator", GuardFlags{RequirePermits: true}, "needs --operator-token-file", nil},
		{"short operator token", GuardFlags{OperatorTokenFile: short}, "at least 16 characters", nil},
		{"token file a directory", GuardFlags{OperatorTokenFile: dir}, "not a regular file", nil},
	} {
		g, err := c.f.Options()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		case c.ok != nil && err == nil && !c.ok(g):
			t.Errorf("%s: options %+v", c.name, g)
		}
	}
}
