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
// The adapter (Open, Register for `adapter: sila2` config files) maps the
// features onto binding.Signal, Setting and Action:
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
// it affects; the LockController lock is held while the driver runs.
//
// Binaries travel as base64 strings; above 2 MiB they go through the
// binary transfer services (BinaryUpload, BinaryDownload) in chunks.
//
// Discover browses mDNS for _sila._tcp servers. The package silatest is a
// reusable fake SiLA 2 server built on the same descriptors.
package sila2
