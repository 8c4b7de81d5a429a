// Package silatest is a reusable fake SiLA 2 server for tests: give it
// Feature Definitions (FDL) and Go handlers and it serves them over real
// gRPC with the same run-time descriptors the sila2 client builds (no
// generated stubs). It implements SiLAService itself and, on request,
// CancelController and LockController; it speaks the SiLA error model
// (ABORTED + base64 SiLAError), validates parameters against their
// constraints, runs observable commands with _Info/_Intermediate/_Result,
// checks -bin metadata, serves TLS with a certificate made in the test, and
// can play a legacy (v1.0-era) server.
//
// [Backend] and [Execution] fake the adapter's seam instead ([sila2.Backend],
// [sila2.Options].Backend) as structs of funcs, for driving the adapter
// without a server: a stream that never comes back, a result lost after
// success.
package silatest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/internal/testnet"
	"github.com/openmhp/mhp-go/sila2"
)

// ErrDrop makes the fake behave as if the connection broke: a unary call
// answers UNAVAILABLE; an observable command's _Info streams break and the
// execution is forgotten (a resubscription gets INVALID_COMMAND_EXECUTION_UUID).
var ErrDrop = errors.New("silatest: connection dropped")

// Handlers are the Go implementations of a feature's calls, keyed by
// identifier. Values use the sila2 value mapping (snake_case keys).
// A handler's *sila2.Error goes to the client as that SiLA error, ErrDrop
// as a dropped connection, any other error as an UndefinedExecutionError.
type Handlers struct {
	// Properties answer unobservable Get_ calls.
	Properties map[string]func(ctx context.Context) (any, error)
	// Subscriptions serve observable properties: send each value until ctx
	// ends; returning ends the stream (an error breaks it).
	Subscriptions map[string]func(ctx context.Context, send func(any) error) error
	// Commands run unobservable commands.
	Commands map[string]func(ctx context.Context, params map[string]any) (map[string]any, error)
	// Observable run observable commands; the Exec reports progress and
	// intermediate responses and says when a cancel arrived.
	Observable map[string]func(ctx context.Context, x *Exec) (map[string]any, error)
	// Accept, when set for an observable command, runs in the initiating
	// call before the confirmation: its error refuses the command (nothing
	// runs); its value is handed to the handler as Exec.Accepted.
	Accept map[string]func(ctx context.Context, params map[string]any) (any, error)
}

// Options configure a Server.
type Options struct {
	Name, Type, UUID, Description, Version, VendorURL string
	// Legacy plays a v1.0-era server: bare feature identifiers in
	// ImplementedFeatures, a GetFeatureDefinition parameter named
	// QualifiedFeatureIdentifier, ValidationError for an unknown feature.
	Legacy bool
	// CancelController and LockController add those standard features.
	CancelController bool
	LockController   bool
	PauseController  bool
	// Unpausable names commands (by identifier) whose executions PauseController
	// refuses to pause with OperationNotSupported.
	Unpausable []string
	// Lifetime is the lifetime of execution sent in confirmations (0: none).
	Lifetime time.Duration
}

// Server is the fake SiLA 2 server.
type Server struct {
	fw   *sila2.Framework
	opts Options

	mu       sync.Mutex
	name     string
	features []*feature
	routes   map[string]route
	execs    map[string]*Exec
	lockID   string
	lockSeen map[string]string // "Feature/Item" -> last LockIdentifier metadata received
	calls    map[string]int
	required []*metaReq
	binaries map[string]*blob
	breakCh  chan struct{}
	grpc     *grpc.Server
	lis      net.Listener
}

// metaReq is metadata the server requires on the calls of some features.
type metaReq struct {
	f        *feature // the declaring feature
	id       string   // metadata identifier
	affected []string // fully qualified feature ids
	check    func(any) error
}

type feature struct {
	c    *sila2.Compiled
	h    Handlers
	text string
}

type routeKind int

const (
	routeGet routeKind = iota
	routeSubscribe
	routeCall
	routeStart
	routeInfo
	routeIntermediate
	routeResult
	routeAffected
)

type route struct {
	kind routeKind
	f    *feature
	item string
}

