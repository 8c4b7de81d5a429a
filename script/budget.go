package script

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The memory budget of a run counts the bytes its growth operations
// allocate (string, list, tuple, dict and big-int growth, formatting,
// conversions), cumulatively, and refuses an operation BEFORE it allocates
// when it would pass the budget. The rewrite (rewrite.go) routes every
// operator and method that can grow a value through the checks below;
// allocations of a few bytes per step (an int, a call frame) are bounded by
// the step budget instead.

// Estimated sizes, in bytes, of what the Starlark runtime allocates.
const (
	slotBytes  = 16 // one element of a list or tuple (an interface value)
	entryBytes = 64 // one dict or set entry (hash table slot, key, value)
	strBytes   = 16 // a string header, for each piece of a split
	maxVisits  = 1 << 22
)

// huge stands for an estimate beyond any budget.
const huge = math.MaxInt64 / 4

type memBudget struct {
	max  int64
	used int64
}

// MemoryError is the error of an operation refused by the memory budget.
type MemoryError struct {
	Op        string // what would have allocated: "str * int", "join", "list(...)"
	Want      int64  // bytes it would allocate (an estimate; huge when unbounded)
	Used, Max int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("memory budget of %s per run exceeded: %s would allocate %s (already used %s); "+
		"the budget is Options.MaxMemory", bytesText(e.Max), e.Op, bytesText(e.Want), bytesText(e.Used))
}

