package transport

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The event ring is bounded in bytes as well as in count, keeps the newest
// events, and reports what it dropped.
func TestEventRingBoundedInBytes(t *testing.T) {
	cases := []struct {
		name            string
		cap, maxBytes   int
		n, size         int
		wantMaxEvents   int
		wantMaxBytes    int
		wantNewestFirst uint64
	}{
		{"by bytes", 1024, 10_000, 100, 1_000, 10, 10_000, 91},
		{"by count", 5, 1 << 20, 100, 10, 5, 50, 96},
		{"one event larger than the cap is kept alone", 10, 100, 3, 1_000, 1, 1_000, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSession(kindIssued, "x#00000000", "x", c.cap, c.maxBytes, time.Unix(0, 0))
			for i := 0; i < c.n; i++ {
				s.push(bytes.Repeat([]byte{'a'}, c.size))
				if ev, b := s.buffered(); ev > c.wantMaxEvents || b > c.wantMaxBytes {
					t.Fatalf("after %d pushes: %d events, %d bytes; caps %d, %d", i+1, ev, b, c.wantMaxEvents, c.wantMaxBytes)
				}
			}
			evs, lost, _, ok := s.since(0)
			if !ok || len(evs) == 0 || evs[0].id != c.wantNewestFirst || evs[len(evs)-1].id != uint64(c.n) {
				t.Fatalf("kept %d events from id %d, want ids %d..%d", len(evs), evs[0].id, c.wantNewestFirst, c.n)
			}
			if lost != c.wantNewestFirst-1 {
				t.Fatalf("lost %d, want %d", lost, c.wantNewestFirst-1)
			}
		})
	}
}

func TestLabelName(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "def",
		"openmhp-python/0.9":          "openmhp-python_0.9",
		"a\"b\n<script>":              "a_b__script_",
		strings.Repeat("é", 40):       strings.Repeat("_", MaxLabelName),
		strings.Repeat("abcdefgh", 9): strings.Repeat("abcdefgh", 4),
	} {
		if got := labelName(in, "def"); got != want {
			t.Errorf("labelName(%q) = %q, want %q", in, got, want)
		}
	}
}

// duplicateMember agrees with a decoder-based reference on every input the
// fuzzer finds, and never panics.
func FuzzDuplicateMember(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"x":1},{"x":1}]`, `{"params":{"dryRun":true,"dryrun":false}}`,
		`{"a":"\"","\u0061":1}`, `{"p":[1,{"q":[{"r":1,"r":1}]}]}`, `"s"`, `1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		_, name, found := duplicateMember(b)
		if want := refDuplicate(t, b); found != want {
			t.Fatalf("duplicateMember(%s) = %q %v, reference says duplicate=%v", b, name, found, want)
		}
	})
}

// refDuplicate walks the token stream of b with encoding/json.
func refDuplicate(t *testing.T, b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // 1E1000 is valid JSON; only a float64 cannot hold it
	var walk func(path string) bool
	walk = func(path string) bool {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		switch tok {
		case json.Delim('{'):
			fold := path == "" || path == "params"
			seen := map[string]bool{}
			dup := false
			for dec.More() {
				k, _ := dec.Token()
				key := k.(string)
				kk := key
				if fold {
					kk = strings.ToLower(key)
				}
				if seen[kk] {
					dup = true
				}
				seen[kk] = true
				if walk(joinPath(path, key)) {
					dup = true
				}
			}
			dec.Token()
			return dup
		case json.Delim('['):
			dup := false
			for dec.More() {
				if walk(path + "[]") {
					dup = true
				}
			}
			dec.Token()
			return dup
		}
		return false
	}
	return walk("")
}

// A notification queued on a session no stream listens to costs no
// allocation (the wake channel is made by a stream that waits: 10,000
// sessions each got a new one per notification, inside the estop's
// fanout), and a stream that waits is still woken by the next push, and
// by the session's end.
func TestPushWithoutAStreamAllocatesNothing(t *testing.T) {
	ss := newSession(kindIssued, "a#1", "a", 16, 1<<20, time.Unix(0, 0))
	data := []byte(`{"jsonrpc":"2.0","method":"x"}`)
	for range 32 { // the ring is full: a push drops the oldest
		ss.push(data)
	}
	if n := testing.AllocsPerRun(100, func() { ss.push(data) }); n != 0 {
		t.Fatalf("a push on a session without a stream allocates %v times", n)
	}
	_, _, wake, ok := ss.since(0)
	if !ok || wake == nil {
		t.Fatal("since gave no channel to wait on")
	}
	ss.push(data)
	select {
	case <-wake:
	default:
		t.Fatal("a push did not wake the waiting stream")
	}
	_, _, wake, _ = ss.since(0)
	ss.close()
	select {
	case <-wake:
	default:
		t.Fatal("the session's end did not wake the waiting stream")
	}
}
