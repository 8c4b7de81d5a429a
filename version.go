package mhp

// Protocol versions. A server answers the highest version it supports that is
// not newer than the client's.
const (
	// ProtocolVersion is the version this module speaks and answers with.
	ProtocolVersion = "2026-09-12"
	// ProtocolVersionMinimum is the oldest version this module accepts.
	ProtocolVersionMinimum = "2026-09-09"
)

// SupportedVersions returns the versions this module speaks, newest first.
func SupportedVersions() []string { return []string{ProtocolVersion, ProtocolVersionMinimum} }

// NegotiateVersion picks the version to answer a client that asked for requested:
// the newest supported version not newer than requested. Versions are ISO dates,
// so they compare as strings. An empty request gets the newest version.
func NegotiateVersion(requested string) (string, error) {
	if requested == "" {
		return ProtocolVersion, nil
	}
	for _, v := range SupportedVersions() {
		if v <= requested {
			return v, nil
		}
	}
	return "", Errorf(CodeInvalidParams, "protocolVersion %q is older than the oldest supported %s", requested, ProtocolVersionMinimum).
		With("supported", SupportedVersions())
}
