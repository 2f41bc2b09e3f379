package errtext

import (
	"errors"
	"testing"
)

func TestErrorfNamesThePackageOnce(t *testing.T) {
	closed := errors.New("journal: closed")
	err := Errorf("journal: ", "journal: update %q: %w", "k", closed)
	if got, want := err.Error(), `journal: update "k": closed`; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}
	if !errors.Is(err, closed) {
		t.Fatalf("errors.Is(err, closed) = false")
	}
	plain := Errorf("journal: ", "journal: open %s: %w", "x", errors.New("permission denied"))
	if got, want := plain.Error(), "journal: open x: permission denied"; got != want {
		t.Fatalf("Error() = %q; want %q", got, want)
	}
}
