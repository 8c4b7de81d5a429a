package evidence

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// canonParser canonicalises a JSON text in one pass over its bytes (the
// json.Decoder token path allocates per token; receipts are written on every
// actuation, so this is the hot path).
type canonParser struct {
	in  []byte
	pos int
}

func (p *canonParser) errf(format string, a ...any) error {
	return fmt.Errorf("canonical json: at byte %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *canonParser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *canonParser) value(out *bytes.Buffer, depth int) error {
	if depth > 512 {
		return p.errf("nested too deep")
	}
	p.ws()
	if p.pos >= len(p.in) {
		return p.errf("unexpected end")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(out, depth)
	case c == '[':
		p.pos++
		out.WriteByte('[')
		p.ws()
		if p.pos < len(p.in) && p.in[p.pos] == ']' {
			p.pos++
			out.WriteByte(']')
			return nil
		}
		for i := 0; ; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := p.value(out, depth+1); err != nil {
				return err
			}
			p.ws()
			if p.pos >= len(p.in) {
				return p.errf("unterminated array")
			}
			if p.in[p.pos] == ']' {
				p.pos++
				out.WriteByte(']')
				return nil
			}
			if p.in[p.pos] != ',' {
				return p.errf("expected , or ]")
			}
			p.pos++
		}
	case c == '"':
		s, err := p.str()
		if err != nil {
			return err
		}
		writeString(out, s)
		return nil
	case c == 't':
		return p.lit(out, "true")
	case c == 'f':
		return p.lit(out, "false")
	case c == 'n':
		return p.lit(out, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.pos
		for p.pos < len(p.in) && bytes.IndexByte([]byte("+-0123456789.eE"), p.in[p.pos]) >= 0 {
			p.pos++
		}
		if text := p.in[start:p.pos]; plainInteger(text) {
			// Up to 15 digits, no fraction or exponent: exactly a double,
			// and its canonical form is its own text ("-0" is "0").
			if string(text) == "-0" {
				text = text[1:]
			}
			out.Write(text)
			return nil
		}
		f, err := strconv.ParseFloat(string(p.in[start:p.pos]), 64)
		if err != nil || math.IsInf(f, 0) {
			return p.errf("number %s is not an IEEE 754 double", p.in[start:p.pos])
		}
		out.WriteString(FormatNumber(f))
		return nil
	default:
		return p.errf("unexpected %q", c)
	}
}

func (p *canonParser) lit(out *bytes.Buffer, word string) error {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		return p.errf("invalid literal")
	}
	p.pos += len(word)
	out.WriteString(word)
	return nil
}

// str decodes a JSON string starting at the quote.
func (p *canonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := p.in[start:p.pos]
			p.pos++
			if !utf8.Valid(s) {
				return "", p.errf("invalid UTF-8")
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.errf("control character in string")
		}
		p.pos++
	}
	var b []byte
	b = append(b, p.in[start:p.pos]...)
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			if !utf8.Valid(b) {
				return "", p.errf("invalid UTF-8")
			}
			return string(b), nil
		case c < 0x20:
			return "", p.errf("control character in string")
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.in) {
			break
		}
		e := p.in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.errf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if p.pos+1 < len(p.in) && p.in[p.pos] == '\\' && p.in[p.pos+1] == 'u' {
					p.pos += 2
					r2, ok := p.hex4()
					if !ok {
						return "", p.errf("bad \\u escape")
					}
					r = utf16.DecodeRune(r, r2)
				} else {
					r = utf8.RuneError
				}
				if r == utf8.RuneError {
					return "", p.errf("lone surrogate in string")
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", p.errf("bad escape \\%c", e)
		}
	}
	return "", p.errf("unterminated string")
}

func (p *canonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.in[p.pos:p.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

func (p *canonParser) object(out *bytes.Buffer, depth int) error {
	p.pos++ // {
	var members []member
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		out.WriteString("{}")
		return nil
	}
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return p.errf("expected a member name")
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return p.errf("expected :")
		}
		p.pos++
		var vb bytes.Buffer
		if err := p.value(&vb, depth+1); err != nil {
			return err
		}
		members = append(members, member{key: key, value: vb.Bytes()})
		p.ws()
		if p.pos >= len(p.in) {
			return p.errf("unterminated object")
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return p.errf("expected , or }")
		}
		p.pos++
	}
	ascii := true
	for i := range members {
		for j := 0; j < len(members[i].key); j++ {
			if members[i].key[j] >= 0x80 {
				ascii = false
			}
		}
	}
	if ascii {
		sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
	} else {
		for i := range members {
			members[i].units = utf16.Encode([]rune(members[i].key))
		}
		sort.Slice(members, func(i, j int) bool { return lessUnits(members[i].units, members[j].units) })
	}
	for i := 1; i < len(members); i++ {
		if members[i].key == members[i-1].key {
			return p.errf("duplicate key %q", members[i].key)
		}
	}
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

// plainInteger reports whether a JSON number's text is an integer of at most
// 15 digits with no fraction or exponent (JSON already refuses leading zeros).
func plainInteger(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 15 || (len(b) > 1 && b[0] == '0') {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
