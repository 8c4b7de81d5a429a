package sila2

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ErrorKind is which of the four SiLA error kinds an Error is.
type ErrorKind int

// SiLA error kinds, numbered as the SiLAError oneof fields.
const (
	KindValidation ErrorKind = 1
	KindDefined    ErrorKind = 2
	KindUndefined  ErrorKind = 3
	KindFramework  ErrorKind = 4
)

// String names the kind as the SiLAError oneof does.
func (k ErrorKind) String() string {
	switch k {
	case KindValidation:
		return "ValidationError"
	case KindDefined:
		return "DefinedExecutionError"
	case KindUndefined:
		return "UndefinedExecutionError"
	case KindFramework:
		return "FrameworkError"
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error is a decoded SiLAError: a gRPC ABORTED status whose message is the
// base64 of the serialized SiLAError.
type Error struct {
	Kind ErrorKind
	// Parameter is the fully qualified parameter of a ValidationError.
	Parameter string
	// Identifier is the fully qualified id of a DefinedExecutionError.
	Identifier string
	// FrameworkType is a FrameworkError's errorType.
	FrameworkType int32
	Message       string
}

// Error describes the SiLA error without its wire encoding.
func (e *Error) Error() string {
	switch e.Kind {
	case KindValidation:
		return fmt.Sprintf("SiLA validation error on %s: %s", e.Parameter, e.Message)
	case KindDefined:
		return fmt.Sprintf("SiLA defined execution error %s: %s", e.Identifier, e.Message)
	case KindFramework:
		return fmt.Sprintf("SiLA framework error %s: %s", FrameworkErrorName(e.FrameworkType), e.Message)
	}
	return "SiLA undefined execution error: " + e.Message
}

// ShortIdentifier returns the last part of a defined error's identifier.
func (e *Error) ShortIdentifier() string {
	if i := strings.LastIndexByte(e.Identifier, '/'); i >= 0 {
		return e.Identifier[i+1:]
	}
	return e.Identifier
}

// FrameworkErrorName names a FrameworkError type.
func FrameworkErrorName(t int32) string {
	if n, ok := frameworkErrorNames[t]; ok {
		return n
	}
	return fmt.Sprintf("FrameworkError(%d)", t)
}

// ConnectionError is any gRPC failure that is not a SiLA error (UNAVAILABLE,
// DEADLINE_EXCEEDED, a broken stream): the outcome of the call is unknown.
type ConnectionError struct {
	Code codes.Code
	Err  error
}

// Error implements error.
func (e *ConnectionError) Error() string {
	return fmt.Sprintf("SiLA connection error (%s): %v%s", e.Code, e.Err, tlsHint(e.Err))
}

// tlsHint says which side of a TLS mismatch a handshake failure points at:
// a plaintext client reads no HTTP/2 preface from a TLS server, and a TLS
// client finds no handshake in a plaintext server's first bytes.
func tlsHint(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "error reading server preface"):
		return " (the server probably wants TLS: drop tls.insecure_plaintext and give tls.pin_sha256 or tls.ca)"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return " (the server probably speaks plaintext, as legacy SiLA servers do: set tls.insecure_plaintext: true)"
	}
	return ""
}

// Unwrap returns the gRPC error.
func (e *ConnectionError) Unwrap() error { return e.Err }

