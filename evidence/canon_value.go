package evidence

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/openmhp/mhp-go"
)

// This file canonicalises a Go value straight into RFC 8785 bytes in one
// walk, without marshalling it with encoding/json and parsing the text
// again. Its output is byte for byte what [Canonical] (the marshal and
// re-parse path, kept as the oracle of the differential and fuzz tests)
// gives for the same value. Where the two could differ, the walk does not
// guess: errSlow sends the whole value (or, for types with their own
// MarshalJSON or MarshalText, just that value) through encoding/json.

// errSlow means the fast walk does not handle a value: the caller takes the
// encoding/json path, which also gives the exact error Canonical gives.
var errSlow = errors.New("evidence: value needs the encoding/json path")

// maxCanonDepth is the nesting canonParser accepts (depth > maxCanonDepth fails).
const maxCanonDepth = 512

// canonicalValue returns v's canonical JSON, exactly as Canonical(v).
func canonicalValue(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := appendCanonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// appendCanonical writes v's canonical JSON to b, exactly as Canonical(v)
// would give it; on an error b holds what it held before.
func appendCanonical(b *bytes.Buffer, v any) error {
	n := b.Len()
	err := (&canonWalk{b: b}).value(v, 0)
	if err == nil {
		return nil
	}
	b.Truncate(n)
	c, err := Canonical(v)
	if err != nil {
		return err
	}
	b.Write(c)
	return nil
}

var walkPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// getBuf takes an empty buffer from the pool (give it back with putBuf).
func getBuf() *bytes.Buffer { b := walkPool.Get().(*bytes.Buffer); b.Reset(); return b }

// putBuf returns b to the pool unless it grew large.
func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		walkPool.Put(b)
	}
}

type canonWalk struct {
	b    *bytes.Buffer
	keys []string // a stack of sorted member names, shared by nested maps
}

var (
	numberType    = reflect.TypeFor[json.Number]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	errorPtrType  = reflect.TypeFor[*mhp.Error]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// value writes v; the common dynamic types are switched on without reflect.
func (w *canonWalk) value(v any, depth int) error {
	if depth > maxCanonDepth {
		return errSlow
	}
	switch x := v.(type) {
	case nil:
		w.b.WriteString("null")
		return nil
	case string:
		w.str(x)
		return nil
	case bool:
		w.boolean(x)
		return nil
	case float64:
		return w.float(x)
	case int:
		w.integer(int64(x))
		return nil
	case int64:
		w.integer(x)
		return nil
	case json.Number:
		return w.number(string(x))
	case json.RawMessage:
		return w.raw(x, depth)
	case map[string]any:
		if x == nil {
			w.b.WriteString("null")
			return nil
		}
		return w.stringMap(x, depth)
	case []any:
		if x == nil {
			w.b.WriteString("null")
			return nil
		}
		w.b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.b.WriteByte(',')
			}
			if err := w.value(e, depth+1); err != nil {
				return err
			}
		}
		w.b.WriteByte(']')
		return nil
	case *mhp.Error:
		if x == nil {
			w.b.WriteString("null")
			return nil
		}
		return w.mhpError(x, depth)
	}
	return w.reflectValue(reflect.ValueOf(v), depth)
}

func (w *canonWalk) boolean(x bool) {
	if x {
		w.b.WriteString("true")
	} else {
		w.b.WriteString("false")
	}
}

// str writes a string value as encoding/json sees it: each byte of invalid
// UTF-8 becomes U+FFFD (writeString, used for the entry's own members,
// replaces a run at once).
func (w *canonWalk) str(s string) {
	if !utf8.ValidString(s) {
		var sb strings.Builder
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				sb.WriteRune(utf8.RuneError)
			} else {
				sb.WriteString(s[i : i+n])
			}
			i += n
		}
		s = sb.String()
	}
	writeString(w.b, s)
}

func (w *canonWalk) float(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errSlow // encoding/json refuses it; Canonical says how
	}
	w.b.Write(appendNumber(w.b.AvailableBuffer(), f))
	return nil
}

