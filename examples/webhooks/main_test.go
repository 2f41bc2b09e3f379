package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	rep, err := run(ctx, &out, nil)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	want := report{Orders: orders, Succeeded: orders - 1, Failed: 1, SettledByEvent: 1}
	got := rep
	got.Events, got.Redelivered = 0, 0
	if got != want {
		t.Errorf("report = %+v; want %+v\n%s", rep, want, out.String())
	}
	if rep.Events != orders+rep.Redelivered {
		t.Errorf("events = %d; want one per order plus %d redelivered", rep.Events, rep.Redelivered)
	}
	if rep.Redelivered == 0 {
		t.Errorf("no event redelivered: the example shows none of Confirm's idempotence")
	}
	if !strings.Contains(out.String(), "response lost") || !strings.Contains(out.String(), "settled") {
		t.Errorf("output does not show the lost response the event settles:\n%s", out.String())
	}
}

func sign(secret string, ts int64, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.%s", ts, body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	body := `{"id":"evt_1"}`
	good := sign(webhookSecret, now.Unix(), body)
	tests := []struct {
		name, header, body string
		ok                 bool
	}{
		{"valid", fmt.Sprintf("t=%d,v1=%s", now.Unix(), good), body, true},
		{"one of two signatures valid", fmt.Sprintf("t=%d,v1=%s,v1=%s", now.Unix(), strings.Repeat("0", 64), good), body, true},
		{"tampered body", fmt.Sprintf("t=%d,v1=%s", now.Unix(), good), `{"id":"evt_2"}`, false},
		{"wrong secret", fmt.Sprintf("t=%d,v1=%s", now.Unix(), sign("other", now.Unix(), body)), body, false},
		{"too old", fmt.Sprintf("t=%d,v1=%s", now.Add(-time.Hour).Unix(), sign(webhookSecret, now.Add(-time.Hour).Unix(), body)), body, false},
		{"from the future", fmt.Sprintf("t=%d,v1=%s", now.Add(time.Hour).Unix(), sign(webhookSecret, now.Add(time.Hour).Unix(), body)), body, false},
		{"timestamp changed", fmt.Sprintf("t=%d,v1=%s", now.Unix()+1, good), body, false},
		{"no signature", fmt.Sprintf("t=%d", now.Unix()), body, false},
		{"no timestamp", "v1=" + good, body, false},
		{"empty", "", body, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.header, []byte(tt.body), []byte(webhookSecret), now)
			if (err == nil) != tt.ok {
				t.Errorf("verify() = %v; want ok %v", err, tt.ok)
			}
		})
	}
}

// signedEvent is a delivery of body as the provider signs it at now.
func signedEvent(now time.Time, body string) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/webhooks", strings.NewReader(body))
	req.Header.Set(idemtest.WebhookSignatureHeader, fmt.Sprintf("t=%d,v1=%s", now.Unix(), sign(webhookSecret, now.Unix(), body)))
	return req
}

// stubReceiver is a receiver at now whose Confirm answers res and err,
// and the count of its Confirm calls.
func stubReceiver(now time.Time, res *idem.Result, err error) (*receiver, *int) {
	calls := new(int)
	return &receiver{now: func() time.Time { return now }, settled: map[string]bool{},
		confirm: func(context.Context, string, string, idem.Confirmation) (*idem.Result, error) {
			*calls++
			return res, err
		}}, calls
}
