package transport_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

var update = flag.Bool("update", false, "rewrite the golden exchanges in testdata/*.txtar")

// TestGolden replays every testdata/*.txtar exchange over a stream against
// the conformance MemoryDriver and compares each answer with the archive.
//
// Archive layout: the comment describes the exchange; an optional "backend"
// file scripts the fake before the exchange, one directive a line
// ("signal NAME JSON", "script NAME Behaviour"); then pairs "NN.request" /
// "NN.response" in order ("NN.other.request" is sent by a second session),
// and "NN.setup" (or "NN.other.setup") requests whose answer must not be an
// error and is not recorded (the initialize of exchanges about something else).
// A request may say $job for the id of the last job an answer carried.
// Answers are compared after normalisation: ts, started, finished and
// expires become 0, session secrets "<session>", session labels "<label>",
// job ids "<job>".
// go test -run TestGolden -update rewrites the responses.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			replayGolden(t, file)
		})
	}
}

var behaviours = map[string]conformance.Behaviour{"Normal": conformance.Normal, "Block": conformance.Block,
	"IgnoreCancel": conformance.IgnoreCancel, "FailReported": conformance.FailReported,
	"FailUnknown": conformance.FailUnknown, "Refuse": conformance.Refuse}

func replayGolden(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{Clock: m.clk})
	main := newRawStream(t, srv)
	var other *rawStream
	lastJob := ""
	changed := false
	for i := 0; i < len(ar.Files); i++ {
		f := &ar.Files[i]
		switch {
		case f.Name == "backend":
			for _, line := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
				fields := strings.Fields(line)
				if len(fields) != 3 {
					t.Fatalf("backend directive %q", line)
				}
				switch fields[0] {
				case "signal":
					var v any
					if err := json.Unmarshal([]byte(fields[2]), &v); err != nil {
						t.Fatalf("backend %q: %v", line, err)
					}
					m.in.SetSignal(fields[1], v)
				case "script":
					b, ok := behaviours[fields[2]]
					if !ok {
						t.Fatalf("backend %q: unknown behaviour", line)
					}
					m.in.Script(fields[1], b)
				default:
					t.Fatalf("backend directive %q", line)
				}
			}
		case strings.HasSuffix(f.Name, ".setup"):
			rs := main
			if strings.HasSuffix(f.Name, ".other.setup") {
				if other == nil {
					other = newRawStream(t, srv)
				}
				rs = other
			}
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if err := json.Unmarshal(f.Data, &probe); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			rs.send(strings.TrimSpace(string(f.Data)))
			var r rawResp
			if err := json.Unmarshal(rs.awaitRaw(string(probe.ID)), &r); err != nil || r.Error != nil {
				t.Fatalf("%s: setup refused: %v %v", f.Name, err, r.Error)
			}
		case strings.HasSuffix(f.Name, ".request"):
			rs := main
			if strings.HasSuffix(f.Name, ".other.request") {
				if other == nil {
					other = newRawStream(t, srv)
				}
				rs = other
			}
			req := strings.TrimSpace(strings.ReplaceAll(string(f.Data), "$job", lastJob))
			id := "null" // the server answers frames it cannot read an id from with id null
			if r, _ := transport.DecodeFrame([]byte(req)); r != nil && r.ID != nil {
				id = string(r.ID)
			}
			rs.send(req)
			raw := rs.awaitRaw(id)
			got, job := normalise(t, raw)
			if job != "" {
				lastJob = job
			}
			respName := strings.TrimSuffix(strings.TrimSuffix(f.Name, ".request"), ".other") + ".response"
			if i+1 >= len(ar.Files) || ar.Files[i+1].Name != respName {
				if !*update {
					t.Fatalf("%s: no %s follows", f.Name, respName)
				}
				ar.Files = append(ar.Files[:i+1], append([]txtar.File{{Name: respName}}, ar.Files[i+1:]...)...)
			}
			want := &ar.Files[i+1]
			if !bytes.Equal(bytes.TrimSpace(want.Data), bytes.TrimSpace(got)) {
				if *update {
					want.Data = append(got, '\n')
					changed = true
				} else {
					t.Errorf("%s: answer differs\n--- got\n%s\n--- want\n%s", f.Name, got, want.Data)
				}
			}
			i++
		default:
			t.Fatalf("unexpected file %q in %s", f.Name, file)
		}
	}
	if *update && changed {
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The scripted backend must not hold the driver's jobs past the test.
	// (A job's Run may reach the backend after a first release: release
	// until the device is no longer busy.)
	conformance.EventuallyWithin(t, "jobs to end", testTimeout, func() bool {
		m.in.ReleaseAll()
		return m.drv.State() != "busy"
	})
}

// awaitRaw returns the raw answer line whose id is id; answers to other ids
// read meanwhile are kept for their own await.
func (rs *rawStream) awaitRaw(id string) []byte {
	rs.t.Helper()
	if line, ok := rs.early[id]; ok {
		delete(rs.early, id)
		return line
	}
	deadline := time.After(testTimeout)
	for {
		select {
		case line, ok := <-rs.lines:
			if !ok {
				rs.t.Fatalf("stream closed waiting for id %s", id)
			}
			var r struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if err := json.Unmarshal(line, &r); err != nil {
				rs.t.Fatalf("line %q: %v", line, err)
			}
			if r.Method != "" {
				continue // a notification
			}
			if string(r.ID) == id {
				return line
			}
			rs.early[string(r.ID)] = line
		case <-deadline:
			rs.t.Fatalf("no answer with id %s within %v", id, testTimeout)
		}
	}
}

var (
	sessionRE = regexp.MustCompile(`^s_[0-9a-f]{32}$`)
	labelRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}#[0-9a-f]{8}$`)
	jobRE     = regexp.MustCompile(`^job_[0-9a-f]{8}$`)
	timeKeys  = map[string]bool{"ts": true, "started": true, "finished": true, "expires": true}
)

// normalise rewrites the volatile fields of an answer and returns it
// indented with sorted keys, plus the last job id it carried.
func normalise(t *testing.T, raw []byte) ([]byte, string) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("answer %q: %v", raw, err)
	}
	job := ""
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if _, isNum := x[k].(float64); isNum && timeKeys[k] {
					x[k] = 0
					continue
				}
				x[k] = walk(x[k])
			}
			return x
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
			return x
		case string:
			switch {
			case sessionRE.MatchString(x):
				return "<session>"
			case labelRE.MatchString(x):
				return "<label>"
			case jobRE.MatchString(x):
				job = x
				return "<job>"
			}
		}
		return v
	}
	v = walk(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes()), job
}

// TestGoldenCoversErrorTable checks that every code a device can produce has
// a golden exchange (MethodRequired needs a method-capable device and
// InternalError a broken one; neither exists here).
func TestGoldenCoversErrorTable(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txtar")
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"code": (-\d+)`).FindAllSubmatch(b, -1) {
			seen[string(m[1])] = true
		}
	}
	for _, code := range []int{-32700, -32600, -32601, -32602, -32000, -32010, -32011, -32012, -32013, -32014,
		-32020, -32021, -32022, -32030, -32040, -32041, -32050} {
		if !seen[strconv.Itoa(code)] {
			t.Errorf("no golden exchange answers code %d", code)
		}
	}
	if len(files) < 20 {
		t.Errorf("only %d golden files", len(files))
	}
}
