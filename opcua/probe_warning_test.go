package opcua

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go/conformance"
)

// TestProbeWarningNamesTheCause: the start-up warning after a failed probe
// names what failed. Before the fix it always said "server not reachable",
// also for an unset password variable, a refused login or certificate.
func TestProbeWarningNamesTheCause(t *testing.T) {
	srv := startFake(t)
	probe := func(cfg Config) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := Probe(ctx, cfg, DialOptions{Logger: quietLogger()})
		if err == nil {
			t.Fatal("probe succeeded")
		}
		return err
	}
	const unset = "MHP_TEST_OPCUA_PW_UNSET_28"
	os.Unsetenv(unset)
	noPassword := fixtureConfig(srv.URL, conformance.Options{})
	noPassword.Auth = Auth{Type: AuthUsername, Username: "mhp", PasswordEnv: unset}
	down := fixtureConfig("opc.tcp://127.0.0.1:1", conformance.Options{})
	down.Timeouts.DialS = 0.5
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"password variable unset", probe(noPassword), "password variable (auth.password_env) is not set"},
		{"unreachable", probe(down), "server not reachable"},
		{"login refused", fmt.Errorf("opcua: connect: %w", ua.StatusBadUserAccessDenied), "refused the login"},
		{"certificate refused", fmt.Errorf("opcua: connect: %w", ua.StatusBadCertificateUntrusted), "refused this client's certificate"},
	} {
		got := probeWarning(c.err)
		if !strings.Contains(got, c.want) || (c.name != "unreachable" && strings.Contains(got, "not reachable")) {
			t.Errorf("%s (%v): warning %q, want it to say %q", c.name, c.err, got, c.want)
		}
	}
}
