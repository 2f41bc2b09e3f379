package fakeserver

import (
	"encoding/json"
	"math"
	"net/http"
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
		st.add(&entry{sk: scopeKey{"", k}, committedAt: t0.Add(time.Duration(i)), counts: KeyStats{Effects: 1, SubmitsAfterFinal: 1}})
	}
	st.sweep(t0.Add(time.Hour), time.Minute)
	require.Empty(t, st.entries)
	require.Empty(t, st.order)
	require.Equal(t, 0, st.keyStats(scopeKey{"", "a"}).Effects, "forgotten: beyond maxRetired")
	require.Equal(t, 1, st.keyStats(scopeKey{"", "b"}).Effects)
	require.Equal(t, 1, st.keyStats(scopeKey{"", "c"}).Effects)

	// A key that expires again adds to its count and becomes the newest.
	st.add(&entry{sk: scopeKey{"", "b"}, committedAt: t0.Add(2 * time.Hour), counts: KeyStats{Effects: 1, SubmitsAfterFinal: 1}})
	require.Equal(t, 2, st.keyStats(scopeKey{"", "b"}).Effects)
	st.sweep(t0.Add(3*time.Hour), time.Minute)
	require.Equal(t, 2, st.keyStats(scopeKey{"", "b"}).Effects)
	st.add(&entry{sk: scopeKey{"", "d"}, committedAt: t0.Add(3 * time.Hour), counts: KeyStats{Effects: 1, SubmitsAfterFinal: 1}})
	st.sweep(t0.Add(4*time.Hour), time.Minute)
	require.Equal(t, 0, st.keyStats(scopeKey{"", "c"}).Effects)
	require.Equal(t, 2, st.keyStats(scopeKey{"", "b"}).Effects)
}

func TestInjectRefusesTooManyPendingFaults(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	for range maxPendingFaults {
		require.NoError(t, s.Inject(Fault{Kind: Throttle, Key: "never"}))
	}
	err = s.Inject(Fault{Kind: Unavailable})
	require.ErrorIs(t, err, errTooManyFaults)
	require.EqualError(t, err, "fakeserver: Inject: too many pending faults: 10000 faults are waiting for matching requests (send requests to consume them, or Reset the server)")
	s.mu.Lock()
	n, last := len(s.faults), s.faults[len(s.faults)-1].Kind
	s.mu.Unlock()
	require.Equal(t, maxPendingFaults, n, "the refused fault is not queued")
	require.Equal(t, Throttle, last)
}

func TestEncodeJSONFailureIsA500WithAJSONError(t *testing.T) {
	status, body := encodeJSON(http.StatusCreated, result{State: stateSucceeded, Key: "k"})
	require.Equal(t, http.StatusCreated, status)
	require.JSONEq(t, `{"state":"succeeded","key":"k"}`, string(body))

	// json.Marshal refuses NaN: the answer is a 500 with a JSON error, not
	// a panic.
	require.NotPanics(t, func() { status, body = encodeJSON(http.StatusOK, math.NaN()) })
	require.Equal(t, http.StatusInternalServerError, status)
	var e errorJSON
	require.NoError(t, json.Unmarshal(body, &e))
	require.Contains(t, e.Error, "could not encode")
}
