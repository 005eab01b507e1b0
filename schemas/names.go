package schemas

// Names of the contract (subjects, micro service, JetStream stream, consumer and bucket), as
// defaults: deployments may change the subjects and names through their configuration.
const (
	DefaultSubject    = "codex.generate" // request-reply generation requests
	DefaultQueueGroup = "codexpool"      // every worker joins it
	ServiceName       = "codexpool"      // the NATS micro service
	EndpointName      = "generate"       // its endpoint on DefaultSubject
)
