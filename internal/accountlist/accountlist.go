// Package accountlist reads the outer shape of an accounts file, shared by the worker's
// CODEXPOOL_ACCOUNTS and the simulator's --accounts: YAML or JSON whose top level is the list of
// accounts, or an object whose only field is "accounts" holding it. Errors name the field and
// its line and never quote a value.
//
// Call Items; decode each account node with the caller's own rules.
package accountlist

import (
	"bytes"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Items returns the account nodes of an accounts file, in order. The list may not be empty.
func Items(data []byte) ([]*yaml.Node, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("the file is empty: want a list of accounts")
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
			if k := list.Content[i]; k.Value == "accounts" {
				found = list.Content[i+1]
			} else {
				return nil, fmt.Errorf("%s (line %d): unknown field (want accounts)", k.Value, k.Line)
			}
		}
		if found == nil {
			return nil, fmt.Errorf("accounts (line %d): required", list.Line)
		}
		list = found
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("accounts (line %d): want a list of accounts", list.Line)
	}
	if len(list.Content) == 0 {
		return nil, fmt.Errorf("accounts (line %d): the list is empty", list.Line)
	}
	return list.Content, nil
}
