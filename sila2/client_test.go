package sila2_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// testTimeout bounds waits, never asserts speed: generous for a loaded machine.
const testTimeout = 30 * time.Second

type lab struct {
	srv    *silatest.Server
	addr   string
	cert   *silatest.Cert
	thermo *silatest.Thermostat
}

// startLab serves SiLAService, GreetingProvider and TemperatureController
// (plus the standard features opts asks for) over TLS on loopback.
func startLab(t *testing.T, opts silatest.Options) *lab {
	t.Helper()
	srv, err := silatest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	th := silatest.NewThermostat(293.15)
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2024)); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, th.Handlers()); err != nil {
		t.Fatal(err)
	}
	var cert *silatest.Cert
	if !opts.Legacy {
		cert, err = silatest.SelfSigned(srv.UUID())
		if err != nil {
			t.Fatal(err)
		}
	}
	var addr string
	if cert != nil {
		addr, err = srv.Start(&cert.TLS)
	} else {
		addr, err = srv.Start(nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &lab{srv: srv, addr: addr, cert: cert, thermo: th}
}

func (l *lab) dial(t *testing.T, tlsCfg sila2.TLSConfig) *sila2.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := sila2.Dial(ctx, sila2.ClientConfig{Endpoint: l.addr, TLS: tlsCfg, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.LoadFeatures(ctx); err != nil {
		t.Fatalf("LoadFeatures: %v", err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestClientDiscoversFeaturesOverTLS(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(l *lab) sila2.TLSConfig
	}{
		{"ca", func(l *lab) sila2.TLSConfig { return sila2.TLSConfig{CAPEM: l.cert.PEM} }},
		{"pin", func(l *lab) sila2.TLSConfig { return sila2.TLSConfig{PinSHA256: l.cert.PinSHA256} }},
		{"ca+server_name", func(l *lab) sila2.TLSConfig { return sila2.TLSConfig{CAPEM: l.cert.PEM, ServerName: "localhost"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, silatest.Options{Name: "Fake lab", CancelController: true})
			c := l.dial(t, tc.cfg(l))
			info, err := c.ServerInfo(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != "Fake lab" || info.UUID != l.srv.UUID() {
				t.Fatalf("server info %+v", info)
			}
			want := []string{sila2.SiLAServiceID, sila2.CancelControllerID,
				"org.silastandard/examples/GreetingProvider/v1", "org.silastandard/examples/TemperatureController/v1"}
			if strings.Join(info.Features, ",") != strings.Join(want, ",") {
				t.Fatalf("features %v, want %v", info.Features, want)
			}
			for _, id := range want {
				if !c.HasFeature(id) {
					t.Errorf("feature %s not loaded", id)
				}
			}
		})
	}
}

func TestClientRefusesUntrustedServer(t *testing.T) {
	l := startLab(t, silatest.Options{})
	other, err := silatest.SelfSigned("other")
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]sila2.TLSConfig{
		"wrong ca":  {CAPEM: other.PEM},
		"wrong pin": {PinSHA256: other.PinSHA256},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := sila2.Dial(ctxT(t), sila2.ClientConfig{Endpoint: l.addr, TLS: cfg, CallTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.ImplementedFeatures(ctxT(t))
			var ce *sila2.ConnectionError
			if !errors.As(err, &ce) {
				t.Fatalf("want a connection error, got %v", err)
			}
		})
	}
	if _, err := sila2.Dial(ctxT(t), sila2.ClientConfig{Endpoint: l.addr}); err == nil {
		t.Fatal("Dial without CA, pin or plaintext must fail: no silent trust")
	}
}

func TestClientLegacyServer(t *testing.T) {
	l := startLab(t, silatest.Options{Legacy: true})
	c := l.dial(t, sila2.TLSConfig{InsecurePlaintext: true})
	ids, err := c.ImplementedFeatures(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "SiLAService,GreetingProvider,TemperatureController" {
		t.Fatalf("legacy ids %v", ids)
	}
	res, err := c.Call(ctxT(t), "GreetingProvider", "SayHello", map[string]any{"name": "legacy"})
	if err != nil || res["greeting"] != "Hello SiLA 2 legacy" {
		t.Fatalf("SayHello: %v %v", res, err)
	}
	_, err = c.FeatureDefinition(ctxT(t), "NoSuchFeature")
	se, ok := sila2.AsSiLAError(err)
	if !ok || se.Kind != sila2.KindValidation || se.Parameter != "QualifiedFeatureIdentifier.Identifier" {
		t.Fatalf("unknown legacy feature: %v", err)
	}
}

func TestClientPropertiesAndCommands(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	c := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	ctx := ctxT(t)
	v, err := c.Property(ctx, "GreetingProvider", "StartYear")
	if err != nil || v != int64(2024) {
		t.Fatalf("StartYear %v %v", v, err)
	}
	v, err = c.Property(ctx, "TemperatureController", "CurrentTemperature")
	if err != nil || v != 293.15 {
		t.Fatalf("CurrentTemperature (first of subscription) %v %v", v, err)
	}
	v, err = c.Property(ctx, "TemperatureController", "Profile")
	if err != nil {
		t.Fatal(err)
	}
	steps := v.([]any)
	if len(steps) != 2 || steps[1].(map[string]any)["hold_time"] != int64(30) {
		t.Fatalf("Profile %v", v)
	}
	if _, err := c.Call(ctx, "TemperatureController", "SetMode", map[string]any{"mode": "Heat"}); err != nil || l.thermo.Mode() != "Heat" {
		t.Fatalf("SetMode: %v mode %s", err, l.thermo.Mode())
	}
	// The server validates constraints too: a value outside the set is a ValidationError.
	_, err = c.Call(ctx, "TemperatureController", "SetMode", map[string]any{"mode": "Boil"})
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindValidation ||
		se.Parameter != "org.silastandard/examples/TemperatureController/v1/Command/SetMode/Parameter/Mode" {
		t.Fatalf("SetMode Boil: %v", err)
	}
	// An undefined execution error.
	_, err = c.Call(ctx, "GreetingProvider", "SayHello", map[string]any{"name": ""})
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindUndefined {
		t.Fatalf("SayHello empty: %v", err)
	}
	// A defined execution error from an unknown feature.
	_, err = c.FeatureDefinition(ctx, "org.example/none/Nope/v1")
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindDefined || se.ShortIdentifier() != "UnimplementedFeature" {
		t.Fatalf("unknown feature: %v", err)
	}
}

func TestClientSubscribeFollowsChanges(t *testing.T) {
	l := startLab(t, silatest.Options{})
	c := l.dial(t, sila2.TLSConfig{CAPEM: l.cert.PEM})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	got := make(chan float64, 8)
	done := make(chan error, 1)
	go func() {
		done <- c.Subscribe(ctx, "TemperatureController", "CurrentTemperature", func(v any) error {
			got <- v.(float64)
			return nil
		})
	}()
	if v := <-got; v != 293.15 {
		t.Fatalf("first value %v", v)
	}
	l.thermo.Set(300)
	select {
	case v := <-got:
		if v != 300 {
			t.Fatalf("second value %v", v)
		}
	case <-time.After(testTimeout):
		t.Fatal("no update")
	}
	l.srv.Stop()
	select {
	case err := <-done:
		var ce *sila2.ConnectionError
		if !errors.As(err, &ce) {
			t.Fatalf("stream loss: want a connection error, got %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("subscription did not end when the server stopped")
	}
}

func TestClientObservableCommand(t *testing.T) {
	l := startLab(t, silatest.Options{CancelController: true})
	c := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	ctx := ctxT(t)
	x, err := c.Start(ctx, "TemperatureController", "ControlTemperature", map[string]any{"target_temperature": 310.0})
	if err != nil {
		t.Fatal(err)
	}
	<-l.thermo.Running()
	// Early _Result: COMMAND_EXECUTION_NOT_FINISHED.
	_, err = x.Result(ctx)
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindFramework || se.FrameworkType != sila2.FrameworkCommandExecutionNotFinished {
		t.Fatalf("early result: %v", err)
	}
	inter := make(chan map[string]any, 4)
	go func() { _ = x.Intermediate(ctx, func(v map[string]any) { inter <- v }) }()
	if v := <-inter; v["current_temperature"] != 293.15 {
		t.Fatalf("intermediate %v", v)
	}
	var infos []sila2.ExecInfo
	final, err := x.Follow(ctx, func(i sila2.ExecInfo) {
		infos = append(infos, i)
		if len(infos) == 1 {
			go func() { _ = l.thermo.End(silatest.Reach, testTimeout) }()
		}
	})
	if err != nil || final.Status != sila2.StatusFinishedSuccessfully {
		t.Fatalf("follow: %+v %v", final, err)
	}
	if len(infos) < 2 || infos[0].Progress != 0.25 || infos[0].Remaining != 30*time.Second {
		t.Fatalf("infos %+v", infos)
	}
	res, err := x.Result(ctx)
	if err != nil || res["reached_temperature"] != 310.0 {
		t.Fatalf("result %v %v", res, err)
	}
	// A defined execution error, read from _Result after finishedWithError.
	bad, _ := c.Start(ctx, "TemperatureController", "ControlTemperature", map[string]any{"target_temperature": 360.0})
	if _, err := bad.Follow(ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = bad.Result(ctx)
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindDefined || se.ShortIdentifier() != "TemperatureNotReachable" {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestClientBadUUIDAndInfoClosesAfterFinalStatus(t *testing.T) {
	l := startLab(t, silatest.Options{})
	c := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	ctx := ctxT(t)
	bogus, err := c.Attach("TemperatureController", "ControlTemperature", "00000000-0000-4000-8000-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"_Info":   func() error { _, err := bogus.Follow(ctx, nil); return err },
		"_Result": func() error { _, err := bogus.Result(ctx); return err },
	} {
		se, ok := sila2.AsSiLAError(call())
		if !ok || se.Kind != sila2.KindFramework || se.FrameworkType != sila2.FrameworkInvalidCommandExecutionUUID {
			t.Fatalf("%s with a bad UUID: %v", name, se)
		}
	}
	x, err := c.Start(ctx, "TemperatureController", "ControlTemperature", map[string]any{"target_temperature": 351.0})
	if err != nil {
		t.Fatal(err)
	}
	// The server closes _Info after the final status: a raw stream sees
	// finishedWithError, then EOF.
	conn, err := grpc.NewClient(l.addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tc, _ := c.Feature("TemperatureController")
	info, _ := tc.Method("ControlTemperature_Info")
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, tc.Path("ControlTemperature_Info"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(c.Framework().UUID(x.UUID())); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var statuses []int32
	for {
		m := dynamicpb.NewMessage(info.Output())
		err := st.RecvMsg(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, sila2.DecodeExecInfo(m).Status)
	}
	if len(statuses) == 0 || statuses[len(statuses)-1] != sila2.StatusFinishedWithError {
		t.Fatalf("statuses %v, want the stream to end after finishedWithError", statuses)
	}
}
