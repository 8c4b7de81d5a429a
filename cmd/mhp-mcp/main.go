// Command mhp-mcp is the lab's MCP server: ten constant tools over every
// MHP device the lab has, over stdio (default) or MCP Streamable HTTP.
//
//	mhp-mcp thermo=http://bench-pc:18921 arm=http://arm-pc:18921
//	mhp-mcp --directory http://directory:18900
//	mhp-mcp --directory http://directory:18900 --http 127.0.0.1:18800 --token-file token --allow-origin https://lab.example
//	mhp-mcp --policy host-policy.json thermo=http://bench-pc:18921
//	mhp-mcp                                   # the host's fleet ($MHP_HOME, default ~/.mhp)
//
// Without targets or --directory it serves the host's fleet: the devices of
// $MHP_HOME/fleet.yaml (mhp lab add …), packages hosted in this process, and
// mhp_lab's fleet ops (scan, add, remove, locate, onboard). Whether a fleet
// device is simulated is the host's decision (a twin or a sim: package),
// never the device's tags.
//
// Over stdio a line that is not JSON-RPC is answered with a JSON-RPC error
// and the session goes on. --http serves HTTPS with --tls-cert and
// --tls-key, mutual TLS with --client-ca, named identities with
// --credentials (package auth); an address that is not loopback needs TLS
// and credentials unless --insecure. --ca, --pin, --client-cert and
// --client-key (MHP_CA, MHP_CLIENT_CERT, MHP_CLIENT_KEY) are how the bridge
// reaches https:// devices and the directory. Without --policy the host policy is
// enabled with every other flag off: hardware devices are refused for
// actuation (a device is simulated only when the host says so: the fleet,
// or --simulated NAME for a named target; never from the device's own
// tags), operator ops are not listed. SIGINT and SIGTERM end the bridge and
// release its leases.
// MHP_MCP_ENABLED=0|1 overrides the policy's enabled flag for one process.
//
// --console ADDR (the fleet only) serves the person at the bench a browser
// console of the hosted devices: the lab page and /devices/ID/, the device
// console over the very device the agent drives, where a manual device's
// operator prompts are answered (console.go). It has the front door of
// --http (the same credentials and bind rule).
//
// --operator-token-file F gives the bridge the devices' operator token (mhp
// serve --operator-token-file): with a policy whose operator_tools is true it
// lists mhp_permit, which issues single-use permits over a connection of its
// own; the model's connections never carry the token.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/cmd/internal/linked"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/onboard"
	"github.com/openmhp/mhp-go/transport"
)

func main() {
	// SIGTERM (systemd, docker stop, kill) ends the bridge as SIGINT does:
	// the deferred Close releases every lease instead of leaving them to
	// their ttl.
	ctx, stop := signal.NotifyContext(context.Background(), shutdownSignals...)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "mhp-mcp:", err)
		os.Exit(1)
	}
}

// shutdownSignals end the bridge (its leases released on the way out).
var shutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

type origins []string

func (o *origins) String() string     { return strings.Join(*o, ",") }
func (o *origins) Set(v string) error { *o = append(*o, v); return nil }