// New makes a server with SiLAService (and the standard features the
// options ask for).
func New(opts Options) (*Server, error) {
	fw, err := sila2.NewFramework()
	if err != nil {
		return nil, err
	}
	if opts.UUID == "" {
		opts.UUID = newUUID()
	}
	if opts.Name == "" {
		opts.Name = "SiLA fake"
	}
	if opts.Type == "" {
		opts.Type = "TestServer"
	}
	if opts.Version == "" {
		opts.Version = "0.1"
	}
	s := &Server{fw: fw, opts: opts, name: opts.Name, routes: map[string]route{}, execs: map[string]*Exec{}, calls: map[string]int{}, lockSeen: map[string]string{},
		breakCh: make(chan struct{}), binaries: map[string]*blob{}}
	svc := sila2.SiLAServiceFDL
	if opts.Legacy {
		svc = strings.Replace(svc, "<Identifier>FeatureIdentifier</Identifier>", "<Identifier>QualifiedFeatureIdentifier</Identifier>", 1)
	}
	if err := s.AddFeature(svc, s.serviceHandlers()); err != nil {
		return nil, err
	}
	if opts.CancelController {
		if err := s.AddFeature(CancelControllerFDL, s.cancelHandlers()); err != nil {
			return nil, err
		}
	}
	if opts.PauseController {
		if err := s.AddFeature(PauseControllerFDL, s.pauseHandlers()); err != nil {
			return nil, err
		}
	}
	if opts.LockController {
		if err := s.AddFeature(LockControllerFDL, s.lockHandlers()); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// UUID is the server UUID.
func (s *Server) UUID() string { return s.opts.UUID }

// Framework returns the framework descriptors the server uses.
func (s *Server) Framework() *sila2.Framework { return s.fw }

// AddFeature parses an FDL, compiles it and routes its calls to h. Call it
// before Start.
func (s *Server) AddFeature(fdl string, h Handlers) error {
	f, err := sila2.ParseFDL([]byte(fdl))
	if err != nil {
		return err
	}
	c, err := sila2.Compile(s.fw, f)
	if err != nil {
		return err
	}
	ft := &feature{c: c, h: h, text: fdl}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.features = append(s.features, ft)
	for _, p := range f.Properties {
		if p.IsObservable() {
			s.routes[c.Path("Subscribe_"+p.Identifier)] = route{routeSubscribe, ft, p.Identifier}
		} else {
			s.routes[c.Path("Get_"+p.Identifier)] = route{routeGet, ft, p.Identifier}
		}
	}
	for _, cmd := range f.Commands {
		if !cmd.IsObservable() {
			s.routes[c.Path(cmd.Identifier)] = route{routeCall, ft, cmd.Identifier}
			continue
		}
		s.routes[c.Path(cmd.Identifier)] = route{routeStart, ft, cmd.Identifier}
		s.routes[c.Path(cmd.Identifier+"_Info")] = route{routeInfo, ft, cmd.Identifier}
		s.routes[c.Path(cmd.Identifier+"_Result")] = route{routeResult, ft, cmd.Identifier}
		if len(cmd.Intermediate) > 0 {
			s.routes[c.Path(cmd.Identifier+"_Intermediate")] = route{routeIntermediate, ft, cmd.Identifier}
		}
	}
	for _, m := range f.Metadata {
		s.routes[c.Path("Get_FCPAffectedByMetadata_"+m.Identifier)] = route{routeAffected, ft, m.Identifier}
	}
	return nil
}

// RequireMetadata makes the metadata <feature>/Metadata/<Id> (declared by
// an added feature) required on every call of the affected features (fully
// qualified ids); check judges its value (nil: any value). A missing value
// is FrameworkError INVALID_METADATA; check's error goes to the client.
func (s *Server) RequireMetadata(featureID, metadataID string, affected []string, check func(any) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.features {
		if !strings.EqualFold(f.c.Feature.FullyQualifiedID(), featureID) && f.c.Feature.Identifier != featureID {
			continue
		}
		for _, m := range f.c.Feature.Metadata {
			if m.Identifier == metadataID {
				s.required = append(s.required, &metaReq{f: f, id: metadataID, affected: affected, check: check})
				return nil
			}
		}
	}
	return fmt.Errorf("silatest: no feature %s declaring metadata %s", featureID, metadataID)
}

// BreakStreams breaks every open _Info, _Intermediate and property
// subscription stream once with UNAVAILABLE, as a network blip would; the
// connection stays up, the executions go on and a client may subscribe
// again.
func (s *Server) BreakStreams() {
	s.mu.Lock()
	close(s.breakCh)
	s.breakCh = make(chan struct{})
	s.mu.Unlock()
}

func (s *Server) breaker() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.breakCh
}

// Start serves on 127.0.0.1 with TLS when cert is given, plaintext
// otherwise, and returns the address: a free port below the ephemeral
// range, so a test can stop the server and serve again on the same address
// without a reconnecting client holding the port (testnet).
func (s *Server) Start(cert *tls.Certificate) (string, error) {
	lis, err := testnet.Listen("127.0.0.1")
	if err != nil {
		return "", err
	}
	return s.Serve(lis, cert), nil
}

// Serve serves on lis (TLS when cert is given) in the background and
// returns the listener's address.
func (s *Server) Serve(lis net.Listener, cert *tls.Certificate) string {
	opts := []grpc.ServerOption{grpc.UnknownServiceHandler(s.handle)}
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})))
	}
	g := grpc.NewServer(opts...)
	s.mu.Lock()
	s.grpc, s.lis = g, lis
	s.mu.Unlock()
	go func() { _ = g.Serve(lis) }()
	return lis.Addr().String()
}

