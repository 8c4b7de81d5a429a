package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/mqtt"
)

// mosquittoAddr returns the real broker of the integration tests (host:port
// in MHP_PEER_MOSQUITTO, set by .ci/run), or skips.
func mosquittoAddr(t *testing.T) string {
	t.Helper()
	return conformance.Peer(t, "MOSQUITTO", "host:port of a running mosquitto (.ci/run installs and starts one)")
}

// clearRetained removes the retained messages a test left under prefix.
func clearRetained(t *testing.T, addr string, col *collector) {
	t.Cleanup(func() {
		c, err := mqtt.DialPaho(mqtt.DialOptions{Broker: addr, ClientID: "cleaner-" + randID(), Logger: quiet()})
		if err != nil {
			return
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if mqtt.WaitUp(ctx, c) != nil {
			return
		}
		seen := map[string]bool{}
		col.mu.Lock()
		for _, m := range col.msgs {
			seen[m.Topic] = true
		}
		col.mu.Unlock()
		for topic := range seen {
			_ = c.Publish(ctx, topic, 1, true, nil)
		}
	})
}

func TestMosquittoFleet(t *testing.T) {
	addr := mosquittoAddr(t)
	prefix := "mhp-test/" + randID()
	dev, in := device(t)
	p := runPublisher(t, dev, "mqtt://"+addr+"/"+prefix)
	conformance.EventuallyWithin(t, "announced", 5*time.Second, func() bool { return p.Status().Published >= 3 })

	// a late subscriber gets the retained card
	col := subscribe(t, "tcp://"+addr, prefix+"/#")
	clearRetained(t, "tcp://"+addr, col)
	cardTopic := prefix + "/conformance-01/card"
	conformance.EventuallyWithin(t, "retained card", 5*time.Second, func() bool { return len(col.on(cardTopic)) > 0 })
	var card struct {
		Card map[string]any `json:"card"`
	}
	if err := json.Unmarshal(col.on(cardTopic)[0].Payload, &card); err != nil || card.Card["id"] != "conformance-01" {
		t.Fatalf("card %s: %v", col.on(cardTopic)[0].Payload, err)
	}

	// the watcher shows a running job and then the estop
	out := &syncBuf{}
	view := NewView()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- WatchWith(ctx, WatchConfig{URL: "mqtt://" + addr + "/" + prefix, Every: 10 * time.Millisecond, Logger: quiet(), View: view}, out)
	}()
	defer func() { cancel(); <-done }()
	in.Script(conformance.ActionMonitor, conformance.Block)
	r, err := dev.Invoke(context.Background(), mhp.InvokeRequest{Name: conformance.ActionMonitor})
	if err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "running job in the view", 5*time.Second, func() bool {
		for _, d := range view.Devices() {
			if _, ok := d.Jobs[r.Job.ID]; ok {
				return true
			}
		}
		return false
	})
	if _, err := dev.EStop(context.Background(), "mosquitto test"); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "estop printed", 5*time.Second, func() bool {
		s := out.String()
		i := strings.LastIndex(s, "== fleet")
		return i >= 0 && strings.Contains(s[i:], `estop "mosquitto test"`)
	})
}
