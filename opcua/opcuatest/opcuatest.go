// Package opcuatest is a fake OPC UA server for tests of package opcua and
// of programs that use it (the opcua package Example runs against it):
// gopcua's server package in process on 127.0.0.1 (security None,
// anonymous), with its own Write and Call handlers, serving the
// conformance fixture from a [*conformance.Instrument].
//
// Address space (namespace 1 = Namespace, string ids):
//   - signals: temperature (Double), door_closed (Boolean); an unavailable
//     signal reads BadNoCommunication;
//   - settings: setpoint, confirm_level, forbidden_level (Double), mode
//     (String), fan (Boolean); writes go through Instrument.WriteSetting;
//     temperature has EngineeringUnits degC, setpoint also EURange 0..100;
//   - extra nodes: ro_counter (Int32, read only), small (Int16, the server
//     refuses values outside 0..100 with BadOutOfRange);
//   - methods on object Device: quick, profile (steps String JSON, cycles
//     Int32), confirm_action, forbidden_action, estop; outputs (ok, action);
//   - LADS-style functional units FU_run and FU_monitor (FunctionalUnitState
//     with CurrentState/Id in the LADS namespace, Start/Stop/Abort/Clear,
//     and RunningStateMachine/CurrentState/Id); an estop during a run
//     leaves the unit Aborted until Clear, as LADS devices do;
//   - TempControl: a LADS control function (ControlFunctionState,
//     TargetValue), not a functional unit.
//
// Freeze/Thaw hang the server with its sockets open; SetValueLag delays
// value notifications as a real server's sampling does; the server's
// CurrentTime is notified every HeartbeatEvery.
//
// Instrument behaviours become OPC UA answers: Refuse -> BadInvalidState,
// FailReported -> BadDeviceFailure (methods) or Aborted (functional units),
// FailUnknown -> the secure channel is closed with the reply pending,
// Block -> the reply (or the end of the run) waits for Release without
// blocking the server.
package opcuatest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"
	"github.com/gopcua/opcua/uasc"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/internal/testnet"
)

// Namespace is the namespace URI of the fake's nodes (index 1).
const Namespace = "urn:openmhp:opcuatest"

// LADSNamespace is registered as index 2 so that state ids carry the real LADS URI.
const LADSNamespace = "http://opcfoundation.org/UA/LADS/"

// Hold is how long the fake keeps a functional unit in each transient
// state, so that a subscription (which reports the latest value per
// publishing interval) sees every state.
const Hold = 150 * time.Millisecond

// HeartbeatEvery is how often the fake notifies subscribers of the
// server's CurrentTime, as a server sampling it would.
const HeartbeatEvery = 200 * time.Millisecond

// syncWindow is how long a handler waits for the instrument before it
// answers from another goroutine.
const syncWindow = 50 * time.Millisecond

// Setting node types of the fixture.
var settingTypes = map[string]uint32{
	conformance.SettingSetpoint: id.Double, conformance.SettingConfirmed: id.Double, conformance.SettingForbidden: id.Double,
	conformance.SettingMode: id.String, conformance.SettingFan: id.Boolean,
}

// Server is a running fake.
type Server struct {
	// URL is the endpoint, opc.tcp://127.0.0.1:<port>.
	URL string
	// In is the instrument the fake answers from.
	In *conformance.Instrument

	srv  *server.Server
	ns   *server.NodeNameSpace
	lads *server.NodeNameSpace

	proxy  net.Listener
	target string
	cancel context.CancelFunc
	conns  map[net.Conn]bool

	mu       sync.Mutex
	extra    map[string]any      // ro_counter, small
	ranges   map[string]ua.Range // EURange by variable key (SetEURange)
	snapshot map[string]string
	units    map[string]*unit
	prog     *program
	channels map[*uasc.SecureChannel]bool
	stop     chan struct{}
	done     chan struct{}
	thawed   chan struct{} // non-nil while frozen
	lag      time.Duration // SetValueLag
	reject   Rejection     // RejectCertificates
	reads    atomic.Int64  // signal values taken (reads, notifications)
	clears   atomic.Int64  // Clear calls that cleared a unit
}

