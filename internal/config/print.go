package config

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PrintHelp writes the settings table of a help text: variable, file key, default, meaning. An
// older variable in milliseconds gets a row of its own below the current one.
func PrintHelp(w io.Writer, list []Setting) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tFILE KEY\tDEFAULT\tMEANING")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Env, s.Key, s.Shown(), s.Desc)
		if s.MSEnv != "" {
			ms := strconv.FormatInt(int64(time.Duration(s.field.Int())/time.Millisecond), 10)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.MSEnv, s.Key, ms,
				"older name of "+s.Env+": the same as an integer number of milliseconds")
		}
	}
	return tw.Flush()
}

// Print writes the effective configuration: every setting's file key, value (secrets redacted),
// source (default, file or env) and variable.
func (st Settings) Print(w io.Writer) error {
	if st.File != "" {
		fmt.Fprintf(w, "# file: %s\n", st.File)
	} else {
		fmt.Fprintln(w, "# file: none")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tVARIABLE")
	for _, s := range st.List {
		v := s.Shown()
		if v == "" {
			v = `""`
		}
		src := string(s.Source)
		if s.Source == File {
			src = fmt.Sprintf("file:%d", s.Line)
		}
		name := s.Env
		if s.Source == Env {
			name = s.Var
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Key, v, src, name)
	}
	return tw.Flush()
}

// Sorted returns st with its settings grouped by section in the given order (sections not in it
// last), keeping their order within a section.
func (st Settings) Sorted(order []string) Settings {
	out := Settings{File: st.File, List: slices.Clone(st.List)}
	rank := func(s Setting) int {
		if i := slices.Index(order, section(s.Key)); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(out.List, func(a, b Setting) int { return rank(a) - rank(b) })
	return out
}

// Merge returns st with the settings of more whose file key st lacks appended.
func (st Settings) Merge(more Settings) Settings {
	out := Settings{File: st.File, List: slices.Clone(st.List)}
	for _, s := range more.List {
		if !slices.ContainsFunc(out.List, func(o Setting) bool { return o.Key == s.Key }) {
			out.List = append(out.List, s)
		}
	}
	return out
}

// WriteExample writes a YAML file that sets every setting of list to its current value (the
// defaults, for a Fields list), sections in the given order, each key under a comment with its
// meaning and variable. Secrets are written empty.
func WriteExample(w io.Writer, header string, order []string, list []Setting) error {
	bySection := map[string][]Setting{}
	for _, s := range list {
		sec := section(s.Key)
		if !slices.Contains(order, sec) {
			order = append(order, sec)
		}
		if !slices.ContainsFunc(bySection[sec], func(o Setting) bool { return o.Key == s.Key }) {
			bySection[sec] = append(bySection[sec], s)
		}
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	for _, sec := range order {
		if len(bySection[sec]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s:\n", sec)
		for _, s := range bySection[sec] {
			fmt.Fprintf(&b, "  # %s (%s)\n", s.Desc, s.Env)
			fmt.Fprintf(&b, "  %s: %s\n", s.Key[len(sec)+1:], exampleValue(s))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// exampleValue is a setting's value in YAML: strings quoted, secrets empty.
func exampleValue(s Setting) string {
	v := s.Value()
	if s.Secret != "" {
		v = ""
	}
	if s.field.Kind() == reflect.String {
		return strconv.Quote(v)
	}
	return v
}