// Stop closes the listener and every connection at once (in-flight streams break).
func (s *Server) Stop() {
	s.mu.Lock()
	g := s.grpc
	execs := make([]*Exec, 0, len(s.execs))
	for _, x := range s.execs {
		execs = append(execs, x)
	}
	s.mu.Unlock()
	for _, x := range execs {
		x.stopOn.Do(func() { close(x.stopped) })
	}
	if g != nil {
		g.Stop()
	}
}

// Calls counts the calls that reached a handler, by "Feature/Item".
func (s *Server) Calls(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func (s *Server) count(f *feature, item string) {
	s.mu.Lock()
	s.calls[f.c.Feature.Identifier+"/"+item]++
	s.mu.Unlock()
}

func (s *Server) siLAStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrDrop) {
		return status.Error(codes.Unavailable, "silatest: connection dropped")
	}
	if e, ok := sila2.AsSiLAError(err); ok {
		return s.fw.Status(e)
	}
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	return s.fw.Status(&sila2.Error{Kind: sila2.KindUndefined, Message: err.Error()})
}

func frameworkErr(t int32, format string, args ...any) *sila2.Error {
	return &sila2.Error{Kind: sila2.KindFramework, FrameworkType: t, Message: fmt.Sprintf(format, args...)}
}

func (s *Server) handle(_ any, stream grpc.ServerStream) error {
	path, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	if s.isBinaryPath(path) {
		return s.handleBinary(path, stream)
	}
	s.mu.Lock()
	r, ok := s.routes[path]
	s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.Unimplemented, "silatest: no method %s", path)
	}
	name := path[strings.LastIndexByte(path, '/')+1:]
	md, _ := r.f.c.Method(name)
	in := dynamicpb.NewMessage(md.Input())
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	if err := s.checkMetadata(stream.Context(), r); err != nil {
		return s.siLAStatus(err)
	}
	ctx := stream.Context()
	switch r.kind {
	case routeGet:
		return s.siLAStatus(s.get(ctx, stream, r, md))
	case routeSubscribe:
		return s.siLAStatus(s.subscribe(ctx, stream, r, md))
	case routeCall:
		return s.siLAStatus(s.call(ctx, stream, r, md, in))
	case routeStart:
		return s.siLAStatus(s.start(stream, r, in))
	case routeInfo:
		s.count(r.f, r.item+"_Info")
		return s.siLAStatus(s.info(ctx, stream, in))
	case routeIntermediate:
		return s.siLAStatus(s.intermediate(ctx, stream, r, md, in))
	case routeResult:
		return s.siLAStatus(s.result(stream, r, md, in))
	case routeAffected:
		return s.siLAStatus(s.affected(stream, r, md))
	}
	return status.Error(codes.Internal, "bad route")
}

