package schemas

import "context"

// accountNoteKey is the context key of a generation's account note.
type accountNoteKey struct{}

// WithAccountNote returns ctx carrying note, which NoteAccount calls with the name of the
// account that serves the generation (the queue sends it as Codex-Account).
func WithAccountNote(ctx context.Context, note func(name string)) context.Context {
	return context.WithValue(ctx, accountNoteKey{}, note)
}

// NoteAccount tells ctx's account note, if it has one, that the account named name serves the
// generation now (the last call wins: a request can move to another account).
func NoteAccount(ctx context.Context, name string) {
	if note, ok := ctx.Value(accountNoteKey{}).(func(string)); ok {
		note(name)
	}
}
