package binding

import "testing"

// TestTurnAbandonedAfterItWasHandedOn: a waiter that gives up after the
// request lock was handed to it (its context ended as the turn came) hands
// it on to the next waiter, and the lock is free once nobody waits.
func TestTurnAbandonedAfterItWasHandedOn(t *testing.T) {
	isClosed := func(w *turnWaiter) bool {
		select {
		case <-w.ready:
			return true
		default:
			return false
		}
	}
	var turn writeTurn
	turn.held = true
	a, b := turn.waitLocked(), turn.waitLocked()
	turn.releaseLocked() // the holder returns: the turn is a's
	if !isClosed(a) || isClosed(b) || !turn.held {
		t.Fatalf("after release: a ready %v, b ready %v, held %v; want a's turn", isClosed(a), isClosed(b), turn.held)
	}
	turn.abandonLocked(a) // a gave up as its turn came
	if !isClosed(b) || !turn.held {
		t.Fatalf("after a gave up: b ready %v, held %v; want b's turn", isClosed(b), turn.held)
	}
	c := turn.waitLocked()
	turn.abandonLocked(c) // c gives up while still queued: nothing is handed on
	if !turn.held || len(turn.queue) != 0 {
		t.Fatalf("after c gave up queued: held %v, queue %d; want b still holding, nobody queued", turn.held, len(turn.queue))
	}
	turn.releaseLocked()
	if turn.held {
		t.Fatal("the turn is still held after its last holder released it")
	}
}
