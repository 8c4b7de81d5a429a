package transport

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
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

// dupScanner walks a JSON text once: it checks that the text is JSON as
// strictly as json.Valid does (bad: it is not; FuzzScanIsValid holds the
// two together), finds the first member name repeated in one object (see
// [duplicateMember]), and keeps the raw values of the top-level object's
// members the frame decoder reads (id, jsonrpc, method, params:
// [decodeFrame]). It stops at the first of a syntax error and a duplicate,
// so after a duplicate the rest of the text is unchecked. It allocates
// nothing on a frame of plain member names without a duplicate: names are
// compared as byte slices of the text, the path of the duplicate is built
// only once one is found, as the scan unwinds.
type dupScanner struct {
	b     []byte
	i     int
	bad   bool // the text is not JSON
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

// maxDepth is the deepest nesting of objects and arrays json.Valid accepts.
const maxDepth = 10000

// scanners reuse dupScanners (with their buffers) across frames.
var scanners = sync.Pool{New: func() any { return new(dupScanner) }}

// getScanner is a scanner from the pool; give it back with putScanner.
func getScanner() *dupScanner { return scanners.Get().(*dupScanner) }

// putScanner returns d to the pool, holding nothing of the text it scanned.
func putScanner(d *dupScanner) {
	clear(d.keysBuf[:])
	d.b, d.keys, d.fold, d.path = nil, nil, nil, d.path[:0]
	d.id, d.jsonrpc, d.method, d.params = nil, nil, nil, nil
	d.name, d.membersOnly = "", false
	scanners.Put(d)
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

// scan walks b from its start: one JSON value, with nothing but whitespace
// around it.
func (d *dupScanner) scan(b []byte) {
	d.b, d.i = b, 0
	d.bad, d.found, d.name, d.path = false, false, "", d.path[:0]
	d.id, d.jsonrpc, d.method, d.params = nil, nil, nil, nil
	d.keys, d.fold = d.keysBuf[:0], d.foldBuf[:0]
	d.value(0, kindEmpty)
	if !d.stopped() {
		d.ws()
		d.bad = d.i != len(d.b)
	}
}

// stopped reports that the scan ended early: a syntax error or a duplicate.
func (d *dupScanner) stopped() bool { return d.bad || d.found }

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

// value scans one value starting at d.i (after whitespace); it stops early
// at a syntax error or once a duplicate is found. depth is the nesting of
// the value (0: the frame itself); an object at a path of kind kindEmpty
// or kindParams compares names case-insensitively.
func (d *dupScanner) value(depth int, kind pathKind) {
	d.ws()
	if d.i >= len(d.b) {
		d.bad = true
		return
	}
	switch c := d.b[d.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			d.bad = true
			return
		}
		if c == '{' {
			d.object(depth, kind)
		} else {
			d.array(depth)
		}
	case c == '"':
		d.str()
	case c == '-' || ('0' <= c && c <= '9'):
		d.number()
	case c == 't':
		d.literal("true")
	case c == 'f':
		d.literal("false")
	case c == 'n':
		d.literal("null")
	default:
		d.bad = true
	}
}

// array scans an array, d.i at its '['.
func (d *dupScanner) array(depth int) {
	d.i++ // '['
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return
	}
	for n := 0; ; n++ {
		d.value(depth+1, kindOther)
		if d.found {
			d.path = append(d.path, pathPart{index: n, isIdx: true})
		}
		if d.stopped() {
			return
		}
		d.ws()
		if d.i >= len(d.b) {
			d.bad = true
			return
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return
		default:
			d.bad = true
			return
		}
	}
}

// literal scans the word w (true, false, null).
func (d *dupScanner) literal(w string) {
	if len(d.b)-d.i < len(w) || string(d.b[d.i:d.i+len(w)]) != w {
		d.bad = true
		return
	}
	d.i += len(w)
}

// number scans a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// (what follows it is the caller's to check).
func (d *dupScanner) number() {
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.digits() == 0:
		d.bad = true
		return
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.digits() == 0 {
			d.bad = true
			return
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			d.bad = true
		}
	}
}

// digits skips decimal digits and returns how many.
func (d *dupScanner) digits() int {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}

// str scans a string and returns its raw text (quotes included): no byte
// below 0x20 in it, and every escape one of JSON's.
func (d *dupScanner) str() []byte {
	start := d.i
	d.i++ // opening quote
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return d.b[start:d.i]
		case c == '\\':
			if !d.escape() {
				d.bad = true
				return d.b[start:d.i]
			}
		case c < 0x20:
			d.bad = true
			return d.b[start:d.i]
		default:
			d.i++
		}
	}
	d.bad = true // unterminated
	return d.b[start:]
}

// escape skips the escape at d.i (its backslash) and reports whether it is
// one of JSON's.
func (d *dupScanner) escape() bool {
	if d.i+1 >= len(d.b) {
		return false
	}
	switch d.b[d.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.i += 2
		return true
	case 'u':
		if len(d.b)-d.i < 6 {
			return false
		}
		for _, h := range d.b[d.i+2 : d.i+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		d.i += 6
		return true
	}
	return false
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

// object scans an object, d.i at its '{'.
func (d *dupScanner) object(depth int, kind pathKind) {
	d.i++ // '{'
	fold := kind != kindOther
	base := len(d.keys)
	defer func() { d.keys = d.keys[:base] }()
	var seen map[string]bool // for an object of more than manyKeys members
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return
	}
	for {
		d.ws()
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			d.bad = true // a member must start with its name
			return
		}
		raw := d.str()
		if d.bad {
			return
		}
		key := unquote(raw)
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
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			d.bad = true
			return
		}
		d.i++
		d.ws()
		start := d.i
		d.value(depth+1, memberKind(kind, key))
		if d.found {
			d.path = append(d.path, pathPart{key: string(key)})
		}
		if d.stopped() {
			return
		}
		if depth == 0 {
			d.keep(key, d.b[start:d.i])
		}
		d.ws()
		if d.i >= len(d.b) {
			d.bad = true
			return
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return
		default:
			d.bad = true
			return
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
