package login

// The helpers client_test.go (package login_test) uses: it runs a codex.Client on an Auth, and
// codex imports this package, so those tests cannot be inside it.
var (
	NewLoginSim   = newLoginSim
	WriteLogin    = writeLogin
	WriteAuthJSON = writeAuthJSON
	OpenTestAuth  = openAuth
	LogBuffer     = logBuffer
	MustCreds     = mustCreds
	WaitFor       = waitFor
	WantError     = wantError
	NoSecrets     = noSecrets
	LoginSecrets  = loginSecrets
	Spend         = spend
	CreateFrame   = createFrame
)

// Alice is the account the tests' simulators serve.
const Alice = alice
