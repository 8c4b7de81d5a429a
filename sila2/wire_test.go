package sila2_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/mdns"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

func TestSiLAErrorRoundTrip(t *testing.T) {
	fw, err := sila2.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*sila2.Error{
		{Kind: sila2.KindValidation, Parameter: "a/b/C/v1/Command/X/Parameter/Y", Message: "too hot"},
		{Kind: sila2.KindDefined, Identifier: "a/b/C/v1/DefinedExecutionError/Boom", Message: "boom"},
		{Kind: sila2.KindUndefined, Message: "something broke"},
		{Kind: sila2.KindFramework, FrameworkType: sila2.FrameworkInvalidMetadata, Message: "no token"},
	} {
		t.Run(e.Kind.String(), func(t *testing.T) {
			st := fw.Status(e)
			if status.Code(st) != codes.Aborted {
				t.Fatalf("status code %v, want ABORTED", status.Code(st))
			}
			raw, err := base64.StdEncoding.DecodeString(status.Convert(st).Message())
			if err != nil || len(raw) == 0 {
				t.Fatalf("status message is not base64: %v", err)
			}
			got, ok := sila2.AsSiLAError(fw.DecodeError(st))
			if !ok || *got != *e {
				t.Fatalf("decoded %+v, want %+v", got, e)
			}
			if strings.Contains(got.Error(), status.Convert(st).Message()) {
				t.Fatalf("error text shows the raw base64: %s", got.Error())
			}
		})
	}
	// ABORTED without a SiLAError: an undefined execution error, text kept.
	got, ok := sila2.AsSiLAError(fw.DecodeError(status.Error(codes.Aborted, "plain words")))
	if !ok || got.Kind != sila2.KindUndefined || !strings.Contains(got.Message, "plain words") {
		t.Fatalf("garbage ABORTED: %+v", got)
	}
	// Anything else is a connection error.
	var ce *sila2.ConnectionError
	if err := fw.DecodeError(status.Error(codes.Unavailable, "down")); !errors.As(err, &ce) || ce.Code != codes.Unavailable {
		t.Fatalf("UNAVAILABLE: %v", err)
	}
}

func TestValuesRoundTrip(t *testing.T) {
	fdl := `<Feature FeatureVersion="1.0" Originator="org.example" Category="tests"><Identifier>Values</Identifier>
	<Command><Identifier>Echo</Identifier><Observable>No</Observable>
	  <Parameter><Identifier>S</Identifier><DataType><Basic>String</Basic></DataType></Parameter>
	  <Parameter><Identifier>I</Identifier><DataType><Basic>Integer</Basic></DataType></Parameter>
	  <Parameter><Identifier>R</Identifier><DataType><Basic>Real</Basic></DataType></Parameter>
	  <Parameter><Identifier>B</Identifier><DataType><Basic>Boolean</Basic></DataType></Parameter>
	  <Parameter><Identifier>Bin</Identifier><DataType><Basic>Binary</Basic></DataType></Parameter>
	  <Parameter><Identifier>D</Identifier><DataType><Basic>Date</Basic></DataType></Parameter>
	  <Parameter><Identifier>T</Identifier><DataType><Basic>Time</Basic></DataType></Parameter>
	  <Parameter><Identifier>TS</Identifier><DataType><Basic>Timestamp</Basic></DataType></Parameter>
	  <Parameter><Identifier>A</Identifier><DataType><Basic>Any</Basic></DataType></Parameter>
	  <Parameter><Identifier>L</Identifier><DataType><List><DataType><DataTypeIdentifier>Point</DataTypeIdentifier></DataType></List></DataType></Parameter>
	</Command>
	<DataTypeDefinition><Identifier>Point</Identifier><DataType><Structure>
	  <Element><Identifier>X</Identifier><DataType><Basic>Real</Basic></DataType></Element>
	  <Element><Identifier>Tags</Identifier><DataType><List><DataType><Basic>String</Basic></DataType></List></DataType></Element>
	</Structure></DataType></DataTypeDefinition></Feature>`
	f, err := sila2.ParseFDL([]byte(fdl))
	if err != nil {
		t.Fatal(err)
	}
	fw, _ := sila2.NewFramework()
	c, err := sila2.Compile(fw, f)
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := f.Command("Echo")
	md, _ := c.Method("Echo")
	in := map[string]any{
		"s": "hé", "i": int64(-42), "r": 2.5, "b": true,
		"bin": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}),
		"d":   "2026-11-29+01:00", "t": "17:40:05-05:30", "ts": "2026-11-29T17:40:05Z",
		"a": map[string]any{"type": "<DataType><Basic>String</Basic></DataType>", "payload": base64.StdEncoding.EncodeToString([]byte("x"))},
		"l": []any{map[string]any{"x": 1.0, "tags": []any{"a", "b"}}, map[string]any{"x": -3.0, "tags": []any{}}},
	}
	msg, err := c.EncodeElements(md.Input(), cmd.Parameters, in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	back := msg.New()
	if err := proto.Unmarshal(raw, back.Interface()); err != nil {
		t.Fatal(err)
	}
	out, err := c.DecodeElements(back, cmd.Parameters)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range in {
		if fmt.Sprint(out[k]) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", k, out[k], want)
		}
	}
	// Wrong types are refused as InvalidValue naming the field.
	bad := map[string]any{}
	for k, v := range in {
		bad[k] = v
	}
	bad["l"] = []any{map[string]any{"x": "one", "tags": []any{}}}
	_, err = c.EncodeElements(md.Input(), cmd.Parameters, bad)
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeInvalidValue || me.Data["field"] != "l[0].x" {
		t.Fatalf("bad value: %v", err)
	}
	delete(bad, "s")
	_, err = c.EncodeElements(md.Input(), cmd.Parameters, bad)
	if mhp.CodeOf(err) != mhp.CodeInvalidValue {
		t.Fatalf("missing parameter: %v", err)
	}
}

