package main

import (
	"fmt"

	"github.com/openmhp/mhp-go/adapters"
)

// validateConfigFile runs `mhp validate FILE.yaml` on an adapter config:
// its kind's Load (strict keys, Validate; no I/O), then the warnings of
// what the integrator has still to decide (the TODOs `mhp init` wrote, a
// writable number without limits, no estop, no watchdog). Warnings do not
// fail the check.
func (a *app) validateConfigFile(p parsed) int {
	path := p.args[0]
	reg, err := newRegistry()
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp validate: %v\n", err)
		return exitUsage
	}
	src, err := adapters.ReadSource(path)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp validate: %v\n", err)
		return exitUsage
	}
	kind, warnings, err := reg.Check(src)
	if p.has("json") {
		problems := []string{}
		if err != nil {
			problems = append(problems, err.Error())
		}
		if warnings == nil {
			warnings = []string{}
		}
		if code := a.printJSON(map[string]any{"valid": err == nil, "adapter": kind, "problems": problems, "warnings": warnings}); code != exitOK {
			return code
		}
	} else {
		if err != nil {
			fmt.Fprintln(a.stdout, err)
		}
		for _, w := range warnings {
			fmt.Fprintf(a.stdout, "warning: %s\n", w)
		}
		if err == nil {
			fmt.Fprintf(a.stdout, "ok: %s is a valid %s config (%d warning(s); the backend was not contacted)\n", path, kind, len(warnings))
		}
	}
	if err != nil {
		return exitRefused
	}
	return exitOK
}
