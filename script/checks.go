package script

import (
	"fmt"
	"math"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions are the Starlark dialect of lab scripts (the one `mhp
// validate` parses a package's scripts/*.star with): while loops, top-level
// control flow and reassigned globals, sets; no recursion, no load.
var fileOptions = syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: false}

// execRewritten parses src, routes its growth operations through the
// memory checks (rewrite.go), then compiles and runs it.
func execRewritten(thread *starlark.Thread, filename, src string, predeclared starlark.StringDict) error {
	opts := fileOptions
	f, err := opts.Parse(filename, src, 0)
	if err != nil {
		return err
	}
	(&rewriter{}).file(f)
	prog, err := starlark.FileProgram(f, predeclared.Has)
	if err != nil {
		return err
	}
	_, err = prog.Init(thread, predeclared)
	return err
}

type builtinFn = func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)

// addChecks puts the checked operators, methods and builtins the rewrite
// calls, and the charged universe builtins, into predeclared.
func (r *runner) addChecks(predeclared starlark.StringDict) {
	for op := range checkedOps {
		predeclared[opName(op)] = starlark.NewBuiltin(op.String(), func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			x, y := args[0], args[1]
			if err := r.mem.charge(x.Type()+" "+op.String()+" "+y.Type(), binarySize(op, x, y)); err != nil {
				return nil, err
			}
			return starlark.Binary(op, x, y)
		})
		// x op= y: checked here, done by the interpreter (in place for lists).
		predeclared[augName(op)] = starlark.NewBuiltin(op.String()+"=", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			x, y := args[0], args[1]
			if err := r.mem.charge(x.Type()+" "+op.String()+"= "+y.Type(), binarySize(op, x, y)); err != nil {
				return nil, err
			}
			return y, nil
		})
	}
	predeclared[rwSlice] = starlark.NewBuiltin("slice", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return r.mem.sliceOf(args[0], args[1], args[2], args[3])
	})
	predeclared[rwElem] = starlark.NewBuiltin("comprehension", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return args[0], r.mem.charge("a list comprehension", slotBytes)
	})
	predeclared[rwEntry] = starlark.NewBuiltin("comprehension", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return args[0], r.mem.charge("a dict comprehension", entryBytes)
	})
	predeclared[rwMethod] = starlark.NewBuiltin("method", func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		recv, name := args[0], string(args[1].(starlark.String))
		fn, err := getattr(recv, name)
		if err != nil {
			return nil, err
		}
		rest := args[2:]
		if err := r.mem.charge(recv.Type()+"."+name, methodSize(recv, name, rest, kwargs)); err != nil {
			return nil, err
		}
		return starlark.Call(thread, fn, rest, kwargs)
	})
	predeclared[rwAttr] = starlark.NewBuiltin("attr", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		return r.chargedAttr(args[0], string(args[1].(starlark.String)))
	})
	// getattr(x, "join") is x.join: charged the same way.
	predeclared["getattr"] = starlark.NewBuiltin("getattr", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) >= 2 && len(kwargs) == 0 {
			if name, ok := args[1].(starlark.String); ok && growthMethods[string(name)] {
				if _, ok := args[0].(starlark.HasAttrs); ok {
					if v, err := r.chargedAttr(args[0], string(name)); err == nil || len(args) == 2 {
						return v, err
					}
				}
			}
		}
		return starlark.Call(thread, starlark.Universe["getattr"], args, kwargs)
	})
	for _, name := range append(chargedBuiltins, "print") {
		orig := starlark.Universe[name]
		if orig == nil {
			continue
		}
		predeclared[name] = starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := r.mem.charge(name+"(...)", builtinSize(name, args, kwargs)); err != nil {
				return nil, err
			}
			return starlark.Call(thread, orig, args, kwargs)
		})
	}
}

// chargedAttr is x.name for a growth method: a builtin that charges each
// call as $method does.
func (r *runner) chargedAttr(recv starlark.Value, name string) (starlark.Value, error) {
	fn, err := getattr(recv, name)
	if err != nil {
		return nil, err
	}
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := r.mem.charge(recv.Type()+"."+name, methodSize(recv, name, args, kwargs)); err != nil {
			return nil, err
		}
		return starlark.Call(thread, fn, args, kwargs)
	}), nil
}

// getattr is x.name as the interpreter resolves it.
func getattr(x starlark.Value, name string) (starlark.Value, error) {
	if h, ok := x.(starlark.HasAttrs); ok {
		v, err := h.Attr(name)
		if err != nil {
			return nil, err
		}
		if v != nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s has no .%s field or method", x.Type(), name)
}

// sum adds the numbers of an iterable (Starlark has no sum of its own),
// each addition charged like +.
func (r *runner) sum(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var it starlark.Iterable
	var start starlark.Value = starlark.MakeInt(0)
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "iterable", &it, "start?", &start); err != nil {
		return nil, err
	}
	iter := it.Iterate()
	defer iter.Done()
	acc := start
	var x starlark.Value
	for iter.Next(&x) {
		if err := r.mem.charge("sum", binarySize(syntax.PLUS, acc, x)); err != nil {
			return nil, err
		}
		v, err := starlark.Binary(syntax.PLUS, acc, x)
		if err != nil {
			return nil, fmt.Errorf("sum: %w", err)
		}
		acc = v
	}
	return acc, nil
}

// seconds converts a script's or a caller's number of seconds to a
// duration, refusing what is not finite, not positive, or above max (so a
// huge value never overflows into a negative or default duration).
func seconds(what string, secs float64, max time.Duration) (time.Duration, error) {
	switch {
	case math.IsNaN(secs) || math.IsInf(secs, 0):
		return 0, fmt.Errorf("%s %v is not a finite number of seconds", what, secs)
	case secs <= 0:
		return 0, fmt.Errorf("%s %g s must be above 0", what, secs)
	case secs > max.Seconds():
		return 0, fmt.Errorf("%s %g s is above the maximum of %g s", what, secs, max.Seconds())
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// maxLeaseTTL bounds a script's acquire(ttl).
const maxLeaseTTL = 24 * time.Hour
