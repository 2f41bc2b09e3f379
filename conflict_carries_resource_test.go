package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// transferAPI answers a create whose X-Idempotency-Key it has seen with
// 409 Conflict and the key's transfer as the body, whole and unwrapped,
// never with the first answer again; its keys never expire. Moov's create
// transfer does so: "A second request with a key Moov has already seen
// returns a 409 with the original transfer in the body; use that
// transfer, and never retry with a new key"
// (https://docs.moov.io/guides/money-movement/manage-transfers/; the
// OpenAPI's 409 for POST /accounts/{accountID}/transfers is the Transfer
// schema: transferID, createdOn, status, amount, source, destination).
type transferAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	// transfers: each key's transfer as the 409 carries it.
	transfers map[string]string
	made      int      // transfers made
	keys      []string // the key of every create, in order
	// cut: the first create the server gets is committed (a transfer
	// made, or the 409 of a key it holds) and its connection closed
	// before any answer.
	cut bool
	// status: the status of the transfers made.
	status string
}

func newTransferAPI(t testing.TB, cut bool, status string) *transferAPI {
	t.Helper()
	a := &transferAPI{transfers: map[string]string{}, cut: cut, status: status}
	a.srv = httptest.NewServer(http.HandlerFunc(a.create))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *transferAPI) create(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	key := r.Header.Get("X-Idempotency-Key")
	a.mu.Lock()
	a.keys = append(a.keys, key)
	stored, seen := a.transfers[key]
	if !seen {
		a.made++
		stored = fmt.Sprintf(`{"transferID":"ec7e1848-dc80-4ab0-8827-dd7fc0737b%02d","createdOn":"2026-11-29T12:00:00Z",`+
			`"status":%q,"amount":{"currency":"USD","value":1000},"source":{"paymentMethodID":"pm-src"},`+
			`"destination":{"paymentMethodID":"pm-dst"}}`, a.made, a.status)
		a.transfers[key] = stored
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case a.cut && len(a.keys) == 1:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case !seen:
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, stored)
	default:
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, stored)
	}
}

// counts returns the transfers made and the keys of the creates seen.
func (a *transferAPI) counts() (made int, keys []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.made, append([]string(nil), a.keys...)
}

// decodeTransfer reads a Moov transfer, as a user of such an API gives
// WithDecoder: its id is transferID, not id.
func decodeTransfer(a *idem.Answer) (idem.Outcome, error) {
	var v struct {
		TransferID string `json:"transferID"`
		Status     string `json:"status"`
	}
	if err := json.Unmarshal(a.Body, &v); err != nil || v.TransferID == "" {
		return idem.Outcome{}, fmt.Errorf("not a transfer: %s", a.Body)
	}
	if v.Status == "failed" {
		return idem.Outcome{State: idem.StateFailed, ResourceID: v.TransferID, Reason: v.Status}, nil
	}
	return idem.Outcome{State: idem.StateSucceeded, ResourceID: v.TransferID}, nil
}

