package mcpbridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go/client"
)

// ReasonLinkDropped is data.reason of a wait ended because the device's link
// dropped (it stopped answering ping), rather than waiting out wait_s.
const ReasonLinkDropped = "link_dropped"

var errLinkDropped = errors.New("the device stopped answering")

// Link watch of a waited job: a ping every linkPoll; linkFailures pings in
// a row without an answer end the wait.
const (
	linkPoll     = time.Second
	linkFailures = 3
)

// watchLink pings d until ctx ends and cancels it with errLinkDropped once
// the device stops answering (a ping's answer, refused or not, is life).
func watchLink(ctx context.Context, d *client.Device, dropped context.CancelCauseFunc) {
	t := time.NewTicker(linkPoll)
	defer t.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, linkPoll*2)
		_, err := d.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil || !client.IsTransportError(err) {
			failed = 0
			continue
		}
		if failed++; failed >= linkFailures {
			dropped(fmt.Errorf("%w: %d pings in a row got no answer (last: %v)", errLinkDropped, failed, err))
			return
		}
	}
}
