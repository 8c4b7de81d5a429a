package transport

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// duplicateMember scans a JSON text that json.Valid accepted and returns the
// first member name that appears twice in one object, with the path of that
// object ("" for the top level, "params", "params.params.x", "params.list[2]"),
// and found false when every object's names are distinct. Names of the top-level
// object and of params are folded to lower case first: the params decoder
// matches them case-insensitively.
func duplicateMember(b []byte) (path, name string, found bool) {
	var d dupScanner
	d.scan(b)
	return d.dupPath(), d.name, d.found
}

// dupScanner walks a JSON text json.Valid accepted, once: it finds the first
// member name repeated in one object (see [duplicateMember]) and keeps the
// raw values of the top-level object's members the frame decoder reads (id,
// jsonrpc, method, params: [decodeFrame]). It allocates nothing on a frame
// of plain member names without a duplicate: names are compared as byte
// slices of the text, the path of the duplicate is built only once one is
// found, as the scan unwinds.
type dupScanner struct {
	b     []byte
	i     int
	found bool
	name  string     // the repeated member, as written (unescaped)
	path  []pathPart // the duplicate's object path, innermost component first
	keys  [][]byte   // the names of the objects being scanned, a stack (folded where folding applies)
	fold  []byte     // the folded names' bytes (appended only: keys point into it)
	// keysBuf and foldBuf back keys and fold for the usual frame.
	keysBuf [16][]byte
	foldBuf [64]byte
	// membersOnly skips the duplicate check: the scan only keeps the
	// top-level members (of a frame whose duplicate is inside params).
	membersOnly bool

	// The top-level object's members (nil when absent; the value's bytes, no
	// surrounding space).
	id, jsonrpc, method, params []byte
}

// pathPart is one step of a path: a member name, or an array index.
type pathPart struct {
	key   string
	index int // when key is "" and isIndex
	isIdx bool
}

// pathKind is what the path of a value spells, as far as folding cares:
// "" (the top level, or members named "" under it), "params", or another.
type pathKind int

const (
	kindEmpty pathKind = iota
	kindParams
	kindOther
)

// memberKind is the pathKind of the member key of an object at kind k.
func memberKind(k pathKind, key []byte) pathKind {
	if k != kindEmpty {
		return kindOther
	}
	switch string(key) {
	case "":
		return kindEmpty
	case "params":
		return kindParams
	}
	return kindOther
}

// scan walks b from its start.
func (d *dupScanner) scan(b []byte) {
	d.b, d.i = b, 0
	d.keys, d.fold = d.keysBuf[:0], d.foldBuf[:0]
	d.value(0, kindEmpty)
}

// dupPath is the duplicate's object path ("" for the top level or none),
// spelt as joinPath does.
func (d *dupScanner) dupPath() string {
	p := ""
	for i := len(d.path) - 1; i >= 0; i-- {
		c := d.path[i]
		if c.isIdx {
			p += "[" + strconv.Itoa(c.index) + "]"
		} else {
			p = joinPath(p, c.key)
		}
	}
	return p
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
// once a duplicate is found. depth is the nesting of the value (0: the
// frame itself); an object at a path of kind kindEmpty or kindParams
// compares names case-insensitively.
func (d *dupScanner) value(depth int, kind pathKind) {
	d.ws()
	if d.i >= len(d.b) || d.found {
		return
	}
	switch d.b[d.i] {
	case '{':
		d.object(depth, kind)
	case '[':
		d.i++
		for n := 0; ; n++ {
			d.ws()
			if d.i < len(d.b) && d.b[d.i] == ']' {
				d.i++
				return
			}
			d.value(depth+1, kindOther)
			if d.found {
				d.path = append(d.path, pathPart{index: n, isIdx: true})
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

// unquote is a member name's text: the bytes between the quotes, or, for a
// name written with an escape, its decoded text.
func unquote(raw []byte) []byte {
	key := raw[1 : len(raw)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []byte(s)
		}
	}
	return key
}

// folded is key as the decoder matches it (strings.ToLower): key itself
// when it has no upper-case letter to fold, an ASCII name lowered into
// d.fold, any other through strings.ToLower.
func (d *dupScanner) folded(key []byte) []byte {
	upper := false
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return []byte(strings.ToLower(string(key)))
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	if !upper {
		return key
	}
	start := len(d.fold)
	for _, c := range key {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		d.fold = append(d.fold, c)
	}
	return d.fold[start:len(d.fold):len(d.fold)]
}

// manyKeys is the member count beyond which an object's names are checked
// in a map rather than by a linear scan of the stack.
const manyKeys = 16

func (d *dupScanner) object(depth int, kind pathKind) {
	d.i++ // '{'
	fold := kind != kindOther
	base := len(d.keys)
	defer func() { d.keys = d.keys[:base] }()
	var seen map[string]bool // for an object of more than manyKeys members
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
		key := unquote(d.str())
		k := key
		if fold {
			k = d.folded(key)
		}
		dup := false
		switch {
		case d.membersOnly:
		case seen != nil:
			dup = seen[string(k)]
			seen[string(k)] = true
		default:
			for _, o := range d.keys[base:] {
				if bytes.Equal(o, k) {
					dup = true
					break
				}
			}
			d.keys = append(d.keys, k)
			if len(d.keys)-base > manyKeys {
				seen = make(map[string]bool, 2*manyKeys)
				for _, o := range d.keys[base:] {
					seen[string(o)] = true
				}
			}
		}
		if dup {
			d.name, d.found = string(key), true
			return
		}
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == ':' {
			d.i++
		}
		d.ws()
		start := d.i
		d.value(depth+1, memberKind(kind, key))
		if d.found {
			d.path = append(d.path, pathPart{key: string(key)})
			return
		}
		if depth == 0 {
			d.keep(key, d.b[start:d.i])
		}
	}
}

// keep records a top-level member the frame decoder reads.
func (d *dupScanner) keep(key, v []byte) {
	switch string(key) {
	case "id":
		d.id = v
	case "jsonrpc":
		d.jsonrpc = v
	case "method":
		d.method = v
	case "params":
		d.params = v
	}
}
