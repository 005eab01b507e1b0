// Package accountlist reads the outer shape of a list file, shared by the worker's
// CODEXPOOL_ACCOUNTS, the simulator's --accounts and the gateway's keys file: YAML or JSON whose
// top level is the list, or an object whose only field (e.g. "accounts", "keys") holds it. Errors
// name the field and its line and never quote a value.
//
// Call Items (accounts) or Of (any list name); decode each node with the caller's own rules.
package accountlist

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Items returns the account nodes of an accounts file, in order. The list may not be empty.
func Items(data []byte) ([]*yaml.Node, error) { return Of(data, "accounts") }

// Of returns the nodes of a file whose top level is a list of name, or an object whose only
// field, name, holds that list; in order. The list may not be empty.
func Of(data []byte, name string) ([]*yaml.Node, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("the file is empty: want a list of %s", name)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err // yaml's messages name the line and the problem, not the values
	}
	list := &doc
	if list.Kind == yaml.DocumentNode && len(list.Content) == 1 {
		list = list.Content[0]
	}
	if list.Kind == yaml.MappingNode {
		var found *yaml.Node
		for i := 0; i+1 < len(list.Content); i += 2 {
			if k := list.Content[i]; k.Value == name {
				found = list.Content[i+1]
			} else {
				return nil, fmt.Errorf("%s (line %d): unknown field (want %s)", k.Value, k.Line, name)
			}
		}
		if found == nil {
			return nil, fmt.Errorf("%s (line %d): required", name, list.Line)
		}
		list = found
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s (line %d): want a list of %s", name, list.Line, name)
	}
	if len(list.Content) == 0 {
		return nil, fmt.Errorf("%s (line %d): the list is empty", name, list.Line)
	}
	return list.Content, nil
}
