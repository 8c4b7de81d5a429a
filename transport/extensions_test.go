package transport_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/guard"
	"github.com/openmhp/mhp-go/methods"
	"github.com/openmhp/mhp-go/transport"
)

// TestExtensionsAndOperatorMethods: a device behind guard and methods gets
// their wire methods and capabilities; permits/issue answers only a request
// with the operator token, never the agent's bearer token; a permit approves
// exactly its request once; a bare driver advertises neither capability and
// refuses a commandId it cannot honour.
func TestExtensionsAndOperatorMethods(t *testing.T) {
	const opToken = "operator-secret-0123456789"
	m := newMemory(t, conformance.Options{})
	g, err := guard.New(m.drv, guard.Config{Permits: guard.NewPermits("conformance-01", nil)})
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, newServer(t, methods.Wrap(g, nil), transport.Options{Token: "agent-token", OperatorToken: opToken}))
	auth := map[string]string{"Authorization": "Bearer agent-token"}
	resp, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`, auth)
	var init mhp.InitializeResult
	if err := json.Unmarshal(r.Result, &init); err != nil {
		t.Fatal(err)
	}
	if !init.Capabilities.CommandIDs || !init.Capabilities.Methods {
		t.Fatalf("capabilities = %+v, want commandIds and methods", init.Capabilities)
	}
	agent := map[string]string{"Authorization": "Bearer agent-token", mhp.HeaderSession: resp.Header.Get(mhp.HeaderSession)}
	issue := `{"jsonrpc":"2.0","id":2,"method":"permits/issue","params":{"method":"settings/write","name":"` + conformance.SettingConfirmed + `","value":3}}`
	if _, r := post(t, hs.URL, issue, agent); r.Error == nil || r.Error.Data["reason"] != "operator_required" {
		t.Fatalf("permits/issue with the agent's token: %+v, want operator_required", r)
	}
	wrong := map[string]string{"Authorization": agent["Authorization"], mhp.HeaderSession: agent[mhp.HeaderSession], mhp.HeaderOperator: "guess"}
	if _, r := post(t, hs.URL, issue, wrong); r.Error == nil {
		t.Fatal("permits/issue with a wrong operator token was answered")
	}
	op := map[string]string{"Authorization": agent["Authorization"], mhp.HeaderSession: agent[mhp.HeaderSession], mhp.HeaderOperator: opToken}
	_, r = post(t, hs.URL, issue, op)
	var p guard.Permit
	if r.Error != nil || json.Unmarshal(r.Result, &p) != nil || !strings.HasPrefix(p.ID, "permit_") {
		t.Fatalf("permits/issue by the operator: %+v", r)
	}
	write := func(value, permit string) rawResp {
		_, r := post(t, hs.URL, `{"jsonrpc":"2.0","id":3,"method":"settings/write","params":{"name":"`+conformance.SettingConfirmed+`","value":`+value+`,"permitId":"`+permit+`","commandId":"c-`+value+permit+`"}}`, agent)
		return r
	}
	if r := write("4", p.ID); r.Error == nil || r.Error.Code != mhp.CodeApprovalRequired {
		t.Fatalf("a permit for 3 used for 4: %+v", r)
	}
	if r := write("3", p.ID); r.Error != nil {
		t.Fatalf("the permitted write: %v", r.Error)
	}
	if r := write("3", p.ID+"x"); r.Error == nil {
		t.Fatal("a forged permit id approved a write")
	}
	_, r = post(t, hs.URL, `{"jsonrpc":"2.0","id":4,"method":"evidence/head"}`, agent)
	if r.Error == nil || r.Error.Code != mhp.CodeNotSupported {
		t.Fatalf("evidence/head without evidence: %+v, want NotSupported", r)
	}
	_, r = post(t, hs.URL, `{"jsonrpc":"2.0","id":5,"method":"methods/list"}`, agent)
	if r.Error != nil || !strings.Contains(string(r.Result), `"methods":[]`) {
		t.Fatalf("methods/list of an empty store: %s %v", r.Result, r.Error)
	}

	// A bare driver: no capabilities, and a commandId it cannot honour is refused, not ignored.
	bare := serveHTTP(t, newServer(t, newMemory(t, conformance.Options{}).drv, transport.Options{}))
	resp, r = post(t, bare.URL, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`, nil)
	var bareInit mhp.InitializeResult
	json.Unmarshal(r.Result, &bareInit)
	if bareInit.Capabilities.CommandIDs || bareInit.Capabilities.Methods {
		t.Fatalf("a bare driver advertises %+v", bareInit.Capabilities)
	}
	h := map[string]string{mhp.HeaderSession: resp.Header.Get(mhp.HeaderSession)}
	_, r = post(t, bare.URL, `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"setpoint","value":1,"commandId":"x"}}`, h)
	if r.Error == nil || r.Error.Code != mhp.CodeNotSupported || r.Error.Data["field"] != "commandId" {
		t.Fatalf("commandId on a bare driver: %+v, want NotSupported naming commandId", r)
	}
	_, r = post(t, bare.URL, `{"jsonrpc":"2.0","id":3,"method":"actions/invoke","params":{"method":"pcr"}}`, h)
	if r.Error == nil || r.Error.Code != mhp.CodeNotSupported {
		t.Fatalf("a saved method on a device without them: %+v, want NotSupported", r)
	}
}