type unit struct {
	name     string // the fixture action
	state    uint32 // LADS id
	runState uint32
	work     *conformance.Work
	runs     int
	runID    string
	estopped bool // aborted by the estop: ends Aborted, waits for Clear
	progress float64
	// results is a ring of result slots: DeviceProgramRunId and the
	// VariableSet (ok, action) of finished runs.
	results [resultSlots]result
	next    int
}

type result struct {
	runID  string
	ok     bool
	action string
}

const resultSlots = 4

// KeyValue is LADS KeyValueType as the fake decodes it.
type KeyValue struct {
	Key   string
	Value string
}

var registerOnce sync.Once

// NodeID returns the node id of a fake node by name ("ns=1;s=<name>").
func NodeID(name string) string { return "ns=1;s=" + name }

// Options tune StartWith.
type Options struct {
	// Basic256Sha256 also advertises a Basic256Sha256/SignAndEncrypt
	// endpoint (with a fresh self-signed server certificate). gopcua's
	// server cannot complete such a channel: use it with RejectCertificates.
	Basic256Sha256 bool
	// Addr is the address clients connect to; default a free port.
	Addr string
	// ExtraNamespaces are registered before Namespace, which then has a
	// higher index (a server whose namespace indexes moved on a restart).
	// The LADS extension objects decode only without them.
	ExtraNamespaces []string
	// Plant adds the nested address space discovery is tested on (see
	// plant.go): folders Plant/Line1/Oven and Plant/Line2/Oven, methods
	// with Input/OutputArguments, EURange, a custom DataType, a program
	// template set.
	Plant bool
	// MinPublishingInterval makes the server revise a subscription's
	// publishing interval up to at least this (open62541 1.4 grants
	// nothing below 100 ms); zero grants what is asked.
	MinPublishingInterval time.Duration
}

// Start starts a fake on 127.0.0.1 with a free port.
func Start(in *conformance.Instrument) (*Server, error) { return StartWith(in, Options{}) }

// StartWith starts a fake with options. The gopcua server binds its own
// port (it takes no listener), so the free port picked for it may be taken
// by another process before it binds: a start that lost that race is tried
// again on a fresh port.
func StartWith(in *conformance.Instrument, o Options) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startWith(in, o)
		inUse := err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
		if !inUse || attempt == 5 {
			return s, err
		}
	}
}

