package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/openmhp/mhp-go/mqtt/fleet"
)

// watchCmd runs `mhp watch mqtt://BROKER:1883/PREFIX`: a live table of the
// devices that `mhp serve --publish` publishes there, until Ctrl-C.
func (a *app) watchCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{})
	if err != nil {
		return a.usageError("watch: %v", err)
	}
	if len(p.args) != 1 {
		return a.usageError("watch: usage: mhp watch mqtt://BROKER:1883[/PREFIX]")
	}
	if _, err := fleet.ParseURL(p.args[0]); err != nil {
		return a.usageError("watch: %v", err)
	}
	ctls, err := a.clientTLS(p)
	if err != nil {
		return a.usageError("watch: %v", err)
	}
	if err := fleet.WatchWith(ctx, fleet.WatchConfig{URL: p.args[0], TLS: ctls}, a.stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(a.stderr, "mhp watch: %v\n", err)
		return exitNoPeer
	}
	return exitOK
}
