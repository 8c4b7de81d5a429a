package rosbridgetest

import (
	"encoding/json"
	"fmt"
	"time"
)

// AddTopic declares a topic of a type, as if a node on the robot published
// or subscribed it. A latched topic sends its last message to each new
// subscriber (transient local durability).
func (s *Server) AddTopic(name, typ string, latch bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topicLocked(name, typ)
	t.typ, t.latch = typ, latch
}

func (s *Server) topicLocked(name, typ string) *topic {
	t, ok := s.topics[name]
	if !ok {
		t = &topic{name: name, typ: typ}
		s.topics[name] = t
	}
	return t
}

// TopicType returns a topic's type, "" when it does not exist.
func (s *Server) TopicType(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[name]; ok {
		return t.typ
	}
	return ""
}

// Publish publishes msg on a topic from the robot's side: every subscribed
// connection gets it, subject to its throttle and queue. The topic is
// created (untyped) if it does not exist.
func (s *Server) Publish(topicName string, msg any) {
	raw, err := marshal(msg)
	if err != nil {
		panic(fmt.Sprintf("rosbridgetest: Publish %s: %v", topicName, err))
	}
	s.mu.Lock()
	t := s.topicLocked(topicName, "")
	t.last = raw
	cs := s.connList()
	s.mu.Unlock()
	for _, c := range cs {
		c.deliver(topicName, raw)
	}
}

func (s *Server) connList() []*conn {
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	return cs
}

// Published returns the messages clients published on a topic, in order.
func (s *Server) Published(topicName string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[topicName]; ok {
		return append([]json.RawMessage(nil), t.published...)
	}
	return nil
}

// OnPublish calls fn (on the connection's reader goroutine) with each message
// a client publishes on the topic, after rosbridge would have accepted it.
func (s *Server) OnPublish(topicName string, fn func(msg json.RawMessage)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topicLocked(topicName, "")
	t.observers = append(t.observers, fn)
}

// Subscribers is how many connections subscribe to the topic.
func (s *Server) Subscribers(topicName string) int {
	s.mu.Lock()
	cs := s.connList()
	s.mu.Unlock()
	n := 0
	for _, c := range cs {
		c.mu.Lock()
		if len(c.subs[topicName]) > 0 {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// deliver sends a topic message subject to the connection's merged throttle
// and queue for the topic.
func (c *conn) deliver(topicName string, raw json.RawMessage) {
	c.mu.Lock()
	subs := c.subs[topicName]
	if len(subs) == 0 {
		c.mu.Unlock()
		return
	}
	throttle, queue := time.Duration(-1), 0
	for _, o := range subs {
		if throttle < 0 || o.throttle < throttle {
			throttle = o.throttle
		}
		queue = max(queue, o.queue)
	}
	st := c.streams[topicName]
	if st == nil {
		st = &stream{}
		c.streams[topicName] = st
	}
	now := time.Now()
	msg := map[string]any{"op": "publish", "topic": topicName, "msg": raw}
	if throttle <= 0 || (now.Sub(st.last) >= throttle && len(st.queue) == 0) {
		st.last = now
		c.mu.Unlock()
		c.send(msg)
		return
	}
	if queue == 0 {
		c.mu.Unlock() // rosbridge drops messages inside the throttle window
		return
	}
	st.queue = append(st.queue, raw)
	if len(st.queue) > queue {
		st.queue = st.queue[len(st.queue)-queue:] // the oldest go first
	}
	if st.timer == nil {
		st.timer = time.AfterFunc(throttle-now.Sub(st.last), func() { c.flush(topicName, throttle) })
	}
	c.mu.Unlock()
}

func (c *conn) flush(topicName string, throttle time.Duration) {
	c.mu.Lock()
	st := c.streams[topicName]
	if st == nil || len(st.queue) == 0 || c.closed() {
		if st != nil {
			st.timer = nil
		}
		c.mu.Unlock()
		return
	}
	raw := st.queue[0]
	st.queue = st.queue[1:]
	st.last = time.Now()
	if len(st.queue) > 0 {
		st.timer = time.AfterFunc(throttle, func() { c.flush(topicName, throttle) })
	} else {
		st.timer = nil
	}
	c.mu.Unlock()
	c.send(map[string]any{"op": "publish", "topic": topicName, "msg": raw})
}
