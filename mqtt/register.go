package mqtt

import (
	"context"
	"fmt"
	"os"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Kind is the config-file kind of this adapter (`adapter: mqtt`).
const Kind = "mqtt"

// Register adds the "mqtt" kind to r.
func Register(r *adapters.Registry) error { return r.Register(Kind, Open) }

// Open is the adapters.Factory of the "mqtt" kind: it decodes the config
// strictly, dials the broker in the background (paho, reconnecting with
// link.retry_min jittered, then up to link.retry_max) and builds the driver.
// The driver's Start waits up to connect_timeout for the connection; without
// it, it starts anyway and reports the backend down (link.fail_fast: it
// fails instead).
func Open(ctx context.Context, src adapters.Source) (*binding.Driver, error) {
	var cfg Config
	if err := src.Decode(&cfg); err != nil {
		return nil, err
	}
	if cfg.Adapter != Kind {
		return nil, fmt.Errorf("%s: adapter is %q, not %q", src.Path, cfg.Adapter, Kind)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	cfg = cfg.withDefaults()
	pw := cfg.Password
	if cfg.PasswordEnv != "" {
		v, ok := os.LookupEnv(cfg.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("%s: password_env %s is not set", src.Path, cfg.PasswordEnv)
		}
		pw = v
	}
	link := cfg.Link.Defaults()
	client, err := DialPaho(DialOptions{Broker: cfg.Broker, ClientID: cfg.ClientID, Username: cfg.Username,
		Password: pw, ConnectTimeout: cfg.ConnectTimeout, RetryInterval: link.RetryMin, MaxReconnectInterval: link.RetryMax})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	d, err := NewDriver(cfg, client, binding.Config{})
	if err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("%s: %w", src.Path, err)
	}
	return d, nil
}
