package mhp

import (
	"encoding/json"
	"strings"
	"sync"
)

// Notification method names.
const (
	NotifySignalsUpdate    = "notifications/signals/update"
	NotifySettingsChanged  = "notifications/settings/changed"
	NotifyJobsStarted      = "notifications/jobs/started"
	NotifyJobsProgress     = "notifications/jobs/progress"
	NotifyJobsPaused       = "notifications/jobs/paused"
	NotifyJobsResumed      = "notifications/jobs/resumed"
	NotifyJobsCancelling   = "notifications/jobs/cancelling"
	NotifyJobsFinished     = "notifications/jobs/finished"
	NotifySafetyEStop      = "notifications/safety/estop"
	NotifySafetyFault      = "notifications/safety/fault"
	NotifySafetyReset      = "notifications/safety/reset"
	NotifyOperatorInstruct = "notifications/operator/instruction"
	// NotifyOperatorAnswer carries a person's answer to an operator-run
	// device (a job, a setting, a stop, a recorded reading) with "by", the
	// person's name or session label, and "person" {name, role, via, session}.
	NotifyOperatorAnswer = "notifications/operator/answer"
	// NotifyBackendLink carries {"backend": BackendLink} when a driver's link
	// to its backend goes down or comes back.
	NotifyBackendLink = "notifications/backend/link"
)

// Notification is a message a device pushes unprompted. Params is a JSON
// object; every notification carries "state" (the device state after the
// event) and "ts" (device clock) so that a job's completion and the device
// state arrive together.
type Notification struct {
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

// Signal returns the signal name of a signals/update notification, or "".
func (n Notification) Signal() string {
	if n.Method != NotifySignalsUpdate {
		return ""
	}
	s, _ := n.Params["name"].(string)
	return s
}

// Job returns the job a notifications/jobs/* notification carries, whatever
// its Go form (an mhp.Job in process, a decoded JSON object off the wire),
// or nil for any other notification.
func (n Notification) Job() *Job {
	if !strings.HasPrefix(n.Method, "notifications/jobs/") {
		return nil
	}
	raw, ok := n.Params["job"]
	if !ok {
		return nil
	}
	switch j := raw.(type) {
	case *Job:
		return j
	case Job:
		return &j
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var j Job
	if json.Unmarshal(b, &j) != nil {
		return nil
	}
	return &j
}

// Listeners is a registry of notification listeners for decorators that
// publish notifications of their own beside their device's (saved methods,
// test doubles). The zero value is ready; it is safe for concurrent use.
type Listeners struct {
	mu   sync.Mutex
	fns  map[int]func(Notification)
	next int
}

// Listen registers fn beside dev's own listeners (dev may be nil) and
// returns the func that stops both.
func (l *Listeners) Listen(dev Device, fn func(Notification)) func() {
	stop := func() {}
	if dev != nil {
		stop = dev.Listen(fn)
	}
	l.mu.Lock()
	if l.fns == nil {
		l.fns = map[int]func(Notification){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	l.mu.Unlock()
	return func() {
		stop()
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

// Publish delivers n to every registered listener (outside the lock).
func (l *Listeners) Publish(n Notification) {
	l.mu.Lock()
	fns := make([]func(Notification), 0, len(l.fns))
	for _, fn := range l.fns {
		fns = append(fns, fn)
	}
	l.mu.Unlock()
	for _, fn := range fns {
		fn(n)
	}
}
