package idem

import "testing"

// newRecord checks only the scope and key a caller gives: the Client's
// scope and the keys newKey makes must pass checkName, or a record would
// be journaled with a name the check refuses.
func TestOwnNamesPassCheckName(t *testing.T) {
	if err := checkName("scope", DefaultScope); err != nil {
		t.Fatalf("checkName(DefaultScope) = %v", err)
	}
	for range 1000 {
		key, err := newKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := checkName("key", key); err != nil {
			t.Fatalf("checkName(newKey() = %q) = %v", key, err)
		}
	}
}
