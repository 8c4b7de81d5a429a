package mcpbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
	// and scripts on hardware devices (a device is simulated only when the
	// host says so: Config.Simulated or the finder's [HostSimulated]; a
	// device's own tags are never read for it); find, describe, estop and
	// the lab's list and updates stay available.
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
// off). Unknown keys are refused so that a misspelt flag is not silently off,
// and so are duplicate keys (a second "allow_hardware" must not turn it on
// behind the first's back).
func ParsePolicy(data []byte) (Policy, error) {
	raw, err := policyMembers(data)
	if err != nil {
		return Policy{}, err
	}
	var p Policy
	for _, m := range raw {
		k, v := m.key, m.value
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

type policyMember struct {
	key   string
	value json.RawMessage
}

// policyMembers reads the document's top-level members in order, refusing
// duplicate keys and anything after the object.
func policyMembers(data []byte) ([]policyMember, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("policy: not a JSON object")
	}
	var out []policyMember
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("policy: not a JSON object: %w", err)
		}
		k, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("policy: %q: %w", k, err)
		}
		if seen[k] {
			return nil, fmt.Errorf("policy: key %q appears twice: refused (which one would hold is not for the parser to guess)", k)
		}
		seen[k] = true
		out = append(out, policyMember{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("policy: not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("policy: text after the policy object")
	}
	return out, nil
}

// Warnings names flags that are set but have no effect as the policy
// stands (operator_tools or allow_hardware without enabled: every tool is
// off), for the host to say at start instead of silently listing no tools.
func (p Policy) Warnings() []string {
	if p.Enabled {
		return nil
	}
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{p.OperatorTools, "operator_tools"}, {p.AllowHardware, "allow_hardware"}, {p.AllowExternalSessions, "allow_external_sessions"}} {
		if f.on {
			out = append(out, fmt.Sprintf("policy: %s is true but enabled is not: the bridge is disabled, lists no tools and refuses every call (add \"enabled\": true)", f.name))
		}
	}
	if len(out) == 0 {
		out = append(out, "policy: enabled is not true: the bridge lists no tools and refuses every call")
	}
	return out
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

// HostSimulated is implemented by a finder that knows, as the host, which of
// its devices are simulated ([Named] from its Simulated set; the fleet from
// its simulated twins and the driver kind of hosted packages).
type HostSimulated interface {
	IsSimulated(id string) bool
}

// simulated reports whether the host says the device with the id is
// simulated. Never from the device: a device that tags itself "simulated"
// (its card, DEVICE.md, descriptor) gains nothing.
func (b *Bridge) simulated(id string) bool {
	if b.cfg.Simulated != nil {
		return b.cfg.Simulated(id)
	}
	if h, ok := b.cfg.Finder.(HostSimulated); ok {
		return h.IsSimulated(id)
	}
	return false
}
