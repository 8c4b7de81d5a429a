package script_test

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/script"
)

// Each script tries to allocate far more than the budget, most in one step;
// each must be refused before the allocation, with an error naming the budget.
func TestMemoryBudgetRefusesBeforeAllocating(t *testing.T) {
	lab, _ := testLab(t)
	cases := []struct {
		name, src string
		budget    int64 // 0: the default (64 MiB)
	}{
		{"string repeat", `s = "x" * 1000000000`, 0},
		{"int times string", `s = 1000000000 * "x"`, 0},
		{"list repeat", `l = [0] * 1000000000`, 0},
		{"tuple repeat", `t = (0, 1) * 1000000000`, 0},
		{"string doubling", "s = 'x'\nfor i in range(40):\n    s = s + s\n", 0},
		{"augmented doubling", "s = 'x'\nfor i in range(40):\n    s += s\n", 0},
		{"list doubling in place", "l = [1]\nfor i in range(40):\n    l += l\n", 0},
		{"indexed doubling", "l = [[1]]\nfor i in range(40):\n    l[0] += l[0]\n", 0},
		{"string times-equals", "s = 'abc'\ns *= 1000000000\n", 0},
		{"join", "s = 'x' * 10000000\nj = ','.join([s] * 100)\n", 0},
		{"replace", "s = 'x' * 1000000\nr = s.replace('x', 'y' * 100)\n", 0},
		{"format", "a = ['x' * 1000] * 10\nfor i in range(20):\n    a = [a] * 10\ns = '{}'.format(a)\n", 0},
		{"percent", "a = ['x' * 1000] * 10\nfor i in range(20):\n    a = [a] * 10\ns = '%s' % (a,)\n", 0},
		{"str of a shared nest", "a = ['x' * 1000] * 10\nfor i in range(20):\n    a = [a] * 10\ns = str(a)\n", 0},
		{"print of a shared nest", "a = ['x' * 1000] * 10\nfor i in range(20):\n    a = [a] * 10\nprint(a)\n", 0},
		{"slices kept", "s = 'x' * 30000000\nkeep = []\nfor i in range(100):\n    keep.append(s[i:])\n", 0},
		{"list of a range", `l = list(range(1000000000))`, 0},
		{"sorted range", `l = sorted(range(1000000000))`, 0},
		{"zip into dict", `d = dict(zip(range(1000000000), range(1000000000)))`, 0},
		{"extend", "l = []\nl.extend(range(1000000000))\n", 0},
		{"split", "s = 'a ' * 10000000\nl = s.split()\n", 0},
		{"big int squaring", "x = 1 << 500\nfor i in range(40):\n    x = x * x\n", 0},
		{"device argument", "a = [1] * 10\nfor i in range(30):\n    a = [a] * 10\nlab['tc'].write('sp', a)\n", 0},
		{"format repeating an argument", "s = 'x' * 1000000\nf = '{0}' * 1000\nr = f.format(s)\n", 0},
		{"percent repeating a key", "s = 'x' * 1000000\nf = '%(a)s' * 1000\nr = f % {'a': s}\n", 0},
		{"method taken as a value", "s = 'x' * 10000000\nj = ','.join\nr = j([s] * 100)\n", 0},
		{"method through getattr", "s = 'x' * 10000000\nr = getattr(',', 'join')([s] * 100)\n", 0},
		{"int of a huge numeral", "s = '9' * 10000000\nx = int(s)\n", 0},
		{"list comprehension", `l = [i for i in range(100000000)]`, 1 << 20},
		{"dict comprehension", `d = {i: i for i in range(100000000)}`, 1 << 20},
		{"append loop", "l = []\nfor i in range(100000000):\n    l.append(i)\n", 1 << 20},
		{"string growth in a function", "def f():\n    s = ''\n    for i in range(100000000):\n        s += 'xxxxxxxxxx'\n    return s\nf()\n", 1 << 20},
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			// Starlark forbids reassigning a global: loops run in a function.
			src := "def main():\n    " + strings.ReplaceAll(strings.TrimSpace(c.src), "\n", "\n    ") + "\nmain()\n"
			res, err := script.Run(context.Background(), src, lab, script.Options{MaxMemory: c.budget})
			runtime.ReadMemStats(&m1)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Error, "memory budget of ") || !strings.Contains(res.Error, "per run exceeded") {
				t.Fatalf("not refused by the memory budget: error %q", res.Error)
			}
			budget := c.budget
			if budget == 0 {
				budget = 64 << 20
			}
			if res.Memory > budget {
				t.Fatalf("the run booked %d bytes over a budget of %d", res.Memory, budget)
			}
			// Refused before allocating: the process allocated at most a
			// few budgets' worth during the run (generous: the race
			// detector and the device's goroutines allocate too).
			if got := m1.TotalAlloc - m0.TotalAlloc; got > uint64(4*budget)+(64<<20) {
				t.Fatalf("the run allocated %d MiB", got>>20)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			t.Logf("%s; heap after GC %d MiB", res.Error[strings.LastIndex(res.Error, "Error"):], m1.HeapAlloc>>20)
		})
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc > before.HeapAlloc+(64<<20) {
		t.Fatalf("heap after the refused runs: %d MiB, before: %d MiB", after.HeapAlloc>>20, before.HeapAlloc>>20)
	}
}

