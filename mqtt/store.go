package mqtt

import (
	"bytes"
	"strings"
	"sync"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// copyStore is paho's in-flight message store, keeping each packet as its
// wire bytes and handing out a fresh copy on Get. paho's MemoryStore hands
// back the very packet it stored, and on reconnect paho sets the DUP flag on
// it while its outgoing goroutine may still be writing the same packet: a
// data race in the library. With copies, the resend is a packet of its own.
//
// It never lets paho send again, after a reconnect, what it sent before the
// connection dropped. With a clean session paho still resumes the outgoing
// packets left in its store: a setpoint, an action or a stop whose answer
// the driver already gave as "outcome unknown" (the device latched in
// fault) would reach the instrument again on the new connection, after the
// driver refused everything, and after an estop the stop would not be the
// last word the instrument hears. The broker keeps no session of ours
// either (clean session), so nothing is lost that the protocol would have
// completed: All, which paho calls only to resume, drops every outgoing
// packet instead of listing it. Incoming ones (a QoS 2 message the broker
// is releasing to us) are kept.
type copyStore struct {
	mu   sync.Mutex
	msgs map[string][]byte
}

func newCopyStore() *copyStore { return &copyStore{msgs: map[string][]byte{}} }

// Open implements paho.Store.
func (s *copyStore) Open() {}

// Put implements paho.Store.
func (s *copyStore) Put(key string, m packets.ControlPacket) {
	var buf bytes.Buffer
	if err := m.Write(&buf); err != nil {
		return // an unencodable packet cannot be resent either
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs[key] = buf.Bytes()
}

// Get implements paho.Store: a new packet decoded from the stored bytes.
func (s *copyStore) Get(key string) packets.ControlPacket {
	s.mu.Lock()
	b, ok := s.msgs[key]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	p, err := packets.ReadPacket(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return p
}

// All implements paho.Store. paho calls it only to resume after a
// (re)connect: the outgoing packets of the connection before are dropped
// here, never listed, so paho cannot send them again (see copyStore).
func (s *copyStore) All() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.msgs))
	for k := range s.msgs {
		if strings.HasPrefix(k, outboundKeyPrefix) {
			delete(s.msgs, k)
			continue
		}
		keys = append(keys, k)
	}
	return keys
}

// outboundKeyPrefix starts the store key of a packet paho sends (paho's own
// convention: "o.<id>" outgoing, "i.<id>" incoming).
const outboundKeyPrefix = "o."

// Del implements paho.Store.
func (s *copyStore) Del(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.msgs, key)
}

// Close implements paho.Store.
func (s *copyStore) Close() {}

// Reset implements paho.Store.
func (s *copyStore) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs = map[string][]byte{}
}

var _ paho.Store = (*copyStore)(nil)
