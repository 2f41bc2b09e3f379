// Package errtext builds error messages that name their package once.
package errtext

import (
	"errors"
	"fmt"
	"strings"
)

// Errorf is fmt.Errorf for a package whose messages start with prefix
// ("idem: ", "journal: "): an error argument whose text already starts with
// prefix (a sentinel, or another of the package's messages) is shown
// without it, so that a message names the package once ("journal: update
// "k": closed", not "journal: update "k": journal: closed"). The chain is
// fmt.Errorf's: errors.Is and errors.As see every %w argument.
func Errorf(prefix, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	shown := make([]any, len(args))
	trimmed := false
	for i, a := range args {
		shown[i] = a
		if e, ok := a.(error); ok && e != nil && strings.HasPrefix(e.Error(), prefix) {
			shown[i] = errors.New(strings.TrimPrefix(e.Error(), prefix))
			trimmed = true
		}
	}
	if !trimmed {
		return err
	}
	return &shownError{msg: fmt.Errorf(format, shown...).Error(), err: err}
}

// shownError is Errorf's error: its own text, and fmt.Errorf's chain.
type shownError struct {
	msg string
	err error
}

func (e *shownError) Error() string { return e.msg }
func (e *shownError) Unwrap() error { return e.err }
