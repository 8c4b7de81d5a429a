package auth

import (
	"fmt"

	"github.com/openmhp/mhp-go"
)

// ReasonRoleForbidden is data.reason of a request refused because the
// identity's role is below what the method needs (data.role, data.need,
// data.method say which).
const ReasonRoleForbidden = "role_forbidden"

// ReasonUnauthorized is data.reason of a request that carried no valid
// credential (no verified client certificate or bearer token that names an
// identity).
const ReasonUnauthorized = "unauthorized"

// methodRoles is the least role of every method of the vocabulary (vocab.go).
// TestEveryMethodHasARole fails when a method is added without a line here.
var methodRoles = map[string]Role{
	mhp.MethodInitialize: RoleViewer,
	mhp.MethodPing:       RoleViewer,
	mhp.MethodDescribe:   RoleViewer,

	mhp.MethodSignalsRead:        RoleViewer,
	mhp.MethodSignalsSubscribe:   RoleViewer,
	mhp.MethodSignalsUnsubscribe: RoleViewer,

	mhp.MethodSettingsWrite: RoleAgent,
	mhp.MethodActionsInvoke: RoleAgent,

	mhp.MethodJobsStatus: RoleViewer,
	mhp.MethodJobsList:   RoleViewer,
	mhp.MethodJobsCancel: RoleAgent,
	mhp.MethodJobsPause:  RoleAgent,
	mhp.MethodJobsResume: RoleAgent,

	mhp.MethodSessionAcquire: RoleAgent,
	mhp.MethodSessionRenew:   RoleAgent,
	mhp.MethodSessionRelease: RoleAgent,

	mhp.MethodSafetyLimits: RoleViewer,
	mhp.MethodSafetyEStop:  RoleViewer, // served to every authenticated identity (spec §5.6)
	mhp.MethodSafetyReset:  RoleAgent,

	mhp.MethodResourcesList: RoleViewer,
	mhp.MethodResourcesRead: RoleViewer,

	mhp.MethodMethodsList:   RoleViewer,
	mhp.MethodMethodsFind:   RoleViewer,
	mhp.MethodMethodsGet:    RoleViewer,
	mhp.MethodMethodsDiff:   RoleViewer,
	mhp.MethodMethodsSave:   RoleAgent,
	mhp.MethodMethodsDelete: RoleAgent,

	mhp.MethodEvidenceHead: RoleViewer,
	mhp.MethodEvidenceList: RoleViewer,

	mhp.MethodPermitsIssue: RoleOperator,
	// A person's answers to an operator-run device (driver: manual; package manual).
	mhp.MethodOperatorAnswer: RoleOperator, mhp.MethodOperatorRecord: RoleOperator, mhp.MethodOperatorPending: RoleOperator,
}

// MethodRole returns the least role that may call method and whether the
// method is one of the vocabulary's. A method outside the vocabulary (an
// extension a decorator adds) is for the server to place: [Need] does.
func MethodRole(method string) (Role, bool) {
	r, ok := methodRoles[method]
	return r, ok
}

// Need is the least role for a method a server serves: the vocabulary's
// table, else operator for an operator extension, else agent (an extension
// may actuate: it is never served to a viewer by default).
func Need(method string, operatorMethod bool) Role {
	if r, ok := methodRoles[method]; ok {
		return r
	}
	if operatorMethod {
		return RoleOperator
	}
	return RoleAgent
}

// Authorize returns nil when id may call a method that needs role need, else
// the refusal: -32000 naming the identity, its role, the method and the role
// it needs (data.reason "role_forbidden", or "operator_required" for an
// operator method, as the operator-token check has always said).
func Authorize(id Identity, method string, need Role) *mhp.Error {
	if id.Role.Allows(need) {
		return nil
	}
	who := id.Name
	if who == "" {
		who = "this client"
	}
	reason := ReasonRoleForbidden
	hint := ""
	if need == RoleOperator {
		reason = mhp.ReasonOperatorRequired
		hint = fmt.Sprintf(" (an operator credential, or the operator token in the %s header)", mhp.HeaderOperator)
	}
	return mhp.Errorf(mhp.CodeServerError, "%s: %s has role %s, and %s needs role %s%s; nothing was sent to the device",
		method, who, roleName(id.Role), method, need, hint).
		With(mhp.DataReason, reason).With(mhp.DataMethod, method).With("role", string(id.Role)).With("need", string(need))
}

func roleName(r Role) string {
	if r == "" {
		return "none"
	}
	return string(r)
}
