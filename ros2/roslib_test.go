package ros2

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// TestRoslibAgainstFake checks the fake server with an independent client:
// roslib 2.x (RobotWebTools) under node. It runs when MHP_PEER_ROSLIB names a
// folder whose node_modules holds roslib (npm install roslib@2.1.0) and node
// is on PATH; otherwise it skips.
func TestRoslibAgainstFake(t *testing.T) {
	dir := conformance.Peer(t, "ROSLIB", "a folder with node_modules/roslib (npm install roslib@2.1.0) and node on PATH, to check the fake with roslib")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("MHP_PEER_ROSLIB is set but node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "roslib")); err != nil {
		t.Fatalf("MHP_PEER_ROSLIB=%s has no node_modules/roslib: %v", dir, err)
	}
	// ESM resolves imports next to the script: put it beside a link to
	// the node_modules folder.
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script, _ := os.ReadFile("testdata/roslib_check.mjs")
	if err := os.WriteFile(filepath.Join(work, "check.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}

	srv := newServer(t, rosbridgetest.Options{})
	srv.AddTopic("/chatter", "std_msgs/msg/String", true)
	srv.Publish("/chatter", map[string]any{"data": "hello from the fake"})
	srv.AddTopic("/from_node", "std_msgs/msg/String", false)
	srv.AddService("/add", "example_interfaces/srv/AddTwoInts", func(ctx context.Context, c *rosbridgetest.Call) (any, error) {
		var a struct{ A, B float64 }
		c.Decode(&a)
		return map[string]any{"sum": a.A + a.B}, nil
	})
	srv.AddAction("/fib", "example_interfaces/action/Fibonacci", rosbridgetest.Scripted(rosbridgetest.Script{
		Feedback: []any{map[string]any{"partial": []int{0, 1}}}, Result: map[string]any{"sequence": []int{0, 1, 1, 2}}}))
	srv.AddAction("/fail", "example_interfaces/action/Fibonacci", rosbridgetest.Scripted(rosbridgetest.Script{
		Status: rosbridgetest.StatusAborted, Result: map[string]any{"sequence": []int{}}}))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs", srv.URL())
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	got := map[string]string{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var l struct {
			Kind  string          `json:"kind"`
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			got[l.Kind] = string(l.Value)
		}
	}
	want := map[string]string{"topic": `"hello from the fake"`, "service": "5", "feedback": "[0,1]", "result": "[0,1,1,2]"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("roslib %s = %s, want %s (all: %v)", k, got[k], v, got)
		}
	}
	if !strings.Contains(got["aborted"], "aborted") {
		t.Errorf("roslib failed callback %s, want the ABORTED status reported", got["aborted"])
	}
	if p := srv.Published("/from_node"); len(p) != 1 || !strings.Contains(string(p[0]), "hi/there") {
		t.Errorf("roslib publish reached the fake as %s", p)
	}
}
