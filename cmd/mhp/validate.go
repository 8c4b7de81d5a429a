package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
)

// validateCmd runs `mhp validate DIR`: the package's field rules, then, when
// its driver can be built here (sim:…), the merge over the bindings (every
// item bound, limits only narrowed, approval only stricter).
func (a *app) validateCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{})
	if err != nil {
		return a.usageError("validate: %v", err)
	}
	if len(p.args) != 1 {
		return a.usageError("validate: usage: mhp validate DIR | FILE.yaml")
	}
	if fi, err := os.Stat(p.args[0]); err == nil && !fi.IsDir() {
		return a.validateConfigFile(p) // an adapter config (validateconfig.go)
	}
	probs, merged := validatePackage(p.args[0])
	if p.has("json") {
		if probs == nil {
			probs = []devicepkg.Problem{}
		}
		if code := a.printJSON(map[string]any{"valid": len(probs) == 0, "merged": merged, "problems": probs}); code != exitOK {
			return code
		}
	} else {
		for _, pr := range probs {
			fmt.Fprintln(a.stdout, pr.String())
		}
		switch {
		case len(probs) > 0:
			fmt.Fprintf(a.stdout, "%d problem(s) in %s\n", len(probs), p.args[0])
		case merged:
			fmt.Fprintf(a.stdout, "ok: %s is valid and merges over its driver's bindings\n", p.args[0])
		default:
			fmt.Fprintf(a.stdout, "ok: %s is valid (its driver is not built here, so the merge was not checked)\n", p.args[0])
		}
	}
	if len(probs) > 0 {
		return exitRefused
	}
	return exitOK
}

// validatePackage returns every problem of the package and whether the merge
// over its bindings was checked.
func validatePackage(dir string) ([]devicepkg.Problem, bool) {
	probs := devicepkg.Validate(dir)
	if len(probs) > 0 {
		return probs, false
	}
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		return []devicepkg.Problem{{File: dir, Message: err.Error()}}, false
	}
	defer pkg.Close()
	if !sim.IsDriver(pkg.Card.Driver) {
		return nil, false
	}
	cfg, err := sim.Config(pkg.Card.Driver, sim.Options{})
	if err != nil {
		return []devicepkg.Problem{{File: devicepkg.CardFile, Field: "driver", Message: err.Error()}}, false
	}
	if err := pkg.Apply(&cfg); err != nil {
		var ps devicepkg.Problems
		if errors.As(err, &ps) {
			return ps, true
		}
		return []devicepkg.Problem{{File: dir, Message: err.Error()}}, true
	}
	return nil, true
}
