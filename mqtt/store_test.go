package mqtt

import (
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"
)

// The store never hands back the packet it was given: paho's resume sets
// DUP on what Get returns, and that must not touch a packet in flight.
func TestCopyStoreHandsOutCopies(t *testing.T) {
	s := newCopyStore()
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.TopicName, p.Qos, p.MessageID, p.Payload = "lab/x/events/job", 1, 7, []byte(`{"id":"e1"}`)
	s.Put("o.7", p)
	got, ok := s.Get("o.7").(*packets.PublishPacket)
	if !ok || got == p || got.TopicName != p.TopicName || string(got.Payload) != string(p.Payload) || got.MessageID != 7 {
		t.Fatalf("Get returned %+v", got)
	}
	got.Dup = true
	if p.Dup {
		t.Fatal("changing the copy changed the stored packet")
	}
	if keys := s.All(); len(keys) != 1 || keys[0] != "o.7" {
		t.Fatalf("All = %v", keys)
	}
	s.Del("o.7")
	if s.Get("o.7") != nil {
		t.Fatal("deleted packet still there")
	}
}
