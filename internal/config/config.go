// Package config loads a process's settings in three layers: the defaults written once in the
// code (the struct the caller passes in), then a YAML file, then the environment. A settings
// struct is made of section structs, embedded with the section's name as their yaml tag; each
// field of a section carries one set of tags:
//
//	envconfig:"NATS_URL"          the variable, without the prefix: envconfig names it CODEXPOOL_NATS_URL
//	yaml:"url"                    the key in its section: the file key is nats.url
//	secret:"true" | secret:"url"  redact the value when shown (a URL: its user information only)
//	ms:"WS_CONNECT_SPACING_MS"    an older variable holding the same duration in integer milliseconds
//	std:"true"                    a standard variable of another project, read without the prefix
//	                              (envconfig:"OTEL_SERVICE_NAME" std:"true" is OTEL_SERVICE_NAME)
//
// A setting's line of help is its desc tag, else what the struct's [Describer] says for its key:
// long help stays out of the tags. Embedded structs without a yaml tag are flattened.
//
// Call [Loader.Load] with a pointer to the defaults; it returns the [Settings] it applied, each
// with its [Source], for printing ([Settings.Print]) and for naming where a bad value came from
// ([Settings.Explain]). [Fields] lists a struct's settings without loading anything (help tables,
// [WriteExample]).
//
// Field types: string, bool, int, int64 and time.Duration (a Go duration such as 30s or 2m). An
// empty variable counts as unset: the environment is read through an injected getenv, which
// cannot tell the two apart.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Source says which layer gave a setting its value.
type Source string

const (
	Default Source = "default"
	File    Source = "file"
	Env     Source = "env"
)

// Setting is one tagged field of a settings struct.
type Setting struct {
	Key    string // file key, "section.name"
	Env    string // environment variable, prefix included
	MSEnv  string // older variable in integer milliseconds; "" = none
	Desc   string
	Secret string // "", "true" or "url"
	Source Source
	Line   int    // line in the file when Source is File
	Var    string // the variable that set it when Source is Env (Env or MSEnv)

	field reflect.Value
}

// Value is the setting's current value as text, unredacted.
func (s Setting) Value() string { return format(s.field) }

// Shown is the value as it may be printed: secrets redacted.
func (s Setting) Shown() string { return Redact(s.Secret, s.Value()) }

// Redact hides v according to a secret tag: "true" hides any non-empty value, "url" hides the
// user information of each comma-separated URL.
func Redact(secret, v string) string {
	switch {
	case v == "" || secret == "":
		return v
	case secret == "url":
		return redactURLs(v)
	}
	return "<redacted>"
}

// redactURLs replaces the user information of every URL in a comma-separated list.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			scheme := ""
			if j := strings.Index(p, "://"); j >= 0 && j < at {
				scheme = p[:j+3]
			}
			parts[i] = scheme + "<redacted>@" + p[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// Describer gives the help line of each setting of a struct by file key.
type Describer interface {
	Describe(key string) string
}

// Fields lists the settings of spec, a pointer to a struct, in field order with Source Default.
func Fields(prefix string, spec any) ([]Setting, error) {
	v := reflect.ValueOf(spec)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("config: want a pointer to a struct, got %T", spec)
	}
	describe := func(string) string { return "" }
	if d, ok := spec.(Describer); ok {
		describe = d.Describe
	}
	names, err := envNames(prefix, spec)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var out []Setting
	err = walk(v.Elem(), "", func(section string, f reflect.StructField, fv reflect.Value) error {
		name := f.Tag.Get("yaml")
		if section == "" || name == "" || strings.Contains(name, ".") {
			return fmt.Errorf("config: field %s: key %q is not section.name", f.Name, section+"."+name)
		}
		env, ok := names[addrOf(fv)]
		if !ok {
			return fmt.Errorf("config: field %s: envconfig does not see it (in an unexported embedded struct?)", f.Name)
		}
		if f.Tag.Get("std") == "true" {
			env = f.Tag.Get("envconfig")
		}
		s := Setting{Key: section + "." + name, Env: env, Desc: f.Tag.Get("desc"),
			Secret: f.Tag.Get("secret"), Source: Default, field: fv}
		if s.Desc == "" {
			s.Desc = describe(s.Key)
		}
		if ms := f.Tag.Get("ms"); ms != "" {
			s.MSEnv = prefix + "_" + ms
			if fv.Type() != durationType {
				return fmt.Errorf("config: %s: an ms variable needs a time.Duration field", f.Name)
			}
		}
		if !settable(fv.Type()) {
			return fmt.Errorf("config: field %s: unsupported type %s", f.Name, fv.Type())
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// walk calls fn for every field with an envconfig tag, descending into embedded structs: one with
// a yaml tag is the section of the fields below it.
func walk(v reflect.Value, section string, fn func(string, reflect.StructField, reflect.Value) error) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			sec := section
			if y := f.Tag.Get("yaml"); y != "" {
				sec = y
			}
			if err := walk(v.Field(i), sec, fn); err != nil {
				return err
			}
		case f.Tag.Get("envconfig") != "":
			if err := fn(section, f, v.Field(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

var durationType = reflect.TypeFor[time.Duration]()

func settable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64:
		return true
	}
	return false
}

// set parses text into the field.
func set(fv reflect.Value, text string) error {
	switch {
	case fv.Type() == durationType:
		d, err := time.ParseDuration(text)
		if err != nil {
			return fmt.Errorf("want a duration such as 30s or 2m, got %q", text)
		}
		fv.SetInt(int64(d))
	case fv.Kind() == reflect.String:
		fv.SetString(text)
	case fv.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", text)
		}
		fv.SetBool(b)
	default:
		n, err := strconv.ParseInt(text, 0, fv.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer, got %q", text)
		}
		fv.SetInt(n)
	}
	return nil
}

// setMS parses an integer count of milliseconds into a duration field.
func setMS(fv reflect.Value, text string) error {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer number of milliseconds, got %q", text)
	}
	fv.SetInt(int64(time.Duration(n) * time.Millisecond))
	return nil
}

// format renders a field's value the way the file and the environment spell it.
func format(fv reflect.Value) string {
	if !fv.IsValid() {
		return ""
	}
	if fv.Type() == durationType {
		return FormatDuration(time.Duration(fv.Int()))
	}
	return fmt.Sprint(fv.Interface())
}

// FormatDuration is d without trailing zero units: 2m, 24h, 1m30s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// FieldError is a value a setting cannot take. Explain adds where the value came from.
type FieldError struct {
	Prefix string // e.g. "worker"
	Env    string // the variable, prefix included
	Msg    string
	Where  string // e.g. "gate.forbidden_budget in codexpool.yaml line 4"; "" = not known
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Prefix != "" {
		b.WriteString(e.Prefix + ": ")
	}
	b.WriteString(e.Env)
	if e.Where != "" {
		b.WriteString(" (" + e.Where + ")")
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// asFieldError returns err's *FieldError, if any.
func asFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}
