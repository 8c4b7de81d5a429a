package opcua

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
)

// Status code helpers. ua.StatusCode has no severity methods: the top two
// bits say Good (00), Uncertain (01) or Bad (10).

func isGood(sc ua.StatusCode) bool      { return sc&0xC0000000 == 0 }
func isUncertain(sc ua.StatusCode) bool { return sc&0xC0000000 == 0x40000000 }
func isBad(sc ua.StatusCode) bool       { return sc&0x80000000 != 0 }

// codeOnly drops the info bits so that codes compare by kind.
func codeOnly(sc ua.StatusCode) ua.StatusCode { return sc & 0xFFFF0000 }

// StatusName returns the OPC UA name of a status code, e.g. "BadOutOfRange",
// or its hex form when gopcua does not know it.
func StatusName(sc ua.StatusCode) string {
	if d, ok := ua.StatusCodes[codeOnly(sc)]; ok && d.Name != "" {
		n := strings.TrimPrefix(d.Name, "Status")
		if n == "OK" {
			return "Good"
		}
		return n
	}
	return fmt.Sprintf("0x%08X", uint32(sc))
}

// refusal is how one refusing status code maps onto MHP.
type refusal struct {
	code   mhp.Code
	reason string
}

// refusals is the table of OPC UA status codes that mean "refused before
// anything took effect", with the MHP code each becomes (read only). A write or call
// answered with one of these fails with an *mhp.Error whose message and
// data.opcua_status name the OPC UA code; the device state is unchanged.
//
//	BadOutOfRange                      -> LimitViolation   (value outside the server's range)
//	BadTypeMismatch                    -> InvalidValue     (value of the wrong type)
//	BadInvalidArgument                 -> InvalidValue     (method arguments refused)
//	BadArgumentsMissing                -> InvalidValue     (method signature mismatch)
//	BadTooManyArguments                -> InvalidValue     (method signature mismatch)
//	BadNotWritable                     -> NotSupported     (the node cannot be written at all)
//	BadWriteNotSupported               -> NotSupported     (the write form is not supported)
//	BadUserAccessDenied                -> Forbidden        (our OPC UA user may not do this)
//	BadNodeIdUnknown, BadNodeIdInvalid,
//	BadAttributeIdInvalid              -> ServerError      (the configured node is not on the server)
//	BadMethodInvalid, BadNotExecutable,
//	BadNotImplemented                  -> NotSupported     (the method cannot be called)
//	BadInvalidState                    -> DeviceBusy       (precondition: busy, or needs Clear/Reset)
//	BadLocked                          -> DeviceBusy       (another client holds the device lock)
//	BadServerNotConnected              -> ServerError      (no connection: nothing was sent)
//	BadTooManyOperations, BadServiceUnsupported,
//	BadRequestTypeInvalid              -> ServerError      (the whole request was rejected)
var refusals = map[ua.StatusCode]refusal{
	ua.StatusBadOutOfRange:           {mhp.CodeLimitViolation, "out_of_range"},
	ua.StatusBadTypeMismatch:         {mhp.CodeInvalidValue, "type_mismatch"},
	ua.StatusBadInvalidArgument:      {mhp.CodeInvalidValue, "invalid_argument"},
	ua.StatusBadArgumentsMissing:     {mhp.CodeInvalidValue, "arguments_missing"},
	ua.StatusBadTooManyArguments:     {mhp.CodeInvalidValue, "too_many_arguments"},
	ua.StatusBadNotWritable:          {mhp.CodeNotSupported, "not_writable"},
	ua.StatusBadWriteNotSupported:    {mhp.CodeNotSupported, "write_not_supported"},
	ua.StatusBadUserAccessDenied:     {mhp.CodeForbidden, "access_denied"},
	ua.StatusBadNodeIDUnknown:        {mhp.CodeServerError, "node_unknown"},
	ua.StatusBadNodeIDInvalid:        {mhp.CodeServerError, "node_invalid"},
	ua.StatusBadAttributeIDInvalid:   {mhp.CodeServerError, "attribute_invalid"},
	ua.StatusBadMethodInvalid:        {mhp.CodeNotSupported, "method_invalid"},
	ua.StatusBadNotExecutable:        {mhp.CodeNotSupported, "not_executable"},
	ua.StatusBadNotImplemented:       {mhp.CodeNotSupported, "not_implemented"},
	ua.StatusBadInvalidState:         {mhp.CodeDeviceBusy, "invalid_state"},
	ua.StatusBadLocked:               {mhp.CodeDeviceBusy, "locked"},
	ua.StatusBadServerNotConnected:   {mhp.CodeServerError, "not_connected"},
	ua.StatusBadTooManyOperations:    {mhp.CodeServerError, "too_many_operations"},
	ua.StatusBadServiceUnsupported:   {mhp.CodeServerError, "service_unsupported"},
	ua.StatusBadRequestTypeInvalid:   {mhp.CodeServerError, "request_type_invalid"},
	ua.StatusBadNothingToDo:          {mhp.CodeServerError, "nothing_to_do"},
	ua.StatusBadDataTypeIDUnknown:    {mhp.CodeServerError, "data_type_unknown"},
	ua.StatusBadIndexRangeInvalid:    {mhp.CodeServerError, "index_range_invalid"},
	ua.StatusBadUserSignatureInvalid: {mhp.CodeForbidden, "user_signature_invalid"},
}

