package console_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/directory"
)

// wirePool reaches the devices over the wire, as serve-directory does.
type wirePool struct {
	mu    sync.Mutex
	conns map[string]*client.Device
}

func (p *wirePool) get(ctx context.Context, target string) (*client.Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.conns[target]; ok {
		return d, nil
	}
	d, err := client.Dial(ctx, target, client.Options{ClientName: "lab-test"})
	if err != nil {
		return nil, err
	}
	p.conns[target] = d
	return d, nil
}

func (p *wirePool) Ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	d, err := p.get(ctx, target)
	if err != nil {
		return "", err
	}
	r, err := d.Ping(ctx)
	if err != nil {
		return "", err
	}
	return r.State, nil
}

func labServer(t *testing.T, devices map[string]mhp.Device, token string) *httptest.Server {
	t.Helper()
	idx := directory.NewIndex(nil)
	for target, d := range devices {
		desc, err := d.Describe(context.Background(), mhp.DescribeRequest{Detail: mhp.DetailCard})
		if err != nil {
			t.Fatal(err)
		}
		idx.Add(directory.CardFrom(desc, target))
	}
	pool := &wirePool{conns: map[string]*client.Device{}}
	t.Cleanup(func() {
		for _, d := range pool.conns {
			d.Close()
		}
	})
	dir, err := directory.New(directory.Config{Index: idx, Pinger: pool})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.Lab(console.LabConfig{
		Directory: dir.Handler(),
		EStopAll: func(ctx context.Context, reason string) []console.EStopAnswer {
			var out []console.EStopAnswer
			for _, s := range idx.Rank("", directory.Filter{}, 0) {
				start := time.Now()
				a := console.EStopAnswer{Target: s.Card.Target, ID: s.Card.ID}
				d, err := pool.get(ctx, s.Card.Target)
				if err == nil {
					var r *mhp.EStopResult
					if r, err = d.EStop(ctx, reason); err == nil {
						a.State, a.Stopped = string(r.State), r.Stopped
					}
				}
				if err != nil {
					a.Error = err.Error()
				}
				a.Seconds = time.Since(start).Seconds()
				out = append(out, a)
			}
			return out
		},
		Guard: tokenGuard(t, token),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return hs
}
