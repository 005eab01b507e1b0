package config

import (
	"io"
	"reflect"
	"text/template"

	"github.com/kelseyhightower/envconfig"
)

// The variables of a settings struct are named by envconfig: the prefix, an underscore and the
// field's envconfig tag, embedded structs flattened. Their values are not read by
// envconfig.Process, which cannot serve here (envconfig_test.go pins each reason): it reads only
// the process's environment, not run's getenv; it falls back to the tag without the prefix
// (NATS_URL for CODEXPOOL_NATS_URL); a variable set empty counts as set; its errors quote the
// value; and it cannot say which variable set a field, nor read an older name in milliseconds.
// Values are read through Loader.Getenv and parsed by set, the same as the file's.

// fieldAddr identifies a settings field by its address and type.
type fieldAddr struct {
	ptr uintptr
	typ reflect.Type
}

// envNames returns the variable envconfig names for each field of spec (a pointer to a struct).
func envNames(prefix string, spec any) (map[fieldAddr]string, error) {
	names := map[fieldAddr]string{}
	add := func(info any) string {
		v := reflect.ValueOf(info)
		field := v.FieldByName("Field").Interface().(reflect.Value)
		if field.CanAddr() {
			names[fieldAddr{field.Addr().Pointer(), field.Type()}] = v.FieldByName("Key").String()
		}
		return ""
	}
	// Usaget hands the template envconfig's own list of the variables, in field order.
	tmpl := template.Must(template.New("names").Funcs(template.FuncMap{"add": add}).Parse(`{{range .}}{{add .}}{{end}}`))
	if err := envconfig.Usaget(prefix, spec, io.Discard, tmpl); err != nil {
		return nil, err
	}
	return names, nil
}

// addrOf is the fieldAddr of an addressable field.
func addrOf(fv reflect.Value) fieldAddr { return fieldAddr{fv.Addr().Pointer(), fv.Type()} }
