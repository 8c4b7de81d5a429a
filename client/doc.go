// Package client is the Go client SDK of MHP: a device handle over HTTP,
// stdio or in process, and a lab of named devices.
//
// API summary:
//
//	d, err := client.Dial(ctx, "http://127.0.0.1:18900", client.Options{ClientName: "me", Token: tok})
//	d, err := client.Dial(ctx, "stdio:mhp serve sim:thermocycler --stdio", opts) // process killed on Close
//	d, err := client.DialStream(ctx, r, w, opts)  // any stream server (pipes)
//	d := client.Connect(dev, opts)                 // in process, own session
//	defer d.Close()
//
//	d.Session(); d.Info()                           // server-issued session, initialize result
//	v, err := d.Get(ctx, "block_temperature")       // signals/read of one signal
//	res, err := d.Set(ctx, "target_temperature", 95) // settings/write
//	job, err := d.Run(ctx, "run_protocol", params)  // actions/invoke
//	job, err = d.Wait(ctx, job.ID)                  // notifications, polling as fallback
//	release, err := d.Scope(ctx, 10*time.Minute)    // hold the lease (heartbeat) until release()
//	// and every mhp.Device method: Describe, Read, Write, Invoke, Job, Jobs,
//	// CancelJob, PauseJob, ResumeJob, Acquire, Renew, Release, Limits, EStop,
//	// Reset, Ping, Subscribe, Unsubscribe, Listen, EndSession.
//
//	lab := client.NewLab(map[string]string{"tc": "http://…", "arm": "stdio:…"}, opts)
//	tc, err := lab.Device(ctx, "tc")                // dialled on first use
//	outcomes := lab.EStopAll(ctx, "operator")       // parallel, per-device deadline and result
//	lab.Close()
//
// Errors come back as *mhp.Error with the server's code. A call that got no
// answer (unreachable, timed out, connection lost) is an *mhp.Error with
// code -32000 and data.reason "transport" ([IsTransportError]); data.sent says
// whether the request may have reached the server, and for actuating methods
// data.outcome "unknown" says its effect is unknown: reconcile by reading
// state, never by sending again. The client never resends a request that may
// have reached the device, with two exceptions where the server refused it
// before anything happened: a NotLeased refusal with reason
// "lease_required" (the client acquires the lease and sends once more), and
// an HTTP session the server forgot (the client initializes again and sends
// once more).
//
// Leases: Acquire (or a lease taken on first use) starts a heartbeat that
// renews the lease every min(ttl, watchdog_s)/3 ([Options.HeartbeatEvery]
// overrides); when a renew says the lease is lost the heartbeat stops and
// the next actuating call fails with NotLeased. Release, Close and Scope's
// release func stop it. [Options.Plain] turns leases on first use and the
// heartbeat off.
//
// Other implementations: the client reads every shape the spec leaves open
// (identity under "device", bare limits with a separate approval map, estop
// jobs as "cancelled" or "cancelling" — [EStopJobs] reads either —, "verified"
// as a string, notes at the top level of a dry run, ts in the error object,
// numbers as ints, floats or numeric strings, unknown state strings) and
// never panics on an odd answer: a field of a type it cannot read is left at
// its zero value. Over HTTP every Dial sends its own X-MHP-Client
// ([NewClientID], or [Options.ClientID]), so two processes or two handles are
// never one client to a server that names clients by that header.
//
// A Device is safe for concurrent use: over a stream, calls are matched to
// answers by id, so many may be in flight at once.
package client
