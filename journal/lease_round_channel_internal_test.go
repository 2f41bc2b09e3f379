package journal

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeasedRoundMakesAChannelOnlyForAClaim: a round whose writes check
// their leases (every write of a Client's drive) makes no channel unless a
// claim of one of its records has to wait for the round's end (checkedIn):
// then every such claim of the round gets the one channel, open until the
// round ends and closed when it does, and after it no claim waits.
func TestLeasedRoundMakesAChannelOnlyForAClaim(t *testing.T) {
	var ls leases
	now := time.Unix(1700000000, 0)
	l, err := ls.claim("s", "k", "owner", now, now.Add(time.Minute), false)
	require.NoError(t, err)
	require.NoError(t, ls.checkInRound(l)) // the first round makes the map
	ls.roundEnded()
	allocs := testing.AllocsPerRun(100, func() {
		if err := ls.checkInRound(l); err != nil {
			t.Fatal(err)
		}
		ls.roundEnded()
	})
	require.Zero(t, allocs, "allocations per round with a leased write")

	require.NoError(t, ls.checkInRound(l))
	require.Nil(t, ls.checkedIn("s", "other"), "a record no write of the round checked")
	ended := ls.checkedIn("s", "k")
	require.NotNil(t, ended, "a record a write of the round checked")
	require.Equal(t, ended, ls.checkedIn("s", "k"), "a second claim's channel")
	select {
	case <-ended:
		t.Fatal("closed before the round ended")
	default:
	}
	ls.roundEnded()
	select {
	case <-ended:
	default:
		t.Fatal("open after the round ended")
	}
	require.Nil(t, ls.checkedIn("s", "k"), "after the round ended")
	require.NoError(t, ls.checkInRound(l))
	next := ls.checkedIn("s", "k")
	require.NotNil(t, next, "the next round's")
	require.NotEqual(t, ended, next, "the next round's channel")
	ls.roundEnded()
	<-next
}
