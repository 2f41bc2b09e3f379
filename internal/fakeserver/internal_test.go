package fakeserver

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRequestLogKeepsTheLastRequests(t *testing.T) {
	var l requestLog
	first := l.add(Request{Path: "0"})
	for i := 1; i < MaxRequestLog+10; i++ {
		l.add(Request{Path: strconv.Itoa(i)})
	}
	got := l.requests()
	require.Len(t, got, MaxRequestLog)
	require.Equal(t, "10", got[0].Path)
	require.Equal(t, strconv.Itoa(MaxRequestLog+9), got[len(got)-1].Path)
	require.Nil(t, l.at(first), "overwritten")
	require.Equal(t, "10", l.at(10).Path)
	require.Nil(t, l.at(uint64(MaxRequestLog+10)), "not yet logged")
}

func TestParseKeyControlCharacters(t *testing.T) {
	for _, raw := range []string{"a\x7fb", "a\x00b", "\"a\x7f\"", "\"a\x01\"", "a\tb"} {
		_, err := parseKey(raw)
		require.Error(t, err, "%q", raw)
	}
	key, err := parseKey(" \t\"k\" ")
	require.NoError(t, err)
	require.Equal(t, "k", key)
}

func TestStoreForgetsOldestRetiredCounts(t *testing.T) {
	st := newStore(2)
	t0 := time.Unix(0, 0)
	for i, k := range []string{"a", "b", "c"} {
		st.add(&entry{sk: scopeKey{"", k}, committedAt: t0.Add(time.Duration(i)), effects: 1})
	}
	st.sweep(t0.Add(time.Hour), time.Minute)
	require.Empty(t, st.entries)
	require.Empty(t, st.order)
	require.Equal(t, 0, st.effects(scopeKey{"", "a"}), "forgotten: beyond maxRetired")
	require.Equal(t, 1, st.effects(scopeKey{"", "b"}))
	require.Equal(t, 1, st.effects(scopeKey{"", "c"}))

	// A key that expires again adds to its count and becomes the newest.
	st.add(&entry{sk: scopeKey{"", "b"}, committedAt: t0.Add(2 * time.Hour), effects: 1})
	require.Equal(t, 2, st.effects(scopeKey{"", "b"}))
	st.sweep(t0.Add(3*time.Hour), time.Minute)
	require.Equal(t, 2, st.effects(scopeKey{"", "b"}))
	st.add(&entry{sk: scopeKey{"", "d"}, committedAt: t0.Add(3 * time.Hour), effects: 1})
	st.sweep(t0.Add(4*time.Hour), time.Minute)
	require.Equal(t, 0, st.effects(scopeKey{"", "c"}))
	require.Equal(t, 2, st.effects(scopeKey{"", "b"}))
}
