package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/codexpool/codexpool/internal/yamlfile"
)

// LoadKeys reads the keys file at path (see ParseKeys). Errors name the file, and the field and
// line at fault.
func LoadKeys(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: keys file: %w", err)
	}
	keys, err := parseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("gateway: keys file %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys decodes a keys file, YAML or JSON: a list of keys, or an object whose "keys" member
// is that list.
//
//	keys:                              # or the list alone at the top level
//	  - name: alice                    # required, unique: what logs, usage and errors show
//	    secret: sk-alice-...           # the key clients send, or:
//	  - name: bob
//	    secret_sha256: 9f86d08...      # its SHA-256, hex (the file then holds no secret)
//	    requests_per_minute: 60        # optional limits, each across every gateway
//	    tokens_per_5h: 2000000
//	    tokens_per_day: 5000000
//	    tokens_per_week: 20000000
//	    max_concurrent: 4
//	    models: [gpt-5.1-codex]        # optional: the only models it may request
//	    admin: true                    # optional: may read GET /v1/usage
//
// Each key has exactly one of secret and secret_sha256. Unknown fields are errors. Every error
// names the field (keys[1].secret_sha256) and its line, and never holds a secret.
func ParseKeys(data []byte) ([]Key, error) {
	keys, err := parseKeys(data)
	if err != nil {
		return nil, fmt.Errorf("gateway: keys file: %w", err)
	}
	return keys, nil
}

func parseKeys(data []byte) ([]Key, error) {
	items, err := keyItems(data)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, 0, len(items))
	names := map[string]int{}
	digests := map[[sha256.Size]byte]int{}
	for i, n := range items {
		k, err := parseKey(n)
		if err != nil {
			return nil, err
		}
		if j, dup := names[k.Name]; dup {
			return nil, n.At(n.Path+".name").Errorf("%q is also the name of keys[%d]", k.Name, j)
		}
		if j, dup := digests[k.SHA256]; dup {
			return nil, n.Errorf("key %q has the same secret as keys[%d]", k.Name, j)
		}
		names[k.Name], digests[k.SHA256] = i, i
		keys = append(keys, k)
	}
	return keys, nil
}

// keyItems returns the key nodes: the top-level list, or the list in a top-level "keys".
func keyItems(data []byte) ([]yamlfile.Node, error) { return yamlfile.List(data, "keys", "secret") }

const keyFields = "name, secret, secret_sha256, requests_per_minute, tokens_per_5h, tokens_per_day, " +
	"tokens_per_week, max_concurrent, models, admin"

func parseKey(n yamlfile.Node) (Key, error) {
	var k Key
	if !n.IsMapping() {
		return k, n.Errorf("want an object with name and one of secret, secret_sha256")
	}
	var secrets []string
	err := n.Fields(func(f, v yamlfile.Node) error {
		var err error
		switch field := f.Text(); field {
		case "name":
			k.Name, err = keyString(v, false)
		case "secret":
			var s string
			s, err = keyString(v, true)
			k.SHA256 = sha256.Sum256([]byte(s))
			secrets = append(secrets, field)
		case "secret_sha256":
			k.SHA256, err = digest(v)
			secrets = append(secrets, field)
		case "models":
			k.Models, err = modelNames(v)
		case "admin":
			k.Admin, err = keyBool(v)
		default:
			var known bool
			known, err = setLimit(&k.Limits, field, v)
			if !known {
				err = f.Errorf("unknown field (want %s)", keyFields)
			}
		}
		return err
	})
	if err != nil {
		return k, err
	}
	switch {
	case k.Name == "":
		return k, n.At(n.Path + ".name").Errorf("required")
	case len(secrets) == 0:
		return k, n.Errorf("key %q has no secret: give one of secret, secret_sha256", k.Name)
	case len(secrets) > 1:
		return k, n.Errorf("key %q has secret and secret_sha256: give exactly one", k.Name)
	}
	return k, nil
}

// setLimit decodes the limit field into l, reporting whether field is one.
func setLimit(l *Limits, field string, v yamlfile.Node) (bool, error) {
	var err error
	switch field {
	case "requests_per_minute":
		l.RequestsPerMinute, err = count[int](v)
	case "max_concurrent":
		l.MaxConcurrent, err = count[int](v)
	case "tokens_per_5h":
		l.TokensPer5h, err = count[int64](v)
	case "tokens_per_day":
		l.TokensPerDay, err = count[int64](v)
	case "tokens_per_week":
		l.TokensPerWeek, err = count[int64](v)
	default:
		return false, nil
	}
	return true, err
}

// keyString returns a scalar's text; secret keeps the value out of every error.
func keyString(n yamlfile.Node, secret bool) (string, error) {
	if !n.IsScalar() || n.IsNull() {
		return "", n.Errorf("want a single non-empty value")
	}
	v := strings.TrimSpace(n.Text())
	switch {
	case v == "":
		return "", n.Errorf("must not be empty")
	case n.Tag() != "!!str" && !secret:
		return "", n.Errorf("want a string, got %s", n.Text())
	case secret && strings.ContainsAny(v, " \t\r\n"):
		return "", n.Errorf("must not contain spaces")
	}
	return v, nil
}

// digest decodes secret_sha256: 64 hex digits.
func digest(n yamlfile.Node) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	b, err := hex.DecodeString(strings.TrimSpace(n.Text()))
	if !n.IsScalar() || err != nil || len(b) != sha256.Size {
		return sum, n.Errorf("want the secret's SHA-256 as 64 hex digits")
	}
	copy(sum[:], b)
	return sum, nil
}

// count decodes a limit: a whole number above 0.
func count[T int | int64](n yamlfile.Node) (T, error) {
	v, err := strconv.ParseInt(n.Text(), 10, 64)
	if !n.IsScalar() || n.Tag() != "!!int" || err != nil || v <= 0 || int64(T(v)) != v {
		return 0, n.Errorf("want a whole number above 0, got %s", strconv.Quote(n.Text()))
	}
	return T(v), nil
}

func keyBool(n yamlfile.Node) (bool, error) {
	if !n.IsScalar() || n.Tag() != "!!bool" {
		return false, n.Errorf("want true or false, got %s", strconv.Quote(n.Text()))
	}
	v := n.Text()
	return v == "true" || v == "True" || v == "TRUE", nil
}

// modelNames decodes models: a list of names, or one name.
func modelNames(n yamlfile.Node) ([]string, error) {
	if n.IsScalar() {
		m, err := keyString(n, false)
		return []string{m}, err
	}
	items := n.Items()
	if !n.IsList() || len(items) == 0 {
		return nil, n.Errorf("want a non-empty list of model names")
	}
	out := make([]string, 0, len(items))
	for _, m := range items {
		s, err := keyString(m, false)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
