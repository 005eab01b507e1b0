// Package batch is the engine behind `codexpool batch`: it runs every line of a JSONL file as a
// durable job (JetStream) and appends each result to an output JSONL file as it finishes.
//
// Call [Load] with a [Config] (it reads IN and the results OUT already has), then [Batch.Run]
// with a NATS connection to the pool. A line is a request body ({"input": ...}) or an OpenAI
// Batch API line ({"custom_id": ..., "body": {...}}), answered in the matching output format;
// "stream" is dropped, results are one-shot.
//
// Rules: job ids derive from the line's content — Config.Name (none by default), its custom_id
// and body, and which copy of identical lines it is — never from IN's path or the line's
// number, so the same lines resubmitted never run a job twice within the duplicate window, and
// a file moved or edited keeps its lines' results. A rerun skips the lines OUT has a success
// for, submits those whose last attempt failed again under the next attempt's id (unless
// Config.KeepFailed), takes the results the pool stored, and submits only the rest. A line the
// pool refuses to take (larger than NATS carries) has that refusal as its result. Every job
// gets exactly one output line per run; [Summary.AllOK] says whether all succeeded.
package batch
