package journal

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommitterKeepsNothingOfARound: the committer keeps its view and its
// payload slice from one round to the next, and ends each round by
// clearing them: nothing of a round stays reachable through them, and the
// next round stages afresh, whatever the last one staged (more than
// stagedScan writes, so that it built its index).
func TestCommitterKeepsNothingOfARound(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "j.db"), WithUnsafeNoSync())
	require.NoError(t, err)
	defer s.Close()

	put := func(key, ref string) *request {
		return &request{run: func(v *view, _ *request) error {
			r := newRecord(key)
			r.Ref = ref
			v.put(recordKey("s", key), r, encode(nil, r))
			return nil
		}}
	}
	var round []*request
	for i := range 2 * stagedScan {
		round = append(round, put(fmt.Sprint("k", i), "first"))
	}
	rvCommit(t, s, round...)
	for _, r := range round {
		require.NoError(t, r.err)
	}
	v := s.c.view
	require.Empty(t, v.order, "the view's writes after its round")
	require.Equal(t, [8]*logged{}, v.first, "the view's first writes after its round")
	require.Nil(t, v.index, "the view's index after its round")
	require.Nil(t, v.pending)
	require.Nil(t, v.s)
	for i, p := range s.c.payloads[:cap(s.c.payloads)] {
		require.Nil(t, p, "payload %d after its round", i)
	}

	// The next round reads the first one's writes from the overlay, not
	// from what its view staged.
	var staged *logged
	var seen []byte
	next := &request{run: func(v *view, _ *request) error {
		rk := recordKey("s", "k3")
		staged = v.staged(rk)
		var err error
		seen, err = v.get(rk)
		return err
	}}
	rvCommit(t, s, next, put("k3", "second"))
	require.NoError(t, next.err)
	require.Nil(t, staged, "a write staged by the last round")
	r, err := decode(seen)
	require.NoError(t, err)
	require.Equal(t, "first", r.Ref)

	got, err := s.Get(t.Context(), "s", "k3")
	require.NoError(t, err)
	require.Equal(t, "second", got.Ref)
}