func startWith(in *conformance.Instrument, o Options) (*Server, error) {
	registerOnce.Do(func() {
		// LADS is namespace 2 in the fake: StartProgram's Properties decode.
		ua.RegisterExtensionObject(ua.NewNumericNodeID(2, 5045), new(KeyValue))
	})
	// The server binds the port itself, after it was freed here: one below
	// the ephemeral range, which no outgoing connection takes meanwhile.
	l, err := testnet.Listen("127.0.0.1")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var proxy net.Listener
	if o.Addr == "" {
		// Below the ephemeral range: Down then Up listens on this address
		// again, which a reconnecting client's own source port could hold.
		proxy, err = testnet.Listen("127.0.0.1")
	} else {
		proxy, err = net.Listen("tcp", o.Addr)
	}
	if err != nil {
		return nil, err
	}
	s := &Server{In: in, extra: map[string]any{"ro_counter": int32(7), "small": int16(10)},
		snapshot: map[string]string{}, units: map[string]*unit{}, channels: map[*uasc.SecureChannel]bool{},
		stop: make(chan struct{}), done: make(chan struct{}), proxy: proxy, conns: map[net.Conn]bool{}}
	opts := []server.Option{
		server.EndPoint("127.0.0.1", port),
		// Clients connect through the proxy; discovery matches by URL.
		server.EndPoint("127.0.0.1", proxy.Addr().(*net.TCPAddr).Port),
		server.EnableSecurity("None", ua.MessageSecurityModeNone),
		server.EnableAuthMode(ua.UserTokenTypeAnonymous),
		server.ServerName("mhp-go opcuatest"),
	}
	if o.Basic256Sha256 {
		cert, key, err := selfSigned()
		if err != nil {
			proxy.Close()
			return nil, err
		}
		opts = append(opts, server.Certificate(cert), server.PrivateKey(key),
			server.EnableSecurity("Basic256Sha256", ua.MessageSecurityModeSignAndEncrypt))
	}
	s.srv = server.New(opts...)
	for _, uri := range o.ExtraNamespaces {
		server.NewNodeNameSpace(s.srv, uri)
	}
	s.ns = server.NewNodeNameSpace(s.srv, Namespace)
	s.lads = server.NewNodeNameSpace(s.srv, LADSNamespace)
	s.build()
	if o.Plant {
		s.buildPlant()
	}
	s.srv.RegisterHandler(id.WriteRequest_Encoding_DefaultBinary, s.handleWrite)
	s.srv.RegisterHandler(id.CallRequest_Encoding_DefaultBinary, s.handleCall)
	if min := float64(o.MinPublishingInterval.Milliseconds()); min > 0 {
		s.srv.RegisterHandler(id.CreateSubscriptionRequest_Encoding_DefaultBinary, func(sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
			if req, ok := r.(*ua.CreateSubscriptionRequest); ok && req.RequestedPublishingInterval < min {
				req.RequestedPublishingInterval = min // gopcua's server grants what the request says
			}
			return s.srv.SubscriptionService.CreateSubscription(sc, r, reqID) // set up by Start
		})
		s.srv.RegisterHandler(id.ModifySubscriptionRequest_Encoding_DefaultBinary, func(sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
			if req, ok := r.(*ua.ModifySubscriptionRequest); ok && req.RequestedPublishingInterval < min {
				req.RequestedPublishingInterval = min
			}
			return s.srv.SubscriptionService.ModifySubscription(sc, r, reqID)
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.srv.Start(ctx); err != nil {
		cancel()
		proxy.Close()
		return nil, err
	}
	s.URL = fmt.Sprintf("opc.tcp://%s", proxy.Addr())
	s.target = fmt.Sprintf("127.0.0.1:%d", port)
	go s.serveProxy(proxy, s.target)
	go s.watch()
	return s, nil
}

// Clears is how many Clear calls cleared an Aborted functional unit.
func (s *Server) Clears() int64 { return s.clears.Load() }

// UnitState is the LADS FunctionalUnitState of the unit of an action
// ("Stopped", "Aborted", ...).
func (s *Server) UnitState(action string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.units[action]
	if !ok {
		return ""
	}
	return ladsName(u.state)
}

// Reads is how often the server took a signal's value (a Read of the
// node, or a notification of its change).
func (s *Server) Reads() int64 { return s.reads.Load() }

// SetValueLag delays the notifications of signal and setting value changes
// by d, as real servers do (sampling plus a publishing interval: 0.2-0.5 s
// was seen on node-opcua); a Read answers the new value at once.
func (s *Server) SetValueLag(d time.Duration) {
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// notifyValue notifies subscribers of a value change after the lag.
func (s *Server) notifyValue(n *ua.NodeID) {
	s.mu.Lock()
	lag := s.lag
	s.mu.Unlock()
	if lag <= 0 {
		s.srv.ChangeNotification(n)
		return
	}
	time.AfterFunc(lag, func() {
		select {
		case <-s.stop:
		default:
			s.srv.ChangeNotification(n)
		}
	})
}

func (s *Server) nid(name string) *ua.NodeID { return ua.NewStringNodeID(s.ns.ID(), name) }

func (s *Server) ladsID(n uint32) *ua.NodeID { return ua.NewNumericNodeID(s.lads.ID(), n) }

func attrs(class ua.NodeClass, name string) server.Attributes {
	return server.Attributes{
		ua.AttributeIDNodeClass:   server.DataValueFromValue(uint32(class)),
		ua.AttributeIDBrowseName:  server.DataValueFromValue(&ua.QualifiedName{Name: name}),
		ua.AttributeIDDisplayName: server.DataValueFromValue(&ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: name}),
	}
}

func (s *Server) object(parent *server.Node, name, key string) *server.Node {
	n := server.NewNode(s.nid(key), attrs(ua.NodeClassObject, name), nil, nil)
	s.ns.AddNode(n)
	if parent != nil {
		parent.AddRef(n, server.RefTypeIDHasComponent, true)
	}
	return n
}

func (s *Server) variable(parent *server.Node, name, key string, dataType uint32, access byte, val func() *ua.DataValue) *server.Node {
	a := attrs(ua.NodeClassVariable, name)
	a[ua.AttributeIDDataType] = server.DataValueFromValue(ua.NewNumericExpandedNodeID(0, dataType))
	a[ua.AttributeIDAccessLevel] = server.DataValueFromValue(access)
	a[ua.AttributeIDUserAccessLevel] = server.DataValueFromValue(access)
	n := server.NewNode(s.nid(key), a, nil, val)
	s.ns.AddNode(n)
	if parent != nil {
		parent.AddRef(n, server.RefTypeIDHasComponent, true)
	}
	return n
}

func (s *Server) method(parent *server.Node, name, key string, args []*ua.Argument) *server.Node {
	m := server.NewNode(s.nid(key), attrs(ua.NodeClassMethod, name), nil, nil)
	s.ns.AddNode(m)
	parent.AddRef(m, server.RefTypeIDHasComponent, true)
	if args != nil {
		eos := make([]*ua.ExtensionObject, len(args))
		for i, a := range args {
			eos[i] = ua.NewExtensionObject(a)
		}
		v := s.variable(nil, "InputArguments", key+".InputArguments", id.Argument, 1, func() *ua.DataValue { return server.DataValueFromValue(eos) })
		m.AddRef(v, server.RefTypeIDHasComponent, true)
	}
	return m
}

// analog gives a variable the EngineeringUnits and (when r is set)
// EURange properties of an OPC UA AnalogItem.
func (s *Server) analog(n *server.Node, key, unit string, r *ua.Range) {
	eu := ua.NewExtensionObject(&ua.EUInformation{NamespaceURI: "http://www.opcfoundation.org/UA/units/un/cefact",
		UnitID: 4408652, DisplayName: &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: unit},
		Description: &ua.LocalizedText{EncodingMask: ua.LocalizedTextText, Text: unit}})
	p := s.variable(nil, "EngineeringUnits", key+".EngineeringUnits", id.EUInformation, 1, func() *ua.DataValue { return good(eu) })
	n.AddRef(p, id.HasProperty, true)
	if r != nil {
		s.mu.Lock()
		if s.ranges == nil {
			s.ranges = map[string]ua.Range{}
		}
		s.ranges[key] = *r
		s.mu.Unlock()
		p := s.variable(nil, "EURange", key+".EURange", id.Range, 1, func() *ua.DataValue { return good(ua.NewExtensionObject(s.euRange(key))) })
		n.AddRef(p, id.HasProperty, true)
	}
}

func good(v any) *ua.DataValue {
	return &ua.DataValue{EncodingMask: ua.DataValueValue | ua.DataValueSourceTimestamp | ua.DataValueServerTimestamp,
		Value: ua.MustVariant(v), SourceTimestamp: time.Now(), ServerTimestamp: time.Now()}
}

func bad(sc ua.StatusCode) *ua.DataValue {
	return &ua.DataValue{EncodingMask: ua.DataValueStatusCode | ua.DataValueServerTimestamp, Status: sc, ServerTimestamp: time.Now()}
}

// build makes the address space.
func (s *Server) build() {
	root := s.ns.Objects()
	dev := s.object(root, "Device", "Device")
	for _, name := range []string{conformance.SignalTemperature, conformance.SignalDoorClosed} {
		name := name
		dt := uint32(id.Double)
		if name == conformance.SignalDoorClosed {
			dt = id.Boolean
		}
		sig := s.variable(dev, name, name, dt, 1, func() *ua.DataValue {
			s.reads.Add(1)
			v, err := s.In.ReadSignal(name)
			if err != nil {
				return bad(ua.StatusBadNoCommunication)
			}
			return good(v)
		})
		if name == conformance.SignalTemperature {
			s.analog(sig, name, "degC", nil)
		}
	}
	for name, dt := range settingTypes {
		name := name
		n := s.variable(dev, name, name, dt, 3, func() *ua.DataValue {
			v, ok := s.In.Written(name)
			if !ok {
				return bad(ua.StatusBadNoData)
			}
			return good(v)
		})
		if name == conformance.SettingSetpoint {
			s.analog(n, name, "degC", &ua.Range{Low: 0, High: 100})
		}
	}
	s.variable(dev, "ro_counter", "ro_counter", id.Int32, 1, func() *ua.DataValue { return good(s.extraValue("ro_counter")) })
	s.variable(dev, "small", "small", id.Int16, 3, func() *ua.DataValue { return good(s.extraValue("small")) })
	noArgs := []*ua.Argument{}
	s.method(dev, "quick", conformance.ActionQuick, noArgs)
	s.method(dev, "confirm_action", conformance.ActionConfirm, noArgs)
	s.method(dev, "forbidden_action", conformance.ActionForbidden, noArgs)
	s.method(dev, "estop", "estop", noArgs)
	s.method(dev, "profile", conformance.ActionProfile, []*ua.Argument{
		{Name: "steps", DataType: ua.NewNumericNodeID(0, id.String), ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "cycles", DataType: ua.NewNumericNodeID(0, id.Int32), ValueRank: -1, Description: &ua.LocalizedText{}},
	})
	for _, action := range []string{conformance.ActionRun, conformance.ActionMonitor} {
		s.buildUnit(root, action)
	}
	// A LADS control function (ControlFunctionState, TargetValue), as a
	// LADS device lists under a unit's FunctionSet: not a functional unit.
	cf := s.object(root, "TempControl", "TempControl")
	s.object(cf, "ControlFunctionState", "TempControl.ControlFunctionState")
	s.variable(cf, "TargetValue", "TempControl.TargetValue", id.Double, 3, func() *ua.DataValue { return good(37.0) })
	s.buildProgram(root)
}

// watch notifies subscribers of instrument changes (the suite changes the
// Instrument directly).
func (s *Server) watch() {
	defer close(s.done)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	names := []string{conformance.SignalTemperature, conformance.SignalDoorClosed}
	for n := range settingTypes {
		names = append(names, n)
	}
	beat := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		// A real server samples CurrentTime; gopcua's server notifies only
		// when told, so the fake tells it every HeartbeatEvery.
		if time.Since(beat) >= HeartbeatEvery && s.frozen() == nil {
			beat = time.Now()
			s.srv.ChangeNotification(ua.NewNumericNodeID(0, id.Server_ServerStatus_CurrentTime))
		}
		for _, u := range s.units {
			s.mu.Lock()
			w, old := u.work, u.progress
			s.mu.Unlock()
			if w == nil {
				continue
			}
			if p := w.Progress(); p != old {
				s.mu.Lock()
				u.progress = p
				s.mu.Unlock()
				s.srv.ChangeNotification(s.nid("FU_" + u.name + ".ActiveProgram.CurrentRuntime"))
			}
		}
		for _, n := range names {
			var cur string
			if v, err := s.In.ReadSignal(n); err != nil {
				cur = "unavailable"
			} else {
				cur = fmt.Sprintf("%T:%v", v, v)
			}
			s.mu.Lock()
			changed := s.snapshot[n] != cur
			s.snapshot[n] = cur
			s.mu.Unlock()
			if changed {
				s.notifyValue(s.nid(n))
			}
		}
	}
}

func header(handle uint32, sc ua.StatusCode) *ua.ResponseHeader {
	return &ua.ResponseHeader{Timestamp: time.Now(), RequestHandle: handle, ServiceResult: sc,
		ServiceDiagnostics: &ua.DiagnosticInfo{}, StringTable: []string{}, AdditionalHeader: ua.NewExtensionObject(nil)}
}

func (s *Server) track(sc *uasc.SecureChannel) {
	s.mu.Lock()
	s.channels[sc] = true
	s.mu.Unlock()
}

// reply sends a response later, from another goroutine.
func (s *Server) reply(sc *uasc.SecureChannel, reqID uint32, resp ua.Response) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := sc.SendResponseWithContext(ctx, reqID, resp); err != nil {
		log.Printf("opcuatest: late reply: %v", err)
	}
}

