// Package mqtttest is the test toolkit of package mqtt: an embedded MQTT
// broker on loopback ([Broker], mochi-mqtt) and a fake MQTT
// device backed by a [conformance.Instrument] ([Device]), with the adapter
// config that maps the conformance fixture onto the device's topics
// ([FixtureConfig]). The mqtt package's own tests, its conformance run and
// its Example use them; so can a program's tests:
//
//	b, err := mqtttest.NewBroker("127.0.0.1:0")
//	defer b.Close()
//	in := conformance.NewInstrument()
//	dev, err := mqtttest.NewDevice(ctx, mqtttest.DeviceConfig{Broker: b.Addr(), Prefix: "lab/x", ClientID: "dev", Instrument: in})
//	defer dev.Close()
//	drv, err := mqtt.New(ctx, mqtttest.FixtureConfig("lab/x", b.Addr(), "adapter"), mqtt.Options{})
package mqtttest

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/openmhp/mhp-go/mqtt"
)

// Broker is an embedded mochi-mqtt broker on a loopback port. It lets
// every client in, except those the test banned ([Broker.Ban]).
type Broker struct {
	srv  *mochi.Server
	addr string // tcp://127.0.0.1:port
	gate *gateHook

	once  sync.Once // Close
	mu    sync.Mutex
	subID int // inline subscription ids
}

// gateHook allows every client and topic, except clients the test banned.
type gateHook struct {
	mochi.HookBase
	mu     sync.Mutex
	banned map[string]bool
}

func (h *gateHook) ID() string { return "mqtttest-gate" }

func (h *gateHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (h *gateHook) OnConnectAuthenticate(cl *mochi.Client, _ packets.Packet) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.banned[cl.ID]
}

func (h *gateHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// NewBroker starts a broker listening on addr (host:port): "127.0.0.1:0"
// for a random port, or a fixed one for a broker coming up, or back, where
// an adapter expects it. Close stops it.
func NewBroker(addr string) (*Broker, error) {
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: quiet()})
	gate := &gateHook{banned: map[string]bool{}}
	if err := srv.AddHook(gate, nil); err != nil {
		return nil, fmt.Errorf("mqtttest: broker hook: %w", err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t1", Address: addr})
	if err := srv.AddListener(l); err != nil {
		return nil, fmt.Errorf("mqtttest: broker listener %s: %w", addr, err)
	}
	go func() { _ = srv.Serve() }()
	return &Broker{srv: srv, addr: "tcp://" + l.Address(), gate: gate}, nil
}

// Close stops the broker (bounded: at most about 8s).
func (b *Broker) Close() { b.once.Do(func() { closeBroker(b.srv) }) }

// Addr is the broker's address for [mqtt.DialOptions.Broker] and
// [mqtt.Config.Broker]: tcp://127.0.0.1:port.
func (b *Broker) Addr() string { return b.addr }

// closeBroker closes a mochi broker without hanging the test. mochi v2.7.9
// takes its client-table read lock recursively while closing
// (Clients.GetByListener -> Len), so a client leaving at that moment
// deadlocks Close: wait (bounded) until only the inline client is left, and
// bound Close itself.
func closeBroker(srv *mochi.Server) {
	deadline := time.Now().Add(3 * time.Second)
	for srv.Clients.Len() > 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling the broker's client table
	}
	done := make(chan struct{})
	go func() { _ = srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}

// Ban refuses (banned) or again allows a client id's connections.
func (b *Broker) Ban(clientID string, banned bool) {
	b.gate.mu.Lock()
	defer b.gate.mu.Unlock()
	b.gate.banned[clientID] = banned
}

// Kick drops a client's connection from the broker side, abruptly (the
// broker publishes its will); false when the client is not connected.
func (b *Broker) Kick(clientID string) bool {
	cl, ok := b.srv.Clients.Get(clientID)
	if !ok {
		return false
	}
	cl.Stop(errors.New("kicked by the test"))
	return true
}

// Drop cuts a client's connection and lets it back only once the broker
// has forgotten the old session (mochi cleans a kicked clean session
// asynchronously; a reconnect racing that cleanup can lose its fresh
// subscriptions, which no real broker does). False when the client is not
// connected, or when the broker did not forget it within 5s.
func (b *Broker) Drop(clientID string) bool {
	b.Ban(clientID, true)
	defer b.Ban(clientID, false)
	if !b.Kick(clientID) {
		return false
	}
	return b.Gone(clientID)
}

// Gone waits, at most 5s, until the broker has forgotten a client, and
// reports whether it has: a test that goes on after false races the
// broker's cleanup of the old session.
func (b *Broker) Gone(clientID string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := b.srv.Clients.Get(clientID); !ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond) // polling the broker's client table
	}
}

// Retained counts the messages the broker retains on topic.
func (b *Broker) Retained(topic string) int { return len(b.srv.Topics.Messages(topic)) }

// Subscribers counts the subscriptions (clients and inline) matching topic.
func (b *Broker) Subscribers(topic string) int {
	s := b.srv.Topics.Subscribers(topic)
	return len(s.Subscriptions) + len(s.InlineSubscriptions)
}

// Publish publishes from the broker's own inline client.
func (b *Broker) Publish(topic string, payload []byte, retain bool, qos byte) error {
	return b.srv.Publish(topic, payload, retain, qos)
}

// Subscribe calls fn, on the broker's goroutine, for every message on
// filter (fn must not block).
func (b *Broker) Subscribe(filter string, fn func(mqtt.Message)) error {
	b.mu.Lock()
	b.subID++
	id := b.subID
	b.mu.Unlock()
	return b.srv.Subscribe(filter, id, func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) {
		fn(mqtt.Message{Topic: pk.TopicName, Payload: pk.Payload, Retained: pk.FixedHeader.Retain})
	})
}
