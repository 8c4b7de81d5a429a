package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/openmhp/mhp-go/conformance"
)

// `mhp serve --publish` puts the device's retained card on the broker, and
// `mhp watch` shows it.
func TestServePublishesToTheFleetBroker(t *testing.T) {
	broker := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := broker.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	l := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := broker.AddListener(l); err != nil {
		t.Fatal(err)
	}
	go func() { _ = broker.Serve() }()
	defer func() {
		done := make(chan struct{})
		go func() { _ = broker.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second): // mochi v2.7.9 can hang in Close; never the test
		}
	}()
	url := "mqtt://" + l.Address() + "/lab"
	serveAsync(t, "serve", "sim:thermocycler", "--http", "127.0.0.1:0", "--publish", url)

	// A late subscriber sees the retained card.
	if card := retainedCard(t, l.Address(), "lab/thermocycler-01/card"); !strings.Contains(card, `"thermocycler"`) {
		t.Fatalf("card %s", card)
	}
	var out syncBuffer
	a, _, _ := testApp()
	a.stdout = &out
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{"watch", url}) }()
	func() {
		defer func() {
			if t.Failed() {
				cancel()
				t.Logf("watch output: %q", out.String())
			}
		}()
		conformance.EventuallyWithin(t, "watch to show the device", 10*time.Second, func() bool { return strings.Contains(out.String(), "thermocycler-01") })
	}()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("watch exit %d", code)
	}
}

// retainedCard subscribes late to topic and returns the retained payload,
// retrying until the publisher has put it there (bounded).
func retainedCard(t *testing.T, addr, topic string) string {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("late-subscriber"))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	got := make(chan string, 1)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var once sync.Once
		c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
			once.Do(func() { got <- string(m.Payload()) })
		}).WaitTimeout(5 * time.Second)
		select {
		case card := <-got:
			return card
		case <-time.After(200 * time.Millisecond):
		}
		c.Unsubscribe(topic).WaitTimeout(time.Second)
	}
	t.Fatalf("no retained message on %s", topic)
	return ""
}
