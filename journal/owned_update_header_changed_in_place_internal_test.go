package journal

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An owned Update's fn is handed the client's own header map (Like), so
// a change it makes to that map in place leaves the record's map the
// client's: the journal must still see the change and refuse it, as it
// refuses any change to the request (Promise 2). Written as the stored
// bytes instead, the journal kept the old header while the Update
// succeeded and handed back (and left in the client's copy, which the
// next attempt is sent from) a header the journal does not hold. A
// Store wrapping this one whose fn strips or rewrites a header (a PII
// scrubber) is such an fn. Both reads, the overlay's and the file's.
func TestOwnedUpdateRefusesTheClientsHeaderChangedInPlace(t *testing.T) {
	ctx := context.Background()
	changes := []struct {
		name   string
		change func(http.Header)
	}{
		{"value set", func(h http.Header) { h.Set("Content-Type", "text/plain") }},
		{"value rewritten", func(h http.Header) { h["Stripe-Account"][0] = "acct_2" }},
		{"name deleted", func(h http.Header) { h.Del("Stripe-Account") }},
		{"name added", func(h http.Header) { h.Set("X-Customer-Email", "a@example.com") }},
		{"value appended", func(h http.Header) { h.Add("Content-Type", "charset=utf-8") }},
	}
	for _, from := range []string{"overlay", "file"} {
		for _, c := range changes {
			s := ownedTestStore(t)
			rec := ownedUpdateRecord("k", 64)
			rec.Header["Stripe-Account"] = []string{"acct_1"}
			want := rec.Header.Clone()
			created, l, err := s.CreateClaimed(ctx, rec, "owner", time.Now().Add(time.Hour))
			require.NoError(t, err)
			if from == "file" {
				require.NoError(t, s.Checkpoint(ctx))
			}
			_, err = s.Update(likeLease(ctx, l, created), "s", "k", func(r *Record) error {
				require.True(t, sameMap(r.Header, created.Header), "%s, %s: fn has the client's map", from, c.name)
				c.change(r.Header)
				r.NextDue = r.NextDue.Add(time.Second)
				return nil
			})
			require.ErrorIs(t, err, ErrInvalid, "%s, %s: a header changed in place", from, c.name)
			stored, err := s.Get(ctx, "s", "k")
			require.NoError(t, err)
			require.Equal(t, want, stored.Header, "%s, %s: the header journaled", from, c.name)
			require.Equal(t, created.NextDue, stored.NextDue, "%s, %s: nothing written", from, c.name)
		}
	}
}
