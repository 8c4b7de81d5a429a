package conformance

import (
	"os"
	"strings"
	"testing"
)

// PeerEnvPrefix starts the name of every environment variable that points a
// test at a real peer: MHP_PEER_OPCUA, MHP_PEER_MOSQUITTO, MHP_PEER_ROSLIB,
// MHP_PEER_MDNS, MHP_PEER_CHROMIUM, MHP_PEER_TS_SDK, ...
const PeerEnvPrefix = "MHP_PEER_"

// Peer gates an integration test on a real peer (a server, a broker, a
// browser, the host network). It returns the value of MHP_PEER_<name> (an
// address, a path, or "1"); when the variable is unset or empty it skips t
// with a message saying what the test needs and how to run it:
//
//	addr := conformance.Peer(t, "MOSQUITTO", "host:port of a running mosquitto (.ci/run starts one)")
//
// `go test ./...` stays offline: every real-peer test skips with its how-to,
// and .ci/run sets the variables of the peers it installs.
func Peer(t testing.TB, name, howto string) string {
	t.Helper()
	key := PeerEnvPrefix + strings.ToUpper(name)
	v := os.Getenv(key)
	if v == "" {
		t.Skipf("needs a real peer: set %s to %s", key, howto)
	}
	return v
}
