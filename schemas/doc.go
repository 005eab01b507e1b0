// Package schemas holds codexpool's public contract in machine-readable form: the JSON Schemas
// of the request, the one-shot reply, the streamed event and the error body (embedded in [FS]),
// and the Go types, headers and error codes they describe. Every decoder of the contract's
// replies, events and errors uses these types.
//
// Errors travel as [*Error]: [Error.Body] and [ParseErrorBody] are the wire form both ways, and
// [AsError] finds one in an error chain. [WithOutputText] turns the origin's completed response
// into the one-shot reply; [Response] and [Event] decode replies and stream events. A worker gets
// a [*Request] from package validate (which links the JSON Schema compiler, so that clients that
// only decode replies do not) and sends [Request.Upstream] to the origin.
//
// The schemas are the source of truth for other languages; the tests (in package validate)
// check what codexpool produces against them so the two cannot drift apart. This package
// imports nothing of codexpool's and nothing outside the standard library.
package schemas