var variantKind = map[uint32]reflect.Kind{id.Double: reflect.Float64, id.String: reflect.String, id.Boolean: reflect.Bool}

// handleWrite checks types and writes through the instrument.
func (s *Server) handleWrite(sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
	req, ok := r.(*ua.WriteRequest)
	if !ok {
		return nil, ua.StatusBadRequestTypeInvalid
	}
	s.track(sc)
	if len(req.NodesToWrite) != 1 {
		return nil, ua.StatusBadTooManyOperations
	}
	w := req.NodesToWrite[0]
	respond := func(code ua.StatusCode) *ua.WriteResponse {
		return &ua.WriteResponse{ResponseHeader: header(req.RequestHeader.RequestHandle, ua.StatusOK), Results: []ua.StatusCode{code}, DiagnosticInfos: []*ua.DiagnosticInfo{}}
	}
	name := ""
	if w.NodeID.Namespace() == s.ns.ID() {
		name = w.NodeID.StringID()
	}
	if w.AttributeID != ua.AttributeIDValue || w.Value == nil || w.Value.Value == nil {
		return respond(ua.StatusBadWriteNotSupported), nil
	}
	val := w.Value.Value.Value()
	switch name {
	case "ro_counter", conformance.SignalTemperature, conformance.SignalDoorClosed:
		return respond(ua.StatusBadNotWritable), nil
	case "small":
		x, ok := val.(int16)
		if !ok {
			return respond(ua.StatusBadTypeMismatch), nil
		}
		if x < 0 || x > 100 {
			return respond(ua.StatusBadOutOfRange), nil
		}
		s.mu.Lock()
		s.extra["small"] = x
		s.mu.Unlock()
		s.notifyValue(s.nid("small"))
		return respond(ua.StatusOK), nil
	}
	dt, ok := settingTypes[name]
	if !ok {
		return respond(ua.StatusBadNodeIDUnknown), nil
	}
	if reflect.ValueOf(val).Kind() != variantKind[dt] {
		return respond(ua.StatusBadTypeMismatch), nil
	}
	answer := func(err error) ua.Response {
		switch err {
		case nil:
			s.notifyValue(s.nid(name))
			return respond(ua.StatusOK)
		case conformance.ErrRefused:
			return respond(ua.StatusBadInvalidState)
		case conformance.ErrReported:
			return respond(ua.StatusBadDeviceFailure)
		default: // ErrDropped: the link drops with the reply pending
			s.DropConnections()
			return nil
		}
	}
	// Answer in the server's goroutine when the write ends at once:
	// gopcua's channel does not order sends from several goroutines, so
	// late replies are kept for writes that block.
	done := make(chan error, 1)
	go func() { done <- s.In.WriteSetting(context.Background(), name, val) }()
	select {
	case err := <-done:
		return answer(err), nil
	case <-time.After(syncWindow):
	}
	go func() {
		if resp := answer(<-done); resp != nil {
			s.reply(sc, reqID, resp)
		}
	}()
	return nil, nil
}