// appendNumber is FormatNumber appended to dst.
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	return append(dst, formatNumberExp(f)...)
}

// integer writes an integer: its own digits up to 15 of them (exactly a
// double), else the double it parses to, as the re-parse would.
func (w *canonWalk) integer(i int64) {
	if i > -1e15 && i < 1e15 {
		w.b.Write(strconv.AppendInt(w.b.AvailableBuffer(), i, 10))
		return
	}
	f, _ := strconv.ParseFloat(strconv.FormatInt(i, 10), 64)
	w.b.Write(appendNumber(w.b.AvailableBuffer(), f))
}

func (w *canonWalk) unsigned(u uint64) {
	if u < 1e15 {
		w.b.Write(strconv.AppendUint(w.b.AvailableBuffer(), u, 10))
		return
	}
	f, _ := strconv.ParseFloat(strconv.FormatUint(u, 10), 64)
	w.b.Write(appendNumber(w.b.AvailableBuffer(), f))
}

// number writes a json.Number (its text; "" is 0, as encoding/json writes it).
func (w *canonWalk) number(s string) error {
	if s == "" {
		s = "0"
	}
	if !validNumber(s) {
		return errSlow
	}
	if plainInteger([]byte(s)) {
		if s == "-0" {
			s = "0"
		}
		w.b.WriteString(s)
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return errSlow
	}
	w.b.Write(appendNumber(w.b.AvailableBuffer(), f))
	return nil
}

// validNumber reports whether s is a JSON number (RFC 8259 section 6).
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// raw writes embedded JSON text, canonicalised at its depth (nil is null,
// as RawMessage marshals).
func (w *canonWalk) raw(m json.RawMessage, depth int) error {
	if m == nil {
		w.b.WriteString("null")
		return nil
	}
	if !json.Valid(m) { // encoding/json refuses what it would not compact
		return errSlow
	}
	p := canonParser{in: m}
	if err := p.value(w.b, depth); err != nil {
		return errSlow
	}
	return nil
}

// marshalled writes v through encoding/json (a type with its own
// MarshalJSON or MarshalText), canonicalised at its depth.
func (w *canonWalk) marshalled(v any, depth int) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return errSlow
	}
	p := canonParser{in: raw}
	if err := p.value(w.b, depth); err != nil {
		return errSlow
	}
	return nil
}

// sortKeys sorts member names by their UTF-16 code units (RFC 8785
// section 3.2.3) without converting them.
func sortKeys(keys []string) { slices.SortFunc(keys, compareUTF16) }

// compareUTF16 orders two valid UTF-8 strings as their UTF-16 encodings.
func compareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a) && i == len(b):
		return 0
	case i == len(a):
		return -1
	case i == len(b):
		return 1
	}
	for i > 0 && !utf8.RuneStart(a[i]) { // the runes differ from their first byte on
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	wa, wb := utf16Weight(ra), utf16Weight(rb)
	if wa < wb {
		return -1
	}
	return 1
}

// utf16Weight orders runes as their first UTF-16 code unit does: below
// U+D800, then the supplementary planes (surrogate pairs, high surrogate
// first), then U+E000..U+FFFF.
func utf16Weight(r rune) int32 {
	switch {
	case r < 0xD800:
		return r
	case r >= 0x10000:
		return 0xD800 + (r - 0x10000)
	default:
		return r + 0x100000
	}
}

func (w *canonWalk) stringMap(m map[string]any, depth int) error {
	base := len(w.keys)
	for k := range m {
		if !utf8.ValidString(k) {
			w.keys = w.keys[:base]
			return errSlow // two names could become one U+FFFD: the re-parse refuses duplicates
		}
		w.keys = append(w.keys, k)
	}
	keys := w.keys[base:]
	sortKeys(keys)
	w.b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			w.b.WriteByte(',')
		}
		writeString(w.b, k)
		w.b.WriteByte(':')
		if err := w.value(m[k], depth+1); err != nil {
			w.keys = w.keys[:base]
			return err
		}
	}
	w.b.WriteByte('}')
	w.keys = w.keys[:base]
	return nil
}

