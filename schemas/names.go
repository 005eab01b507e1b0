package schemas

import "regexp"

// Names of the contract (subjects, micro service, JetStream stream, consumer and bucket), as
// defaults: deployments may change the subjects and names through their configuration.
const (
	DefaultSubject       = "codex.generate"    // request-reply generation requests
	DefaultQueueGroup    = "codexpool"         // every worker joins it
	ServiceName          = "codexpool"         // the NATS micro service
	EndpointName         = "generate"          // its endpoint on DefaultSubject
	DefaultCancelSubject = "codex.cancel"      // core publish of a Codex-Request-Id to stop it
	DefaultJobsSubject   = "codex.jobs"        // the stream captures DefaultJobsSubject + ".>"
	DefaultJobsStream    = "CODEXPOOL_JOBS"    // durable jobs, work-queue retention
	JobsConsumer         = "codexpool"         // the durable pull consumer every worker shares
	DefaultResultsBucket = "CODEXPOOL_RESULTS" // KV: job id -> the body codex.generate would reply
)

// SubmitSubject returns the subject jobs are published to under the jobs subject prefix.
func SubmitSubject(jobsSubject string) string { return jobsSubject + ".submit" }

// jobID is the form of a job id: it is a KV key and a header value in every client language.
var jobID = regexp.MustCompile(`^[A-Za-z0-9_=-]{1,128}$`)

// ValidJobID reports whether id is a valid job id ([A-Za-z0-9_=-]{1,128}).
func ValidJobID(id string) bool { return jobID.MatchString(id) }
