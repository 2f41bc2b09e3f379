package idem_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 120 * time.Second, true},
		{" 3 ", 3 * time.Second, true},
		{"0", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},     // in the past: no wait
		{"Sunday, 29-Nov-26 12:00:30 GMT", 30 * time.Second, true}, // RFC 850, still legal
		{"99999999999999999999999", 365 * 24 * time.Hour, true},    // saturates, capped later
		{"18446744073709551615", 365 * 24 * time.Hour, true},
		{"Sun, 01 Nov 2100 0:00:00 GMT", 365 * 24 * time.Hour, true}, // far-off date saturates too
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 1500 * time.Millisecond, true},
		{"soon", 0, false},
		{"Mon, 99 Foo 2026 99:99:99 GMT", 0, false},
		{string(make([]byte, 100)), 0, false},
	}
	for _, tt := range tests {
		got, ok := idem.ParseRetryAfter(tt.in, now)
		require.Equalf(t, tt.wantOK, ok, "ParseRetryAfter(%q) ok", tt.in)
		require.Equalf(t, tt.want, got, "ParseRetryAfter(%q)", tt.in)
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, s := range []string{"0", "120", "Sun, 29 Nov 2026 12:01:00 GMT", "-1", "1e9", "99999999999999999999", " 7", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := idem.ParseRetryAfter(s, now)
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false; want 0 when not ok", s, d)
		}
		if d < 0 || d > 365*24*time.Hour {
			t.Fatalf("ParseRetryAfter(%q) = %v; want within [0, 1 year]", s, d)
		}
	})
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		body    string
		want    idem.Outcome
		wantErr bool
	}{
		{`{"state":"succeeded","resourceId":"ord_1"}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, false},
		{`{"state":"failed","reason":"card declined"}`, idem.Outcome{State: idem.StateFailed, Reason: "card declined"}, false},
		{`{"state":"processing"}`, idem.Outcome{State: idem.StateProcessing}, false},
		{`{"state":"pending","resourceId":"x"}`, idem.Outcome{State: idem.StateProcessing, ResourceID: "x"}, false},
		{`{"id":"ch_123","amount":5}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ch_123"}, false},
		{`{"state":"succeeded"}`, idem.Outcome{}, true}, // success must name what it created
		{`{"state":"weird"}`, idem.Outcome{}, true},
		{`{"id":42}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "42"}, false}, // a positive integer id, as Mercado Pago's
		{`{"id":0}`, idem.Outcome{}, true},
		{`{"id":4.2}`, idem.Outcome{}, true},
		{`{"id":192036465,"pending":false,"success":false}`, idem.Outcome{}, true}, // Paymob's declined transaction
		{`{"id":"ord_1","success":true}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "ord_1"}, false},
		// Midtrans's refusal in a 200, the error's "id" beside its status_code (docs.midtrans.com/reference/code-4xx).
		{`{"status_code":"406","status_message":"Duplicate order ID. order_id has already been utilized previously","id":"be929ec4"}`, idem.Outcome{}, true},
		{`{"status_code":402,"id":"363a8d7f"}`, idem.Outcome{}, true},
		{`{"status_code":"201","id":"va_1"}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "va_1"}, false},
		{`{"status_code":"ok","id":"x_1"}`, idem.Outcome{State: idem.StateSucceeded, ResourceID: "x_1"}, false},
		{`{"state":"failed","reason":"declined","success":false}`, idem.Outcome{State: idem.StateFailed, Reason: "declined"}, false},
		{`{"id":""}`, idem.Outcome{}, true},
		{`{}`, idem.Outcome{}, true},
		{`{"state":"succeeded","resourceId":"ord_1"`, idem.Outcome{}, true}, // truncated
		{`<html>oops</html>`, idem.Outcome{}, true},
		{``, idem.Outcome{}, true},
	}
	for _, tt := range tests {
		got, err := idem.DecodeJSON(&idem.Answer{Key: "k1", StatusCode: 200, Body: []byte(tt.body)})
		if tt.wantErr {
			require.Errorf(t, err, "DecodeJSON(%s)", tt.body)
			continue
		}
		require.NoErrorf(t, err, "DecodeJSON(%s)", tt.body)
		require.Equalf(t, tt.want, got, "DecodeJSON(%s)", tt.body)
	}
}

func TestDefaultClassifier(t *testing.T) {
	want := map[int]idem.Verdict{
		200: idem.Settled, 201: idem.Settled, 202: idem.Settled,
		303: idem.Ambiguous, 400: idem.Rejected, 401: idem.Rejected, 402: idem.Rejected, 404: idem.Rejected,
		408: idem.Ambiguous, 409: idem.Processing, 422: idem.Conflict, 429: idem.Throttled,
		500: idem.Ambiguous, 502: idem.Ambiguous, 503: idem.Throttled, 504: idem.Ambiguous,
	}
	for code, v := range want {
		require.Equalf(t, v, idem.DefaultClassifier(code), "DefaultClassifier(%d)", code)
	}
}

func FuzzParseRetryAfterHeader(f *testing.F) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, s := range [][3]string{
		{"1.5", "", ""}, {"Sun, 29 Nov 2026 12:31:00 GMT", "", "Sun, 29 Nov 2026 12:30:00 GMT"}, {"", "1500", ""},
		{"5, 10", "", ""}, {"1e9999", "NaN", "Thu, 01 Jan 1970 00:00:00 GMT"}, {"99999999999999999999.9", "0x10", "garbage"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, ra, ms, date string) {
		h := http.Header{}
		for _, kv := range [][2]string{{"Retry-After", ra}, {"Retry-After-Ms", ms}, {"Date", date}} {
			if kv[1] != "" {
				h[kv[0]] = []string{kv[1]}
			}
		}
		d, ok := idem.ParseRetryAfterHeader(h, now)
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfterHeader(%v) = %v, false; want 0 when not ok", h, d)
		}
		if d < 0 || d > 365*24*time.Hour {
			t.Fatalf("ParseRetryAfterHeader(%v) = %v; want within [0, 1 year]", h, d)
		}
		if single, sok := idem.ParseRetryAfter(ra, now); sok && h["Date"] == nil && (!ok || d != single) {
			t.Fatalf("ParseRetryAfterHeader(%v) = %v, %v; ParseRetryAfter(%q) = %v: a usable Retry-After wins", h, d, ok, ra, single)
		}
	})
}