// checkMetadata enforces SiLA metadata rules: none on SiLAService, and the
// lock identifier on every call of a locked server outside the core features.
func (s *Server) checkMetadata(ctx context.Context, r route) error {
	md, _ := metadata.FromIncomingContext(ctx)
	var silaKeys []string
	for k := range md {
		if strings.HasPrefix(k, "sila-") && strings.HasSuffix(k, "-bin") {
			silaKeys = append(silaKeys, k)
		}
	}
	if r.f.c.Feature.Identifier == "SiLAService" {
		if len(silaKeys) > 0 {
			return frameworkErr(sila2.FrameworkNoMetadataAllowed, "SiLAService calls take no metadata (got %s)", strings.Join(silaKeys, ", "))
		}
		return nil
	}
	if r.kind == routeInfo || r.kind == routeResult || r.kind == routeIntermediate || r.kind == routeAffected {
		return nil
	}
	s.mu.Lock()
	reqs := append([]*metaReq(nil), s.required...)
	s.mu.Unlock()
	for _, q := range reqs {
		hit := false
		for _, a := range q.affected {
			hit = hit || strings.EqualFold(a, r.f.c.Feature.FullyQualifiedID())
		}
		if !hit {
			continue
		}
		vals := md.Get(sila2.MetadataKey(q.f.c.Feature.FullyQualifiedID() + "/Metadata/" + q.id))
		if len(vals) == 0 {
			return frameworkErr(sila2.FrameworkInvalidMetadata, "metadata %s is required", q.id)
		}
		v, err := decodeMetadata(q.f, q.id, []byte(vals[0]))
		if err != nil {
			return frameworkErr(sila2.FrameworkInvalidMetadata, "metadata %s: %v", q.id, err)
		}
		if q.check != nil {
			if err := q.check(v); err != nil {
				return err
			}
		}
	}
	key := sila2.MetadataKey(sila2.LockControllerID + "/Metadata/LockIdentifier")
	vals := md.Get(key)
	seen := ""
	if lc := s.feature("LockController"); lc != nil && len(vals) > 0 {
		if v, err := decodeMetadata(lc, "LockIdentifier", []byte(vals[0])); err == nil {
			seen, _ = v.(string)
		}
	}
	s.mu.Lock()
	s.lockSeen[r.f.c.Feature.Identifier+"/"+r.item] = seen
	s.mu.Unlock()
	s.mu.Lock()
	lock := s.lockID
	s.mu.Unlock()
	if lock == "" || !s.lockAffects(r.f) {
		return nil
	}
	if len(vals) == 0 {
		return frameworkErr(sila2.FrameworkInvalidMetadata, "the server is locked: the LockIdentifier metadata is required")
	}
	lc := s.feature("LockController")
	v, err := decodeMetadata(lc, "LockIdentifier", []byte(vals[0]))
	if err != nil {
		return frameworkErr(sila2.FrameworkInvalidMetadata, "LockIdentifier metadata: %v", err)
	}
	if v != lock {
		return &sila2.Error{Kind: sila2.KindDefined, Identifier: lc.c.FQID("DefinedExecutionError", "InvalidLockIdentifier"),
			Message: "the lock identifier does not match the lock"}
	}
	return nil
}

// lockAffects reports whether the lock protects f's calls: every feature's
// but SiLAService's, LockController's (another client must be able to ask
// LockServer and hear ServerAlreadyLocked, and to read IsLocked) and
// CancelController's.
func (s *Server) lockAffects(f *feature) bool {
	switch f.c.Feature.Identifier {
	case "SiLAService", "LockController", "CancelController":
		return false
	}
	return true
}

func decodeMetadata(f *feature, id string, raw []byte) (any, error) {
	for _, m := range f.c.Feature.Metadata {
		if m.Identifier != id {
			continue
		}
		msg := dynamicpb.NewMessage(f.c.File.Messages().ByName(protoreflect.Name("Metadata_" + id)))
		if err := proto.Unmarshal(raw, msg); err != nil {
			return nil, err
		}
		v, err := f.c.DecodeElements(msg, []sila2.Element{{Identifier: m.Identifier, DataType: m.DataType}})
		if err != nil {
			return nil, err
		}
		return v[sila2.SnakeCase(id)], nil
	}
	return nil, fmt.Errorf("no metadata %s", id)
}

func (s *Server) feature(id string) *feature {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.features {
		if f.c.Feature.Identifier == id {
			return f
		}
	}
	return nil
}

func (s *Server) get(ctx context.Context, stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor) error {
	p, _ := r.f.c.Feature.Property(r.item)
	h := r.f.h.Properties[r.item]
	if h == nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "property " + r.item + " has no handler"}
	}
	s.count(r.f, r.item)
	v, err := h(ctx)
	if err != nil {
		return err
	}
	els := []sila2.Element{{Identifier: p.Identifier, DataType: p.DataType}}
	vals, err := s.offerDownloads(r.f, els, map[string]any{sila2.SnakeCase(p.Identifier): v})
	if err != nil {
		return err
	}
	out, err := r.f.c.EncodeElements(md.Output(), els, vals)
	if err != nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "handler value: " + err.Error()}
	}
	return stream.SendMsg(out)
}