// mhpError writes *mhp.Error as its MarshalJSON does: code, message and
// data with ts inside.
func (w *canonWalk) mhpError(e *mhp.Error, depth int) error {
	w.b.WriteString(`{"code":`)
	w.integer(int64(e.Code))
	if len(e.Data) > 0 || e.TS != 0 {
		if e.TS != 0 && (math.IsNaN(e.TS) || math.IsInf(e.TS, 0)) {
			return errSlow
		}
		base := len(w.keys)
		hasTS := false
		for k := range e.Data {
			if !utf8.ValidString(k) {
				w.keys = w.keys[:base]
				return errSlow
			}
			hasTS = hasTS || k == "ts"
			w.keys = append(w.keys, k)
		}
		if e.TS != 0 && !hasTS {
			w.keys = append(w.keys, "ts")
		}
		keys := w.keys[base:]
		sortKeys(keys)
		w.b.WriteString(`,"data":{`)
		for i, k := range keys {
			if i > 0 {
				w.b.WriteByte(',')
			}
			writeString(w.b, k)
			w.b.WriteByte(':')
			if k == "ts" && e.TS != 0 {
				w.float(e.TS)
				continue
			}
			if err := w.value(e.Data[k], depth+2); err != nil {
				w.keys = w.keys[:base]
				return err
			}
		}
		w.b.WriteByte('}')
		w.keys = w.keys[:base]
	}
	w.b.WriteString(`,"message":`)
	w.str(e.Message)
	w.b.WriteByte('}')
	return nil
}

// ---- the reflect walk, for every other type ----

// typeKind caches how a type is written.
type typeKind struct {
	custom     bool        // MarshalJSON or MarshalText on the value
	ptrCustom  bool        // ... or on its pointer (used when addressable)
	fields     []fieldPlan // structs: the members, sorted; nil with slowStruct
	slowStruct bool        // a struct shape the walk leaves to encoding/json
}

type fieldPlan struct {
	index     int
	key       string // the member name, escaped and quoted, with the colon
	omitEmpty bool
}

var kinds sync.Map // reflect.Type -> *typeKind

func kindOf(t reflect.Type) *typeKind {
	if k, ok := kinds.Load(t); ok {
		return k.(*typeKind)
	}
	k := &typeKind{
		custom: t.Implements(marshalerType) || t.Implements(textType),
	}
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface {
		pt := reflect.PointerTo(t)
		k.ptrCustom = pt.Implements(marshalerType) || pt.Implements(textType)
	}
	if t.Kind() == reflect.Struct {
		k.fields, k.slowStruct = planStruct(t)
	}
	kinds.Store(t, k)
	return k
}

// planStruct lists a struct's members as encoding/json names them, sorted;
// slow is true for what the walk does not mirror (embedded fields, the
// string and omitzero options, unusual names, clashing names).
func planStruct(t reflect.Type) (fields []fieldPlan, slow bool) {
	type named struct {
		name string
		fieldPlan
	}
	var ns []named
	seen := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			return nil, true
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		} else if !plainTagName(name) {
			return nil, true
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty":
				omit = true
			case "string", "omitzero":
				return nil, true
			}
		}
		if seen[name] || !utf8.ValidString(name) {
			return nil, true
		}
		seen[name] = true
		var kb bytes.Buffer
		writeString(&kb, name)
		kb.WriteByte(':')
		ns = append(ns, named{name, fieldPlan{index: i, key: kb.String(), omitEmpty: omit}})
	}
	slices.SortFunc(ns, func(a, b named) int { return compareUTF16(a.name, b.name) })
	fields = make([]fieldPlan, len(ns))
	for i, n := range ns {
		fields[i] = n.fieldPlan
	}
	return fields, false
}

