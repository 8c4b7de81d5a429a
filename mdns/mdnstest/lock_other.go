//go:build !unix

package mdnstest

import (
	"context"
	"testing"
)

// lockZeroconf is a no-op where flock is not available: announcers of
// parallel test binaries may then answer each other's queries.
func lockZeroconf(testing.TB, context.Context) (unlock func()) { return func() {} }
