package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go/sila2"
)

// silaCmd runs `mhp sila discover [--timeout D]`: SiLA 2 servers announced
// by mDNS (_sila._tcp) on the local network, ready for a config file.
func (a *app) silaCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{})
	if err != nil {
		return a.usageError("sila: %v", err)
	}
	if len(p.args) != 1 || p.args[0] != "discover" {
		return a.usageError("sila: usage: mhp sila discover [--timeout D] [--json]")
	}
	timeout, err := timeoutOf(p, 3*time.Second)
	if err != nil {
		return a.usageError("sila: %v", err)
	}
	found, err := sila2.Discover(ctx, timeout)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp sila discover: %v\n", err)
		return exitNoPeer
	}
	if p.has("json") {
		return a.printJSON(found)
	}
	if len(found) == 0 {
		fmt.Fprintf(a.stdout, "no SiLA 2 server answered within %s\n", timeout)
		return exitOK
	}
	for _, s := range found {
		tls := "announces no CA (pin its certificate or give a CA)"
		if s.CAPEM != "" {
			tls = "announces its CA"
		}
		fmt.Fprintf(a.stdout, "%s  %s  %s  %s\n    endpoint: %s   (%s)\n", s.UUID, s.Name, s.Version, s.Description, s.Endpoint, tls)
	}
	return exitOK
}
