//go:build !unix

package embedded

// lockStore has no implementation here: nothing keeps two embedded servers off one store.
func lockStore(string) (unlock func(), err error) { return func() {}, nil }