func (s *Server) subscribe(ctx context.Context, stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor) error {
	p, _ := r.f.c.Feature.Property(r.item)
	h := r.f.h.Subscriptions[r.item]
	if h == nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "property " + r.item + " has no handler"}
	}
	s.count(r.f, r.item)
	els := []sila2.Element{{Identifier: p.Identifier, DataType: p.DataType}}
	// BreakStreams ends the subscription UNAVAILABLE on a live connection.
	brk := s.breaker()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	broken := make(chan struct{})
	go func() {
		select {
		case <-brk:
			close(broken)
			cancel()
		case <-hctx.Done():
		}
	}()
	err := h(hctx, func(v any) error {
		out, err := r.f.c.EncodeElements(md.Output(), els, map[string]any{sila2.SnakeCase(p.Identifier): v})
		if err != nil {
			return err
		}
		return stream.SendMsg(out)
	})
	select {
	case <-broken:
		return status.Error(codes.Unavailable, "silatest: stream broken")
	default:
		return err
	}
}

// params decodes and validates a command's parameters as a SiLA server
// must: every parameter present, every constraint met; a failure is a
// ValidationError naming the fully qualified parameter.
func (s *Server) params(f *feature, cmd *sila2.Command, in *dynamicpb.Message) (map[string]any, error) {
	vals, err := f.c.DecodeElements(in, cmd.Parameters)
	if err != nil {
		return nil, &sila2.Error{Kind: sila2.KindValidation, Message: err.Error()}
	}
	if vals, err = s.resolveUploads(f, cmd, vals); err != nil {
		return nil, err
	}
	for _, p := range cmd.Parameters {
		name := sila2.SnakeCase(p.Identifier)
		fq := f.c.FQID("Command", cmd.Identifier, "Parameter", p.Identifier)
		v := vals[name]
		if v == nil {
			return nil, &sila2.Error{Kind: sila2.KindValidation, Parameter: fq, Message: "parameter " + p.Identifier + " is missing"}
		}
		if _, e := f.c.Shape(&p.DataType).Check(name, v); e != nil {
			return nil, &sila2.Error{Kind: sila2.KindValidation, Parameter: fq, Message: e.(*mhp.Error).Message}
		}
	}
	return vals, nil
}

func (s *Server) call(ctx context.Context, stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor, in *dynamicpb.Message) error {
	cmd, _ := r.f.c.Feature.Command(r.item)
	vals, err := s.params(r.f, cmd, in)
	if err != nil {
		return err
	}
	h := r.f.h.Commands[r.item]
	if h == nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "command " + r.item + " has no handler"}
	}
	s.count(r.f, r.item)
	res, err := h(ctx, vals)
	if err != nil {
		return err
	}
	if res, err = s.offerDownloads(r.f, cmd.Responses, res); err != nil {
		return err
	}
	out, err := r.f.c.EncodeElements(md.Output(), cmd.Responses, res)
	if err != nil {
		return &sila2.Error{Kind: sila2.KindUndefined, Message: "handler responses: " + err.Error()}
	}
	return stream.SendMsg(out)
}

func (s *Server) affected(stream grpc.ServerStream, r route, md protoreflect.MethodDescriptor) error {
	var ids []any
	if r.f.c.Feature.Identifier == "LockController" && r.item == "LockIdentifier" {
		s.mu.Lock()
		for _, f := range s.features {
			if s.lockAffects(f) {
				ids = append(ids, f.c.Feature.FullyQualifiedID())
			}
		}
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		for _, q := range s.required {
			if q.f == r.f && q.id == r.item {
				for _, a := range q.affected {
					ids = append(ids, a)
				}
			}
		}
		s.mu.Unlock()
		if len(ids) == 0 {
			// Metadata nobody requires affects the feature that declares it.
			ids = append(ids, r.f.c.Feature.FullyQualifiedID())
		}
	}
	out, err := r.f.c.EncodeElements(md.Output(), []sila2.Element{{Identifier: "AffectedCalls",
		DataType: sila2.DataType{List: &sila2.DataType{Basic: sila2.BasicString}}}}, map[string]any{"affected_calls": ids})
	if err != nil {
		return err
	}
	return stream.SendMsg(out)
}
