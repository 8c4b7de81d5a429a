// Package transport serves any mhp.Device as a JSON-RPC 2.0 server over
// stdio (newline-delimited) and HTTP + Server-Sent Events.
//
// API summary:
//
//	srv := transport.NewServer(dev, transport.Options{Token: tok}) // Close() when done
//	err := srv.ServeStdio(ctx, os.Stdin, os.Stdout)                // one stream = one session
//	http.Handle("/", srv.Handler())                                // POST /rpc, GET /events, DELETE /session, GET /mhp.json
//	err = transport.ListenHTTP(ctx, ":18900", srv)                 // binds 127.0.0.1 unless a host is given
//	ln, _ := transport.Listen("127.0.0.1:0"); go transport.ServeHTTP(ctx, ln, srv)
//	req, rpcErr := transport.DecodeFrame(line)                     // the frame decoder (fuzzed)
//
// Protocol rules the server enforces:
//
//   - initialize must come first: anything else before it gets -32000
//     "initialize must come first" (data.reason "not_initialized"); an
//     unknown method gets -32601 even then. The version is negotiated with
//     mhp.NegotiateVersion. The result is {protocolVersion, device{id, class,
//     make, model}, capabilities{signals, settings, actions, methods:false,
//     subscribe, lease, estop, resources}, session}.
//   - Sessions are issued by the server (128 random bits from crypto/rand),
//     never claimed by the client. Over HTTP the client sends the id back in
//     the Mhp-Session header (HeaderSession); X-MHP-Client is a display name
//     for logs only and grants nothing. A stdio stream is one session. Device
//     calls carry the session with mhp.WithSession, so leases belong to it.
//     HTTP sessions idle longer than Options.SessionTTL (no request and no
//     open event stream) are forgotten and the device told (EndSession); a
//     stream's session ends with the stream.
//   - The method table is explicit (Server.Methods lists it). Params are
//     decoded strictly: an unknown member, a member of the wrong type or a
//     missing required member is -32602 with data.field naming it (an
//     unknown member is refused rather than ignored so that a misspelt
//     "dry_run" cannot turn a dry run into a real write; member names match
//     case-insensitively, as in encoding/json, so "dryrun" reads as dryRun). resources/* answer
//     NotSupported unless the device is an mhp.ResourceProvider;
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
//   - Frames over Options.MaxFrame (4 MiB) are refused (-32600 on a stream,
//     where the connection goes on; 413 over HTTP); malformed JSON gets
//     -32700 and the connection goes on.
//   - Notifications: signals/update goes only to sessions subscribed to that
//     signal; every other notification goes to every session. On a stream
//     they are interleaved lines; over HTTP they are SSE events with ids,
//     resumable with Last-Event-ID from a bounded per-session buffer.
//   - Token: with Options.Token, every HTTP request (including /mhp.json
//     unless Options.PublicDescriptor) needs "Authorization: Bearer <token>",
//     compared in constant time; a bad or missing token gets 401. A request
//     from a browser page (an Origin header) not in Options.AllowedOrigins
//     gets 403, so a web page cannot drive a device on localhost (DNS
//     rebinding, cross-site POST).
package transport
