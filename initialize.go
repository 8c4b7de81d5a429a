package mhp

// Wire types and HTTP header names that servers (transport) and clients
// (client) share, so that neither imports the other.

// HTTP header names of the HTTP+SSE transport.
const (
	// HeaderSession carries the session secret initialize returned. It is the
	// credential of a server-issued session; leases belong to its label.
	HeaderSession = "Mhp-Session"
	// HeaderClient is the client's name (spec §9). With Mhp-Session it is a
	// display name only; without it, it keys a header session (see the
	// transport package doc), which can never act as or see a server-issued
	// session.
	HeaderClient = "X-MHP-Client"
	// HeaderOperator carries the operator token: only a request with it may
	// call operator methods such as permits/issue ([MethodPermitsIssue]).
	HeaderOperator = "Mhp-Operator"
	// HeaderLastEventID resumes an SSE stream after the given event id.
	HeaderLastEventID = "Last-Event-ID"
)

// InitializeResult is the answer of initialize (spec §5.1).
type InitializeResult struct {
	ProtocolVersion string       `json:"protocolVersion"`
	Device          DeviceInfo   `json:"device"`
	Capabilities    Capabilities `json:"capabilities"`
	// Session is the server-issued session secret. HTTP clients send it back
	// in the Mhp-Session header ([HeaderSession]); on a stream it is
	// informational. It is the credential: only its owner ever sees it.
	Session string `json:"session"`
	// Label is the session's public name: lease holders, notifications'
	// "by", job owners and logs carry it, never the secret.
	Label string `json:"label"`
}

// Capabilities are the initialize capability booleans (spec §5.1): a
// client must not call a method whose capability is false.
type Capabilities struct {
	Signals   bool `json:"signals"`
	Settings  bool `json:"settings"`
	Actions   bool `json:"actions"`
	Methods   bool `json:"methods"`
	Subscribe bool `json:"subscribe"`
	Lease     bool `json:"lease"`
	EStop     bool `json:"estop"`
	// Resources is true when the device serves resources/list and resources/read.
	Resources bool `json:"resources"`
	// CommandIDs is true when settings/write and actions/invoke honour
	// commandId (a retry with the same id never acts twice), so clients may
	// resend after a transport failure.
	CommandIDs bool `json:"commandIds,omitempty"`
}
