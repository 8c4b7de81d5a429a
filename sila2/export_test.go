package sila2

import (
	"context"
	"log/slog"
	"time"
)

// LeaseHookForTest is the lease-mode binding.Config.Lease hook of an
// adapter over client, for driving the hook directly (in any order).
func LeaseHookForTest(cfg *Config, client *Client, timeout time.Duration) func(ctx context.Context, holder string, acquire bool) error {
	a := newAdapter(cfg, client, false, slog.Default())
	a.client = client
	a.lockMode, a.lockTimeout = LockLease, timeout
	return a.leaseHook
}
