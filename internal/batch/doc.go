// Package batch is the engine behind `codexpool batch`: it runs every line of a JSONL file as a
// durable job (JetStream) and appends each result to an output JSONL file as it finishes.
//
// Call [Load] with a [Config] (it reads IN and the results OUT already has), then [Batch.Run]
// with a NATS connection to the pool. A line is a request body ({"input": ...}) or an OpenAI
// Batch API line ({"custom_id": ..., "body": {...}}), answered in the matching output format;
// "stream" is dropped, results are one-shot.
//
// Rules: job ids derive from Config.Name, the line's custom_id (or its position) and its body,
// so the same file resubmitted never runs a job twice within the duplicate window; a rerun
// skips the lines OUT has, takes the results the pool stored, and submits only the rest. Every
// job gets exactly one output line.
package batch
