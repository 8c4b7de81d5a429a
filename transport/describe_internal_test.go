package transport

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/openmhp/mhp-go"
)

func testDescriptor() mhp.Descriptor {
	return mhp.Descriptor{
		MHP:        mhp.ProtocolVersion,
		DeviceInfo: mhp.DeviceInfo{ID: "tc-01", Class: "thermocycler", Make: "Acme", Tags: []string{"pcr", "<b>&"}},
		Notes:      "notes", Instructions: "do <this> & that",
		Physical: &mhp.Physical{MassKg: 12},
		Signals:  []mhp.Signal{{Name: "block_temperature", Type: mhp.TypeNumber, Unit: "degC"}},
		Settings: []mhp.Setting{{Name: "target_temperature", Type: mhp.TypeNumber, Unit: "degC", Limits: mhp.Range(4, 99)}},
		Actions:  []mhp.Action{{Name: "run", Duration: "long", Cancellable: true}},
		Safety:   mhp.Safety{EStop: true, Interlocks: []string{"lid_closed"}, WatchdogS: 5},
	}
}

// The cached answer of every tier is, byte for byte, what the description
// renders, whatever the live state and backend link, and the cache serves
// it without rendering again; a descriptor answered anew (a refined unit,
// a list replaced) is rendered anew.
func TestDescribeCacheAnswersWhatTheDescriptionRenders(t *testing.T) {
	desc := testDescriptor()
	refined := desc
	refined.Signals = slices.Clone(desc.Signals)
	refined.Signals[0].Unit = "K"
	link := &mhp.BackendLink{Connected: false, Since: 1.5, Error: "dial <tcp>: refused"}
	for _, detail := range []string{mhp.DetailCard, mhp.DetailSummary, mhp.DetailFull} {
		t.Run(detail, func(t *testing.T) {
			s := &Server{}
			steps := []struct {
				name    string
				desc    *mhp.Descriptor
				state   mhp.DeviceState
				backend *mhp.BackendLink
				cached  bool // answered from the cache
			}{
				{"first", &desc, mhp.StateIdle, nil, false},
				{"again", &desc, mhp.StateIdle, nil, true},
				{"state changed", &desc, mhp.StateEStop, nil, true},
				{"backend link appears", &desc, mhp.StateFault, link, false},
				{"backend link changes", &desc, mhp.StateFault, &mhp.BackendLink{Connected: true, Since: 2}, true},
				{"descriptor refined", &refined, mhp.StateFault, link, false},
				{"refined again", &refined, mhp.StateIdle, link, true},
				{"no state", &refined, "", link, false},
			}
			for _, st := range steps {
				d := &mhp.Description{Detail: detail, Descriptor: *st.desc, State: st.state, Backend: st.backend}
				want, err := d.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				before := s.cachedTier(detail)
				enc, err := s.encodeDescription(d)
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				got, err := enc.MarshalJSON()
				if err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				ab := &answerBuf{}
				ab.enc = json.NewEncoder(&ab.b)
				if err := encodeResponse(ab, &Response{JSONRPC: Version, ID: json.RawMessage("3"), Result: enc}); err != nil {
					t.Fatal(err)
				}
				if whole := `{"jsonrpc":"2.0","id":3,"result":` + string(want) + "}\n"; ab.b.String() != whole {
					t.Fatalf("%s: the whole answer is\n%s\nwant\n%s", st.name, ab.b.Bytes(), whole)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: answered\n%s\nthe description renders\n%s", st.name, got, want)
				}
				if hit := before != nil && s.cachedTier(detail) == before && before.matches(d); hit != st.cached {
					t.Errorf("%s: answered from the cache %v, want %v", st.name, hit, st.cached)
				}
			}
		})
	}
}

// cachedTier is the cache entry of detail (nil: none yet).
func (s *Server) cachedTier(detail string) *renderedDescription {
	c := s.dcache.Load()
	if c == nil {
		return nil
	}
	return c.slot(detail).Load()
}

// sameDescriptor notices a change of any field of the descriptor, found by
// reflection (a field added to mhp.Descriptor and not compared fails here).
func TestSameDescriptorCoversEveryField(t *testing.T) {
	base := testDescriptor()
	if !sameDescriptor(&base, &base) {
		t.Fatal("a descriptor is not the same as itself")
	}
	copyOf := base
	if !sameDescriptor(&base, &copyOf) {
		t.Fatal("a shallow copy is not the same descriptor")
	}
	var visit func(v reflect.Value, path string)
	visit = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			if f.Kind() == reflect.Struct {
				visit(f, name+".")
				continue
			}
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString(f.String() + "x")
			case reflect.Bool:
				f.SetBool(!f.Bool())
			case reflect.Float64:
				f.SetFloat(f.Float() + 1)
			case reflect.Slice: // the same content in a new list
				n := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
				reflect.Copy(n, f)
				if f.Len() == 0 {
					n = reflect.MakeSlice(f.Type(), 1, 1)
				}
				f.Set(n)
			case reflect.Pointer:
				n := reflect.New(f.Type().Elem())
				if !f.IsNil() {
					n.Elem().Set(f.Elem())
				}
				f.Set(n)
			default:
				t.Fatalf("%s: a %s field: teach this test and sameDescriptor about it", name, f.Kind())
			}
			changed := reflect.ValueOf(&copyOf).Elem().Interface().(mhp.Descriptor)
			if sameDescriptor(&base, &changed) {
				t.Errorf("%s changed, and sameDescriptor still says the same", name)
			}
			f.Set(old)
		}
	}
	visit(reflect.ValueOf(&copyOf).Elem(), "")
	if !sameDescriptor(&base, &copyOf) {
		t.Fatal("the copy is not restored")
	}
}