// run is the command; ready, when set, is told the MCP URL once HTTP listens.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, ready func(url string)) error {
	fs := flag.NewFlagSet("mhp-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dirURL := fs.String("directory", "", "directory server URL (directory/search finds devices)")
	httpAddr := fs.String("http", "", "serve MCP Streamable HTTP on this address (default: stdio); a bare port binds 127.0.0.1")
	tokenFile := fs.String("token-file", "", "file holding the bearer token HTTP clients must send (and MHP devices are sent)")
	insecure := fs.Bool("insecure", false, "allow --http (and --console) on a non-loopback address without TLS and credentials")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (with --tls-key)")
	tlsKey := fs.String("tls-key", "", "the PEM key of --tls-cert")
	clientCA := fs.String("client-ca", "", "mutual TLS: HTTP clients need a certificate signed by this CA (PEM)")
	credentials := fs.String("credentials", "", "YAML credentials file of named identities {name, role, token_sha256 | client_cert}")
	caFile := fs.String("ca", os.Getenv("MHP_CA"), "PEM CA file the devices' https:// certificates are checked against (MHP_CA)")
	pin := fs.String("pin", "", "sha256:HEX pin of the devices' server certificate")
	clientCert := fs.String("client-cert", os.Getenv("MHP_CLIENT_CERT"), "client certificate shown to devices that require mutual TLS (MHP_CLIENT_CERT)")
	clientKey := fs.String("client-key", os.Getenv("MHP_CLIENT_KEY"), "the key of --client-cert (MHP_CLIENT_KEY)")
	policyFile := fs.String("policy", "", "host policy JSON {enabled, allow_hardware, operator_tools, allow_external_sessions}; "+
		"only a JSON true turns a flag on (default: enabled, the rest off)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json (for log collectors)")
	opTokenFile := fs.String("operator-token-file", "", "file holding the devices' operator token; with operator_tools, mhp_permit issues permits")
	evidenceDir := fs.String("evidence", "", "without targets: keep the hosted devices' evidence receipts in one shared log in DIR (default HOME/evidence)")
	evidenceKey := fs.String("evidence-key", "", "without targets: sign the hosted devices' evidence heads with this Ed25519 key file")
	evidenceSync := fs.String("evidence-sync", "", "without targets: always (default: each receipt on disk before the answer) or never (the OS decides)")
	headEvery := fs.String("evidence-head-every", "", "without targets: sign a head every N receipts (with --evidence-key)")
	headInterval := fs.String("evidence-head-interval", "", "without targets: sign a head at least this often while receipts come (with --evidence-key)")
	requirePermits := fs.Bool("require-permits", false, "without targets: a confirm-gated write of a hosted device needs an operator permit (with --operator-token-file)")
	home := fs.String("home", "", "the host's home with fleet.yaml and devices/ (default $MHP_HOME or ~/.mhp); used without targets")
	var allow origins
	fs.Var(&allow, "allow-origin", "browser Origin allowed over HTTP (repeatable)")
	sessionIdle := fs.Duration("session-idle", mcpbridge.DefaultSessionIdle, "over HTTP, release an MCP session's device leases once it shows no life "+
		"(no request, no open stream) for this long; a client that vanished without DELETE does not keep the devices")
	// --console: the fleet's browser console (console.go).
	consoleAddr := fs.String("console", "", "without targets: serve the lab page and the hosted devices' consoles (operator answers, estop) "+
		"on this address, with the credentials of --http; a bare port binds 127.0.0.1")
	var simNames origins
	fs.Var(&simNames, "simulated", "a named device the host knows to be simulated, so actuated without allow_hardware (repeatable); "+
		"a device's own tags never count")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mhp-mcp [--policy FILE] [--directory URL | name=target ... | --home DIR] [--http ADDR --token-file F --allow-origin O --insecure]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", *logFormat)
	}
	named := map[string]string{}
	for _, a := range fs.Args() {
		name, target, ok := strings.Cut(a, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("argument %q: want name=target (e.g. thermo=http://bench-pc:18921)", a)
		}
		if _, dup := named[name]; dup {
			return fmt.Errorf("device name %q given twice", name)
		}
		named[name] = target
	}
	if *dirURL != "" && len(named) > 0 {
		fs.Usage()
		return errors.New("give either --directory URL or name=target devices, not both (neither: the host's fleet)")
	}
	if (*evidenceDir != "" || *evidenceKey != "" || *evidenceSync != "" || *headEvery != "" || *headInterval != "" || *requirePermits) &&
		(*dirURL != "" || len(named) > 0) {
		return errors.New("--evidence, --evidence-key, --evidence-sync, --evidence-head-* and --require-permits are for the fleet's hosted devices (no targets); " +
			"a named or directory device keeps its own guard (mhp serve --evidence ... --require-permits)")
	}
	token := ""
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("token file %s is empty", *tokenFile)
		}
	}
	opToken := ""
	if *opTokenFile != "" {
		b, err := host.ReadSmallFile(*opTokenFile)
		if err != nil {
			return fmt.Errorf("--operator-token-file: %w", err)
		}
		opToken = strings.TrimSpace(string(b))
		if len(opToken) < 16 {
			return fmt.Errorf("--operator-token-file: the operator token must be at least 16 characters")
		}
		if opToken == token {
			return fmt.Errorf("--operator-token-file: the operator token must differ from the bearer token (agents hold that one)")
		}
	}
	policy := mcpbridge.DefaultPolicy()
	if *policyFile != "" {
		p, err := mcpbridge.LoadPolicy(*policyFile)
		if err != nil {
			return err
		}
		policy = p
	}

	switch v := os.Getenv("MHP_MCP_ENABLED"); v { // one process's override (seed 001)
	case "":
	case "0":
		policy.Enabled = false
	case "1":
		policy.Enabled = true
	default:
		return fmt.Errorf("MHP_MCP_ENABLED=%q: want 0 or 1", v)
	}
	for _, w := range policy.Warnings() { // say why at start, not by listing 0 tools
		fmt.Fprintln(stderr, "mhp-mcp:", w)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	var addr string
	var st *auth.ServerTLS
	var authn *auth.Authenticator
	if *httpAddr != "" || *consoleAddr != "" { // --console: the same front door as --http
		addr = transport.LoopbackDefault(*httpAddr)
		tc := auth.ServerTLSConfig{CertFile: *tlsCert, KeyFile: *tlsKey, ClientCAFile: *clientCA, Logger: log}
		if err := tc.Validate(); err != nil {
			return err
		}
		if tc.Enabled() {
			var err error
			if st, err = auth.NewServerTLS(tc); err != nil {
				return err
			}
		}
		// --console: the person at the bench may sign in as the operator with
		// the devices' operator token (Mhp-Operator), as on mhp serve; the
		// bridge's tools never look at a role, and no model holds that token.
		consoleOp := ""
		if *consoleAddr != "" {
			consoleOp = opToken
		}
		if *credentials != "" || token != "" || st.MutualTLS() || consoleOp != "" {
			var err error
			authn, err = auth.New(auth.Config{CredentialsFile: *credentials, Token: token, ClientCerts: st.MutualTLS(), OperatorToken: consoleOp, Logger: log})
			if err != nil {
				return err
			}
		}
		if *httpAddr != "" {
			if err := auth.CheckExposure("mhp-mcp --http", addr, st != nil, authn.Required(), *insecure); err != nil {
				return err
			}
		}
		if *consoleAddr != "" {
			if err := auth.CheckExposure("mhp-mcp --console", transport.LoopbackDefault(*consoleAddr), st != nil, authn.Required(), *insecure); err != nil {
				return err
			}
		}
	} else if *tlsCert != "" || *credentials != "" || *clientCA != "" {
		return errors.New("--tls-cert, --client-ca and --credentials guard --http and --console: give --http ADDR or --console ADDR")
	}
	if *consoleAddr != "" && (*dirURL != "" || len(named) > 0) {
		return errors.New("--console serves the fleet's hosted devices (no targets): a named or directory device serves its own console (mhp serve)")
	}
	ctls := auth.ClientTLS{CAFile: *caFile, Pin: *pin, CertFile: *clientCert, KeyFile: *clientKey}
	if _, err := ctls.Config(); err != nil {
		return err
	}
	copts := client.Options{ClientName: "mhp-mcp", Token: token, TLS: ctls}
	var finder directory.Finder
	var fleet *host.Fleet
	var iv *onboard.Interview
	switch {
	case *dirURL != "":
		hc, err := client.HTTPClient(ctls, 10*time.Second)
		if err != nil {
			return err
		}
		finder = &directory.Remote{URL: strings.TrimRight(*dirURL, "/"), HTTP: hc}
	case len(named) == 0:
		// No targets: the host's fleet ($MHP_HOME or --home), its packages
		// hosted in this process; mhp_lab gets the fleet ops.
		g, err := host.GuardFlags{Evidence: *evidenceDir, EvidenceKey: *evidenceKey, EvidenceSync: *evidenceSync,
			EvidenceHeadEvery: *headEvery, EvidenceHeadInterval: *headInterval, OperatorTokenFile: *opTokenFile,
			RequirePermits: *requirePermits, EvidenceDirDefault: true}.Options()
		if err != nil {
			return err
		}
		f, err := linked.Fleet(*home, copts, sim.Options{}, g, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return err
		}
		defer f.Close()
		fleet = f
		if iv, err = linked.Interview(f); err != nil {
			return err
		}
	default:
		// Named targets are the operator's own command line: stdio: may start
		// their processes. A directory's targets never do (client default).
		copts.AllowStdio = true
		sims := map[string]bool{}
		for _, s := range simNames {
			if _, ok := named[s]; !ok {
				return fmt.Errorf("--simulated %q: no device of that name (give name=target)", s)
			}
			sims[s] = true
		}
		n := &mcpbridge.Named{Targets: named, Simulated: sims, Client: copts}
		defer n.Close()
		finder = n
	}
	if opToken != "" && !policy.OperatorTools && *consoleAddr == "" { // --console: the operator signs in with it
		fmt.Fprintln(stderr, "mhp-mcp: --operator-token-file is unused: the host policy's operator_tools is off, so mhp_permit is not listed")
	}
	b, err := mcpbridge.New(mcpbridge.Config{Finder: finder, Fleet: fleet, Onboard: iv, Client: copts, Policy: &policy, OperatorToken: opToken,
		SessionIdle: *sessionIdle})
	if err != nil {
		return err
	}
	defer b.Close()
	if *consoleAddr != "" { // the fleet's browser console (console.go), ended before the fleet closes
		var tlsCfg *tls.Config
		if st != nil {
			tlsCfg = st.Config()
		}
		stopConsole, err := startConsole(ctx, transport.LoopbackDefault(*consoleAddr), consoleConfig{Fleet: fleet, Auth: authn, TLS: tlsCfg,
			Hosts: consoleHosts(*consoleAddr), Log: log})
		if err != nil {
			return err
		}
		defer stopConsole()
		if *httpAddr == "" {
			auth.ReloadOnHangup(ctx, log, st, authn)
		}
	}
	if *httpAddr == "" {
		return b.Server().Run(ctx, &mcpbridge.LineTransport{In: stdin, Out: stdout})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mx := metrics.New(metrics.Config{})
	g := auth.Guard{Auth: authn, Logger: log} // every route: the Host check, then credentials
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.HTTPHandler(mcpbridge.HTTPOptions{Guard: g, AllowedOrigins: allow, Middleware: []mcp.Middleware{mx.MCPMiddleware()}}))
	mux.Handle("GET /metrics", mx.Handler(""))
	scheme := "http"
	var tlsCfg *tls.Config
	if st != nil {
		scheme, tlsCfg = "https", st.Config()
	}
	base := scheme + "://" + ln.Addr().String()
	url := base + "/mcp"
	if !authn.Required() {
		log.Warn("mhp-mcp serving HTTP without credentials: anyone who reaches the address can drive the lab", "url", url)
	}
	log.Info("mhp-mcp serving", "url", url, "metrics", base+"/metrics", "credentials", authn.Required(), "tls", st != nil, "policy", fmt.Sprintf("%+v", policy))
	auth.ReloadOnHangup(ctx, log, st, authn)
	if ready != nil {
		ready(url)
	}
	return transport.Serve(ctx, ln, g.Wrap(mux), transport.ServeOptions{TLS: tlsCfg, Logger: log})
}
