package yamlfile_test

import (
	"strings"
	"testing"

	"github.com/codexpool/codexpool/internal/yamlfile"
)

func TestList(t *testing.T) {
	tests := []struct {
		name, data, want string
	}{
		{"empty", "  \n", "the file is empty: want a list of keys"},
		{"unknown field", "kyes:\n  - a\n", "kyes (line 1): unknown field (want keys)"},
		{"not a list", "keys: 3\n", "keys (line 1): want a list of keys"},
		{"empty list", "keys: []\n", "keys (line 1): the list is empty"},
		{"scalar top", "3\n", "keys (line 1): want a list of keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := yamlfile.List([]byte(tt.data), "keys")
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %s", err, tt.want)
			}
		})
	}
	items, err := yamlfile.List([]byte("- a\n- b\n"), "keys")
	if err != nil || len(items) != 2 || items[1].Path != "keys[1]" || items[1].Text() != "b" || items[1].Line() != 2 {
		t.Fatalf("got %v, %v; want keys[0..1]", items, err)
	}
}

// A secret field's text never appears in an error, whatever the caller formats into it.
func TestErrorsRedactSecrets(t *testing.T) {
	data := "keys:\n  - name: alice\n    secret: sk-very-secret\n    limit: sk-very-secret\n"
	items, err := yamlfile.List([]byte(data), "keys", "secret")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = items[0].Fields(func(k, v yamlfile.Node) error {
		got = append(got, v.Errorf("bad %q", v.Text()).Error(), k.Errorf("key of %s", data).Error())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range got {
		if strings.Contains(msg, "sk-very-secret") {
			t.Errorf("error quotes the secret: %s", msg)
		}
	}
	if want := `keys[0].limit (line 4): bad "<redacted>"`; got[4] != want {
		t.Errorf("got %s, want %s", got[4], want)
	}
}
