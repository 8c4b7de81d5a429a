package directory

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
)

func tc(id, loc string, st mhp.DeviceState, score float64) Result {
	return Result{Card: Card{DeviceInfo: mhp.DeviceInfo{ID: id, Class: "thermocycler", Make: "SimBio", Model: "TC-96",
		Location: loc, Tags: []string{"pcr"}, Description: "96-well PCR thermocycler."},
		Signals: []string{"block_temperature", "lid_closed"}, Actions: []string{"run_protocol"}, Target: "http://" + id + ":18921"},
		State: st, Score: score}
}

// TestCompactSaysSharedFieldsOnce: the fields equal in every result go to
// common, the rest stay per result, and Expand gives back exactly the
// results the directory answered.
func TestCompactSaysSharedFieldsOnce(t *testing.T) {
	unreachable := tc("tc-3", "bay 12", mhp.StateUnreachable, 9)
	unreachable.Error = "dial tcp: connection refused"
	noTags := tc("tc-4", "bay 12", mhp.StateIdle, 9)
	noTags.Tags = nil
	for _, c := range []struct {
		name       string
		in         []Result
		common     []string // keys in common
		perResult  []string // keys of the first entry
		wantCommon bool
	}{
		{"none", nil, nil, nil, false},
		{"one result: nothing hoisted", []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9)}, nil,
			[]string{"actions", "class", "description", "id", "location", "make", "model", "score", "signals", "state", "tags", "target"}, false},
		{"same bay, state and score", []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9), tc("tc-2", "bay 12", mhp.StateIdle, 9)},
			[]string{"actions", "class", "description", "location", "make", "model", "score", "signals", "state", "tags"},
			[]string{"id", "target"}, true},
		{"locations, states and scores differ", []Result{tc("tc-1", "bay 1", mhp.StateIdle, 9), tc("tc-2", "bay 2", mhp.StateBusy, 8.5)},
			[]string{"actions", "class", "description", "make", "model", "signals", "tags"},
			[]string{"id", "location", "score", "state", "target"}, true},
		{"an unreachable one keeps its error", []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9), unreachable},
			[]string{"actions", "class", "description", "location", "make", "model", "score", "signals", "tags"},
			[]string{"id", "state", "target"}, true},
		{"a field one result lacks is not hoisted", []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9), noTags},
			[]string{"actions", "class", "description", "location", "make", "model", "score", "signals", "state"},
			[]string{"id", "tags", "target"}, true},
		{"duplicate ids stay per result", []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9), tc("tc-1", "bay 12", mhp.StateIdle, 9)},
			[]string{"actions", "class", "description", "location", "make", "model", "score", "signals", "state", "tags", "target"},
			[]string{"id"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Compact(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(f.Common); !slices.Equal(got, c.common) {
				t.Errorf("common %v, want %v", got, c.common)
			}
			if len(f.Results) > 0 {
				if got := keys(f.Results[0]); !slices.Equal(got, c.perResult) {
					t.Errorf("first entry %v, want %v", got, c.perResult)
				}
			}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"common"`) != c.wantCommon {
				t.Errorf("common in the JSON: %s", b)
			}
			if !strings.Contains(string(b), `"results":[`) {
				t.Errorf("results not a list: %s", b)
			}
			back, err := DecodeFound(b)
			if err != nil {
				t.Fatal(err)
			}
			want := c.in
			if want == nil {
				want = []Result{}
			}
			if !reflect.DeepEqual(back, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v", back, want)
			}
		})
	}
}

// TestCompactIsSmaller: three cards of one class in one bay cost well under
// half of the wire's shape.
func TestCompactIsSmaller(t *testing.T) {
	in := []Result{tc("tc-1", "bay 12", mhp.StateIdle, 9), tc("tc-2", "bay 12", mhp.StateIdle, 9), tc("tc-3", "bay 12", mhp.StateIdle, 9)}
	wire, _ := json.Marshal(map[string]any{"results": in})
	f, _ := Compact(in)
	compact, _ := json.Marshal(f)
	t.Logf("wire %d bytes, compact %d", len(wire), len(compact))
	if 2*len(compact) > len(wire) {
		t.Fatalf("compact %d bytes is not under half of the wire's %d:\n%s", len(compact), len(wire), compact)
	}
}

// TestDecodeFoundRefuses: an answer that says two things about one device,
// or is not a search answer, is refused, not merged one way or the other.
func TestDecodeFoundRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"a field in common and in a result", `{"common":{"class":"thermocycler"},"results":[{"id":"a","class":"hotplate","target":"x"}]}`, `sets "class"`},
		{"not JSON", `{"results":[`, "search answer"},
		{"results not a list", `{"results":{"id":"a"}}`, "search answer"},
		{"a result of the wrong type", `{"common":{"score":"high"},"results":[{"id":"a","target":"x"}]}`, "result 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeFound([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want one naming %q", err, c.want)
			}
		})
	}
	// The wire's own shape decodes too.
	got, err := DecodeFound([]byte(`{"results":[{"id":"a","class":"hotplate","target":"http://a","state":"idle","score":1}]}`))
	if err != nil || len(got) != 1 || got[0].Class != "hotplate" || got[0].State != mhp.StateIdle {
		t.Fatalf("wire shape: %+v %v", got, err)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