// plainTagName: a tag name encoding/json takes as it is (letters, digits,
// underscore, hyphen); others are left to it.
func plainTagName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

func (w *canonWalk) reflectValue(v reflect.Value, depth int) error {
	if depth > maxCanonDepth {
		return errSlow
	}
	if !v.IsValid() {
		w.b.WriteString("null")
		return nil
	}
	t := v.Type()
	switch t {
	case numberType:
		return w.number(v.String())
	case rawType:
		return w.raw(json.RawMessage(v.Bytes()), depth)
	case errorPtrType:
		if v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		return w.mhpError(v.Interface().(*mhp.Error), depth)
	}
	k := kindOf(t)
	if k.custom {
		if t.Kind() == reflect.Pointer && v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		return w.marshalled(v.Interface(), depth)
	}
	if k.ptrCustom && v.CanAddr() {
		return w.marshalled(v.Addr().Interface(), depth)
	}
	switch t.Kind() {
	case reflect.Bool:
		w.boolean(v.Bool())
	case reflect.String:
		w.str(v.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.integer(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.unsigned(v.Uint())
	case reflect.Float64:
		return w.float(v.Float())
	case reflect.Float32:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return errSlow
		}
		// encoding/json writes a float32's own shortest digits; the
		// re-parse reads them as a double.
		d, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
		return w.float(d)
	case reflect.Interface:
		if v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		return w.value(v.Interface(), depth) // the dynamic value, not addressable either way
	case reflect.Pointer:
		if v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		return w.reflectValue(v.Elem(), depth)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return errSlow
		}
		if v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		return w.reflectMap(v, depth)
	case reflect.Slice:
		if v.IsNil() {
			w.b.WriteString("null")
			return nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return errSlow // base64, or the element's own marshaller
		}
		return w.reflectList(v, depth)
	case reflect.Array:
		return w.reflectList(v, depth)
	case reflect.Struct:
		if k.slowStruct {
			if v.CanAddr() {
				return w.marshalled(v.Addr().Interface(), depth)
			}
			return w.marshalled(v.Interface(), depth)
		}
		return w.reflectStruct(v, k.fields, depth)
	default:
		return errSlow // channels, functions, complex numbers: encoding/json refuses them
	}
	return nil
}

func (w *canonWalk) reflectList(v reflect.Value, depth int) error {
	w.b.WriteByte('[')
	for i := 0; i < v.Len(); i++ {
		if i > 0 {
			w.b.WriteByte(',')
		}
		if err := w.reflectValue(v.Index(i), depth+1); err != nil {
			return err
		}
	}
	w.b.WriteByte(']')
	return nil
}

func (w *canonWalk) reflectMap(v reflect.Value, depth int) error {
	base := len(w.keys)
	it := v.MapRange()
	for it.Next() {
		k := it.Key().String()
		if !utf8.ValidString(k) {
			w.keys = w.keys[:base]
			return errSlow
		}
		w.keys = append(w.keys, k)
	}
	keys := w.keys[base:]
	sortKeys(keys)
	w.b.WriteByte('{')
	kt := v.Type().Key()
	for i, k := range keys {
		if i > 0 {
			w.b.WriteByte(',')
		}
		writeString(w.b, k)
		w.b.WriteByte(':')
		if err := w.reflectValue(v.MapIndex(reflect.ValueOf(k).Convert(kt)), depth+1); err != nil {
			w.keys = w.keys[:base]
			return err
		}
	}
	w.b.WriteByte('}')
	w.keys = w.keys[:base]
	return nil
}

func (w *canonWalk) reflectStruct(v reflect.Value, fields []fieldPlan, depth int) error {
	w.b.WriteByte('{')
	first := true
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && emptyValue(fv) {
			continue
		}
		if !first {
			w.b.WriteByte(',')
		}
		first = false
		w.b.WriteString(f.key)
		if err := w.reflectValue(fv, depth+1); err != nil {
			return err
		}
	}
	w.b.WriteByte('}')
	return nil
}
