package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/openmhp/mhp-go"
)

// Policy is the host's policy: what the bridge lets a model do, whatever the
// devices allow (they enforce their own rules in addition). The safe default,
// without a policy document, is DefaultPolicy: enabled, every other flag off.
type Policy struct {
	// Enabled off refuses every tools/call and lists no tools; no device is
	// contacted.
	Enabled bool `json:"enabled"`
	// AllowHardware off refuses reads, writes, invokes, job steering, leases
	// and scripts on hardware devices (a device is simulated only when its
	// card carries the tag "simulated"); find, describe, estop and the lab's
	// list and updates stay available.
	AllowHardware bool `json:"allow_hardware"`
	// OperatorTools on lists the operator tools and ops (reset after an
	// estop, and later permits): human decisions, off for a model.
	OperatorTools bool `json:"operator_tools"`
	// AllowExternalSessions on accepts an MHP session the bridge did not
	// open. The bridge opens every MHP session itself and no tool takes a
	// session argument (the schemas refuse one, whatever this flag), so it
	// gates nothing yet; it is kept for the policy document's shape.
	AllowExternalSessions bool `json:"allow_external_sessions"`
}

// DefaultPolicy is the policy without a policy document: enabled, every other
// flag false (seed 001).
func DefaultPolicy() Policy { return Policy{Enabled: true} }

// policyFlags are the flags a policy document may set.
func policyFlags() []string {
	return []string{"enabled", "allow_hardware", "operator_tools", "allow_external_sessions"}
}

// ParsePolicy reads a policy document: a JSON object whose flags are on only
// when they are the JSON literal true (a missing flag, false, "true" or 1 are
// off). Unknown keys are refused so that a misspelt flag is not silently off.
func ParsePolicy(data []byte) (Policy, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Policy{}, fmt.Errorf("policy: not a JSON object: %w", err)
	}
	var p Policy
	for k, v := range raw {
		if !slices.Contains(policyFlags(), k) {
			return Policy{}, fmt.Errorf("policy: unknown flag %q (known: %v)", k, policyFlags())
		}
		on := bytes.Equal(bytes.TrimSpace(v), []byte("true"))
		switch k {
		case "enabled":
			p.Enabled = on
		case "allow_hardware":
			p.AllowHardware = on
		case "operator_tools":
			p.OperatorTools = on
		case "allow_external_sessions":
			p.AllowExternalSessions = on
		}
	}
	return p, nil
}

// LoadPolicy reads a policy document from path. A file that cannot be read
// is an error: the bridge refuses to start rather than guess.
func LoadPolicy(path string) (Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return ParsePolicy(data)
}

// forbidden is the refusal of a policy flag.
func forbidden(flag, what string) *mhp.Error {
	return mhp.Errorf(mhp.CodeForbidden, "%s is refused by the host policy (%s=false)", what, flag).
		With(mhp.DataReason, "policy").With("policy", flag+"=false")
}

// simulated reports whether a device's card says it is simulated.
func simulated(info mhp.DeviceInfo) bool { return slices.Contains(info.Tags, "simulated") }
