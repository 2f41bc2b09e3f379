package idem

import (
	"strings"
	"testing"
)

// TestClauseFromReachesNoFurtherThanStateReach: a refusal of many words
// with no sentence's end in them (hostile, or a list of items joined by
// commas) walks back from each "already" no further than
// refusedForState reads; the walk to the clause's start took time
// growing as the square of the answer's length (about 0.2 s for one
// 768 KiB answer of "cannot cancel client_order_id already processed"
// repeated, each "already" walking back to the first word).
func TestClauseFromReachesNoFurtherThanStateReach(t *testing.T) {
	starts := make([]bool, 100_000)
	starts[0] = true
	for _, i := range []int{0, 3, stateReach, stateReach + 1, 50_000, len(starts) - 1} {
		got := clauseFrom(starts, i)
		if got < i-stateReach || got > i {
			t.Errorf("clauseFrom(…, %d) = %d, want within [%d, %d]", i, got, max(0, i-stateReach), i)
		}
	}
	// A clause's start within reach is still where the clause starts.
	starts[49_997] = true
	if got := clauseFrom(starts, 50_000); got != 49_997 {
		t.Errorf("clauseFrom(…, 50000) = %d, want 49997, the clause's first word", got)
	}
	// Word counts that differ from the caller's (a shorter starts) end
	// the walk, never index past it.
	if got := clauseFrom(starts[:10], 20); got != 20 {
		t.Errorf("clauseFrom(10 marks, 20) = %d, want 20", got)
	}
}

// TestSaysDuplicateLongRefusalReadAsBefore: bounding the clause changes
// no reading: a cancel refused for the payment's state in a long
// answer is no duplicate, however many words come before; a client
// order id "already processed" with the "cannot cancel" beyond
// refusedForState's reach is one.
func TestSaysDuplicateLongRefusalReadAsBefore(t *testing.T) {
	long := strings.Repeat("word ", 5000)
	refused := []byte(`{"message":"` + long + `cannot cancel client_order_id already processed"}`)
	if duplicateWords(refused, "client_order_id", "k1", true) {
		t.Errorf("duplicateWords(%q…) = true, want false: a cancel refused for the state", refused[len(refused)-60:])
	}
	far := []byte(`{"message":"` + long + `cannot cancel one two three four five six seven eight client_order_id already processed"}`)
	if !duplicateWords(far, "client_order_id", "k1", true) {
		t.Errorf("duplicateWords(%q…) = false, want true: the \"cannot\" is beyond reach", far[len(far)-60:])
	}
}