// The rewrite that routes growth through the budget keeps Starlark's
// semantics: aliasing of +=, evaluation once of augmented targets, slices.
func TestCheckedOperationsKeepSemantics(t *testing.T) {
	lab, _ := testLab(t)
	src := `
def main():
    calls = []
    def idx(i):
        calls.append(i)
        return i
    a = [1, 2]
    b = a
    a += [3]
    print(a, len(b))
    m = [[0], [10]]
    m[idx(1)] += [11]
    print(m, calls)
    d = {"k": 1}
    d["k"] += 41
    s = "ab"
    s *= 3
    print(d, s, "%d-%s" % (7, "x"), "%s" % "y", "{}:{}".format(1, [2]))
    l = list(range(10))
    print(l[2:8:2], l[::-1][:3], l[-3:], l[8:2:-3], "hello"[1:-1], (1, 2, 3)[1:])
    print([x * 2 for x in l if x % 3 == 0], {k: v + 1 for k, v in [("a", 1)]})
    print(",".join(["a", "b"]), "a b".split(), "xyx".replace("x", "z", 1), sum([1, 2, 3]), sum(["a", "b"], ""))
    f = lambda x, y=[1] + [2]: x + y
    print(f([0]), sorted([3, 1, 2]), dict(a=1), tuple([1]) + (2,), 1 << 3 | 1, {"a": 1} | {"b": 2})
    def g(*args, **kw):
        return len(args) + len(kw)
    print(g(*[1, 2], **{"z": 3}), str(1.5), repr("q"))
    print(len(range(1000000000)[::2]), int("42"), int("ff", 16))
    j = "-".join
    print(j(["a", "b"]), getattr("x,y", "split")(","), getattr([], "nope", 7), "%(k)s=%(k)s" % {"k": 1})

main()
`
	res, err := script.Run(context.Background(), src, lab, script.Options{})
	if err != nil || res.Error != "" {
		t.Fatalf("%v %s", err, res.Error)
	}
	want := `[1, 2, 3] 3
[[0], [10, 11]] [1]
{"k": 42} ababab 7-x y 1:[2]
[2, 4, 6] [9, 8, 7] [7, 8, 9] [8, 5] ell (2, 3)
[0, 6, 12, 18] {"a": 2}
a,b ["a", "b"] zyx 6 ab
[0, 1, 2] [1, 2, 3] {"a": 1} (1, 2) 9 {"a": 1, "b": 2}
3 1.5 "q"
500000000 42 255
a-b ["x", "y"] 7 1=1
`
	if res.Output != want {
		t.Fatalf("output:\n%s\nwant:\n%s", res.Output, want)
	}
	if res.Memory == 0 {
		t.Fatal("no growth was booked")
	}
	// A script cannot reach or shadow the checks: '$' names do not lex.
	res, _ = script.Run(context.Background(), "x = $slice\n", lab, script.Options{})
	if res.Error == "" {
		t.Fatal("a script named an injected check")
	}
}