func TestAdapterSendsRequiredMetadata(t *testing.T) {
	const greeter = "org.silastandard/examples/GreetingProvider/v1"
	for _, tc := range []struct {
		name, extra string
		state       mhp.JobState
		outcome     string
		text        string
	}{
		{"token", "metadata: {org.silastandard/core/AuthorizationService/v1/Metadata/AccessToken: secret}\n", mhp.JobDone, "", ""},
		{"no token", "", mhp.JobFailed, mhp.OutcomeNotStarted, "refused the call's metadata"},
		{"wrong token", "metadata: {org.silastandard/core/AuthorizationService/v1/Metadata/AccessToken: guess}\n", mhp.JobFailed, mhp.OutcomeFailed, "InvalidAccessToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, silatest.Options{})
			if err := l.srv.AddFeature(silatest.AuthorizationServiceFDL, silatest.Handlers{}); err != nil {
				t.Fatal(err)
			}
			err := l.srv.RequireMetadata(silatest.AuthorizationServiceID, "AccessToken", []string{greeter}, func(v any) error {
				if v != "secret" {
					return &sila2.Error{Kind: sila2.KindDefined, Identifier: silatest.AuthorizationServiceID + "/DefinedExecutionError/InvalidAccessToken", Message: "bad token"}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			d := openAdapter(t, l, tc.extra)
			j := waitJob(t, d, invoke(t, d, "say_hello", map[string]any{"name": "token"}).ID, terminal)
			if j.State != tc.state {
				t.Fatalf("job %s (%+v), want %s", j.State, j.Error, tc.state)
			}
			if j.Outcome != tc.outcome || (tc.text != "" && !strings.Contains(fmt.Sprint(j.Error), tc.text)) {
				t.Fatalf("job outcome %q error %+v, want outcome %q mentioning %s", j.Outcome, j.Error, tc.outcome, tc.text)
			}
			if st := deviceState(t, d); st == mhp.StateFault {
				t.Fatal("a metadata refusal must not fault the device")
			}
		})
	}
}

func TestAdapterResubscribesBrokenInfoStream(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	d := openAdapter(t, l, "")
	j := invoke(t, d, "control_temperature", map[string]any{"target_temperature": 320.0})
	<-l.thermo.Running()
	waitJob(t, d, j.ID, func(j *mhp.Job) bool { return j.Progress > 0 })
	before := l.srv.Calls("TemperatureController/ControlTemperature_Info")
	l.srv.BreakStreams()
	conformance.EventuallyWithin(t, "the adapter to subscribe to _Info again", testTimeout, func() bool {
		return l.srv.Calls("TemperatureController/ControlTemperature_Info") > before
	})
	if err := l.thermo.End(silatest.Reach, testTimeout); err != nil {
		t.Fatal(err)
	}
	got := waitJob(t, d, j.ID, terminal)
	if got.State != mhp.JobDone || deviceState(t, d) != mhp.StateIdle {
		t.Fatalf("after a resubscription: job %+v (%+v), device %s", got, got.Error, deviceState(t, d))
	}
}

// TestDiscoverLive announces a server with hashicorp/mdns and browses for
// it. Multicast is often unavailable in containers and CI: set
// MHP_PEER_MDNS=1 to run it.
func TestDiscoverLive(t *testing.T) {
	conformance.Peer(t, "MDNS", "1 to browse mDNS on this host (needs multicast)")
	svc, err := mdns.NewMDNSService("0d6f3c2b-1a90-4f7e-8a42-4c1f2a6e9b1d", sila2.MDNSService, "local.", "mhp-test.local.", 50099,
		[]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"version=1.1", "server_name=MHP test"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mdns.NewServer(&mdns.Config{Zone: svc})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	found, err := sila2.Browse(ctxT(t), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range found {
		if s.UUID == "0d6f3c2b-1a90-4f7e-8a42-4c1f2a6e9b1d" && s.Name == "MHP test" && strings.HasSuffix(s.Endpoint, ":50099") {
			return
		}
	}
	t.Fatalf("announced server not found in %+v", found)
}
