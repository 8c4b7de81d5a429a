package sila2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Fully qualified identifiers of the standard features the client uses.
const (
	SiLAServiceID      = "org.silastandard/core/SiLAService/v1"
	CancelControllerID = "org.silastandard/core.commands/CancelController/v1"
	LockControllerID   = "org.silastandard/core/LockController/v1"
	PauseControllerID  = "org.silastandard/core.commands/PauseController/v1"
)

// TLSConfig is how the client trusts the server. SiLA 2 v1.1 requires TLS:
// give a CA (the server's self-signed certificate works as its own CA) or
// the SHA-256 pin of the server certificate; plaintext only for legacy
// servers, when InsecurePlaintext says so.
type TLSConfig struct {
	// CAPEM holds PEM certificates the server's chain must end in.
	CAPEM []byte
	// PinSHA256 is the hex SHA-256 of the server certificate (DER); colons
	// and case are ignored. With a pin, the chain is not checked against a CA.
	PinSHA256 string
	// ServerName, when set, is checked against the server certificate's
	// names after its chain (or pin) is verified, and sent as SNI. A
	// certificate with DNS or IP SANs is checked by its SANs only (Go's
	// standard rules: wildcards, an IP literal against IP SANs); one with
	// neither — the typical SiLA 2 certificate, which carries only CN=SiLA2
	// and which Go's own check refuses — by its Common Name: exactly,
	// case-insensitively, an IP literal compared as an IP, no wildcards.
	// Unset, only the chain (or pin) is checked: SiLA certificates name
	// "SiLA2", not the host.
	ServerName string
	// InsecurePlaintext talks plaintext HTTP/2 (legacy v1.0 servers).
	InsecurePlaintext bool
}

// ClientConfig configures Dial.
type ClientConfig struct {
	// Endpoint is host:port.
	Endpoint string
	TLS      TLSConfig
	// CallTimeout bounds each unary call whose context has no deadline; default 10s.
	CallTimeout time.Duration
}

// Client is a generic SiLA 2 client: it reads SiLAService, compiles each
// feature's definition to protobuf descriptors at run time and calls any
// property or command by name.
type Client struct {
	conn        *grpc.ClientConn
	fw          *Framework
	service     *Compiled
	callTimeout time.Duration

	mu       sync.RWMutex
	features map[string]*Compiled // lower-case FQID and identifier
	meta     map[string]*metaValue
}

type metaValue struct {
	key      string // gRPC header key
	value    []byte
	affected []string // lower-case FQIDs (features or calls)
}

// ServerInfo is what SiLAService says of the server.
type ServerInfo struct {
	Name, Type, UUID, Description, Version, VendorURL string
	Features                                          []string
}

// Dial connects to a SiLA 2 server (lazily, as gRPC does) and prepares the
// SiLAService descriptors. Call LoadFeatures to read the server's features.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("sila2: no endpoint")
	}
	creds, err := cfg.TLS.credentials()
	if err != nil {
		return nil, err
	}
	fw, err := NewFramework()
	if err != nil {
		return nil, err
	}
	svcFDL, err := ParseFDL([]byte(SiLAServiceFDL))
	if err != nil {
		return nil, err
	}
	svc, err := Compile(fw, svcFDL)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(grpcTarget(cfg.Endpoint), grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("sila2: %s: %w", cfg.Endpoint, err)
	}
	c := &Client{conn: conn, fw: fw, service: svc, callTimeout: cfg.CallTimeout,
		features: map[string]*Compiled{}, meta: map[string]*metaValue{}}
	if c.callTimeout <= 0 {
		c.callTimeout = 10 * time.Second
	}
	c.addFeature(svc)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Connected reports whether the gRPC channel has a live connection (state
// READY). A call that failed UNAVAILABLE on a channel still READY was ended
// by the server (a broken stream), not by a lost link.
func (c *Client) Connected() bool { return c.conn.GetState() == connectivity.Ready }

// Framework returns the framework descriptors the client uses.
func (c *Client) Framework() *Framework { return c.fw }

func (c *Client) addFeature(f *Compiled) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.features[strings.ToLower(f.Feature.FullyQualifiedID())] = f
	c.features[strings.ToLower(f.Feature.Identifier)] = f
}

