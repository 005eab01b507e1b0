// Package schemas holds codexpool's public contract in machine-readable form: the JSON Schemas
// of the request, the one-shot reply, the streamed event and the error body (embedded in [FS]),
// and the Go types and error codes they describe.
//
// A worker calls [ParseRequest] first on every incoming payload: it either returns a validated
// [*Request], whose [Request.Upstream] is the frame to send to the origin, or an [*Error] with
// [CodeInvalidRequest] whose message names the offending field. [WithOutputText] turns the
// origin's completed response into the one-shot reply. Errors travel as [*Error]; its
// [Error.Body] and [ParseErrorBody] are the wire form both ways.
//
// The schemas are the source of truth for other languages; the tests validate what this
// package produces against them so the two cannot drift apart. This package imports nothing
// of codexpool's.
package schemas
