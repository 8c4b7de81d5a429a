package auth_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
)

// TestGuardDecidesOnce: a guard behind one with the same authenticator
// takes its decision (the same pass, no second check); behind one with
// another authenticator, or behind a context that only names an identity
// (WithIdentity), it decides itself; what it lets in reaches the handler
// as one context value (FromContext, PassFrom).
func TestGuardDecidesOnce(t *testing.T) {
	file := authtest.Credentials(t, t.TempDir(), "alice=agent:alice-token")
	a, err := auth.New(auth.Config{CredentialsFile: file})
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.New(auth.Config{Token: "legacy-token"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		outer      *auth.Authenticator // nil with outerGuard: an open guard
		outerGuard bool
		preset     bool // the request's context names "mallory" (WithIdentity), no guard
		inner      *auth.Authenticator
		token      string
		wantStatus int
		wantName   string
		samePass   bool // the inner guard served the outer guard's pass
	}{
		{"same authenticator: the outer decision", a, true, false, a, "alice-token", http.StatusOK, "alice", true},
		{"another authenticator: checked again", other, true, false, a, "legacy-token", http.StatusUnauthorized, "", false},
		{"an open guard in front of credentials: checked again", nil, true, false, a, "alice-token", http.StatusOK, "alice", false},
		{"an identity without a guard: decided anew", nil, false, true, nil, "", http.StatusOK, "", false},
		{"no guard in front", nil, false, false, a, "alice-token", http.StatusOK, "alice", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outerPass, innerPass *auth.Pass
			var gotName string
			var h http.Handler = auth.Guard{Auth: tt.inner}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				innerPass = auth.PassFrom(r.Context())
				id, _ := auth.FromContext(r.Context())
				gotName = id.Name
			}))
			if tt.outerGuard {
				inner := h
				h = auth.Guard{Auth: tt.outer}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					outerPass = auth.PassFrom(r.Context())
					inner.ServeHTTP(w, r)
				}))
			}
			r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			if tt.preset {
				r = r.WithContext(auth.WithIdentity(r.Context(), auth.Identity{Name: "mallory", Role: auth.RoleOperator, Via: "token"}))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("HTTP %d; want %d", w.Code, tt.wantStatus)
			}
			if tt.wantStatus != http.StatusOK {
				return
			}
			if gotName != tt.wantName {
				t.Errorf("identity %q; want %q", gotName, tt.wantName)
			}
			if same := innerPass != nil && innerPass == outerPass; same != tt.samePass {
				t.Errorf("inner guard served the outer pass: %v; want %v", same, tt.samePass)
			}
		})
	}
}
