package config

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/codexpool/codexpool/internal/yamlfile"
)

// Loader reads the settings of one program.
type Loader struct {
	Prefix string              // of every variable, e.g. "CODEXPOOL"
	Getenv func(string) string // the environment; nil = empty

	// Known lists every settings struct of the program (pointers). A file may hold any of their
	// keys, so that one file serves every subcommand; keys the struct being loaded lacks are
	// ignored, keys no struct has are an error.
	Known []any
}

// Settings is what Load applied: every setting of the struct with its source.
type Settings struct {
	File string // the file read; "" = none
	List []Setting
}

// Load fills *dst, which holds the defaults, from the YAML file at path ("" = none) and then the
// environment. Errors name the file, line and key, or the variable, never a secret value.
func (l Loader) Load(dst any, path string) (Settings, error) {
	list, err := Fields(l.Prefix, dst)
	if err != nil {
		return Settings{}, err
	}
	st := Settings{File: path, List: list}
	if path != "" {
		if err := l.applyFile(&st); err != nil {
			return st, err
		}
	}
	return st, l.applyEnv(&st)
}

// applyFile sets the settings the file names.
func (l Loader) applyFile(st *Settings) error {
	raw, err := os.ReadFile(st.File)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	entries, err := parseFile(raw, secretNames(st.List))
	if err != nil {
		return fmt.Errorf("config: %s: %w", st.File, err)
	}
	keys, sections, err := l.known(st.List)
	if err != nil {
		return err
	}
	for _, e := range entries {
		at := fmt.Sprintf("config: %s line %d", st.File, e.line)
		switch {
		case e.section && !slices.Contains(sections, e.key):
			return fmt.Errorf("%s: unknown section %q (did you mean %q?)", at, e.key, closest(e.key, sections))
		case e.section:
			continue
		case !slices.Contains(keys, e.key):
			return fmt.Errorf("%s: unknown key %q (did you mean %q?)", at, e.key, closest(e.key, keys))
		}
		i := slices.IndexFunc(st.List, func(s Setting) bool { return s.Key == e.key })
		if i < 0 || e.null {
			continue // another subcommand's setting, or an empty value: the default stays
		}
		s := &st.List[i]
		if err := set(s.field, e.value); err != nil {
			return fmt.Errorf("%s: %s: %s", at, e.key, e.node.Redact(err.Error()))
		}
		s.Source, s.Line = File, e.line
	}
	return nil
}

// known returns the sorted file keys and sections of list and of every Known struct.
func (l Loader) known(list []Setting) (keys, sections []string, err error) {
	all := slices.Clone(list)
	for _, spec := range l.Known {
		more, err := Fields(l.Prefix, spec)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, more...)
	}
	for _, s := range all {
		keys = append(keys, s.Key)
		sections = append(sections, section(s.Key))
	}
	slices.Sort(keys)
	slices.Sort(sections)
	return slices.Compact(keys), slices.Compact(sections), nil
}

// applyEnv sets the settings whose variable is non-empty; the current name wins over the older
// name in milliseconds.
func (l Loader) applyEnv(st *Settings) error {
	if l.Getenv == nil {
		return nil
	}
	for i := range st.List {
		s := &st.List[i]
		name, v, ms := s.Env, l.Getenv(s.Env), false
		if v == "" && s.MSEnv != "" {
			name, v, ms = s.MSEnv, l.Getenv(s.MSEnv), true
		}
		if v == "" {
			continue
		}
		var err error
		if ms {
			err = setMS(s.field, v)
		} else {
			err = set(s.field, v)
		}
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		s.Source, s.Var, s.Line = Env, name, 0
	}
	return nil
}

// entry is one "section:" or "key: value" line of a file.
type entry struct {
	key     string // "section" or "section.name"
	section bool
	line    int
	value   string
	null    bool          // "key:" with no value, or "key: ~"
	node    yamlfile.Node // for redacting errors
}

// parseFile returns the file's sections and keys in order. A file is a mapping of sections, each a
// mapping of keys to single values. The values of keys named in secrets never appear in an error.
func parseFile(raw []byte, secrets []string) ([]entry, error) {
	top, ok, err := yamlfile.Parse(raw, secrets...)
	if err != nil || !ok {
		return nil, err // yaml's errors name the line; an empty file sets nothing
	}
	if !top.IsMapping() {
		return nil, fmt.Errorf("line %d: want sections (nats:, codex:, ...) at the top level", top.Line())
	}
	var out []entry
	seen := map[string]int{}
	err = top.Fields(func(k, v yamlfile.Node) error {
		out = append(out, entry{key: k.Text(), section: true, line: k.Line(), node: k})
		if v.IsNull() {
			return nil
		}
		if !v.IsMapping() {
			return fmt.Errorf("line %d: %s: a section holds \"key: value\" lines", v.Line(), k.Text())
		}
		return v.Fields(func(kk, vv yamlfile.Node) error {
			key := kk.Path
			if prev, dup := seen[key]; dup {
				return fmt.Errorf("line %d: %s: also set on line %d", kk.Line(), key, prev)
			}
			seen[key] = kk.Line()
			if !vv.IsScalar() {
				return fmt.Errorf("line %d: %s: want a single value, not a list or mapping", vv.Line(), key)
			}
			out = append(out, entry{key: key, line: kk.Line(), value: vv.Text(), null: vv.IsNull(), node: vv})
			return nil
		})
	})
	return out, err
}

// secretNames returns the last part of the keys of list's secrets (password, token, ...).
func secretNames(list []Setting) []string {
	var out []string
	for _, s := range list {
		if s.Secret == "true" {
			out = append(out, s.Key[strings.Index(s.Key, ".")+1:])
		}
	}
	return out
}

// section returns the section of a key.
func section(key string) string {
	s, _, _ := strings.Cut(key, ".")
	return s
}

// Explain adds to a *FieldError where its variable's value came from: the file key and line, or
// the older variable that set it. Other errors are returned as they are.
func (st Settings) Explain(err error) error {
	fe, ok := asFieldError(err)
	if !ok || fe.Where != "" {
		return err
	}
	for _, s := range st.List {
		if s.Env != fe.Env && s.MSEnv != fe.Env {
			continue
		}
		switch {
		case s.Source == File:
			fe.Where = fmt.Sprintf("%s in %s line %d", s.Key, st.File, s.Line)
		case s.Source == Env && s.Var != fe.Env:
			fe.Where = "set as " + s.Var
		}
		break
	}
	return err
}

// Lookup returns the setting of the variable env (prefix included).
func (st Settings) Lookup(env string) (Setting, bool) {
	i := slices.IndexFunc(st.List, func(s Setting) bool { return s.Env == env })
	if i < 0 {
		return Setting{}, false
	}
	return st.List[i], true
}

// closest returns the candidate nearest to s: one with the same last part in another section
// (codex.max_inflight -> nats.max_inflight), else the one at the least edit distance.
func closest(s string, candidates []string) string {
	if _, leaf, ok := strings.Cut(s, "."); ok {
		for _, c := range candidates {
			if _, cl, _ := strings.Cut(c, "."); cl == leaf {
				return c
			}
		}
	}
	best, bestD := "", -1
	for _, c := range candidates {
		if d := distance(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