// IsRefusal reports whether sc means "refused before anything took
// effect" (the table in the package documentation): such a code becomes an
// *mhp.Error and leaves the device state unchanged.
func IsRefusal(sc ua.StatusCode) bool {
	_, ok := refusals[codeOnly(sc)]
	return ok
}

// refusalError builds the *mhp.Error of a refusing status code for what
// (e.g. `setting "setpoint" write 120`).
func refusalError(what string, sc ua.StatusCode) *mhp.Error {
	r, ok := refusals[codeOnly(sc)]
	if !ok {
		r = refusal{mhp.CodeServerError, "refused"}
	}
	return mhp.Errorf(r.code, "%s refused by the OPC UA server: %s", what, StatusName(sc)).
		With("opcua_status", StatusName(sc)).With("reason", r.reason)
}

// ErrNotConnected is returned by a Client when no session is up: the request
// was not sent.
var ErrNotConnected = fmt.Errorf("opcua: not connected: %w", ua.StatusBadServerNotConnected)

// notSent reports whether a transport error proves that the request never
// left this process (so nothing can have taken effect).
func notSent(err error) bool {
	var sc ua.StatusCode
	if errors.As(err, &sc) {
		return codeOnly(sc) == ua.StatusBadServerNotConnected
	}
	return false
}

// serviceRefusal reports whether a transport error is a definite rejection of
// the whole request by the server (a ServiceFault with a refusing code, or
// not sent at all). Timeouts, closed channels, closed sessions, EOF and
// context ends are not: the request may have been executed.
func serviceRefusal(err error) (ua.StatusCode, bool) {
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false
	}
	var sc ua.StatusCode
	if !errors.As(err, &sc) {
		return 0, false
	}
	switch codeOnly(sc) {
	case ua.StatusBadServerNotConnected, ua.StatusBadTooManyOperations, ua.StatusBadServiceUnsupported,
		ua.StatusBadRequestTypeInvalid, ua.StatusBadNothingToDo, ua.StatusBadUserAccessDenied,
		ua.StatusBadNodeIDUnknown, ua.StatusBadNodeIDInvalid, ua.StatusBadInvalidArgument,
		ua.StatusBadTypeMismatch, ua.StatusBadOutOfRange, ua.StatusBadNotWritable,
		ua.StatusBadMethodInvalid, ua.StatusBadInvalidState, ua.StatusBadLocked:
		return sc, true
	}
	return 0, false
}

// connectionTrouble reports whether err says the connection is down or
// broken (as opposed to an answer from the server).
func connectionTrouble(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, net.ErrClosed) {
		return true
	}
	var sc ua.StatusCode
	if errors.As(err, &sc) {
		switch codeOnly(sc) {
		case ua.StatusBadServerNotConnected, ua.StatusBadConnectionClosed, ua.StatusBadSecureChannelClosed,
			ua.StatusBadSessionClosed, ua.StatusBadSessionIDInvalid, ua.StatusBadSecureChannelIDInvalid,
			ua.StatusBadCommunicationError, ua.StatusBadTimeout:
			return true
		}
	}
	return false
}

// unknownOutcome wraps a transport error after a request was (possibly)
// sent: a plain error, so the driver latches in fault with outcome unknown.
func unknownOutcome(what string, err error) error {
	return fmt.Errorf("%s: outcome unknown (the request may have reached the server): %w", what, err)
}

// transportError classifies the error of a Write or Call transport.
func transportError(what string, err error) error {
	if sc, ok := serviceRefusal(err); ok {
		e := refusalError(what, sc)
		if codeOnly(sc) == ua.StatusBadServerNotConnected {
			e.Message = what + " refused: the OPC UA server is not connected (nothing was sent)"
		}
		return e
	}
	return unknownOutcome(what, err)
}

// probeWarning is the start-up warning when the first probe for units and
// ranges failed: it names the cause (the password variable unset, the login
// or the client certificate refused, the server not reachable) instead of
// calling every failure unreachable.
func probeWarning(err error) string {
	const tail = " to read units and ranges; the config's are used until a connection succeeds"
	msg := err.Error()
	var sc ua.StatusCode
	code := ua.StatusCode(0)
	if errors.As(err, &sc) {
		code = codeOnly(sc)
	}
	switch {
	case strings.Contains(msg, "password_env") && strings.Contains(msg, "is not set"):
		return "opcua: cannot log in: the password variable (auth.password_env) is not set" + tail
	case code == ua.StatusBadUserAccessDenied || code == ua.StatusBadIdentityTokenRejected || code == ua.StatusBadIdentityTokenInvalid ||
		strings.Contains(msg, "BadUserAccessDenied") || strings.Contains(msg, "BadIdentityToken"):
		return "opcua: the server refused the login (check auth.username and the password)" + tail
	case certificateCodes[code] || strings.Contains(msg, "client certificate"):
		return "opcua: the server refused this client's certificate (trust it on the server; see the error)" + tail
	case connectionTrouble(err) || errors.Is(err, context.DeadlineExceeded) || isDialError(err):
		return "opcua: server not reachable" + tail
	}
	return "opcua: the server answered but units and ranges could not be read" + tail
}

// isDialError reports a failure to reach the server at all (refused,
// unresolvable, timed out before an answer).
func isDialError(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns)
}
