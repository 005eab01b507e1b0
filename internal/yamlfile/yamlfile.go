// Package yamlfile reads the YAML (or JSON) files the pool reads: the settings file, the worker's
// and the simulator's accounts files and the gateway's keys file. It is the one place that walks
// YAML nodes, and it keeps one rule for all of them: no error ever quotes a secret.
//
// Call [Parse] (a mapping at the top level, the settings file) or [List] (a list, or an object
// whose only field holds it); then walk the [Node]s with [Node.Fields] and [Node.Items] and read
// scalars with [Node.Text]. Every error a Node makes ([Node.Errorf]) names its path and line,
// "accounts[1].token (line 4): ...", and shows any argument that holds the text of a secret field
// of the file (the field names passed to Parse or List) as <redacted>, whatever the caller passes.
package yamlfile

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Node is one node of a file and the path that names it in errors.
type Node struct {
	Path string // e.g. "accounts[1].token"; "" for the top level

	n    *yaml.Node
	file *file
}

// file holds what every node of one file shares: the text of its secret fields.
type file struct {
	secretFields []string
	secrets      []string
}

// Parse decodes data and returns its top-level node; ok is false for an empty document. Fields
// named in secretFields, at any depth, are secrets. yaml's own syntax errors name the line and the
// problem, not the values.
func Parse(data []byte, secretFields ...string) (top Node, ok bool, err error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Node{}, false, err
	}
	f := &file{secretFields: secretFields}
	f.collect(&doc, false)
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return Node{file: f}, false, nil
	}
	return Node{n: doc.Content[0], file: f}, true, nil
}

// collect records the text of every scalar under a secret field.
func (f *file) collect(n *yaml.Node, secret bool) {
	if n.Kind == yaml.ScalarNode && secret && n.Value != "" {
		f.secrets = append(f.secrets, n.Value)
	}
	for i, c := range n.Content {
		s := secret
		if n.Kind == yaml.MappingNode && i%2 == 1 {
			s = s || contains(f.secretFields, n.Content[i-1].Value)
		}
		f.collect(c, s)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// List returns the items of a file whose top level is a list of name, or an object whose only
// field, name, holds that list; each item's path is name[i]. The list may not be empty.
func List(data []byte, name string, secretFields ...string) ([]Node, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("the file is empty: want a list of %s", name)
	}
	list, ok, err := Parse(data, secretFields...)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the file is empty: want a list of %s", name)
	}
	if list.IsMapping() {
		var found *Node
		err := list.Fields(func(k, v Node) error {
			if k.Text() != name {
				return k.At(k.Text()).Errorf("unknown field (want %s)", name)
			}
			found = &v
			return nil
		})
		if err != nil {
			return nil, err
		}
		if found == nil {
			return nil, list.At(name).Errorf("required")
		}
		list = *found
	}
	at := fmt.Sprintf("%s (line %d)", name, list.Line())
	if !list.IsList() {
		return nil, list.file.errorf(at, "want a list of %s", name)
	}
	if len(list.n.Content) == 0 {
		return nil, list.file.errorf(at, "the list is empty")
	}
	items := make([]Node, len(list.n.Content))
	for i, c := range list.n.Content {
		items[i] = Node{Path: fmt.Sprintf("%s[%d]", name, i), n: c, file: list.file}
	}
	return items, nil
}

// Line is the node's line in the file.
func (n Node) Line() int { return n.n.Line }

// Kinds.
func (n Node) IsMapping() bool { return n.n.Kind == yaml.MappingNode }
func (n Node) IsList() bool    { return n.n.Kind == yaml.SequenceNode }
func (n Node) IsScalar() bool  { return n.n.Kind == yaml.ScalarNode }

// IsNull reports an empty value: "key:", "key: ~" or "key: null".
func (n Node) IsNull() bool { return n.n.ShortTag() == "!!null" }

// Tag is the node's short tag: !!str, !!int, !!float, !!bool, !!null, !!seq, !!map.
func (n Node) Tag() string { return n.n.ShortTag() }

// Text is a scalar's text as written (unquoted).
func (n Node) Text() string { return n.n.Value }

// Fields calls fn with each key of the mapping n, in order, and its value. Both have the path
// n.Path + "." + key (the key alone at the top level): the key's line is the field's, the value's
// line is where the value starts.
func (n Node) Fields(fn func(k, v Node) error) error {
	for i := 0; i+1 < len(n.n.Content); i += 2 {
		k, v := n.n.Content[i], n.n.Content[i+1]
		path := k.Value
		if n.Path != "" {
			path = n.Path + "." + k.Value
		}
		if err := fn(Node{Path: path, n: k, file: n.file}, Node{Path: path, n: v, file: n.file}); err != nil {
			return err
		}
	}
	return nil
}

// Value returns the value of the field key of the mapping n; ok is false when n has none.
func (n Node) Value(key string) (Node, bool) {
	for i := 0; i+1 < len(n.n.Content); i += 2 {
		if n.n.Content[i].Value == key {
			return Node{Path: strings.TrimPrefix(n.Path+"."+key, "."), n: n.n.Content[i+1], file: n.file}, true
		}
	}
	return Node{}, false
}

// Items returns the elements of the list n, each with the path n.Path[i].
func (n Node) Items() []Node {
	out := make([]Node, len(n.n.Content))
	for i, c := range n.n.Content {
		out[i] = Node{Path: fmt.Sprintf("%s[%d]", n.Path, i), n: c, file: n.file}
	}
	return out
}

// At returns n with another path (e.g. a field's path for a message about the whole mapping).
func (n Node) At(path string) Node {
	n.Path = path
	return n
}

// Decode decodes the node into dst with yaml's own rules.
func (n Node) Decode(dst any) error { return n.n.Decode(dst) }

// Errorf returns the error "path (line N): message". An argument that holds a secret of n's file
// is replaced by <redacted> whole (the format is the caller's own text, never a value).
func (n Node) Errorf(format string, args ...any) error {
	return n.file.errorf(fmt.Sprintf("%s (line %d)", n.Path, n.Line()), format, args...)
}

// Redact returns s, or <redacted> when s holds a secret of n's file.
func (n Node) Redact(s string) string {
	if n.file == nil {
		return s
	}
	return n.file.redact(s)
}

func (f *file) errorf(at, format string, args ...any) error {
	for i, a := range args {
		if s := fmt.Sprint(a); f.redact(s) != s {
			args[i] = "<redacted>"
		}
	}
	return &Error{Msg: at + ": " + fmt.Sprintf(format, args...)}
}

func (f *file) redact(s string) string {
	for _, secret := range f.secrets {
		if strings.Contains(s, secret) {
			return "<redacted>"
		}
	}
	return s
}

// Error is an error about a node of a file: its message names the path and the line and holds no
// secret.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }
