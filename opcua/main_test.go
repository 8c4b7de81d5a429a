package opcua

import (
	"io"
	"log"
	"os"
	"testing"
)

// TestMain silences the global logger: gopcua's server logs every node set
// import and listener there.
func TestMain(m *testing.M) {
	if os.Getenv("MHP_OPCUA_LOG") == "" {
		log.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}
