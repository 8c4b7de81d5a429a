package auth

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Reloader is what [ReloadOnHangup] re-reads: a [ServerTLS] or an
// [Authenticator].
type Reloader interface{ Reload() error }

// ReloadOnHangup re-reads each of rs on every SIGHUP until ctx ends (they
// also re-read their files when those change). Nil entries are skipped; a
// failed reload is logged and the configuration before it stays.
func ReloadOnHangup(ctx context.Context, log *slog.Logger, rs ...Reloader) {
	var live []Reloader
	for _, r := range rs {
		if r != nil && !isNil(r) {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				log.Info("SIGHUP: reloading the certificate and credentials")
				for _, r := range live {
					if err := r.Reload(); err != nil {
						log.Error("reload failed: the configuration before stays", "err", err)
					}
				}
			}
		}
	}()
}

func isNil(r Reloader) bool {
	switch v := r.(type) {
	case *ServerTLS:
		return v == nil
	case *Authenticator:
		return v == nil
	}
	return false
}
