package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Canonical returns the RFC 8785 (JSON Canonicalization Scheme) form of v: v
// is marshalled with encoding/json, then re-encoded with object members sorted
// by their UTF-16 code units, no insignificant whitespace, numbers in the
// ECMAScript shortest form and strings with the minimal escaping the RFC
// prescribes. Two parties that hash the canonical form of the same value get
// the same digest whatever their JSON library.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalJSON(raw)
}

// CanonicalJSON re-encodes a JSON text in RFC 8785 form. It refuses invalid
// UTF-8, duplicate object keys and numbers outside IEEE 754 double range.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("canonical json: invalid UTF-8")
	}
	p := canonParser{in: raw}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := p.value(&buf, 0); err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(raw) {
		return nil, fmt.Errorf("canonical json: trailing data")
	}
	return buf.Bytes(), nil
}

type member struct {
	key   string
	units []uint16
	value []byte
}

func lessUnits(a, b []uint16) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// writeString escapes as RFC 8785 section 3.2.2.2 says: quote and backslash,
// the five short control escapes, other controls as \u00xx; all else literal.
// Runs of bytes that need no escaping are copied at once.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			fmt.Fprintf(buf, `\u%04x`, c)
		}
		start = i + 1
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// FormatNumber renders f as ECMAScript's Number.prototype.toString does
// (RFC 8785 section 3.2.2.3): shortest round-trip digits, plain notation for
// exponents from -6 to 20, exponent notation ("1e+21", "1.5e-7") beyond.
func FormatNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		// Plain notation: the shortest round-trip digits laid out with no
		// exponent, which is Go's 'f' format at precision -1.
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return formatNumberExp(f)
}

// formatNumberExp is FormatNumber by the ECMAScript layout rules from the
// shortest digits; FormatNumber takes it for values outside the plain range
// (the test checks it agrees with the fast path inside).
func formatNumberExp(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	if f < 0 {
		return "-" + formatNumberExp(-f)
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	x := n - 1
	if x < 0 {
		x = -x
	}
	if k == 1 {
		return digits + "e" + sign + strconv.Itoa(x)
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(x)
}
