// Package sila2 fronts any SiLA 2 instrument as an MHP device, generically,
// from the server's own Feature Definitions: no generated stubs per feature.
//
// The client (Dial, Client) reads SiLAService (server identity, implemented
// features, each feature's definition), parses every Feature Definition
// (ParseFDL: basic, list, structure, constrained and custom data types,
// properties, commands with parameters, responses and intermediate
// responses, defined execution errors, metadata) and builds its gRPC
// service at run time: a descriptorpb.FileDescriptorProto per feature,
// resolved with protodesc against the SiLA framework messages (which are
// themselves a descriptor written in Go, NewFramework), with dynamicpb
// messages on the wire through grpc.ClientConn.Invoke and NewStream. Any
// SiLA 2 server works without recompiling. Legacy (v1.0-era) servers that
// list bare feature identifiers and run plaintext are tolerated.
//
// Errors follow the SiLA error model: an ABORTED status carries the base64
// of a SiLAError, decoded into *Error (validation, defined execution,
// undefined execution, framework); any other gRPC failure is a
// *ConnectionError whose outcome is unknown.
//
// # The adapter
//
// This package has the shape every adapter has (see package adapters):
// Load, Config.Validate, New, Register.
//
//	const Kind = "sila2"                                    // the config file's `adapter:`
//	func Load(src adapters.Source) (Config, error)          // strict YAML, paths resolved, validated
//	func (c Config) Validate() error                        // no I/O: what the file says is coherent
//	func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error)
//	func Register(r *adapters.Registry) error               // Kind -> Load, then New
//
// [New] dials [Config.Endpoint] unless [Options.Backend] gives another
// wire (with [Options.Features], the definitions it serves), and maps the
// features onto [binding.Signal], [binding.Setting] and [binding.Action]:
//
//   - unobservable property -> signal read with Get_; observable property ->
//     pushed signal fed by Subscribe_ (latest value cached; stream loss ->
//     unavailable until a resubscription delivers again);
//   - unobservable command -> short action, or a setting where the config
//     names a one-parameter command; observable command -> long action whose
//     job follows _Info (progress, estimated remaining time), carries
//     intermediate responses as progress extras, and takes its result from
//     _Result;
//   - constraints (bounds, set, pattern, length, element count, unit) become
//     MHP limits, enums and units, so the driver refuses bad values before
//     anything is sent; the config may narrow them, never widen them.
//
// Outcomes are honest: finishedSuccessfully -> done; finishedWithError ->
// failed with the defined execution error's identifier and message;
// cancellable only where the server implements CancelController, and
// cancelled only when the server confirmed the cancel (or ended the command
// with an error the config lists in cancelled_errors after a cancel or
// estop); pausable where it implements PauseController; a command whose
// _Info stream cannot be resumed -> outcome unknown
// -> device fault. ValidationErrors become InvalidValue or LimitViolation
// naming the parameter; framework errors of an initiating call are
// refusals. Metadata the config gives is sent on the calls the server says
// it affects.
//
// # Locks
//
// Where the server implements LockController, MHP leases map onto its lock
// (`lock: lease`, the default then; binding.Config.Lease): a session's
// session/acquire first calls LockServer with a fresh random lock
// identifier and a timeout (lock.timeout_s, default
// DefaultLeaseLockTimeoutS), and is refused with NotLeased (data.reason
// "server_locked", data.sila_error) when the server answers
// ServerAlreadyLocked because another client holds it. While the lease
// lives, every call the server lists under
// Get_FCPAffectedByMetadata_LockIdentifier carries the LockIdentifier
// metadata, and other SiLA clients are refused by the server. When the
// lease ends — release, expiry, the watchdog, Close — UnlockServer gives
// the lock back. A command refused by the server for its lock
// (InvalidLockIdentifier, or missing metadata on a locked server) is a
// NotLeased refusal. `lock: lifetime` (or any lock mapping without mode,
// as before modes existed) holds one lock from Start to Close instead;
// `lock: none` never locks.
//
// A timed lock is checked every third of its timeout: a read of a
// lock-protected unobservable property (Client.LockProbe; it carries the
// identifier, which keeps the lock active) and of IsLocked. A lock the
// server let lapse is taken again under the same identifier and logged.
// If it cannot be — the server refuses LockServer, or another client holds
// the server now — the lock is lost while the lease (or the driver)
// counted on it: the device latches in fault (binding.Driver.Fault), since
// the exclusive access the lease promised is gone; after a reset the lease
// continues without a server lock and the server refuses its calls
// (NotLeased) until the other client unlocks. Connection errors during a
// check only log; the next check tries again. Without a lock-protected
// unobservable property to probe, a foreign lock taken between two checks
// shows as NotLeased refusals rather than a fault.
//
// Binaries travel as base64 strings; above 2 MiB they go through the
// binary transfer services (BinaryUpload, BinaryDownload) in chunks.
//
// [Browse] finds _sila._tcp servers by mDNS: it sends its own query and
// decodes the answers record by record (a tolerant decoder, shared with the
// directory's _mhp._tcp browse in package mdns: a record it cannot read is
// skipped and logged by type and reason, never the whole packet; this
// package reads only the SiLA TXT fields); [Discover] reads one server's features into a config. The package silatest is a
// reusable fake SiLA 2 server built on the same descriptors; its Backend
// is a fake [Backend] for driving the adapter without a server.
//
// # Peers checked against
//
// Served through `mhp serve` and `mhp conformance` against the legacy
// Python SiLA 2 library (sila2) with the standard's example features. Its
// mDNS announcements, made with python-zeroconf 0.47, carry an NSEC record
// whose type bitmap has an empty block (window 0, length 0), which strict
// decoders (miekg/dns, under hashicorp/mdns) reject with the whole packet;
// they are now decoded: the browse was checked against python-zeroconf
// 0.47.3 (Debian 12's python3-zeroconf) announcing on loopback
// (TestBrowseRealZeroconf, MHP_PEER_ZEROCONF), and two of its responses,
// captured byte for byte (mdns/testdata/zeroconf-0.47.txtar), are golden tests;
// hashicorp/mdns's responder is checked on the host network with
// MHP_PEER_MDNS. tls.server_name against CN-only, SAN-DNS and SAN-IP
// certificates is checked with certificates made by crypto/x509. The other
// tests run against the Go fake (sila2/silatest).
package sila2