// A create whose answer was lost after the transfer was made is answered
// 409 with that transfer on the resend: the server's final word for the
// key, as GoCardless's 409 naming the resource is. Read as the key in
// flight, it was resent on every visit, each 409 the same, until the key
// window passed and a person was asked about a transfer the server had
// named from the first resend.
func TestConflictCarryingTheKeysResourceSettles(t *testing.T) {
	opts := func(api *transferAPI, clock *idemtest.Clock) []idem.Option {
		return []idem.Option{
			idem.WithHTTPClient(api.srv.Client()), idem.WithClock(clock),
			idem.WithKeyHeader("X-Idempotency-Key", idem.KeyBare),
			idem.WithDecoder(decodeTransfer),
		}
	}
	req := func(api *transferAPI) idem.Request {
		return idem.Request{Key: "k", URL: api.srv.URL + "/accounts/acct/transfers",
			Body: []byte(`{"source":{"paymentMethodID":"pm-src"},"destination":{"paymentMethodID":"pm-dst"},"amount":{"currency":"USD","value":1000}}`)}
	}
	requireKeys := func(t *testing.T, api *transferAPI, made, creates int) {
		t.Helper()
		gotMade, keys := api.counts()
		require.Equal(t, made, gotMade, "transfers made")
		require.Len(t, keys, creates, "creates sent")
		for i, k := range keys {
			require.Equalf(t, "k", k, "create %d: X-Idempotency-Key", i+1)
		}
	}

	t.Run("answer lost after the transfer was made", func(t *testing.T) {
		api := newTransferAPI(t, true, "pending")
		c := journaledClient(t, opts(api, idemtest.NewClock(epoch))...)
		res, err := c.Submit(t.Context(), req(api))
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
		require.Equal(t, "ec7e1848-dc80-4ab0-8827-dd7fc0737b01", res.ResourceID)
		require.Empty(t, res.Review)
		requireKeys(t, api, 1, 2)

		again, err := c.Submit(t.Context(), req(api))
		require.NoError(t, err)
		require.Equal(t, res.ResourceID, again.ResourceID)
		requireKeys(t, api, 1, 2)
	})
	t.Run("the transfer made failed", func(t *testing.T) {
		api := newTransferAPI(t, true, "failed")
		c := journaledClient(t, opts(api, idemtest.NewClock(epoch))...)
		res, err := c.Submit(t.Context(), req(api))
		require.ErrorIs(t, err, idem.ErrFailed)
		require.Equal(t, idem.StateFailed, res.State)
		require.Equal(t, "ec7e1848-dc80-4ab0-8827-dd7fc0737b01", res.ResourceID)
		requireKeys(t, api, 1, 2)
	})
	t.Run("the process stopped after the lost answer: Resume settles it", func(t *testing.T) {
		api := newTransferAPI(t, true, "pending")
		clock := idemtest.NewClock(epoch)
		path := filepath.Join(t.TempDir(), "idem.journal")
		ctx, stop := context.WithCancel(t.Context())
		// The process stops as soon as the first create's answer is lost.
		hc := &http.Client{Transport: stopOnLoss{api.srv.Client().Transport, stop}}
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, append(opts(api, clock), idem.WithHTTPClient(hc))...)
		require.NoError(t, err)
		_, err = c.Submit(ctx, req(api))
		require.ErrorIs(t, err, idem.ErrUnknownOutcome)
		require.NoError(t, c.Close())
		require.NoError(t, store.Close())
		requireKeys(t, api, 1, 1)

		store, err = journal.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = store.Close() })
		c, err = idem.New(store, opts(api, clock)...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		sum, err := c.Resume(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, sum.Visited)
		rec, err := store.Get(t.Context(), idem.DefaultScope, "k")
		require.NoError(t, err)
		require.Equal(t, journal.StateSucceeded, rec.State)
		require.Equal(t, "ec7e1848-dc80-4ab0-8827-dd7fc0737b01", rec.Result.ResourceID)
		requireKeys(t, api, 1, 2)
	})
	t.Run("answer lost, the key another request's transfer of another amount", func(t *testing.T) {
		// Moov's keys are per account and never expire: a service sharing
		// the account, or a key taken from a business id used before, has
		// the key's transfer made by another request, and the 409 to ours
		// (whose answer was lost, so it may have executed) carries that
		// transfer. Its amount is not ours: our transfer was never made,
		// and settling with the other's would report it made.
		api := newTransferAPI(t, true, "pending")
		api.transfers["k"] = `{"transferID":"other","createdOn":"2026-11-29T11:00:00Z","status":"completed",` +
			`"amount":{"currency":"USD","value":250000}}`
		c := journaledClient(t, opts(api, idemtest.NewClock(epoch))...)
		res, err := c.Submit(t.Context(), req(api))
		requireForeignKey(t, res, err)
		require.NotEqual(t, "other", res.ResourceID)
		requireKeys(t, api, 0, 2)
	})
	t.Run("nothing of ours sent before: another request's transfer", func(t *testing.T) {
		api := newTransferAPI(t, false, "pending")
		// Another request (a replica, a copy) made the key's transfer.
		api.transfers["k"] = `{"transferID":"other","createdOn":"2026-11-29T11:00:00Z","status":"completed",` +
			`"amount":{"currency":"USD","value":1000}}`
		c := journaledClient(t, opts(api, idemtest.NewClock(epoch))...)
		res, err := c.Submit(t.Context(), req(api))
		requireForeignKey(t, res, err)
		requireKeys(t, api, 0, 1)
	})
}

// stopOnLoss is a process that stops (stop cancels its calls) as soon as
// an answer is lost.
type stopOnLoss struct {
	base http.RoundTripper
	stop context.CancelFunc
}

func (s stopOnLoss) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err != nil {
		s.stop()
	}
	return resp, err
}
