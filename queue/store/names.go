package store

import "github.com/codexpool/codexpool/schemas"

// The names of every JetStream bucket and stream the pool uses, by default (each can be set).
// Those clients read too are contract, declared in schemas.
const (
	JobsStream        = schemas.DefaultJobsStream    // durable jobs, work-queue retention
	ResultsBucket     = schemas.DefaultResultsBucket // job id -> the body codex.generate would reply
	JobsKeyBucket     = "CODEXPOOL_JOBS_KEY"         // the key of job ids, in its metadata
	CredentialsBucket = "CODEXPOOL_CREDENTIALS"      // Codex logins shared by the workers, sealed
	SessionsBucket    = "CODEXPOOL_SESSIONS"         // sticky bindings of sessions to accounts
	LeasesBucket      = "CODEXPOOL_ACCOUNT_SLOTS"    // accounts' concurrency slots (memory)
	UsageStream       = "CODEXPOOL_USAGE"            // the gateway's usage records
	LimitsBucket      = "CODEXPOOL_LIMITS"           // per-key limit state
	KeysBucket        = "CODEXPOOL_KEYS"             // the gateways' client keys, as SHA-256 digests
	AuditStream       = "CODEXPOOL_AUDIT"            // who changed what, when (the keys' changes)
	AuditSubject      = "codexpool.audit.keys"       // the subject of the keys' audit records
)
