package binding

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"weak"

	"github.com/openmhp/mhp-go"
)

// Frozen specs: the driver owns a copy of every setting and action spec it
// was built from (the caller may change its Config afterwards), and that
// copy is never changed. Drivers built from specs of the same content (10,000
// simulated devices of one class) share one copy: New looks the content up
// in a process-wide table of weak pointers, so a copy lives as long as a
// driver holds it and the table never grows beyond the specs in use.

// frozenSpec is one shared, immutable copy of a setting or an action spec,
// of a descriptor's lists, or of a driver template.
type frozenSpec struct {
	setting  mhp.Setting
	shape    *mhp.Shape // the setting's value shape, checked by the limits gate
	action   mhp.Action
	lists    descLists
	template *driverTemplate // what drivers of one spec share (template.go)
}

// descLists are a descriptor's signal, setting and action lists, and, in
// a frozen copy, the position of each name in them.
type descLists struct {
	signals  []mhp.Signal
	settings []mhp.Setting
	actions  []mhp.Action

	signalIdx, settingIdx, actionIdx map[string]int
}

// byName finds a driver's binding by its name: idx (shared, frozen) gives
// its position in items (the driver's own bindings, in Config order).
type byName[T any] struct {
	idx   map[string]int
	items []T
}

// get returns the binding named name.
func (b byName[T]) get(name string) (*T, bool) {
	i, ok := b.idx[name]
	if !ok {
		return nil, false
	}
	return &b.items[i], true
}

// at returns the binding named name, nil when there is none.
func (b byName[T]) at(name string) *T {
	t, _ := b.get(name)
	return t
}

// positions maps each name to its position in list.
func positions[T any](list []T, name func(T) string) map[string]int {
	m := make(map[string]int, len(list))
	for i, x := range list {
		m[name(x)] = i
	}
	return m
}

// freezeLists returns the shared copy of a descriptor's lists, whose
// settings and actions are frozen specs already (their parts are shared;
// the lists are copied exactly to their length).
func freezeLists(l descLists) *frozenSpec {
	return freeze("lists\x00"+contentKey(l), func() *frozenSpec {
		c := descLists{signals: slices.Clip(slices.Clone(l.signals)),
			settings: slices.Clip(slices.Clone(l.settings)), actions: slices.Clip(slices.Clone(l.actions))}
		c.signalIdx = positions(c.signals, func(s mhp.Signal) string { return s.Name })
		c.settingIdx = positions(c.settings, func(s mhp.Setting) string { return s.Name })
		c.actionIdx = positions(c.actions, func(a mhp.Action) string { return a.Name })
		return &frozenSpec{lists: c}
	})
}

var frozen = struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[frozenSpec]
}{m: map[string]weak.Pointer[frozenSpec]{}}

// freeze returns the shared copy of the spec whose content key is key,
// making it with build when there is none alive.
func freeze(key string, build func() *frozenSpec) *frozenSpec {
	frozen.mu.Lock()
	defer frozen.mu.Unlock()
	if w, ok := frozen.m[key]; ok {
		if f := w.Value(); f != nil {
			return f
		}
	}
	f := build()
	frozen.m[key] = weak.Make(f)
	runtime.AddCleanup(f, forget, key)
	return f
}

// forget drops a collected copy's entry (unless a new copy took its place).
func forget(key string) {
	frozen.mu.Lock()
	defer frozen.mu.Unlock()
	if w, ok := frozen.m[key]; ok && w.Value() == nil {
		delete(frozen.m, key)
	}
}

// freezeSetting returns s with its referenced parts (limits, interlocks)
// shared with every other driver's spec of the same content, and the copy
// the driver must hold.
func freezeSetting(s mhp.Setting) (mhp.Setting, *frozenSpec) {
	f := freeze("setting\x00"+contentKey(s), func() *frozenSpec {
		c := cloneSetting(s)
		return &frozenSpec{setting: c, shape: c.Shape()}
	})
	return f.setting, f
}

// freezeAction is freezeSetting for an action spec (params, returns,
// examples, interlocks).
func freezeAction(a mhp.Action) (mhp.Action, *frozenSpec) {
	f := freeze("action\x00"+contentKey(a), func() *frozenSpec { return &frozenSpec{action: cloneAction(a)} })
	return f.action, f
}

// contentKey is a text that two values share exactly when they are deeply
// equal, dynamic types of interface values included (an int 95 and a
// float64 95 differ); map keys are taken in sorted order.
func contentKey(v any) string {
	var b strings.Builder
	writeKey(&b, reflect.ValueOf(v))
	return b.String()
}

func writeKey(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("nil;")
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil;")
			return
		}
		if v.Kind() == reflect.Interface {
			b.WriteString(v.Elem().Type().String())
		}
		b.WriteByte('(')
		writeKey(b, v.Elem())
		b.WriteByte(')')
	case reflect.Struct:
		b.WriteByte('{')
		for i := 0; i < v.NumField(); i++ {
			writeKey(b, v.Field(i))
		}
		b.WriteByte('}')
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("nil;")
			return
		}
		b.WriteString("[" + strconv.Itoa(v.Len()) + ":")
		for i := 0; i < v.Len(); i++ {
			writeKey(b, v.Index(i))
		}
		b.WriteByte(']')
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("nil;")
			return
		}
		keys := v.MapKeys()
		texts := make([]string, len(keys))
		for i, k := range keys {
			var kb strings.Builder
			writeKey(&kb, k)
			texts[i] = kb.String()
		}
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return texts[idx[i]] < texts[idx[j]] })
		b.WriteString("map[" + strconv.Itoa(len(keys)) + ":")
		for _, i := range idx {
			b.WriteString(texts[i])
			b.WriteByte('=')
			writeKey(b, v.MapIndex(keys[i]))
		}
		b.WriteByte(']')
	case reflect.String:
		b.WriteString(strconv.Quote(v.String()))
		b.WriteByte(';')
	case reflect.Bool:
		b.WriteString(strconv.FormatBool(v.Bool()) + ";")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(v.Int(), 10) + ";")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		b.WriteString(strconv.FormatUint(v.Uint(), 10) + ";")
	case reflect.Float32, reflect.Float64:
		b.WriteString(strconv.FormatUint(math.Float64bits(v.Float()), 16) + ";")
	default:
		// Funcs, channels and the like never appear in a spec; should one,
		// its identity keeps two specs apart.
		b.WriteString(v.Type().String() + "@" + strconv.FormatUint(uint64(v.Pointer()), 16) + ";")
	}
}