// handleCall runs methods and functional units through the instrument.
func (s *Server) handleCall(sc *uasc.SecureChannel, r ua.Request, reqID uint32) (ua.Response, error) {
	req, ok := r.(*ua.CallRequest)
	if !ok {
		return nil, ua.StatusBadRequestTypeInvalid
	}
	s.track(sc)
	if len(req.MethodsToCall) != 1 {
		return nil, ua.StatusBadTooManyOperations
	}
	m := req.MethodsToCall[0]
	respond := func(res *ua.CallMethodResult) *ua.CallResponse {
		if res.InputArgumentResults == nil {
			res.InputArgumentResults = []ua.StatusCode{}
		}
		if res.InputArgumentDiagnosticInfos == nil {
			res.InputArgumentDiagnosticInfos = []*ua.DiagnosticInfo{}
		}
		if res.OutputArguments == nil {
			res.OutputArguments = []*ua.Variant{}
		}
		return &ua.CallResponse{ResponseHeader: header(req.RequestHeader.RequestHandle, ua.StatusOK),
			Results: []*ua.CallMethodResult{res}, DiagnosticInfos: []*ua.DiagnosticInfo{}}
	}
	status := func(code ua.StatusCode) *ua.CallResponse { return respond(&ua.CallMethodResult{StatusCode: code}) }
	if m.MethodID.Namespace() != s.ns.ID() {
		return status(ua.StatusBadMethodInvalid), nil
	}
	key := m.MethodID.StringID()
	switch key {
	case "estop":
		// As LADS devices do, an emergency stop aborts a running unit, and
		// the unit stays Aborted until a client calls Clear.
		s.mu.Lock()
		for _, u := range s.units {
			if u.work != nil {
				u.estopped = true
			}
		}
		s.mu.Unlock()
		if err := s.In.Stop(); err != nil {
			// The stop did not reach the work: it runs on, not aborted.
			s.mu.Lock()
			for _, u := range s.units {
				u.estopped = false
			}
			s.mu.Unlock()
			return status(ua.StatusBadDeviceFailure), nil
		}
		return status(ua.StatusOK), nil
	case conformance.ActionQuick, conformance.ActionConfirm, conformance.ActionForbidden, conformance.ActionProfile:
		params := map[string]any{}
		if key == conformance.ActionProfile {
			if len(m.InputArguments) != 2 {
				return status(ua.StatusBadArgumentsMissing), nil
			}
			steps, ok1 := m.InputArguments[0].Value().(string)
			cycles, ok2 := m.InputArguments[1].Value().(int32)
			if !ok1 || !ok2 {
				return respond(&ua.CallMethodResult{StatusCode: ua.StatusBadInvalidArgument, InputArgumentResults: []ua.StatusCode{ua.StatusBadTypeMismatch, ua.StatusBadTypeMismatch}}), nil
			}
			var list []any
			if err := json.Unmarshal([]byte(steps), &list); err != nil {
				return status(ua.StatusBadInvalidArgument), nil
			}
			params["steps"], params["cycles"] = list, int64(cycles)
		} else if len(m.InputArguments) != 0 {
			return status(ua.StatusBadTooManyArguments), nil
		}
		w, err := s.In.Start(key, params)
		if err != nil {
			return status(ua.StatusBadInvalidState), nil
		}
		answer := func() ua.Response {
			st, res, _ := w.State()
			switch st {
			case conformance.WorkSucceeded:
				out := []*ua.Variant{ua.MustVariant(true), ua.MustVariant(key)}
				if m, ok := res.(map[string]any); ok {
					if okv, ok := m["ok"].(bool); ok {
						out[0] = ua.MustVariant(okv)
					}
				}
				return respond(&ua.CallMethodResult{StatusCode: ua.StatusOK, OutputArguments: out})
			case conformance.WorkFailed:
				return status(ua.StatusBadDeviceFailure)
			case conformance.WorkCancelled:
				return status(ua.StatusBadRequestCancelledByClient)
			default:
				s.DropConnections()
				return nil
			}
		}
		select {
		case <-w.Done():
			return answer(), nil
		default:
		}
		go func() {
			<-w.Done()
			if resp := answer(); resp != nil {
				s.reply(sc, reqID, resp)
			}
		}()
		return nil, nil
	}
	if strings.HasPrefix(key, "Batch.") {
		return status(s.callProgram(key)), nil
	}
	for action, u := range s.units {
		prefix := "FU_" + action + "."
		switch key {
		case prefix + "Start", prefix + "StartProgram":
			return s.startUnit(sc, u, m, respond), nil
		case prefix + "Clear":
			s.mu.Lock()
			aborted := u.state == 5160
			s.mu.Unlock()
			if !aborted {
				return status(ua.StatusBadInvalidState), nil
			}
			s.clears.Add(1)
			s.setUnit(u, 5143, 0)
			go func() {
				time.Sleep(Hold)
				s.setUnit(u, 5085, 5120)
			}()
			return status(ua.StatusOK), nil
		case prefix + "Stop", prefix + "Abort":
			s.mu.Lock()
			w, running := u.work, u.state == 5099
			s.mu.Unlock()
			if !running || w == nil {
				return status(ua.StatusBadInvalidState), nil // already Stopped or Aborted, as LADS units answer
			}
			if key == prefix+"Abort" {
				s.mu.Lock()
				u.estopped = true // Abort ends Aborting -> Aborted, until Clear
				s.mu.Unlock()
			}
			w.Cancel()
			return status(ua.StatusOK), nil
		}
	}
	return status(ua.StatusBadMethodInvalid), nil
}
