package idem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// visitFair's queue hands out refs in the order they came, passing over
// those whose host is full and never an overdue one's turn; take removes
// a host's whole line.
func TestFairQueueOrder(t *testing.T) {
	var q fairQueue
	q.push([]ref{{key: "a1", host: "a"}, {key: "b1", host: "b"}, {key: "a2", host: "a"}, {key: "late", host: "a", overdue: true}, {key: "c1", host: "c"}})
	fullA := func(host string) bool { return host == "a" }
	none := func(string) bool { return false }
	var got []string
	next := func(full func(string) bool) {
		t.Helper()
		r, ok := q.next(full)
		require.True(t, ok)
		got = append(got, r.key)
	}
	next(none)  // a1
	next(fullA) // b1
	next(fullA) // late: overdue, a full or not
	next(none)  // a2
	require.Equal(t, []string{"a1", "b1", "late", "a2"}, got)
	require.Equal(t, 1, q.len())

	q.push([]ref{{key: "a3", host: "a"}, {key: "a4", host: "a"}, {key: "late2", host: "a", overdue: true}})
	require.Equal(t, []ref{{key: "a3", host: "a"}, {key: "a4", host: "a"}}, q.take(fullA))
	require.Equal(t, 2, q.len())
	_, ok := q.next(func(host string) bool { return host == "c" })
	require.True(t, ok, "the overdue ref")
	_, ok = q.next(func(host string) bool { return host == "c" })
	require.False(t, ok, "c1 waits for its host's room")
	q.clear()
	require.Zero(t, q.len())
	_, ok = q.next(none)
	require.False(t, ok)
}

// Resume queues every open operation at once: finding the next ref asks
// about the full hosts (at most two: the workers are twice a share) and
// one more, however many refs wait, for one host or for as many hosts (a
// scan of them on every start was quadratic: seconds for ten thousand).
func TestFairQueueNextAsksFewHosts(t *testing.T) {
	const n = 10000
	for _, hosts := range []int{1, n} {
		t.Run(fmt.Sprintf("%d hosts", hosts), func(t *testing.T) {
			var q fairQueue
			refs := make([]ref, n)
			for i := range refs {
				refs[i] = ref{key: fmt.Sprintf("op-%05d", i), host: fmt.Sprintf("host-%05d", i%hosts)}
			}
			q.push(refs)
			q.push([]ref{{key: "last", host: "last"}})
			asked := 0
			fullFirst := func(host string) bool { asked++; return host == "host-00000" || host == "host-00001" }
			for want := range 3 {
				asked = 0
				r, ok := q.next(fullFirst)
				require.True(t, ok)
				require.LessOrEqual(t, asked, 3, "hosts asked about")
				if hosts == 1 {
					require.Equal(t, "last", r.key, "the one ref whose host has room")
					_, ok = q.next(fullFirst)
					require.False(t, ok)
					require.Equal(t, n, q.len())
					return
				}
				require.Equal(t, fmt.Sprintf("op-%05d", want+2), r.key, "the first ref whose host has room")
			}
			require.Equal(t, n+1-3, q.len())
		})
	}
}
