package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codexpool/codexpool/internal/accountlist"
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
		path := fmt.Sprintf("keys[%d]", i)
		k, err := parseKey(n, path)
		if err != nil {
			return nil, err
		}
		if j, dup := names[k.Name]; dup {
			return nil, keyError(path+".name", n, "%q is also the name of keys[%d]", k.Name, j)
		}
		if j, dup := digests[k.SHA256]; dup {
			return nil, keyError(path, n, "key %q has the same secret as keys[%d]", k.Name, j)
		}
		names[k.Name], digests[k.SHA256] = i, i
		keys = append(keys, k)
	}
	return keys, nil
}

// keyItems returns the key nodes: the top-level list, or the list in a top-level "keys".
func keyItems(data []byte) ([]*yaml.Node, error) { return accountlist.Of(data, "keys") }

const keyFields = "name, secret, secret_sha256, requests_per_minute, tokens_per_5h, tokens_per_day, " +
	"tokens_per_week, max_concurrent, models, admin"

func parseKey(n *yaml.Node, path string) (Key, error) {
	var k Key
	if n.Kind != yaml.MappingNode {
		return k, keyError(path, n, "want an object with name and one of secret, secret_sha256")
	}
	var secrets []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		field, v := n.Content[i].Value, n.Content[i+1]
		at := path + "." + field
		var err error
		switch field {
		case "name":
			k.Name, err = keyString(v, at, false)
		case "secret":
			var s string
			s, err = keyString(v, at, true)
			k.SHA256 = sha256.Sum256([]byte(s))
			secrets = append(secrets, field)
		case "secret_sha256":
			k.SHA256, err = digest(v, at)
			secrets = append(secrets, field)
		case "models":
			k.Models, err = modelNames(v, at)
		case "admin":
			k.Admin, err = keyBool(v, at)
		default:
			var known bool
			known, err = setLimit(&k.Limits, field, v, at)
			if !known {
				err = keyError(at, n.Content[i], "unknown field (want %s)", keyFields)
			}
		}
		if err != nil {
			return k, err
		}
	}
	switch {
	case k.Name == "":
		return k, keyError(path+".name", n, "required")
	case len(secrets) == 0:
		return k, keyError(path, n, "key %q has no secret: give one of secret, secret_sha256", k.Name)
	case len(secrets) > 1:
		return k, keyError(path, n, "key %q has secret and secret_sha256: give exactly one", k.Name)
	}
	return k, nil
}

// setLimit decodes the limit field into l, reporting whether field is one.
func setLimit(l *Limits, field string, v *yaml.Node, at string) (bool, error) {
	var err error
	switch field {
	case "requests_per_minute":
		l.RequestsPerMinute, err = count[int](v, at)
	case "max_concurrent":
		l.MaxConcurrent, err = count[int](v, at)
	case "tokens_per_5h":
		l.TokensPer5h, err = count[int64](v, at)
	case "tokens_per_day":
		l.TokensPerDay, err = count[int64](v, at)
	case "tokens_per_week":
		l.TokensPerWeek, err = count[int64](v, at)
	default:
		return false, nil
	}
	return true, err
}

// keyError names the field at path and the line of n.
func keyError(path string, n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s (line %d): %s", path, n.Line, fmt.Sprintf(format, args...))
}

// keyString returns a scalar's text; secret keeps the value out of every error.
func keyString(n *yaml.Node, path string, secret bool) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", keyError(path, n, "want a single non-empty value")
	}
	v := strings.TrimSpace(n.Value)
	switch {
	case v == "":
		return "", keyError(path, n, "must not be empty")
	case n.ShortTag() != "!!str" && !secret:
		return "", keyError(path, n, "want a string, got %s", n.Value)
	case secret && strings.ContainsAny(v, " \t\r\n"):
		return "", keyError(path, n, "must not contain spaces")
	}
	return v, nil
}

// digest decodes secret_sha256: 64 hex digits.
func digest(n *yaml.Node, path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	b, err := hex.DecodeString(strings.TrimSpace(n.Value))
	if n.Kind != yaml.ScalarNode || err != nil || len(b) != sha256.Size {
		return sum, keyError(path, n, "want the secret's SHA-256 as 64 hex digits")
	}
	copy(sum[:], b)
	return sum, nil
}

// count decodes a limit: a whole number above 0.
func count[T int | int64](n *yaml.Node, path string) (T, error) {
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil || v <= 0 || int64(T(v)) != v {
		return 0, keyError(path, n, "want a whole number above 0, got %s", strconv.Quote(n.Value))
	}
	return T(v), nil
}

func keyBool(n *yaml.Node, path string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, keyError(path, n, "want true or false, got %s", strconv.Quote(n.Value))
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", nil
}

// modelNames decodes models: a list of names, or one name.
func modelNames(n *yaml.Node, path string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		m, err := keyString(n, path, false)
		return []string{m}, err
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, keyError(path, n, "want a non-empty list of model names")
	}
	out := make([]string, 0, len(n.Content))
	for i, m := range n.Content {
		s, err := keyString(m, fmt.Sprintf("%s[%d]", path, i), false)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
