package auth

import "strings"

// MaxLabelPart caps each part (owner, client name) of a session label, in
// bytes.
const MaxLabelPart = 32

// LabelPart sanitises one part of a session label ("owner/client#hex": the
// identity's name, the client's name): letters, digits, '.', '_' and '-' are
// kept, anything else becomes '_', the result is capped at MaxLabelPart
// bytes; an empty part becomes def. A label is data (who a session stands
// for), never a credential.
func LabelPart(name, def string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= MaxLabelPart {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return def
	}
	return b.String()
}
