// Package transport serves any mhp.Device as a JSON-RPC 2.0 server over
// stdio (newline-delimited) and HTTP + Server-Sent Events.
//
// API summary:
//
//	srv := transport.NewServer(dev, transport.Options{Token: tok}) // Close() when done
//	err := srv.ServeStdio(ctx, os.Stdin, os.Stdout)                // one stream = one session
//	http.Handle("/", srv.Handler())                                // POST /rpc, GET /events, DELETE /session, GET /mhp.json, Options.Handlers
//	err = transport.ListenHTTP(ctx, ":18900", srv)                 // binds 127.0.0.1 unless a host is given
//	ln, _ := transport.Listen("127.0.0.1:0"); go transport.ServeHTTP(ctx, ln, srv)
//	req, rpcErr := transport.DecodeFrame(line)                     // the frame decoder (fuzzed)
//
// Protocol rules the server enforces:
//
//   - initialize must come first: anything else before it gets -32000
//     "initialize must come first" (data.reason "not_initialized"); an
//     unknown method gets -32601 even then. Two exceptions, served to any
//     caller on any transport, before initialize, without a session, with an
//     unknown or expired one, or with the session table full: safety/estop
//     (the one call that always works; an unknown Mhp-Session does not stop
//     it) and ping without a session (liveness probes must not cost a
//     session; a ping that names an unknown session still gets
//     "session_unknown", so a client learns its session expired). They run
//     with the session label "anonymous". GET /mhp.json needs no session
//     either. The HTTP gates that decide who may reach the device at all
//     (token, Origin, Host) still apply to them. The version is negotiated with mhp.NegotiateVersion. The result
//     is {protocolVersion, device{id, class, make, model}, capabilities{signals,
//     settings, actions, methods:false, subscribe, lease, estop, resources},
//     session, label}.
//   - On a stream, a request read after an initialize waits until that
//     initialize is done, so pipelined requests never race the session into
//     existence (safety/estop and ping do not wait: they are served at once).
//   - Secret and label. Every session has a secret and a public label. The
//     secret (session: "s_" + 128 random bits from crypto/rand) is the
//     credential: it is sent once, in the initialize answer (and its
//     Mhp-Session header), and appears in nothing else: not in refusals,
//     notifications, job owners, event streams or logs. The label
//     (clientInfo.name or X-MHP-Client, reduced to [A-Za-z0-9._-] and 32
//     bytes, plus "#" and 32 random bits, unique among live sessions; for
//     example "openmhp#3fa2c1d0") is the public name. The device only ever sees
//     the label: it is what mhp.SessionFrom returns in the device's context,
//     so lease holders (data.holder), notifications' "by", job owners and
//     device logs carry it. A label is never accepted as a credential.
//   - Issued sessions. Over HTTP the client sends the secret back in the
//     Mhp-Session header ([mhp.HeaderSession]). A stdio stream is one session.
//     With Mhp-Session, X-MHP-Client is a display name only.
//   - Header sessions (spec §9: "Clients SHOULD send an X-MHP-Client header
//     so leases and audit logs can name them"). The Python reference client
//     initializes, then sends every request with X-MHP-Client only and never
//     echoes Mhp-Session. A request with no Mhp-Session but an X-MHP-Client
//     is served in the header session of that name: a session of its own,
//     with its own label, opened on first use after an initialize that
//     carried the same header and no Mhp-Session. It can never act as or see
//     a server-issued session (even the one its initialize returned): the
//     header is looked up only among header sessions, and leases belong to
//     labels. The trade-off: the header is not a secret. Anyone who can
//     reach the server and knows or guesses a client's name can act in its
//     header session, as with the reference server. Clients that echo
//     Mhp-Session (this module's client) are not exposed.
//     [Options.StrictSessions] (mhp serve --strict-sessions) refuses actuation
//     from header sessions (writes, invokes, job control, leases, reset: -32000
//     reason "session_required"), leaving them reads, describe, ping and
//     estop; use it where the reference client need not drive the device.
//   - Session lifetime. HTTP sessions idle longer than [Options.SessionTTL] (no
//     request) are forgotten and the device told (EndSession); an open event
//     stream is not a sign of life (a client that only listens must ping)
//     and ends with its session. A stream's session ends with the stream. At
//     [Options.MaxSessions] a new session evicts the least recently used HTTP
//     session that holds no lease, instead of refusing the newcomer; only
//     when every session holds a lease is it refused ("too_many_sessions").
//   - The method table is explicit ([Server.Methods] lists it), one line per
//     method named by its mhp.Method* constant. Params are decoded strictly,
//     by [mhp.DecodeParams], the one decoder that extensions' [mhp.Handle]
//     uses too: an unknown member, a member of the wrong type or a
//     missing required member is -32602 with data.field naming it (an
//     unknown member is refused rather than ignored so that a misspelt
//     "dry_run" cannot turn a dry run into a real write; member names match
//     case-insensitively, as in encoding/json, so "dryrun" reads as dryRun).
//     resources/* answer NotSupported unless the device is an
//     mhp.ResourceProvider;
//     methods/list and methods/find answer empty lists and methods/get,
//     diff, save and delete NotSupported (capability methods is false).
//   - Errors: an *mhp.Error goes on the wire as is (data.ts is the device
//     clock of the refusal; errors made by the transport carry the server
//     clock); any other error is -32603.
//   - Batches (JSON arrays) are refused with -32600: one request per frame,
//     so that nothing can queue safety/estop behind other batch members.
//   - Values: params are decoded with encoding/json into float64, bool,
//     string, []any, map[string]any and nil (not json.Number), which is what
//     the device's checks and hooks expect. Integers beyond 2^53 lose
//     precision, as in every JSON peer that uses doubles; the device's
//     integer check refuses fractions (2.5) but cannot tell 3.0 from 3.
//   - Priority path: on a stream, requests run concurrently, and
//     safety/estop and ping are never queued or refused for load, so they are
//     answered while another request of the same stream is blocked in the
//     device. Over HTTP every request is its own goroutine. Device calls are
//     not cancelled when the caller disconnects (the device's hook timeouts
//     bound them): cutting a write off halfway would make its outcome unknown.
//   - Frames over [Options.MaxFrame] (4 MiB) are refused (-32600 on a stream,
//     where the connection goes on; 413 over HTTP); malformed JSON gets
//     -32700 and the connection goes on. Strict input: bytes that are not
//     UTF-8 anywhere in a frame get -32700 with id null (invalid text is
//     never echoed); a member name repeated in any object of a frame gets
//     -32600 naming it in data.field (names of the frame and of params are
//     compared case-insensitively, as the params decoder matches them), so
//     "dryRun":true,"dryRun":false is never a real write; a safety/estop
//     whose params repeat a member stops anyway. session/acquire's ttl must
//     lie in [MinLeaseTTL, MaxLeaseTTL] seconds (data.min, data.max); a
//     number that overflows a double (1e400) is -32014 naming its field
//     ("value", "ttl", "params"), as NaN and Inf are.
//   - Bounded memory: a stored estop reason is cut to [MaxReason] (1 KiB,
//     marked by mhp.Truncate); client names to 32 bytes in labels; an
//     X-MHP-Client that keys a session to [MaxClientHeader] bytes; each
//     session's event buffer holds at most SSEBuffer events and
//     SSEBufferBytes bytes (oldest dropped first, reported on resume).
//   - Connections ([ServeHTTP], [ListenHTTP]): ReadTimeout bounds a request and
//     its body (a body trickling in is cut off), ReadHeaderTimeout its
//     headers, IdleTimeout a keep-alive connection between requests, and
//     WriteTimeout each answer and each event written (event streams last
//     as long as their session). At most MaxConns connections are open: at
//     the cap a new connection closes, oldest first, an idle connection,
//     else one still sending its request, else an event stream (its client
//     resumes); never one whose request is being served. So neither idle
//     nor trickling connections lock out an estop; and with every
//     connection serving, a newcomer gets one of [EStopReserve] reserve
//     slots beyond the cap, which carries one safety/estop (anything else
//     is refused busy, 503 with Retry-After, and the connection closed).
//   - Cost: the frame is decoded in one pass; the usual params of
//     signals/read, device/describe and settings/write are read by a scan
//     (anything else by the strict decoder); answers are written without
//     reflecting over the envelope; device/describe is answered from its
//     tier's encoding, cached per descriptor (a device that changes its
//     descriptor answers new lists and is rendered anew; lists are never
//     changed in place). A server nobody talked to holds no session table.
//   - Notifications: signals/update goes only to sessions subscribed to that
//     signal; every other notification goes to every session. On a stream
//     they are interleaved lines; over HTTP they are SSE events with ids,
//     resumable with Last-Event-ID from a bounded per-session buffer.
//   - Who: every HTTP request passes [Server.Guard] (package auth): with
//     credentials configured ([Options.Auth]: a credentials file, client
//     certificates; or the legacy [Options.Token]) it needs a verified client
//     certificate or bearer token that names an identity (401 otherwise,
//     /mhp.json included unless [Options.PublicDescriptor]); the identity is
//     in the context of every device call (auth.FromContext), its role bounds
//     the methods it may call (auth.Authorize, before the device is called;
//     estop is served to every role), and the sessions it opens are its own
//     (their labels start with its name; another identity presenting their
//     secret or X-MHP-Client header does not find them). A request from a
//     browser page (an Origin header) not in [Options.AllowedOrigins] gets
//     403, so a web page cannot drive a device on localhost (cross-site
//     POST). While no credential is required, a request whose Host is not an
//     IP literal, localhost or in [Options.AllowedHosts] gets 403 (DNS
//     rebinding: a page whose name was re-pointed at 127.0.0.1). mhp serve
//     refuses a non-loopback --http without TLS and credentials unless
//     --insecure.
//   - TLS and framing: [ServeHTTP], [ServeHandler] and [Serve] terminate TLS
//     themselves when [Options.TLS] is set (HTTP/1.1; certificates reload
//     through auth.ServerTLS) and follow each connection's HTTP/1.1 framing,
//     so a request carrying both Content-Length and Transfer-Encoding is
//     refused with 400 and its connection closed (RFC 9112 §6.1: nothing
//     smuggled after its chunked body is served).
//   - Extra routes: [Options.Handlers] adds HTTP routes behind the same Host,
//     Origin and credential checks (for example a console).
package transport