// Feature returns a loaded feature by identifier or fully qualified id.
func (c *Client) Feature(id string) (*Compiled, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	f, ok := c.features[strings.ToLower(strings.TrimSpace(id))]
	return f, ok
}

// HasFeature reports whether the server implements a feature (after LoadFeatures).
func (c *Client) HasFeature(id string) bool {
	_, ok := c.Feature(id)
	return ok
}

func (c *Client) unary(ctx context.Context, f *Compiled, method string, in proto.Message, callID string) (*dynamicpb.Message, error) {
	md, ok := f.Method(method)
	if !ok {
		return nil, fmt.Errorf("sila2: feature %s has no method %s", f.Feature.Identifier, method)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
	}
	ctx = c.withMetadata(ctx, f, callID)
	out := dynamicpb.NewMessage(md.Output())
	if err := c.conn.Invoke(ctx, f.Path(method), in, out); err != nil {
		return nil, c.fw.DecodeError(err)
	}
	return out, nil
}

func (c *Client) withMetadata(ctx context.Context, f *Compiled, callID string) context.Context {
	if callID == "" || f.Feature.Identifier == "SiLAService" {
		return ctx
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	featID := strings.ToLower(f.Feature.FullyQualifiedID())
	call := strings.ToLower(callID)
	for _, m := range c.meta {
		for _, a := range m.affected {
			if a == featID || a == call {
				ctx = metadata.AppendToOutgoingContext(ctx, m.key, string(m.value))
				break
			}
		}
	}
	return ctx
}

func (c *Client) getString(ctx context.Context, prop string) (string, error) {
	v, err := c.Property(ctx, "SiLAService", prop)
	if err != nil {
		return "", err
	}
	s, _ := v.(string)
	return s, nil
}

// ServerInfo reads SiLAService's properties.
func (c *Client) ServerInfo(ctx context.Context) (*ServerInfo, error) {
	var info ServerInfo
	for _, p := range []struct {
		name string
		dst  *string
	}{{"ServerName", &info.Name}, {"ServerType", &info.Type}, {"ServerUUID", &info.UUID},
		{"ServerDescription", &info.Description}, {"ServerVersion", &info.Version}, {"ServerVendorURL", &info.VendorURL}} {
		s, err := c.getString(ctx, p.name)
		if err != nil {
			return nil, fmt.Errorf("sila2: SiLAService %s: %w", p.name, err)
		}
		*p.dst = s
	}
	feats, err := c.ImplementedFeatures(ctx)
	if err != nil {
		return nil, err
	}
	info.Features = feats
	return &info, nil
}

// ImplementedFeatures lists the server's features as it names them (fully
// qualified, or bare identifiers on legacy servers).
func (c *Client) ImplementedFeatures(ctx context.Context) ([]string, error) {
	v, err := c.Property(ctx, "SiLAService", "ImplementedFeatures")
	if err != nil {
		return nil, fmt.Errorf("sila2: SiLAService ImplementedFeatures: %w", err)
	}
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// FeatureDefinition fetches a feature's FDL. The request is built by field
// number, so legacy servers whose field is named QualifiedFeatureIdentifier answer too.
func (c *Client) FeatureDefinition(ctx context.Context, id string) (string, error) {
	cmd, _ := c.service.Feature.Command("GetFeatureDefinition")
	md, _ := c.service.Method("GetFeatureDefinition")
	in, err := c.service.EncodeElements(md.Input(), cmd.Parameters, map[string]any{"feature_identifier": id})
	if err != nil {
		return "", err
	}
	out, err := c.unary(ctx, c.service, "GetFeatureDefinition", in, "")
	if err != nil {
		return "", fmt.Errorf("sila2: GetFeatureDefinition %s: %w", id, err)
	}
	res, err := c.service.DecodeElements(out, cmd.Responses)
	if err != nil {
		return "", err
	}
	s, _ := res["feature_definition"].(string)
	return s, nil
}

// LoadFeatures reads every implemented feature's definition and compiles
// it. A feature whose definition does not parse is reported in the error
// list but does not stop the others.
func (c *Client) LoadFeatures(ctx context.Context) ([]*Compiled, error) {
	texts, err := c.FeatureDefinitions(ctx)
	if err != nil {
		return nil, err
	}
	return c.CompileFeatures(texts)
}

// FeatureDefinitions reads the FDL of every implemented feature but
// SiLAService, in the server's order.
func (c *Client) FeatureDefinitions(ctx context.Context) ([]string, error) {
	ids, err := c.ImplementedFeatures(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if strings.EqualFold(id, SiLAServiceID) || strings.EqualFold(id, "SiLAService") {
			continue
		}
		text, err := c.FeatureDefinition(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, text)
	}
	return out, nil
}

// CompileFeatures compiles FDL texts (read from the server, or from a
// descriptor cache) and adds them to the client; SiLAService is always
// first. A definition that does not parse is reported but does not stop
// the others.
func (c *Client) CompileFeatures(texts []string) ([]*Compiled, error) {
	out := []*Compiled{c.service}
	var errs []error
	for i, text := range texts {
		f, err := ParseFDL([]byte(text))
		if err != nil {
			errs = append(errs, fmt.Errorf("feature definition %d: %w", i, err))
			continue
		}
		comp, err := Compile(c.fw, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.addFeature(comp)
		out = append(out, comp)
	}
	return out, errors.Join(errs...)
}

func (c *Client) lookup(feature string) (*Compiled, error) {
	f, ok := c.Feature(feature)
	if !ok {
		return nil, fmt.Errorf("sila2: feature %q is not loaded (the server does not implement it, or LoadFeatures was not called)", feature)
	}
	return f, nil
}

// Property reads an unobservable property (Get_), or the first value of an
// observable one (Subscribe_, then the stream is cancelled).
func (c *Client) Property(ctx context.Context, feature, prop string) (any, error) {
	f, err := c.lookup(feature)
	if err != nil {
		return nil, err
	}
	p, ok := f.Feature.Property(prop)
	if !ok {
		return nil, fmt.Errorf("sila2: feature %s has no property %s", f.Feature.Identifier, prop)
	}
	if p.IsObservable() {
		sub, cancel := context.WithTimeout(ctx, c.callTimeout)
		defer cancel()
		var first any
		got := errors.New("got first")
		err := c.Subscribe(sub, feature, prop, func(v any) error { first = v; return got })
		if err == got {
			return first, nil
		}
		return nil, err
	}
	md, _ := f.Method("Get_" + p.Identifier)
	out, err := c.unary(ctx, f, "Get_"+p.Identifier, dynamicpb.NewMessage(md.Input()), f.FQID("Property", p.Identifier))
	if err != nil {
		return nil, err
	}
	res, err := f.DecodeElements(out, []Element{{Identifier: p.Identifier, DataType: p.DataType}})
	if err != nil {
		return nil, err
	}
	return c.resolveBinaries(ctx, res[SnakeCase(p.Identifier)])
}

// Subscribe follows an observable property, calling fn with each value
// until ctx ends, the stream breaks or fn returns an error (which Subscribe
// returns). A stream the server closes is an error.
func (c *Client) Subscribe(ctx context.Context, feature, prop string, fn func(any) error) error {
	f, err := c.lookup(feature)
	if err != nil {
		return err
	}
	p, ok := f.Feature.Property(prop)
	if !ok || !p.IsObservable() {
		return fmt.Errorf("sila2: feature %s has no observable property %s", f.Feature.Identifier, prop)
	}
	name := "Subscribe_" + p.Identifier
	md, _ := f.Method(name)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	els := []Element{{Identifier: p.Identifier, DataType: p.DataType}}
	return c.serverStream(c.withMetadata(ctx, f, f.FQID("Property", p.Identifier)), f, name, dynamicpb.NewMessage(md.Input()), md.Output(),
		func(m *dynamicpb.Message) error {
			res, err := f.DecodeElements(m, els)
			if err != nil {
				return err
			}
			v, err := c.resolveBinaries(ctx, res[SnakeCase(p.Identifier)])
			if err != nil {
				return err
			}
			return fn(v)
		})
}

var errStreamEnded = errors.New("stream closed by the server")

func (c *Client) serverStream(ctx context.Context, f *Compiled, method string, in proto.Message, out protoreflect.MessageDescriptor, fn func(*dynamicpb.Message) error) error {
	st, err := c.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: method, ServerStreams: true}, f.Path(method))
	if err != nil {
		return c.streamErr(ctx, err)
	}
	if err := st.SendMsg(in); err != nil {
		if err == io.EOF {
			// The real error comes from RecvMsg.
			err = st.RecvMsg(dynamicpb.NewMessage(out))
		}
		return c.streamErr(ctx, err)
	}
	if err := st.CloseSend(); err != nil {
		return c.streamErr(ctx, err)
	}
	for {
		m := dynamicpb.NewMessage(out)
		if err := st.RecvMsg(m); err != nil {
			if err == io.EOF {
				return &ConnectionError{Err: fmt.Errorf("%s: %w", method, errStreamEnded)}
			}
			return c.streamErr(ctx, err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

func (c *Client) streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return c.fw.DecodeError(err)
}

// Call runs an unobservable command and returns its responses keyed by
// snake_case identifiers. Params are keyed the same way.
func (c *Client) Call(ctx context.Context, feature, command string, params map[string]any) (map[string]any, error) {
	f, cmd, md, err := c.command(feature, command)
	if err != nil {
		return nil, err
	}
	if cmd.IsObservable() {
		return nil, fmt.Errorf("sila2: command %s is observable: use Start", cmd.Identifier)
	}
	in, err := c.encodeParams(ctx, f, cmd, md, params)
	if err != nil {
		return nil, err
	}
	out, err := c.unary(ctx, f, cmd.Identifier, in, f.FQID("Command", cmd.Identifier))
	if err != nil {
		return nil, err
	}
	return c.decodeResponses(ctx, f, out, cmd.Responses)
}

// encodeParams uploads binaries above the inline limit (with the command's
// metadata) and encodes the parameters.
func (c *Client) encodeParams(ctx context.Context, f *Compiled, cmd *Command, md protoreflect.MethodDescriptor, params map[string]any) (*dynamicpb.Message, error) {
	params, err := c.uploadLarge(c.withMetadata(ctx, f, f.FQID("Command", cmd.Identifier)), f, cmd, params)
	if err != nil {
		return nil, err
	}
	return f.EncodeElements(md.Input(), cmd.Parameters, params)
}

// decodeResponses decodes responses and downloads binaries sent by transfer.
func (c *Client) decodeResponses(ctx context.Context, f *Compiled, out protoreflect.Message, es []Element) (map[string]any, error) {
	res, err := f.DecodeElements(out, es)
	if err != nil {
		return nil, err
	}
	if _, err := c.resolveBinaries(ctx, res); err != nil {
		return nil, err
	}
	return res, nil
}

func (c *Client) command(feature, command string) (*Compiled, *Command, protoreflect.MethodDescriptor, error) {
	f, err := c.lookup(feature)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd, ok := f.Feature.Command(command)
	if !ok {
		return nil, nil, nil, fmt.Errorf("sila2: feature %s has no command %s", f.Feature.Identifier, command)
	}
	md, _ := f.Method(cmd.Identifier)
	return f, cmd, md, nil
}

// MetadataKey returns the gRPC header key of a fully qualified metadata id:
// "sila-" + lower(id with "/" -> "-") + "-bin".
func MetadataKey(fqid string) string {
	return "sila-" + strings.ToLower(strings.ReplaceAll(fqid, "/", "-")) + "-bin"
}

// SetMetadata sends value as the metadata fqid
// (<feature fqid>/Metadata/<Id>) on every call the server says it affects
// (Get_FCPAffectedByMetadata_<Id>). A nil value stops sending it.
func (c *Client) SetMetadata(ctx context.Context, fqid string, value any) error {
	i := strings.LastIndex(strings.ToLower(fqid), "/metadata/")
	if i < 0 {
		return fmt.Errorf("sila2: metadata id %q is not <feature>/Metadata/<Identifier>", fqid)
	}
	featID, metaID := fqid[:i], fqid[i+len("/metadata/"):]
	if value == nil {
		c.mu.Lock()
		delete(c.meta, strings.ToLower(fqid))
		c.mu.Unlock()
		return nil
	}
	f, err := c.lookup(featID)
	if err != nil {
		return err
	}
	var decl *Metadata
	for i := range f.Feature.Metadata {
		if strings.EqualFold(f.Feature.Metadata[i].Identifier, metaID) {
			decl = &f.Feature.Metadata[i]
		}
	}
	if decl == nil {
		return fmt.Errorf("sila2: feature %s declares no metadata %s", f.Feature.Identifier, metaID)
	}
	msgDesc := f.File.Messages().ByName(protoreflect.Name("Metadata_" + decl.Identifier))
	msg, err := f.EncodeElements(msgDesc, []Element{{Identifier: decl.Identifier, DataType: decl.DataType}},
		map[string]any{SnakeCase(decl.Identifier): value})
	if err != nil {
		return fmt.Errorf("sila2: metadata %s: %w", fqid, err)
	}
	raw, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	name := "Get_FCPAffectedByMetadata_" + decl.Identifier
	md, _ := f.Method(name)
	out, err := c.unary(ctx, f, name, dynamicpb.NewMessage(md.Input()), "")
	if err != nil {
		return fmt.Errorf("sila2: %s: %w", name, err)
	}
	res, err := f.DecodeElements(out, []Element{{Identifier: "AffectedCalls", DataType: DataType{List: &DataType{Basic: BasicString}}}})
	if err != nil {
		return err
	}
	var affected []string
	list, _ := res["affected_calls"].([]any)
	for _, a := range list {
		if s, ok := a.(string); ok {
			affected = append(affected, strings.ToLower(s))
		}
	}
	c.mu.Lock()
	c.meta[strings.ToLower(fqid)] = &metaValue{key: MetadataKey(f.Feature.FullyQualifiedID() + "/Metadata/" + decl.Identifier), value: raw, affected: affected}
	c.mu.Unlock()
	return nil
}

// Lock locks the server with LockController under lockID for timeout (zero:
// the server's rule) and sends the LockIdentifier metadata from then on.
func (c *Client) Lock(ctx context.Context, lockID string, timeout time.Duration) error {
	if !c.HasFeature(LockControllerID) {
		return fmt.Errorf("sila2: the server does not implement LockController")
	}
	if _, err := c.Call(ctx, LockControllerID, "LockServer", map[string]any{
		"LockIdentifier": lockID, "Timeout": int64(timeout / time.Second)}); err != nil {
		return fmt.Errorf("sila2: LockServer: %w", err)
	}
	if err := c.SetMetadata(ctx, LockControllerID+"/Metadata/LockIdentifier", lockID); err != nil {
		// Locked, but the calls could not carry the identifier: give the
		// lock back rather than hold a lock nobody can use.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
		_, _ = c.Call(uctx, LockControllerID, "UnlockServer", map[string]any{"LockIdentifier": lockID})
		cancel()
		return err
	}
	return nil
}

// LockProbe names an unobservable property whose Get_ the server says the
// LockIdentifier metadata affects (after Lock): reading it is a call that
// carries the lock identifier, which keeps a timed lock active and is
// refused when someone else holds the lock. ok is false when the server
// lists no such property.
func (c *Client) LockProbe() (feature, property string, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := c.meta[strings.ToLower(LockControllerID+"/Metadata/LockIdentifier")]
	if m == nil {
		return "", "", false
	}
	var fids []string
	seen := map[*Compiled]bool{}
	byID := map[string]*Compiled{}
	for _, f := range c.features {
		if !seen[f] {
			seen[f] = true
			id := f.Feature.FullyQualifiedID()
			fids = append(fids, id)
			byID[id] = f
		}
	}
	sort.Strings(fids)
	for _, fid := range fids {
		f := byID[fid]
		if f.Feature.Identifier == "SiLAService" || strings.EqualFold(fid, LockControllerID) {
			continue
		}
		for _, p := range f.Feature.Properties {
			if p.IsObservable() {
				continue
			}
			call := strings.ToLower(f.FQID("Property", p.Identifier))
			for _, a := range m.affected {
				if a == strings.ToLower(fid) || a == call {
					return fid, p.Identifier, true
				}
			}
		}
	}
	return "", "", false
}

// Unlock unlocks the server and stops sending the lock identifier.
func (c *Client) Unlock(ctx context.Context, lockID string) error {
	_, err := c.Call(ctx, LockControllerID, "UnlockServer", map[string]any{"LockIdentifier": lockID})
	_ = c.SetMetadata(ctx, LockControllerID+"/Metadata/LockIdentifier", nil)
	if err != nil {
		return fmt.Errorf("sila2: UnlockServer: %w", err)
	}
	return nil
}
