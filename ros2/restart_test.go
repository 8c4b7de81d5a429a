package ros2

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// TestOwedCancelSurvivesABridgeRestart: when the bridge process itself
// restarts mid-goal, the goal's connection closes first and the cancel the
// client writes at once goes onto a main connection the dying process no
// longer reads. However long the new process takes to come up, that cancel
// is still owed and goes out first on the next main connection. Before the
// fix the write counted as sent and its recheck expired after the request
// timeout, so a restart slower than that left nothing owed.
func TestOwedCancelSurvivesABridgeRestart(t *testing.T) {
	srv := newServer(t, rosbridgetest.Options{})
	release := make(chan struct{})
	defer close(release)
	srv.AddAction("/move", "arm/action/Move", rosbridgetest.Scripted(rosbridgetest.Script{Release: release}))
	clk := clock.NewManual(time.Now())
	var logged syncBuffer
	c := dialTest(t, srv, ClientOptions{Clock: clk, RequestTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	h, err := c.SendGoal(context.Background(), GoalRequest{Action: "/move", Type: "arm/action/Move"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.WaitGoal(wait, "/move"); !ok {
		t.Fatal("goal never reached the bridge")
	}
	before := srv.Accepted()
	srv.Restart()
	if r := recv(t, h.Result); !errors.Is(r.Err, ErrConnLost) {
		t.Fatalf("goal result after the restart: %+v", r)
	}
	conformance.EventuallyWithin(t, "the main connection's loss seen", wait, func() bool { return !c.Connected() })
	// The new process takes longer than the request timeout to come up.
	clk.Advance(time.Minute)
	srv.Refuse(false)
	if _, ok := srv.WaitFor(wait, func(m rosbridgetest.Message) bool {
		return m.Op == "cancel_action_goal" && m.ID == h.ID && m.Conn > before
	}); !ok {
		t.Fatalf("the owed cancel never reached the restarted bridge; log:\n%s", logged.String())
	}
	if !strings.Contains(logged.String(), "sending first after the reconnect: cancel of goal "+h.ID) {
		t.Fatalf("no owed-cancel-first log line; log:\n%s", logged.String())
	}
	for _, m := range srv.Received() {
		if m.Conn > before {
			if m.Op != "cancel_action_goal" {
				t.Fatalf("first message after the restart is %s, want the owed cancel", m.Op)
			}
			break
		}
	}
}
