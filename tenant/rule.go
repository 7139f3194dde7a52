// Package tenant derives who is asking from a request's headers: a configured header's
// value, a hash of the bearer token, or a claim of a JWT bearer token. It holds no
// state and never keeps or returns a credential in clear.
package tenant

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// Rule says how a request's identity is derived. At most one of its fields is set; with
// none, no request has an identity (every one falls in the default tenant).
type Rule struct {
	// Header names a request header whose value is the identity, e.g. X-Tenant.
	Header string `yaml:"header,omitempty"`
	// Bearer takes the identity from the bearer token of the Authorization header, as
	// Hash(token): the token itself is never kept.
	Bearer bool `yaml:"bearer,omitempty"`
	// JWTClaim takes the identity from a claim of the JWT in the Authorization header (a
	// dotted path into nested objects, e.g. "sub" or "org.id"). The token's signature is
	// not checked (that would need its issuer's keys): use it behind a gateway that
	// verifies the token, as the mesh or API gateway in front of an inference pod does.
	JWTClaim string `yaml:"jwt_claim,omitempty"`
}

// ErrInvalidRule wraps every problem of a Rule.
var ErrInvalidRule = errors.New("tenant: invalid identify rule")

// MaxIdentity bounds the length of an identity: longer header or claim values have
// none (they fall in the default tenant), so that a client cannot make slogate keep
// large strings.
const MaxIdentity = 256

// Validate reports a rule with more than one source or a malformed header or claim.
func (r Rule) Validate() error {
	n := 0
	for _, set := range []bool{r.Header != "", r.Bearer, r.JWTClaim != ""} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return fmt.Errorf("%w: set one of header, bearer and jwt_claim", ErrInvalidRule)
	case r.Header != "" && !validHeaderName(r.Header):
		return fmt.Errorf("%w: %q is not a header name", ErrInvalidRule, r.Header)
	case r.JWTClaim != "" && slices.Contains(strings.Split(r.JWTClaim, "."), ""):
		return fmt.Errorf("%w: jwt_claim %q has an empty path element", ErrInvalidRule, r.JWTClaim)
	}
	return nil
}

// None reports whether the rule derives no identity at all.
func (r Rule) None() bool { return r.Header == "" && !r.Bearer && r.JWTClaim == "" }

// String describes the rule for logs and the status page, e.g. "header X-Tenant".
func (r Rule) String() string {
	switch {
	case r.Header != "":
		return "header " + textproto.CanonicalMIMEHeaderKey(r.Header)
	case r.Bearer:
		return "bearer token (sha256)"
	case r.JWTClaim != "":
		return "JWT claim " + r.JWTClaim
	}
	return "none"
}

// Identity returns the identity of a request with headers h, or "" when it has none:
// the header is absent or empty, there is no bearer token, the token is not a JWT, the
// claim is missing or not a string or number, or the value is longer than
// MaxIdentity. For Bearer it is Hash(token).
func (r Rule) Identity(h http.Header) string {
	var id string
	switch {
	case r.Header != "":
		id = strings.TrimSpace(h.Get(r.Header))
	case r.Bearer:
		if tok := bearer(h); tok != "" {
			return Hash(tok)
		}
	case r.JWTClaim != "":
		id = claim(bearer(h), r.JWTClaim)
	}
	if len(id) > MaxIdentity {
		return ""
	}
	return id
}

// Hash returns the identity of a bearer token: "sha256:" and the hex SHA-256 of the
// token, which is what a tenants file lists to match it.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// bearer returns the token of an "Authorization: Bearer <token>" header, or "".
func bearer(h http.Header) string {
	v := h.Get("Authorization")
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// maxJWT bounds the tokens whose payload is decoded.
const maxJWT = 16 << 10

// claim returns the value at path of the payload of jwt, a compact JWS
// (header.payload.signature), as a string; "" when there is none.
func claim(jwt, path string) string {
	if jwt == "" || len(jwt) > maxJWT {
		return ""
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	for _, key := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = obj[key]
	}
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func validHeaderName(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
