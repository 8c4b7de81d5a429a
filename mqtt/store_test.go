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
	s.Del("o.7")
	if s.Get("o.7") != nil {
		t.Fatal("deleted packet still there")
	}
}

// What paho sent before a drop is never resumed: All (paho's resume) drops
// the outgoing packets and lists only the incoming ones.
func TestCopyStoreResumesNothingSentBefore(t *testing.T) {
	s := newCopyStore()
	out := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	out.TopicName, out.Qos, out.MessageID, out.Payload = "lab/x/set/setpoint", 1, 7, []byte(`{"id":"w1","value":50}`)
	rel := packets.NewControlPacket(packets.Pubrel).(*packets.PubrelPacket)
	rel.MessageID = 8
	in := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	in.TopicName, in.Qos, in.MessageID = "lab/x/set/reply", 2, 9
	s.Put("o.7", out)
	s.Put("o.8", rel)
	s.Put("i.9", in)
	if keys := s.All(); len(keys) != 1 || keys[0] != "i.9" {
		t.Fatalf("All = %v, want only the incoming i.9", keys)
	}
	if s.Get("o.7") != nil || s.Get("o.8") != nil {
		t.Fatal("an outgoing packet of the connection before is still stored after the resume")
	}
	if s.Get("i.9") == nil {
		t.Fatal("the incoming packet was dropped")
	}
}
