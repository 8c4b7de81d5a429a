package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/openmhp/mhp-go"
)

// NewCommandID returns a fresh command id ("cmd_" + 16 random hex digits):
// one per intent, reused only to resend that same intent.
func NewCommandID() string {
	var b [8]byte
	rand.Read(b[:])
	return "cmd_" + hex.EncodeToString(b[:])
}

// commandIDs reports whether the client gives writes and invokes command ids.
func (d *Device) commandIDs() bool { return !d.opts.Plain && d.Info().Capabilities.CommandIDs }

// sentWithoutAnswer reports whether err says the request may have reached the
// server but no answer came back (a dropped connection, a timeout).
func sentWithoutAnswer(err error) bool {
	e, ok := mhp.AsError(err)
	return ok && e.Data != nil && e.Data[mhp.DataReason] == ReasonTransport && e.Data["sent"] == true
}

// retrySent calls send, and while it fails without an answer resends it with
// the same command id, a bounded number of times, only to a server that
// honours command ids: there the resend replays the first answer instead of
// acting twice.
func retrySent[T any](ctx context.Context, d *Device, commandID string, send func() (T, error)) (T, error) {
	res, err := send()
	retries := d.opts.CommandRetries
	if retries == 0 {
		retries = 2
	}
	backoff := 50 * time.Millisecond
	for i := 0; i < retries && commandID != "" && sentWithoutAnswer(err) && d.commandIDs(); i++ {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-t.C:
		}
		backoff *= 4
		d.log.Info("mhp resending with the same command id after a transport failure", "command_id", commandID, "err", err)
		res, err = send()
	}
	return res, err
}
