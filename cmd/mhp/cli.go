package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// Exit codes.
const (
	exitOK      = 0
	exitRefused = 1 // a refusal, a failed job, validation or conformance problems
	exitUsage   = 2 // bad command line
	exitNoPeer  = 3 // the target could not be reached or started
)

// app is one invocation of the CLI with its streams, so that tests run it in
// process.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// tty says stdout is a terminal: --wait draws a live progress bar.
	tty bool
	// getenv reads the environment (MHP_TOKEN).
	getenv func(string) string
	// ready, when set, is told the base URLs once `demo` or `serve --http` listens.
	ready func(urls []string)

	idOnce sync.Once
	id     string
}

func newApp() *app {
	tty := false
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		tty = true
	}
	return &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, tty: tty, getenv: os.Getenv}
}

const usage = `mhp: the Model Hardware Protocol command line

Serve a device:
  mhp serve TARGET [--http ADDR | --stdio] [--token-file F] [--speed N] [--public-descriptor]
            [--publish mqtt://BROKER:1883/PREFIX] [--advertise] [--log-format text|json] [--allow-host NAME,...]
      TARGET is a device package folder, sim:thermocycler, sim:arm, or an adapter config file.
      --http defaults to 127.0.0.1:18921 (a bare :PORT binds loopback). GET / is the operator console
      (reachable by IP, localhost or an --allow-host name), GET /metrics the Prometheus metrics (token-guarded).

Talk to a device (TARGET is http://HOST:PORT or stdio:COMMAND):
  mhp TARGET describe [card|summary|full]     the descriptor (default summary)
  mhp TARGET read [NAME...]                   signals (all when no names)
  mhp TARGET write NAME VALUE [--dry-run] [--approved]
  mhp TARGET invoke NAME [JSON | k=v...] [--wait] [--dry-run] [--approved]
  mhp TARGET job ID | jobs | cancel ID | pause ID | resume ID
  mhp TARGET estop [REASON] | reset | limits | ping
  mhp TARGET acquire [TTL]                    hold the lease until Ctrl-C
  mhp TARGET release
  mhp TARGET resources | resource PATH
  mhp TARGET rpc METHOD [JSON]                any method, raw JSON-RPC
  mhp TARGET permit write|invoke NAME [VALUE|JSON] --operator-token-file F [--ttl S]
                                              an operator's single-use approval of exactly that request;
                                              the agent then sends --permit ID (permitId)
  mhp TARGET ack JOB|estop done|failed|could_not|cancelled [NOTE...] --operator-token-file F
  mhp TARGET confirm SETTING [VALUE] | record SIGNAL VALUE | pending   (--operator-token-file F)
                                              a person's answers to an operator-run (driver: manual) device
  VALUE is JSON if it parses (95, true, "x", [1,2]), else a string.
  Common flags: --json (machine output), --token-file F (or MHP_TOKEN), --timeout D;
      for https:// targets --ca FILE (MHP_CA), --pin sha256:HEX, --client-cert F --client-key F (MHP_CLIENT_CERT, MHP_CLIENT_KEY).
  Servers (serve, serve-directory, demo): --tls-cert F --tls-key F (HTTPS), --client-ca F (mutual TLS),
      --credentials F (named identities with roles); beyond loopback they need TLS and credentials unless --insecure.
  mhp certs init DIR | issue DIR NAME --host H[,H] [--client]
      a lab CA and the certificates it signs (see README, "Deploying on a lab network")

Wrap a backend (OPC UA PLC, ROS 2 robot, MQTT, SiLA 2, MADSci node, PyLabRobot bridge):
  mhp init KIND TARGET [-o FILE] [--include P,...] [--exclude P,...] [--depth N] [--listen D] [--root P]
      reads the live backend and writes the adapter config (and its descriptor snapshot) to review,
      then mhp validate FILE, mhp serve FILE; e.g. mhp init opcua opc.tcp://10.0.0.5:4840 -o plc.yaml

The host's fleet (the devices mhp-mcp serves when given no targets; $MHP_HOME, default ~/.mhp):
  mhp lab list | scan [HOST...] | add TARGET [--twin] [--yes] | remove ID | locate ID WHERE
  mhp onboard                                  add an instrument with no MHP server by answering questions
  mhp setup claude-desktop|claude-code|FILE [--dry-run]   register mhp-mcp with a harness
  mhp skills install DIR [--force]             the three Agent Skills, where a harness reads skills

Other:
  mhp demo [--http ADDR] [--speed N] [--once]  the simulated lab and a PCR workflow
  mhp validate DIR|FILE.yaml                   check a device package or an adapter config
  mhp conformance TARGET [--actuate]           wire checks citing the spec (MUST fails, SHOULD warns);
                                               --actuate adds estop checks (stop, then reset, the device)
  mhp run SCRIPT NAME=TARGET...                a Starlark script against a lab of devices
  mhp serve-directory [MANIFEST] [--http ADDR] [--probe HOST,...] [--browse] [--log-format F] [--allow-host N]
      a directory of devices (directory/search, directory/get); --http defaults to 127.0.0.1:18900;
      GET / is the lab page (search, live state, estop-all), GET /metrics the metrics
  mhp sila discover [--timeout D]              SiLA 2 servers announced by mDNS
  mhp watch mqtt://BROKER:1883/PREFIX          a live fleet view (devices published with serve --publish)
  mhp evidence verify DIR|BUNDLE [--pub F] | export DIR [--session L] [--key F] | keygen PRIV PUB
      the tamper-evident receipts of serve --evidence DIR
  mhp version

Exit status: 0 ok; 1 refused, job failed, problems found; 2 usage; 3 unreachable.
`

