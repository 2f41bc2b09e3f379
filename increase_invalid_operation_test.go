package idem_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemtest"
	"github.com/idemkit/idem/journal"
)

// increaseInsufficientBalance is Increase's 409 refusing an action for
// the state of the object it acts on, word for word its errors page's
// example (https://increase.com/documentation/errors): type
// invalid_operation_error, "The action you specified can't be performed
// on the object in its current state.". The same page gives the key's
// own 409 another type, idempotency_key_already_used_error, and
// Increase replays the first request's object to the same request
// with the same key (https://increase.com/documentation/idempotency-keys).
const increaseInsufficientBalance = `{"type":"invalid_operation_error","status":409,` +
	`"title":"The action you specified can't be performed on the object in its current state.",` +
	`"detail":"There's an insufficient balance in the account."}`

// sendIncreaseTransfer creates an Increase ACH transfer at default
// settings, the key "ach-ord-7" in Idempotency-Key, each create answered
// with the next of shapes.
func sendIncreaseTransfer(t *testing.T, shapes ...shape) (*vendor, *idem.Client, *idem.Result, error) {
	t.Helper()
	v := newVendor(t, shapes...)
	c := clientFor(t, v.srv, idemtest.NewClock(epoch))
	res, err := c.Submit(t.Context(), idem.Request{Key: "ach-ord-7", URL: v.srv.URL + "/ach_transfers",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"account_id":"account_in71c4amph0vgo2qllky","account_number":"987654321","routing_number":"101050001","amount":100,"statement_descriptor":"Order 7"}`)})
	return v, c, res, err
}

// TestIncreaseInvalidOperationToAFirstAttemptFails: nothing of a first
// attempt refused for its account's balance ran, and a copy of it that
// had would be replayed: failed at once, with Increase's words. It was
// read as another request's transfer in flight, resent five times and
// left pending.
func TestIncreaseInvalidOperationToAFirstAttemptFails(t *testing.T) {
	v, _, res, err := sendIncreaseTransfer(t, shape{status: http.StatusConflict, body: increaseInsufficientBalance})
	require.ErrorIs(t, err, idem.ErrFailed)
	require.NotErrorIs(t, err, idem.ErrKeyConflict)
	require.Equal(t, idem.StateFailed, res.State)
	require.Contains(t, res.Reason, "insufficient balance")
	require.Empty(t, res.Review)
	v.requireKeys(t, "Idempotency-Key", "ach-ord-7", 1)
}

// TestIncreaseInvalidOperationToAResendIsRefusedAfterSend: after a 502
// that may have followed the transfer's creation, the refusal proves
// nothing of it (a gateway's answer lost, a balance another transfer
// spent): never failed, asked about and left for a person once it
// persists, as any refusal of a resend is. It was waited for as the
// key's transfer in flight, resent until the call's budget ran out and
// left "processing", then by Run until the key window closed.
func TestIncreaseInvalidOperationToAResendIsRefusedAfterSend(t *testing.T) {
	v, c, res, err := sendIncreaseTransfer(t,
		shape{status: http.StatusBadGateway, body: `<html>502 Bad Gateway</html>`},
		shape{status: http.StatusConflict, body: increaseInsufficientBalance})
	requireRefusedAfterSend(t, c, res, err, "ach-ord-7", "transfer that may have been created")
	// The 502, then three refusals: the third leaves it for a person.
	v.requireKeys(t, "Idempotency-Key", "ach-ord-7", 4)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "ach-ord-7")
	require.NoError(t, err)
	require.Equal(t, 4, op.Attempts, "no result query: nothing to ask")
}

// TestIncreaseInvalidOperationToAResumedSendIsRefusedAfterSend: a
// process that stopped between journaling its send and journaling the
// answer may have created the transfer, and the next process's resend is
// no first attempt, though none of its own came before: the refusal is
// never failed, asked about and left for a person on the third, as after
// a 502. No change: closeOpenAttempts counts the open attempt as written.
func TestIncreaseInvalidOperationToAResumedSendIsRefusedAfterSend(t *testing.T) {
	v := newVendor(t, shape{status: http.StatusConflict, body: increaseInsufficientBalance})
	clock := idemtest.NewClock(epoch)
	path := filepath.Join(t.TempDir(), "idem.journal")
	open := func() (*journal.Store, *idem.Client) {
		store, err := journal.Open(path)
		require.NoError(t, err)
		c, err := idem.New(store, idem.WithHTTPClient(v.srv.Client()), idem.WithClock(clock))
		require.NoError(t, err)
		return store, c
	}
	store, c := open()
	_, err := c.Prepare(t.Context(), idem.Request{Key: "ach-ord-7", URL: v.srv.URL + "/ach_transfers",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"account_id":"account_in71c4amph0vgo2qllky","amount":100}`)})
	require.NoError(t, err)
	// The send, journaled, and the process gone before its answer.
	_, err = store.Update(t.Context(), idem.DefaultScope, "ach-ord-7", func(r *journal.Record) error {
		r.Attempts = append(r.Attempts, journal.Attempt{Number: len(r.Attempts) + 1, Kind: journal.AttemptSubmit, Start: clock.Now()})
		r.FirstSent = clock.Now()
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, store.Close())

	store, c = open()
	t.Cleanup(func() { _ = c.Close(); _ = store.Close() })
	_, err = c.Resume(t.Context())
	require.NoError(t, err)
	op, err := c.Lookup(t.Context(), idem.DefaultScope, "ach-ord-7")
	require.NoError(t, err)
	require.Equal(t, idem.StateUnknown, op.State, "the transfer may have been created")
	require.Equal(t, idem.ReviewRefusedAfterSend, op.Review)
	// The crashed send, then three refusals: the third leaves it for a person.
	require.Equal(t, 4, op.Attempts)
	v.requireKeys(t, "Idempotency-Key", "ach-ord-7", 3)
}

// TestIncreaseInvalidOperationSayingSomethingRunsIsNoFailure: a refusal
// of the object's state whose words say a transfer is still being
// processed may be refusing for our own copy (a proxy's or mesh's retry
// of this very request, or the first of two sends net/http made on a
// connection it took for dead), whatever its type: never failed to a
// first attempt, as any refusal saying something runs is not (modelled:
// no Increase page quotes such a detail).
func TestIncreaseInvalidOperationSayingSomethingRunsIsNoFailure(t *testing.T) {
	running := `{"type":"invalid_operation_error","status":409,` +
		`"title":"The action you specified can't be performed on the object in its current state.",` +
		`"detail":"Your previous transfer is still being processed."}`
	v, _, res, err := sendIncreaseTransfer(t, shape{status: http.StatusConflict, body: running})
	require.ErrorIs(t, err, idem.ErrUnknownOutcome)
	require.NotErrorIs(t, err, idem.ErrFailed)
	require.Equal(t, idem.StatePending, res.State, "waited for as the key in flight")
	v.requireKeys(t, "Idempotency-Key", "ach-ord-7", idem.DefaultMaxAttempts)
}
