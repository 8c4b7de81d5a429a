// Package silatest is a reusable fake SiLA 2 server for tests: give it
// Feature Definitions (FDL) and Go handlers and it serves them over real
// gRPC with the same run-time descriptors the sila2 client builds (no
// generated stubs). It implements SiLAService itself and, on request,
// CancelController and LockController; it speaks the SiLA error model
// (ABORTED + base64 SiLAError), validates parameters against their
// constraints, runs observable commands with _Info/_Intermediate/_Result,
// checks -bin metadata, serves TLS with a certificate made in the test, and
// can play a legacy (v1.0-era) server.
//
// [Backend] and [Execution] fake the adapter's seam instead ([sila2.Backend],
// [sila2.Options].Backend) as structs of funcs, for driving the adapter
// without a server: a stream that never comes back, a result lost after
// success.
package silatest

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go/sila2"
)

// serviceHandlers answer the core SiLAService feature every server has:
// its name, type, UUID, version and Feature Definitions.
func (s *Server) serviceHandlers() Handlers {
	str := func(get func() string) func(context.Context) (any, error) {
		return func(context.Context) (any, error) { return get(), nil }
	}
	return Handlers{
		Properties: map[string]func(context.Context) (any, error){
			"ServerName": str(func() string {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.name
			}),
			"ServerType":        str(func() string { return s.opts.Type }),
			"ServerUUID":        str(func() string { return s.opts.UUID }),
			"ServerDescription": str(func() string { return s.opts.Description }),
			"ServerVersion":     str(func() string { return s.opts.Version }),
			"ServerVendorURL":   str(func() string { return s.opts.VendorURL }),
			"ImplementedFeatures": func(context.Context) (any, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				var out []any
				for _, f := range s.features {
					if s.opts.Legacy {
						out = append(out, f.c.Feature.Identifier)
					} else {
						out = append(out, f.c.Feature.FullyQualifiedID())
					}
				}
				return out, nil
			},
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"GetFeatureDefinition": func(_ context.Context, p map[string]any) (map[string]any, error) {
				id, _ := p["feature_identifier"].(string)
				if id == "" {
					id, _ = p["qualified_feature_identifier"].(string)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, f := range s.features {
					if strings.EqualFold(id, f.c.Feature.FullyQualifiedID()) || (s.opts.Legacy && id == f.c.Feature.Identifier) {
						return map[string]any{"feature_definition": s.fdlText(f)}, nil
					}
				}
				if s.opts.Legacy {
					return nil, &sila2.Error{Kind: sila2.KindValidation, Parameter: "QualifiedFeatureIdentifier.Identifier", Message: "unknown feature " + id}
				}
				return nil, &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.SiLAServiceID + "/DefinedExecutionError/UnimplementedFeature",
					Message: "feature " + id + " is not implemented"}
			},
			"SetServerName": func(_ context.Context, p map[string]any) (map[string]any, error) {
				s.mu.Lock()
				s.name, _ = p["server_name"].(string)
				s.mu.Unlock()
				return map[string]any{}, nil
			},
		},
	}
}

func (s *Server) fdlText(f *feature) string { return f.text }

func (s *Server) cancelHandlers() Handlers {
	notFound := func(id string) error {
		return &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.CancelControllerID + "/DefinedExecutionError/InvalidCommandExecutionUUID",
			Message: "no running command execution " + id}
	}
	return Handlers{Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
		"CancelCommand": func(_ context.Context, p map[string]any) (map[string]any, error) {
			id, _ := p["command_execution_uuid"].(string)
			s.mu.Lock()
			x, ok := s.execs[strings.ToLower(id)]
			s.mu.Unlock()
			if !ok {
				return nil, notFound(id)
			}
			select {
			case <-x.done:
				return nil, notFound(id)
			default:
			}
			x.abort()
			return map[string]any{}, nil
		},
		"CancelAll": func(context.Context, map[string]any) (map[string]any, error) {
			s.mu.Lock()
			xs := make([]*Exec, 0, len(s.execs))
			for _, x := range s.execs {
				xs = append(xs, x)
			}
			s.mu.Unlock()
			for _, x := range xs {
				x.abort()
			}
			return map[string]any{}, nil
		},
	}}
}

func (s *Server) pauseHandlers() Handlers {
	pauseErr := func(id, msg string) error {
		return &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.PauseControllerID + "/DefinedExecutionError/" + id, Message: msg}
	}
	set := func(pause bool) func(context.Context, map[string]any) (map[string]any, error) {
		return func(_ context.Context, p map[string]any) (map[string]any, error) {
			id, _ := p["command_execution_uuid"].(string)
			s.mu.Lock()
			x, ok := s.execs[strings.ToLower(id)]
			s.mu.Unlock()
			if !ok {
				return nil, pauseErr("InvalidCommandExecutionUUID", "no command execution "+id)
			}
			for _, c := range s.opts.Unpausable {
				if c == x.Command {
					return nil, pauseErr("OperationNotSupported", x.Command+" cannot be paused")
				}
			}
			x.mu.Lock()
			defer x.mu.Unlock()
			if x.info.Terminal() {
				return nil, pauseErr("InvalidCommandExecutionUUID", "command execution "+id+" has finished")
			}
			if x.paused == pause {
				return nil, pauseErr("InvalidCommandState", fmt.Sprintf("command execution already paused=%v", pause))
			}
			x.paused = pause
			x.bump()
			return map[string]any{}, nil
		}
	}
	return Handlers{Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
		"Pause": set(true), "Resume": set(false),
	}}
}

// Exec returns a remembered execution by UUID.
func (s *Server) Exec(id string) (*Exec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.execs[strings.ToLower(id)]
	return x, ok
}

func (s *Server) lockHandlers() Handlers {
	lockErr := func(id, msg string) error {
		return &sila2.Error{Kind: sila2.KindDefined, Identifier: sila2.LockControllerID + "/DefinedExecutionError/" + id, Message: msg}
	}
	return Handlers{
		Properties: map[string]func(context.Context) (any, error){
			"IsLocked": func(context.Context) (any, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.lockID != "", nil
			},
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"LockServer": func(_ context.Context, p map[string]any) (map[string]any, error) {
				id, _ := p["lock_identifier"].(string)
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.lockID != "" {
					return nil, lockErr("ServerAlreadyLocked", "the server is already locked")
				}
				s.lockID = id
				return map[string]any{}, nil
			},
			"UnlockServer": func(_ context.Context, p map[string]any) (map[string]any, error) {
				id, _ := p["lock_identifier"].(string)
				s.mu.Lock()
				defer s.mu.Unlock()
				switch {
				case s.lockID == "":
					return nil, lockErr("ServerNotLocked", "the server is not locked")
				case s.lockID != id:
					return nil, lockErr("InvalidLockIdentifier", "wrong lock identifier")
				}
				s.lockID = ""
				return map[string]any{}, nil
			},
		},
	}
}

// ForceUnlock drops the lock, as a server whose lock timed out does.
func (s *Server) ForceUnlock() {
	s.mu.Lock()
	s.lockID = ""
	s.mu.Unlock()
}

// LockIdentifierSeen is the LockIdentifier metadata the last call of
// "Feature/Item" (a command or property identifier) carried; "" when it
// carried none or there was no call.
func (s *Server) LockIdentifierSeen(call string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockSeen[call]
}

// Locked reports the current lock identifier ("" when unlocked).
func (s *Server) Locked() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockID
}

// Executions lists the UUIDs of executions the server remembers.
func (s *Server) Executions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.execs))
	for id := range s.execs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
