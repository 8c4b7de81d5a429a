package opcua

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

func TestDisconnectedReadsUnavailableWritesRefused(t *testing.T) {
	srv := startFake(t)
	d := startDriver(t, extraConfig(srv.URL), nil)
	waitSignals(t, d)
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s1")
	srv.Down()
	conformance.EventuallyWithin(t, "signals to read unavailable", 5*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == nil && strings.Contains(r.Unavailable["temperature"], "backend")
	})
	_, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 30.0})
	if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeServerError || e.Data["outcome"] != mhp.OutcomeNotStarted {
		t.Fatalf("write while disconnected: %v", err)
	}
	if p, _ := dev.Ping(ctx); p.State != mhp.StateIdle {
		t.Fatalf("a write refused before sending faulted the device: %s", p.State)
	}
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "reads after the server came back", 10*time.Second, func() bool {
		r, err := dev.Read(ctx, []string{"temperature"})
		return err == nil && r.Values["temperature"] == 21.5
	})
	if _, err := dev.Write(ctx, mhp.WriteRequest{Name: "setpoint", Value: 30.0}); err != nil {
		t.Fatalf("write after reconnect: %v", err)
	}
}

func TestLoadExampleAndRegister(t *testing.T) {
	path := filepath.Join("..", "examples", "opcua-plc", "plc.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := adapters.Source{Path: path, Dir: filepath.Dir(path), Data: data}
	cfg, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoint != "opc.tcp://127.0.0.1:4840" || len(cfg.Signals) != 3 || cfg.Settings[0].Limits == nil || *cfg.Settings[0].Limits.Max != 100 {
		t.Fatalf("decoded %+v", cfg)
	}
	if cfg.Actions[1].LADS == nil || cfg.Actions[0].Params.Names()[1] != "b" {
		t.Fatalf("actions %+v", cfg.Actions)
	}
	reg := adapters.NewRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg); err == nil {
		t.Fatal("registering opcua twice succeeded")
	}
	d, err := reg.Build(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	desc := d.Descriptor()
	if desc.ID != "plc-01" || !desc.Safety.EStop || len(desc.Actions) != 2 || !desc.Actions[1].Cancellable {
		t.Fatalf("descriptor %+v", desc)
	}
	// A typo is an error naming its line, not a silently dropped limit.
	bad := strings.Replace(string(data), "limits: {min: 0, max: 100}", "limit: {min: 0, max: 100}", 1)
	if _, err := Load(adapters.Source{Path: "bad.yaml", Data: []byte(bad)}); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("typo accepted: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := func() Config {
		c := Config{Endpoint: "opc.tcp://127.0.0.1:4840"}
		c.Device.ID = "x"
		return c
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"ok", func(c *Config) {}, ""},
		{"endpoint", func(c *Config) { c.Endpoint = "http://x" }, "opc.tcp"},
		{"policy", func(c *Config) { c.Security.Policy = "Basic128Rsa15" }, "security.policy"},
		{"mode without policy", func(c *Config) { c.Security.Mode = ModeSignAndEncrypt }, "needs policy"},
		{"pin", func(c *Config) { c.Security.ServerCertificate = "sha256:abcd" }, "fingerprint"},
		{"cert without key", func(c *Config) { c.Security.ClientCertificate = "c.pem" }, "go together"},
		{"username without password", func(c *Config) { c.Auth = Auth{Type: AuthUsername, Username: "u"} }, "password"},
		{"bad node", func(c *Config) {
			c.Signals = []SignalItem{{Signal: mhp.Signal{Name: "s"}, Node: "ns=x;s=1"}}
		}, "node id"},
		{"nsu node ok", func(c *Config) {
			c.Signals = []SignalItem{{Signal: mhp.Signal{Name: "s"}, Node: "nsu=urn:x;s=A.B"}}
		}, ""},
		{"two bindings", func(c *Config) {
			c.Actions = []ActionItem{{Action: mhp.Action{Name: "a"}, Method: &MethodSpec{Object: "i=85", Method: "i=1"}, Program: &ProgramSpec{Node: "i=2"}}}
		}, "exactly one"},
		{"data type", func(c *Config) {
			c.Settings = []SettingItem{{Setting: mhp.Setting{Name: "s", Type: mhp.TypeNumber}, Node: "i=1", DataType: "Decimal"}}
		}, "data_type"},
		{"empty estop", func(c *Config) { c.EStop = &EStopSpec{} }, "estop"},
		// gopcua's publish wait is max(keep-alive, request timeout): equal
		// to the keep-alive, it races the server's keep-alive.
		{"keepalive at request timeout", func(c *Config) { c.Timeouts = Timeouts{RequestS: 2, KeepAliveS: 2} }, "keepalive_s"},
		{"keepalive below publishing", func(c *Config) { c.Timeouts = Timeouts{PublishS: 0.5, KeepAliveS: 0.1} }, "keepalive_s"},
		{"keepalive ok", func(c *Config) { c.Timeouts = Timeouts{RequestS: 3, KeepAliveS: 1} }, ""},
		{"negative max age", func(c *Config) { c.Timeouts.MaxAgeS = -1 }, "negative"},
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		err := c.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestStatusTable(t *testing.T) {
	cases := []struct {
		sc   ua.StatusCode
		code mhp.Code
	}{
		{ua.StatusBadOutOfRange, mhp.CodeLimitViolation},
		{ua.StatusBadTypeMismatch, mhp.CodeInvalidValue},
		{ua.StatusBadInvalidArgument, mhp.CodeInvalidValue},
		{ua.StatusBadNotWritable, mhp.CodeNotSupported},
		{ua.StatusBadUserAccessDenied, mhp.CodeForbidden},
		{ua.StatusBadNodeIDUnknown, mhp.CodeServerError},
		{ua.StatusBadInvalidState, mhp.CodeDeviceBusy},
		{ua.StatusBadLocked, mhp.CodeDeviceBusy},
	}
	for _, c := range cases {
		e := refusalError("write x", c.sc)
		if e.Code != c.code || e.Data["opcua_status"] != StatusName(c.sc) || !strings.Contains(e.Message, StatusName(c.sc)) {
			t.Errorf("%s: %+v", StatusName(c.sc), e)
		}
	}
	// Transport errors: refused before sending vs outcome unknown.
	if _, ok := mhp.AsError(transportError("w", ErrNotConnected)); !ok {
		t.Error("not connected should be a refusal")
	}
	for _, err := range []error{ua.StatusBadTimeout, io.EOF, context.DeadlineExceeded, ua.StatusBadSessionClosed, ua.StatusBadConnectionClosed} {
		if _, ok := mhp.AsError(transportError("w", err)); ok {
			t.Errorf("%v should leave the outcome unknown", err)
		}
	}
	if StatusName(ua.StatusGood) != "Good" || StatusName(ua.StatusBadOutOfRange) != "BadOutOfRange" {
		t.Error("status names")
	}
}

// funcClient is a Client made of functions: the seam lets the mapping be
// tested without any server.
type funcClient struct {
	read  func(context.Context, []*ua.ReadValueID) ([]*ua.DataValue, error)
	write func(context.Context, *ua.NodeID, *ua.Variant) (ua.StatusCode, error)
	call  func(context.Context, *ua.CallMethodRequest) (*ua.CallMethodResult, error)
}

func (f *funcClient) Read(ctx context.Context, n []*ua.ReadValueID) ([]*ua.DataValue, error) {
	return f.read(ctx, n)
}
func (f *funcClient) Write(ctx context.Context, n *ua.NodeID, v *ua.Variant) (ua.StatusCode, error) {
	return f.write(ctx, n, v)
}
func (f *funcClient) Call(ctx context.Context, r *ua.CallMethodRequest) (*ua.CallMethodResult, error) {
	return f.call(ctx, r)
}
func (f *funcClient) Browse(context.Context, *ua.NodeID) ([]*ua.ReferenceDescription, error) {
	return nil, nil
}
func (f *funcClient) Subscribe(_ context.Context, nodes []*ua.NodeID, fn func(int, *ua.DataValue)) (func(), error) {
	for i := range nodes {
		fn(i, &ua.DataValue{EncodingMask: ua.DataValueValue, Value: ua.MustVariant(1.5)})
	}
	return func() {}, nil
}

func TestSeamWriteOutcomes(t *testing.T) {
	var written []*ua.Variant
	var writeErr error
	var writeSC ua.StatusCode
	fc := &funcClient{
		read: func(_ context.Context, n []*ua.ReadValueID) ([]*ua.DataValue, error) {
			out := make([]*ua.DataValue, len(n))
			for i, r := range n {
				switch r.AttributeID {
				case ua.AttributeIDDataType:
					out[i] = &ua.DataValue{Value: ua.MustVariant(ua.NewNumericNodeID(0, 10))} // Float
				case ua.AttributeIDValue:
					if r.NodeID.IntID() == 2255 {
						out[i] = &ua.DataValue{Value: ua.MustVariant([]string{"http://opcfoundation.org/UA/"})}
					} else {
						out[i] = &ua.DataValue{Value: ua.MustVariant(float32(2.5))}
					}
				}
			}
			return out, nil
		},
		write: func(_ context.Context, _ *ua.NodeID, v *ua.Variant) (ua.StatusCode, error) {
			written = append(written, v)
			return writeSC, writeErr
		},
	}
	cfg := Config{Endpoint: "opc.tcp://fake:4840"}
	cfg.Device.ID = "seam"
	cfg.Settings = []SettingItem{{Setting: mhp.Setting{Name: "level", Type: mhp.TypeNumber}, Node: "ns=0;i=5000"}}
	d := startWith(t, cfg, Options{Options: adapters.Options{Logger: quietLogger()}, Dial: func(ctx context.Context, c Config, on func(context.Context, Client) error) (Client, error) {
		return fc, on(ctx, fc)
	}})
	ctx := ctxT(t)
	dev := mhp.AsSession(d, "s")
	r, err := dev.Write(ctx, mhp.WriteRequest{Name: "level", Value: 2.5})
	if err != nil || !r.Applied {
		t.Fatalf("write: %+v %v", r, err)
	}
	if _, ok := written[0].Value().(float32); !ok {
		t.Fatalf("wrote %T, want the node's Float", written[0].Value())
	}
	// Read-back differs: sent, not applied.
	r, err = dev.Write(ctx, mhp.WriteRequest{Name: "level", Value: 3.0})
	if err != nil || r.Applied || r.Status != mhp.WriteSent {
		t.Fatalf("unconfirmed write: %+v %v", r, err)
	}
	// A timeout after sending: outcome unknown, fault, and no retry.
	writeErr = ua.StatusBadTimeout
	n := len(written)
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "level", Value: 4.0})
	if e, ok := mhp.AsError(err); !ok || !e.OutcomeUnknown() {
		t.Fatalf("timed-out write: %v", err)
	}
	if len(written) != n+1 {
		t.Fatalf("the write was sent %d times", len(written)-n)
	}
}
