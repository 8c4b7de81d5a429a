package transport

import (
	"encoding/json"
	"strconv"
	"strings"
)

// duplicateMember scans a JSON text that json.Valid accepted and returns the
// first member name that appears twice in one object, with the path of that
// object ("" for the top level, "params", "params.params.x", "params.list[2]"),
// and found false when every object's names are distinct. Names of the top-level
// object and of params are folded to lower case first: the params decoder
// matches them case-insensitively.
func duplicateMember(b []byte) (path, name string, found bool) {
	d := dupScanner{b: b}
	d.value("")
	return d.path, d.name, d.found
}

type dupScanner struct {
	b     []byte
	i     int
	found bool
	path  string
	name  string
}

func (d *dupScanner) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// value skips one value starting at d.i (after whitespace); it stops early
// once a duplicate is found.
func (d *dupScanner) value(path string) {
	d.ws()
	if d.i >= len(d.b) || d.found {
		return
	}
	switch d.b[d.i] {
	case '{':
		d.object(path)
	case '[':
		d.i++
		for n := 0; ; n++ {
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ']' {
				d.i++
				return
			}
			d.value(path + "[" + strconv.Itoa(n) + "]")
			if d.found {
				return
			}
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ',' {
				d.i++
			}
		}
	case '"':
		d.str()
	default: // number, true, false, null
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return
			}
			d.i++
		}
	}
}

// str skips a string and returns its raw text (quotes included).
func (d *dupScanner) str() []byte {
	start := d.i
	d.i++ // opening quote
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '\\':
			d.i += 2
			continue
		case '"':
			d.i++
			return d.b[start:d.i]
		}
		d.i++
	}
	return d.b[start:]
}

func (d *dupScanner) object(path string) {
	d.i++ // '{'
	fold := path == "" || path == "params"
	seen := map[string]bool{}
	for {
		d.ws()
		if d.i >= len(d.b) {
			return
		}
		if d.b[d.i] == '}' {
			d.i++
			return
		}
		if d.b[d.i] == ',' {
			d.i++
			continue
		}
		raw := d.str()
		key := string(raw[1 : len(raw)-1])
		if strings.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				key = s
			}
		}
		k := key
		if fold {
			k = strings.ToLower(key)
		}
		if seen[k] {
			d.path, d.name, d.found = path, key, true
			return
		}
		seen[k] = true
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == ':' {
			d.i++
		}
		d.value(joinPath(path, key))
		if d.found {
			return
		}
	}
}
