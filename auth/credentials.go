package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxCredentialsFile caps the size of a credentials file, in bytes.
const MaxCredentialsFile = 1 << 20

// Credential is one named identity of a credentials file: a role and either
// the SHA-256 of its bearer token (the token itself is never stored) or the
// client certificate it signs in with.
//
//   - {name: alice, role: operator, token_sha256: 9f86d0...}
//   - {name: bench-3, role: agent, client_cert: {cn: bench-3}}
//   - {name: wall, role: viewer, client_cert: {san: wall.lab.example}}
type Credential struct {
	// Name is the identity's name (session labels start with it).
	Name string `yaml:"name"`
	// Role is viewer, agent or operator.
	Role Role `yaml:"role"`
	// TokenSHA256 is the hex SHA-256 of the bearer token.
	TokenSHA256 string `yaml:"token_sha256,omitempty"`
	// ClientCert matches a verified client certificate.
	ClientCert *CertMatch `yaml:"client_cert,omitempty"`
}

// CertMatch names the client certificate of an identity: its subject common
// name, or one of its subject alternative names (DNS, e-mail, URI or IP).
type CertMatch struct {
	CN  string `yaml:"cn,omitempty"`
	SAN string `yaml:"san,omitempty"`
}

// HashToken returns the hex SHA-256 of a token, the form a credentials file
// stores (`printf %s TOKEN | sha256sum`).
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParseCredentials reads a credentials file's YAML strictly: a list of
// [Credential]; unknown or duplicate keys, duplicate names, duplicate token
// hashes or certificate matches, a missing role and an entry with neither
// or both of token_sha256 and client_cert are refused, naming the entry.
func ParseCredentials(b []byte) ([]Credential, error) {
	var creds []Credential
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&creds); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("credentials: one YAML document expected (a list of {name, role, token_sha256 | client_cert})")
	}
	names, tokens, certs := map[string]bool{}, map[string]string{}, map[string]string{}
	for i, c := range creds {
		at := fmt.Sprintf("credentials: entry %d", i+1)
		if c.Name != "" {
			at += fmt.Sprintf(" (%s)", c.Name)
		}
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("%s: name is required", at)
		case strings.ContainsAny(c.Name, "/#\x00\n"):
			return nil, fmt.Errorf("%s: a name may not contain '/', '#' or control characters", at)
		case names[c.Name]:
			return nil, fmt.Errorf("%s: the name is given twice", at)
		case !c.Role.Valid():
			return nil, fmt.Errorf("%s: role %q: want viewer, agent or operator", at, c.Role)
		case (c.TokenSHA256 == "") == (c.ClientCert == nil):
			return nil, fmt.Errorf("%s: give exactly one of token_sha256 and client_cert", at)
		}
		names[c.Name] = true
		if c.TokenSHA256 != "" {
			h := strings.ToLower(c.TokenSHA256)
			if raw, err := hex.DecodeString(h); err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("%s: token_sha256 must be 64 hex digits (the SHA-256 of the token, never the token)", at)
			}
			if prev, dup := tokens[h]; dup {
				return nil, fmt.Errorf("%s: the same token as %s", at, prev)
			}
			tokens[h] = c.Name
			creds[i].TokenSHA256 = h
			continue
		}
		m := c.ClientCert
		if (m.CN == "") == (m.SAN == "") {
			return nil, fmt.Errorf("%s: client_cert needs exactly one of cn and san", at)
		}
		key := "cn:" + m.CN
		if m.SAN != "" {
			key = "san:" + strings.ToLower(m.SAN)
		}
		if prev, dup := certs[key]; dup {
			return nil, fmt.Errorf("%s: the same client certificate match as %s", at, prev)
		}
		certs[key] = c.Name
	}
	return creds, nil
}

// LoadCredentials reads and parses a credentials file (at most
// [MaxCredentialsFile] bytes).
func LoadCredentials(path string) ([]Credential, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCredentialsFile+1))
	if err != nil {
		return nil, fmt.Errorf("credentials %s: %w", path, err)
	}
	if len(b) > MaxCredentialsFile {
		return nil, fmt.Errorf("credentials %s: larger than %d bytes", path, MaxCredentialsFile)
	}
	creds, err := ParseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return creds, nil
}