// NeverSent reports whether the call failed because no connection to the
// server could be made (UNAVAILABLE while dialing: refused, no route, no
// such host, the TLS handshake failing): gRPC sends nothing on a channel
// that is not connected, so the server never saw the call. A stream that
// broke after the call went out is not NeverSent.
func (e *ConnectionError) NeverSent() bool {
	if e.Code != codes.Unavailable {
		return false
	}
	msg := strings.ToLower(e.Err.Error())
	for _, s := range []string{"while dialing", "connection refused", "no such host", "no route to host",
		"network is unreachable", "authentication handshake failed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// neverSent reports whether err is a ConnectionError that never reached
// the server.
func neverSent(err error) bool {
	var ce *ConnectionError
	return errors.As(err, &ce) && ce.NeverSent()
}

// linkLost reports whether err is a connection-level failure (any
// ConnectionError but our own deadline or cancel).
func linkLost(err error) bool {
	var ce *ConnectionError
	return errors.As(err, &ce) && ce.Code != codes.Canceled && ce.Code != codes.DeadlineExceeded
}

// Status encodes e as the gRPC status a SiLA server returns.
func (fw *Framework) Status(e *Error) error {
	b, err := proto.Marshal(fw.encodeError(e))
	if err != nil {
		return status.Error(codes.Internal, "sila2: cannot encode SiLAError: "+err.Error())
	}
	return status.Error(codes.Aborted, base64.StdEncoding.EncodeToString(b))
}

func (fw *Framework) encodeError(e *Error) *dynamicpb.Message {
	root := fw.New("SiLAError")
	var inner *dynamicpb.Message
	switch e.Kind {
	case KindValidation:
		inner = fw.New("ValidationError")
		setScalar(inner, 1, protoreflect.ValueOfString(e.Parameter))
		setScalar(inner, 2, protoreflect.ValueOfString(e.Message))
	case KindDefined:
		inner = fw.New("DefinedExecutionError")
		setScalar(inner, 1, protoreflect.ValueOfString(e.Identifier))
		setScalar(inner, 2, protoreflect.ValueOfString(e.Message))
	case KindFramework:
		inner = fw.New("FrameworkError")
		setScalar(inner, 1, protoreflect.ValueOfEnum(protoreflect.EnumNumber(e.FrameworkType)))
		setScalar(inner, 2, protoreflect.ValueOfString(e.Message))
	default:
		inner = fw.New("UndefinedExecutionError")
		setScalar(inner, 1, protoreflect.ValueOfString(e.Message))
		e = &Error{Kind: KindUndefined, Message: e.Message}
	}
	setMsg(root, protoreflect.FieldNumber(e.Kind), inner)
	return root
}

// DecodeError turns a gRPC error into *Error (ABORTED carrying a SiLAError)
// or *ConnectionError (anything else). An ABORTED status whose message is
// not a SiLAError is an undefined execution error carrying the text. nil
// stays nil.
func (fw *Framework) DecodeError(err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return &ConnectionError{Code: codes.Unknown, Err: err}
	}
	if st.Code() != codes.Aborted {
		return &ConnectionError{Code: st.Code(), Err: err}
	}
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(st.Message()))
	if derr != nil {
		raw, derr = base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(st.Message()), "="))
	}
	if derr != nil {
		return &Error{Kind: KindUndefined, Message: "server sent ABORTED without a SiLAError: " + st.Message()}
	}
	m := fw.New("SiLAError")
	if uerr := proto.Unmarshal(raw, m); uerr != nil {
		return &Error{Kind: KindUndefined, Message: "server sent an unreadable SiLAError: " + uerr.Error()}
	}
	od := m.Descriptor().Oneofs().ByName("error")
	fd := m.WhichOneof(od)
	if fd == nil {
		return &Error{Kind: KindUndefined, Message: "server sent an empty SiLAError"}
	}
	inner := m.Get(fd).Message()
	out := &Error{Kind: ErrorKind(fd.Number())}
	switch out.Kind {
	case KindValidation:
		out.Parameter, out.Message = getField(inner, 1).String(), getField(inner, 2).String()
	case KindDefined:
		out.Identifier, out.Message = getField(inner, 1).String(), getField(inner, 2).String()
	case KindUndefined:
		out.Message = getField(inner, 1).String()
	case KindFramework:
		out.FrameworkType, out.Message = int32(getField(inner, 1).Enum()), getField(inner, 2).String()
	}
	return out
}

// AsSiLAError returns err as a *Error if it is one.
func AsSiLAError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
