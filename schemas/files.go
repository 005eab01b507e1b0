package schemas

import "embed"

// FS holds the JSON Schema files (draft 2020-12), named by the Schema* constants.
//
//go:embed *.schema.json
var FS embed.FS

// Names of the schema files in FS. Each file's $id is BaseURL followed by its name.
const (
	RequestSchema  = "request.schema.json"  // a generation request (the NATS request payload)
	ResponseSchema = "response.schema.json" // the one-shot reply: a Responses API response plus output_text
	ErrorSchema    = "error.schema.json"    // the body of an error reply
	EventSchema    = "event.schema.json"    // one message of a streamed reply
)

// BaseURL is the prefix of every schema's $id.
const BaseURL = "https://codexpool.dev/schemas/"

// SchemaNames lists the files in FS.
var SchemaNames = []string{RequestSchema, ResponseSchema, ErrorSchema, EventSchema}
