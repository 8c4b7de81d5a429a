package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go/conformance/wire"
)

// conformanceCmd runs `mhp conformance TARGET`: the wire checks of package
// conformance/wire (each citing the spec sentence it enforces; MUST
// violations fail, SHOULD violations warn). Exit 1 when a MUST failed.
// --actuate adds the estop checks, which stop the device and reset it.
func (a *app) conformanceCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{"actuate": false})
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	if len(p.args) != 1 || !isTarget(p.args[0]) {
		return a.usageError("conformance: usage: mhp conformance http://HOST:PORT | stdio:COMMAND [--actuate]")
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	timeout, err := timeoutOf(p, 10*time.Second)
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	hc, err := a.tlsHTTPClient(p)
	if err != nil {
		return a.usageError("conformance: %v", err)
	}
	rep, err := wire.Run(ctx, p.args[0], wire.Options{Token: token, Timeout: timeout, Stderr: a.stderr, HTTPClient: hc,
		Actuate: p.has("actuate")})
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: conformance: %v\n", err)
		return exitNoPeer
	}
	if p.has("json") {
		if code := a.printJSON(rep); code != exitOK {
			return code
		}
	} else {
		for _, r := range rep.Results {
			fmt.Fprintln(a.stdout, r.String())
		}
		fmt.Fprintf(a.stdout, "\n%d passed, %d failed, %d warned, %d skipped\n", rep.Passed, rep.Failed, rep.Warned, rep.Skipped)
	}
	if !rep.OK() {
		return exitRefused
	}
	return exitOK
}
