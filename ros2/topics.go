package ros2

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Subscribe implements Conn.
func (c *Client) Subscribe(ctx context.Context, sub Subscription, fn func(TopicEvent)) (func(), error) {
	if sub.Topic == "" || fn == nil {
		return nil, errors.New("ros2: subscribe needs a topic and a handler")
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	s := &subState{id: c.nextID("subscribe:" + sub.Topic), s: sub, fn: fn}
	c.subs[s.id] = s
	ws := c.ws
	c.mu.Unlock()
	if ws != nil {
		ctx, cancel := c.withDeadline(ctx)
		defer cancel()
		// A failed write drops the link; the next attach subscribes again.
		_ = c.write(ctx, ws, subscribeOp(s))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.subs, s.id)
			ws := c.ws
			c.mu.Unlock()
			if ws != nil {
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
				defer cancel()
				_ = c.write(ctx, ws, map[string]any{"op": "unsubscribe", "id": s.id, "topic": sub.Topic})
			}
		})
	}, nil
}

// Publish implements Conn. With a context from StopPath it goes over the
// estop connection.
func (c *Client) Publish(ctx context.Context, topic, typ string, msg any) error {
	if msg == nil {
		msg = map[string]any{}
	}
	if isStopPath(ctx) {
		return c.stopPublish(ctx, topic, typ, msg)
	}
	c.mu.Lock()
	ws, err := c.current()
	if err != nil {
		c.mu.Unlock()
		return err
	}
	needAdvertise := typ != "" && c.advertised[topic] != typ
	var advID string
	if needAdvertise {
		c.advertised[topic] = typ
		c.adverts[topic] = typ
		advID = c.nextID("advertise:" + topic)
	}
	c.mu.Unlock()
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if needAdvertise {
		if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": advID, "topic": topic, "type": typ}); err != nil {
			c.mu.Lock()
			delete(c.advertised, topic)
			c.mu.Unlock()
			if errors.Is(err, ErrNotSent) {
				return err
			}
			return fmt.Errorf("%w (advertise %s failed: %v)", ErrNotConnected, topic, err)
		}
	}
	if err := c.write(ctx, ws, map[string]any{"op": "publish", "topic": topic, "msg": msg}); err != nil {
		if errors.Is(err, ErrNotSent) {
			return err
		}
		return fmt.Errorf("%w: publish %s: %v", ErrConnLost, topic, err)
	}
	return nil
}

// Advertise announces a topic the client will publish on, now and after
// every reconnect (while the link is down it is only recorded). Publish
// advertises by itself; advertising ahead (at start) matters on ROS 1,
// where a publish right after its advertise can be lost while subscribers
// connect. With a context from StopPath the topic is advertised on the
// estop connection.
func (c *Client) Advertise(ctx context.Context, topic, typ string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if isStopPath(ctx) {
		c.stopAdverts[topic] = typ
		c.mu.Unlock()
		s, err := c.stopSide(ctx)
		if err == nil {
			err = c.stopAdvertise(ctx, s, topic, typ)
		}
		if err != nil && !errors.Is(err, ErrNotConnected) {
			return err
		}
		return nil
	}
	c.adverts[topic] = typ
	ws := c.ws
	if ws != nil {
		c.advertised[topic] = typ
	}
	c.mu.Unlock()
	if ws == nil {
		return nil // sent on connect
	}
	if err := c.write(ctx, ws, map[string]any{"op": "advertise", "id": "advertise:" + topic, "topic": topic, "type": typ}); err != nil {
		return fmt.Errorf("%w: advertise %s: %v", ErrNotConnected, topic, err)
	}
	return nil
}

// PublishFirstOnReconnect publishes now when the main connection is up, or
// else as the first message after it comes back (right after the topic's
// advertise): the cancel of a ROS 1 actionlib goal left running by a drop.
func (c *Client) PublishFirstOnReconnect(what, topic, typ string, msg any) {
	m := map[string]any{"op": "publish", "topic": topic, "msg": msg}
	c.mu.Lock()
	if typ != "" {
		c.adverts[topic] = typ
	}
	if c.ws == nil && !c.closed {
		c.oweLocked(owedOp{what: what, msg: m})
		c.mu.Unlock()
		return
	}
	ws := c.ws
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
	defer cancel()
	err := c.Publish(ctx, topic, typ, msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, ErrNotConnected) || errors.Is(err, ErrConnLost):
		c.oweLocked(owedOp{what: what, msg: m})
	case err == nil && ws != nil:
		// As a ROS 2 cancel: a publish on a connection that drops right
		// after proves nothing; it is owed again then (reoweLocked).
		c.oweLocked(owedOp{what: what, msg: m, via: ws, expires: c.opts.Clock.Now().Add(c.opts.RequestTimeout)})
		if c.ws != ws {
			c.reoweLocked(ws)
		}
	}
}

// oweLocked queues a message for the next main connection; past maxOwed
// the oldest is dropped, with a log line.
func (c *Client) oweLocked(o owedOp) {
	if len(c.owed) >= maxOwed {
		c.opts.Logger.Error("ros2: too many messages owed to rosbridge; dropping the oldest: " + c.owed[0].what)
		c.owed = c.owed[1:]
	}
	c.owed = append(c.owed, o)
}
