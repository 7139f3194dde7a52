package tenant

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// jwt returns a compact JWS with the given JSON payload and a dummy signature.
func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc([]byte(payload)) + ".c2lnbmF0dXJl"
}

func TestIdentity(t *testing.T) {
	long := strings.Repeat("x", MaxIdentity+1)
	tests := []struct {
		name   string
		rule   Rule
		header http.Header
		want   string
	}{
		{"header", Rule{Header: "X-Tenant"}, http.Header{"X-Tenant": {"search"}}, "search"},
		{"header any case", Rule{Header: "x-tenant"}, http.Header{"X-Tenant": {" search "}}, "search"},
		{"header absent", Rule{Header: "X-Tenant"}, http.Header{"X-Other": {"search"}}, ""},
		{"header too long", Rule{Header: "X-Tenant"}, http.Header{"X-Tenant": {long}}, ""},
		{"bearer", Rule{Bearer: true}, http.Header{"Authorization": {"Bearer sk-team-a"}}, Hash("sk-team-a")},
		{"bearer scheme any case", Rule{Bearer: true}, http.Header{"Authorization": {"bearer sk-team-a"}}, Hash("sk-team-a")},
		{"bearer absent", Rule{Bearer: true}, http.Header{}, ""},
		{"basic is no bearer", Rule{Bearer: true}, http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, ""},
		{"jwt sub", Rule{JWTClaim: "sub"}, http.Header{"Authorization": {"Bearer " + jwt(`{"sub":"team-a","exp":1}`)}}, "team-a"},
		{"jwt nested", Rule{JWTClaim: "org.id"}, http.Header{"Authorization": {"Bearer " + jwt(`{"org":{"id":42}}`)}}, "42"},
		{"jwt missing claim", Rule{JWTClaim: "tenant"}, http.Header{"Authorization": {"Bearer " + jwt(`{"sub":"a"}`)}}, ""},
		{"jwt object claim", Rule{JWTClaim: "org"}, http.Header{"Authorization": {"Bearer " + jwt(`{"org":{"id":1}}`)}}, ""},
		{"jwt not a jwt", Rule{JWTClaim: "sub"}, http.Header{"Authorization": {"Bearer sk-plain"}}, ""},
		{"jwt bad base64", Rule{JWTClaim: "sub"}, http.Header{"Authorization": {"Bearer a.!!!.c"}}, ""},
		{"jwt bad json", Rule{JWTClaim: "sub"}, http.Header{"Authorization": {"Bearer " + jwt(`{"sub":`)}}, ""},
		{"no rule", Rule{}, http.Header{"X-Tenant": {"search"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.rule.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tt.rule.Identity(tt.header); got != tt.want {
				t.Errorf("Identity = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestHashNeverHoldsToken pins the form of a bearer identity: a digest, not the token.
func TestHashNeverHoldsToken(t *testing.T) {
	id := Hash("sk-secret-token")
	if strings.Contains(id, "secret") || !strings.HasPrefix(id, "sha256:") || len(id) != len("sha256:")+64 {
		t.Errorf("Hash = %q, want sha256: and 64 hex digits", id)
	}
	if Hash("a") == Hash("b") {
		t.Error("different tokens hash alike")
	}
}

func TestValidate(t *testing.T) {
	for _, r := range []Rule{
		{Header: "X-Tenant", Bearer: true},
		{Bearer: true, JWTClaim: "sub"},
		{Header: "X Tenant"},
		{JWTClaim: "org..id"},
		{JWTClaim: "."},
	} {
		if err := r.Validate(); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidRule", r, err)
		}
	}
}

func FuzzIdentity(f *testing.F) {
	f.Add("Bearer "+jwt(`{"sub":"team-a"}`), "sub")
	f.Add("Bearer "+jwt(`{"org":{"id":7}}`), "org.id")
	f.Add("Bearer a.b.c", "sub")
	f.Add("bearer", "x")
	f.Fuzz(func(t *testing.T, auth, path string) {
		h := http.Header{"Authorization": {auth}, "X-Tenant": {auth}}
		for _, r := range []Rule{{Header: "X-Tenant"}, {Bearer: true}, {JWTClaim: path}} {
			if r.Validate() != nil {
				continue
			}
			id := r.Identity(h)
			if len(id) > MaxIdentity && !strings.HasPrefix(id, "sha256:") {
				t.Fatalf("identity of %d bytes", len(id))
			}
			if r.Bearer && id != "" && strings.Contains(auth, id) {
				t.Fatalf("bearer identity %q holds the token", id)
			}
		}
	})
}
