package auth_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
)

// vocabularyMethods reads every Method* string constant of the root package
// (vocab.go and its neighbours): the methods the protocol names.
func vocabularyMethods(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Method") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d method constants in the root package: the parse is broken", len(out))
	}
	return out
}

// TestEveryMethodHasARole fails when a method is added to the vocabulary
// without a line in the role table.
func TestEveryMethodHasARole(t *testing.T) {
	for name, method := range vocabularyMethods(t) {
		if _, ok := auth.MethodRole(method); !ok {
			t.Errorf("mhp.%s (%q) has no role in auth's table: add it to methodRoles in auth/roles.go", name, method)
		}
	}
}

// TestEveryRoleAgainstEveryMethod is the table: each role against each
// method of the vocabulary, with the expected verdict written out.
func TestEveryRoleAgainstEveryMethod(t *testing.T) {
	viewer := []string{mhp.MethodInitialize, mhp.MethodPing, mhp.MethodDescribe, mhp.MethodSignalsRead, mhp.MethodSignalsSubscribe,
		mhp.MethodSignalsUnsubscribe, mhp.MethodJobsStatus, mhp.MethodJobsList, mhp.MethodSafetyLimits, mhp.MethodSafetyEStop,
		mhp.MethodResourcesList, mhp.MethodResourcesRead, mhp.MethodMethodsList, mhp.MethodMethodsFind, mhp.MethodMethodsGet,
		mhp.MethodMethodsDiff, mhp.MethodEvidenceHead, mhp.MethodEvidenceList}
	agent := []string{mhp.MethodSettingsWrite, mhp.MethodActionsInvoke, mhp.MethodJobsCancel, mhp.MethodJobsPause, mhp.MethodJobsResume,
		mhp.MethodSessionAcquire, mhp.MethodSessionRenew, mhp.MethodSessionRelease, mhp.MethodSafetyReset, mhp.MethodMethodsSave,
		mhp.MethodMethodsDelete}
	operator := []string{mhp.MethodPermitsIssue, mhp.MethodOperatorAnswer, mhp.MethodOperatorRecord, mhp.MethodOperatorPending}
	want := map[string]auth.Role{}
	for _, m := range viewer {
		want[m] = auth.RoleViewer
	}
	for _, m := range agent {
		want[m] = auth.RoleAgent
	}
	for _, m := range operator {
		want[m] = auth.RoleOperator
	}
	for name, method := range vocabularyMethods(t) {
		need, ok := want[method]
		if !ok {
			t.Errorf("mhp.%s (%q) is not in this test's table: say which role it needs", name, method)
			continue
		}
		for _, role := range []auth.Role{auth.RoleViewer, auth.RoleAgent, auth.RoleOperator, "", "root"} {
			id := auth.Identity{Name: "alice", Role: role, Via: "token"}
			err := auth.Authorize(id, method, auth.Need(method, false))
			allowed := role.Valid() && role.Allows(need)
			if allowed != (err == nil) {
				t.Errorf("%s calling %s: refused=%v, want allowed=%v", role, method, err != nil, allowed)
			}
			if err != nil && (err.Code != mhp.CodeServerError || !strings.Contains(err.Message, method) ||
				!strings.Contains(err.Message, "alice") || !strings.Contains(err.Message, string(need))) {
				t.Errorf("refusal of %s to %s does not name the identity, the method and the role: %v", method, role, err)
			}
		}
	}
}

func TestNeedOfExtensions(t *testing.T) {
	if got := auth.Need("vendor/spin", false); got != auth.RoleAgent {
		t.Fatalf("an extension outside the vocabulary needs %s, want agent (it may actuate)", got)
	}
	if got := auth.Need("vendor/approve", true); got != auth.RoleOperator {
		t.Fatalf("an operator extension needs %s, want operator", got)
	}
	e := auth.Authorize(auth.Identity{Name: "bob", Role: auth.RoleAgent}, mhp.MethodPermitsIssue, auth.RoleOperator)
	if e == nil || e.Data[mhp.DataReason] != mhp.ReasonOperatorRequired {
		t.Fatalf("an agent issuing a permit: %v, want operator_required", e)
	}
}