func bytesText(n int64) string {
	switch {
	case n >= huge:
		return "more than any budget"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// charge books n bytes for op, or refuses without booking.
func (m *memBudget) charge(op string, n int64) error {
	if n <= 0 {
		return nil
	}
	if n > m.max-m.used {
		return &MemoryError{Op: op, Want: n, Used: m.used, Max: m.max}
	}
	m.used += n
	return nil
}

// mul multiplies two non-negative estimates, saturating at huge.
func mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > huge/b {
		return huge
	}
	return a * b
}

func add(a, b int64) int64 {
	if a >= huge-b {
		return huge
	}
	return a + b
}

// count is an Int as a repeat count: negative counts repeat nothing.
func count(x starlark.Int) int64 {
	if v, ok := x.Int64(); ok {
		return max(v, 0)
	}
	if x.Sign() < 0 {
		return 0
	}
	return huge
}

// MaxIntBits bounds the integers a script computes: multiplying big
// integers costs time more than linear in their size, so a product or sum
// above this many bits is refused like an allocation beyond the budget.
const MaxIntBits = 1 << 16

func intBits(x starlark.Int) int64 {
	if v, ok := x.Int64(); ok {
		if v < 0 {
			v = -v
		}
		return int64(64 - bitsLeadingZeros(uint64(v)))
	}
	return int64(x.BigInt().BitLen())
}

// intResult is the charge of an integer result of at most bits bits: none
// for a machine word, its bytes above, and huge beyond MaxIntBits.
func intResult(bits int64) int64 {
	switch {
	case bits <= 64:
		return 0
	case bits > MaxIntBits:
		return huge
	}
	return bits/8 + 8
}

func intBytes(x starlark.Int) int64 { return intResult(intBits(x)) }

// length is the element count of a sized value, or -1.
func length(v starlark.Value) int64 {
	if s, ok := v.(starlark.Sequence); ok {
		return int64(s.Len())
	}
	if s, ok := v.(interface{ Len() int }); ok {
		return int64(s.Len())
	}
	return -1
}

// binarySize estimates the bytes `x op y` allocates.
func binarySize(op syntax.Token, x, y starlark.Value) int64 {
	switch op {
	case syntax.PLUS:
		switch x := x.(type) {
		case starlark.String:
			if y, ok := y.(starlark.String); ok {
				return int64(len(x) + len(y))
			}
		case starlark.Bytes:
			if y, ok := y.(starlark.Bytes); ok {
				return int64(len(x) + len(y))
			}
		case *starlark.List, starlark.Tuple:
			if n := length(y); n >= 0 {
				return mul(slotBytes, length(x)+n)
			}
		case starlark.Int:
			if y, ok := y.(starlark.Int); ok {
				return intResult(max(intBits(x), intBits(y)) + 1)
			}
		}
	case syntax.STAR:
		if a, ok := x.(starlark.Int); ok {
			if b, ok := y.(starlark.Int); ok {
				return intResult(intBits(a) + intBits(b))
			}
		}
		if n, ok := y.(starlark.Int); ok {
			return repeatSize(x, count(n))
		}
		if n, ok := x.(starlark.Int); ok {
			return repeatSize(y, count(n))
		}
	case syntax.PERCENT:
		if s, ok := x.(starlark.String); ok {
			if t, ok := y.(starlark.Tuple); ok {
				return add(int64(len(s)), argsReprSize(t, nil))
			}
			// A mapping's values may be named many times ("%(a)s%(a)s").
			return add(int64(len(s)), mul(int64(strings.Count(string(s), "%")), strSize(y)))
		}
	case syntax.PIPE:
		if _, ok := x.(*starlark.Dict); ok {
			return mul(entryBytes, max(length(x), 0)+max(length(y), 0))
		}
		if _, ok := x.(*starlark.Set); ok {
			return mul(entryBytes, max(length(x), 0)+max(length(y), 0))
		}
	}
	return 0
}

func repeatSize(x starlark.Value, n int64) int64 {
	switch x := x.(type) {
	case starlark.String:
		return mul(int64(len(x)), n)
	case starlark.Bytes:
		return mul(int64(len(x)), n)
	case *starlark.List, starlark.Tuple:
		return mul(mul(slotBytes, length(x)), n)
	}
	return 0
}

// reprSize estimates the length of str(v) or repr(v), stopping once it
// passes limit (nested values can share elements, so the printed form can
// be exponentially larger than the value).
func reprSize(v starlark.Value, limit int64) int64 {
	visits := 0
	var walk func(v starlark.Value, depth int) int64
	walk = func(v starlark.Value, depth int) int64 {
		visits++
		if visits > maxVisits {
			return huge
		}
		if depth > 64 { // Starlark prints a cycle as "..."
			return 5
		}
		switch v := v.(type) {
		case starlark.String:
			return int64(len(v))*2 + 2 // escapes at most double it
		case starlark.Bytes:
			return int64(len(v))*4 + 3
		case starlark.Int:
			return intBytes(v)*3 + 24
		case *starlark.List, starlark.Tuple, *starlark.Set:
			total := int64(2)
			iter := starlark.Iterate(v)
			defer iter.Done()
			var e starlark.Value
			for iter.Next(&e) {
				total = add(total, walk(e, depth+1)+2)
				if total > limit {
					return huge
				}
			}
			return total
		case *starlark.Dict:
			total := int64(2)
			for _, kv := range v.Items() {
				total = add(total, add(walk(kv[0], depth+1), walk(kv[1], depth+1))+4)
				if total > limit {
					return huge
				}
			}
			return total
		}
		return 64
	}
	return walk(v, 0)
}

// strSize estimates str(v): a string is itself, anything else its repr.
func strSize(v starlark.Value) int64 {
	if s, ok := v.(starlark.String); ok {
		return int64(len(s))
	}
	return reprSize(v, huge)
}

// argsReprSize is strSize over call arguments.
func argsReprSize(args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	total := int64(0)
	for _, a := range args {
		total = add(total, strSize(a))
	}
	for _, kv := range kwargs {
		total = add(total, strSize(kv[1]))
	}
	return total
}

// methodSize estimates the bytes recv.name(args) allocates.
func methodSize(recv starlark.Value, name string, args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	arg := func(i int) starlark.Value {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch recv := recv.(type) {
	case *starlark.List:
		switch name {
		case "append", "insert":
			return slotBytes
		case "extend":
			if n := length(arg(0)); n >= 0 {
				return mul(slotBytes, n)
			}
		}
	case *starlark.Dict:
		switch name {
		case "update":
			total := int64(len(kwargs)) * entryBytes
			if n := length(arg(0)); n > 0 {
				total = add(total, mul(entryBytes, n))
			}
			return total
		case "setdefault":
			return entryBytes
		case "items":
			return mul(slotBytes*4, int64(recv.Len()))
		case "keys", "values":
			return mul(slotBytes, int64(recv.Len()))
		}
	case *starlark.Set:
		switch name {
		case "add":
			return entryBytes
		case "union", "update", "difference", "intersection", "symmetric_difference":
			total := int64(recv.Len())
			for _, a := range args {
				total += max(length(a), 0)
			}
			return mul(entryBytes, total)
		}
	case starlark.String:
		s := string(recv)
		switch name {
		case "join":
			return joinSize(s, arg(0))
		case "replace":
			old, _ := starlark.AsString(arg(0))
			repl, _ := starlark.AsString(arg(1))
			n := int64(strings.Count(s, old))
			if c, ok := arg(2).(starlark.Int); ok {
				n = min(n, count(c))
			}
			return add(int64(len(s)), mul(n, int64(len(repl))))
		case "format":
			// Each {} may repeat an argument ("{0}{0}{0}"): bound by the largest.
			largest := int64(0)
			for _, a := range args {
				largest = max(largest, strSize(a))
			}
			for _, kv := range kwargs {
				largest = max(largest, strSize(kv[1]))
			}
			return add(int64(len(s)), mul(int64(strings.Count(s, "{")), largest))
		case "upper", "lower", "title", "capitalize", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix",
			"partition", "rpartition":
			return int64(len(s)) + 3*strBytes
		case "split", "rsplit", "splitlines":
			pieces := int64(1)
			if sep, ok := starlark.AsString(arg(0)); ok && name != "splitlines" && sep != "" {
				pieces += int64(strings.Count(s, sep))
			} else {
				pieces += int64(strings.Count(s, "\n"))
				if name != "splitlines" {
					pieces = fields(s) + 1
				}
			}
			return add(int64(len(s)), mul(pieces, slotBytes+strBytes))
		}
	}
	return 0
}

// fields counts the runs of non-space bytes of s (an upper bound of the
// words of a whitespace split) without allocating.
func fields(s string) int64 {
	n, in := int64(0), false
	for i := 0; i < len(s); i++ {
		space := s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\v' || s[i] == '\f'
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}

func joinSize(sep string, it starlark.Value) int64 {
	iterable, ok := it.(starlark.Iterable)
	if !ok {
		return 0
	}
	iter := iterable.Iterate()
	defer iter.Done()
	total, n := int64(0), int64(0)
	var e starlark.Value
	for iter.Next(&e) {
		if s, ok := e.(starlark.String); ok {
			total = add(total, int64(len(s)))
		}
		n++
		if n > maxVisits {
			return huge
		}
	}
	return add(total, mul(int64(len(sep)), n))
}

// builtinSize estimates what a call of a wrapped universe builtin allocates.
func builtinSize(name string, args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	first := int64(0)
	if len(args) > 0 {
		first = max(length(args[0]), 0)
	}
	switch name {
	case "list", "tuple", "sorted", "reversed":
		return mul(slotBytes, first)
	case "enumerate":
		return mul(slotBytes*4, first)
	case "dict", "set":
		return add(mul(entryBytes, first), int64(len(kwargs))*entryBytes)
	case "zip":
		n := int64(-1)
		for _, a := range args {
			l := length(a)
			if l < 0 {
				l = 0
			}
			if n < 0 || l < n {
				n = l
			}
		}
		return mul(slotBytes*int64(len(args)+2), max(n, 0))
	case "str", "repr", "print", "fail":
		return argsReprSize(args, kwargs)
	case "int":
		// Parsing decimal digits costs time more than linear in their count.
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok && int64(len(s)) > MaxIntBits/3 {
				return huge
			}
		}
	case "bytes":
		if len(args) > 0 {
			if s, ok := args[0].(starlark.String); ok {
				return int64(len(s))
			}
			return first
		}
	}
	return 0
}

// chargedBuiltins are the universe builtins a run sees through the budget.
var chargedBuiltins = []string{"int", "list", "tuple", "sorted", "reversed", "enumerate", "dict", "set", "zip", "str", "repr", "fail", "bytes"}

// sliceOf is x[lo:hi:step] with Starlark's semantics, charged before the
// copy is made.
func (m *memBudget) sliceOf(x, lo, hi, step starlark.Value) (starlark.Value, error) {
	sl, ok := x.(starlark.Sliceable)
	if !ok {
		return nil, fmt.Errorf("invalid slice operand %s", x.Type())
	}
	n := sl.Len()
	st := 1
	if step != starlark.None {
		var err error
		if st, err = starlark.AsInt32(step); err != nil {
			return nil, fmt.Errorf("invalid slice step: %s", err)
		}
		if st == 0 {
			return nil, fmt.Errorf("zero is not a valid slice step")
		}
	}
	index := func(v starlark.Value, def int, what string) (int, error) {
		if v == starlark.None {
			return def, nil
		}
		i, err := starlark.AsInt32(v)
		if err != nil {
			return 0, fmt.Errorf("invalid %s index: %s", what, err)
		}
		if i < 0 {
			i += n
		}
		return i, nil
	}
	start, err := index(lo, 0, "start")
	if err != nil {
		return nil, err
	}
	var end int
	if st > 0 {
		if end, err = index(hi, n, "end"); err != nil {
			return nil, err
		}
		start, end = min(max(start, 0), n), min(max(end, 0), n)
		end = max(end, start)
	} else {
		if start, err = index(lo, n-1, "start"); err != nil {
			return nil, err
		}
		if end, err = index(hi, -1, "end"); err != nil {
			return nil, err
		}
		start, end = min(start, n-1), max(end, -1)
		start = max(start, end)
	}
	elems := int64(end-start) / int64(st)
	if elems < 0 {
		elems = -elems
	}
	size := int64(0) // a range's slice is another range
	switch x.(type) {
	case starlark.String, starlark.Bytes:
		size = elems + 1
	case *starlark.List, starlark.Tuple:
		size = mul(elems+1, slotBytes)
	}
	if err := m.charge("slice", size); err != nil {
		return nil, err
	}
	return sl.Slice(start, end, st), nil
}

func bitsLeadingZeros(v uint64) int { return bits.LeadingZeros64(v) }