// flagSpec says which flags a command takes and whether they take a value.
type flagSpec map[string]bool // name -> takes a value

var commonFlags = flagSpec{"json": false, "token-file": true, "timeout": true, "help": false,
	"ca": true, "pin": true, "client-cert": true, "client-key": true} // client TLS: every command that dials

// parsed is a command line split into positionals and flags.
type parsed struct {
	args  []string
	flags map[string]string
}

func (p parsed) has(name string) bool { _, ok := p.flags[name]; return ok }

// parseArgs separates flags (anywhere on the line, "--name", "--name=value"
// or "--name value") from positionals. A negative number is a positional;
// "--" ends the flags.
func parseArgs(args []string, spec flagSpec) (parsed, error) {
	p := parsed{flags: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.args = append(p.args, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || isNumber(a) {
			p.args = append(p.args, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		value, hasValue := "", false
		if k, v, ok := strings.Cut(name, "="); ok {
			name, value, hasValue = k, v, true
		}
		takes, known := spec[name]
		if !known {
			takes, known = commonFlags[name]
		}
		if !known {
			return p, fmt.Errorf("unknown flag --%s", name)
		}
		if takes && !hasValue {
			if i+1 >= len(args) {
				return p, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if !takes && hasValue {
			return p, fmt.Errorf("flag --%s takes no value", name)
		}
		p.flags[name] = value
	}
	return p, nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// run executes one command line and returns the exit status.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, usage)
		return exitUsage
	}
	switch cmd := args[0]; {
	case cmd == "help" || cmd == "--help" || cmd == "-h":
		fmt.Fprint(a.stdout, usage)
		return exitOK
	case cmd == "version" || cmd == "--version":
		fmt.Fprintf(a.stdout, "mhp (mhp-go) protocol %s, accepts %s\n", mhp.ProtocolVersion, mhp.ProtocolVersionMinimum)
		return exitOK
	case cmd == "serve":
		return a.serveCmd(ctx, args[1:])
	case cmd == "demo":
		return a.demoCmd(ctx, args[1:])
	case cmd == "validate":
		return a.validateCmd(ctx, args[1:])
	case cmd == "init":
		return a.initCmd(ctx, args[1:])
	case cmd == "conformance":
		return a.conformanceCmd(ctx, args[1:])
	case cmd == "run":
		return a.runCmd(ctx, args[1:])
	case cmd == "certs":
		return a.certsCmd(ctx, args[1:])
	case cmd == "serve-directory":
		return a.serveDirectoryCmd(ctx, args[1:])
	case cmd == "sila":
		return a.silaCmd(ctx, args[1:])
	case cmd == "watch":
		return a.watchCmd(ctx, args[1:])
	case cmd == "evidence":
		return a.evidenceCmd(ctx, args[1:])
	case cmd == "lab":
		return a.labCmd(ctx, args[1:])
	case cmd == "onboard":
		return a.onboardCmd(ctx, args[1:])
	case cmd == "skills":
		return a.skillsCmd(ctx, args[1:])
	case cmd == "setup":
		return a.setupCmd(ctx, args[1:])
	case isTarget(cmd):
		return a.deviceCmd(ctx, cmd, args[1:])
	default:
		return a.usageError("unknown command %q: give a command (serve, demo, validate, conformance) or a target (http://HOST:PORT, stdio:COMMAND)", cmd)
	}
}

func isTarget(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "stdio:")
}

// quietLogger logs warnings and errors to stderr (library info logs would
// drown the CLI's own output).
func (a *app) quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (a *app) usageError(format string, args ...any) int {
	fmt.Fprintf(a.stderr, "mhp: "+format+"\n", args...)
	fmt.Fprintln(a.stderr, "run `mhp help` for usage")
	return exitUsage
}

// token reads --token-file, else MHP_TOKEN.
func (a *app) token(p parsed) (string, error) {
	if f, ok := p.flags["token-file"]; ok {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("token file %s is empty", f)
		}
		return t, nil
	}
	if a.getenv != nil {
		return strings.TrimSpace(a.getenv("MHP_TOKEN")), nil
	}
	return "", nil
}

func timeoutOf(p parsed, def time.Duration) (time.Duration, error) {
	v, ok := p.flags["timeout"]
	if !ok {
		return def, nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("--timeout: %w", err)
	}
	return d, nil
}

// parseDuration reads "90", "90s", "10m": a bare number is seconds.
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f <= 0 {
			return 0, fmt.Errorf("%q is not a positive duration", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a duration (90, 90s, 10m)", s)
	}
	return d, nil
}

// parseValue reads a VALUE: JSON if it parses, else the text as a string.
func parseValue(s string) any {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&v); err == nil && !dec.More() {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			return v
		}
	}
	return s
}

// printJSON writes v as indented JSON and returns the exit status: an
// answer that cannot be rendered is an error (exit 1), never a silent 0.
func (a *app) printJSON(v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: cannot render the answer: %v\n", err)
		return exitRefused
	}
	fmt.Fprintln(a.stdout, string(b))
	return exitOK
}

// clientID is this process's X-MHP-Client: unique per process (and per app),
// so that two CLI processes are never one client to a server that names
// clients by that header.
func (a *app) clientID() string {
	a.idOnce.Do(func() { a.id = client.NewClientID("mhp-cli") })
	return a.id
}
