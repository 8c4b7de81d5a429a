package opcuatest

import (
	"fmt"

	"github.com/gopcua/opcua/ua"
)

// SetEURange changes the EURange property of the analog variable name
// (setpoint in the conformance fixture; plant variables by their key) to
// low..high, as a server reconfigured between two connections does: reads
// of the property answer the new range from now on. No notification is
// sent (clients read EURange at connection). It fails for a variable with
// no EURange.
func (s *Server) SetEURange(name string, low, high float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ranges[name]; !ok {
		return fmt.Errorf("opcuatest: variable %q has no EURange", name)
	}
	s.ranges[name] = ua.Range{Low: low, High: high}
	return nil
}

// euRange is the current EURange of the variable key.
func (s *Server) euRange(key string) *ua.Range {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.ranges[key]
	return &r
}
