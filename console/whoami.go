package console

import (
	"encoding/json"
	"net/http"

	"github.com/openmhp/mhp-go/auth"
)

// Whoami is the answer of GET /whoami: who the console's requests are
// signed in as, so the page shows it and hides what the role cannot do.
type Whoami struct {
	// Name is the identity's name ("" when none is needed or none was given).
	Name string `json:"name"`
	// Role is viewer, agent or operator; "" when not signed in.
	Role auth.Role `json:"role"`
	// Via is "cert", "token", "none" (the server needs no credential), or
	// "" when not signed in.
	Via string `json:"via"`
	// Can lists what the role allows the page to show: "read", "write"
	// (settings, actions, job control, leases, reset), "operator", and
	// always "estop" once signed in.
	Can []string `json:"can"`
}

func whoami(w http.ResponseWriter, r *http.Request) {
	out := Whoami{Can: []string{}}
	if id, ok := auth.FromContext(r.Context()); ok {
		out.Name, out.Role, out.Via = id.Name, id.Role, id.Via
		out.Can = append(out.Can, "read", "estop")
		if id.Role.Allows(auth.RoleAgent) {
			out.Can = append(out.Can, "write")
		}
		if id.Role.Allows(auth.RoleOperator) {
			out.Can = append(out.Can, "operator")
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
