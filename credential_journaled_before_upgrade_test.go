package idem_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/journal"
)

// An operation journaled by a release that still accepted a credential in
// its URL's query string (apilayer's ?access_key=, refused since 85d034e)
// or in a header (KuCoin's KC-API-PASSPHRASE, refused since the header
// list grew) must be finished after the upgrade, not stranded: Resume
// sends it, once; and the caller who resubmits it with the same key, as
// told to after a crash, drives it. It heard ErrSecretHeader, whose
// promise is "nothing was journaled and nothing will be sent": false, as
// Run sends the order, and a caller who trusted it would order again
// under a new key.
func TestCredentialJournaledBeforeUpgradeIsFinished(t *testing.T) {
	for _, legacy := range []struct {
		name  string
		query string
		hdr   http.Header
	}{
		{name: "query parameter", query: "?access_key=LEGACY"},
		// Accepted until the ';' separator and the signed-URL names
		// were read (url.Values dropped the pair; sig was no secret).
		{name: "query parameter after a semicolon", query: "?currency=EUR;api_key=LEGACY"},
		{name: "Azure SAS sig", query: "?sv=2015-04-05&sig=LEGACY%2Bsig%3D"},
		{name: "header", hdr: http.Header{"Kc-Api-Passphrase": {"LEGACY"}}},
	} {
		for _, how := range []string{"resume", "submit", "prepare"} {
			t.Run(legacy.name+"/"+how, func(t *testing.T) {
				e := newEnv(t)
				old := e.req("k", `{"n":1}`)
				old.URL += legacy.query
				old.Header = legacy.hdr
				journalLegacy(t, e, legacy.query, legacy.hdr)
				_, err := e.client.Prepare(e.ctx, func() idem.Request { r := old; r.Key = "new"; return r }())
				require.ErrorIs(t, err, idem.ErrSecretHeader, "a new operation with the credential")
				e.crashMidAttempt("k")
				e.restart()

				finishJournaledOnce(t, e, how, old)
				_, err = e.store.Get(e.ctx, idem.DefaultScope, "new")
				require.ErrorIs(t, err, journal.ErrNotFound, "the refused new operation journaled")
			})
		}
	}
}

// The refusal's advice, followed: after the upgrade the caller adds the
// credential at send time (apilayer's access_key in a WithRequestHook's
// r.URL.RawQuery, KuCoin's KC-API-PASSPHRASE in its header) and
// resubmits the journaled order under its key without it, as told to
// after a crash. The server sees the same request either way; the
// journal's copy differs only in the credential it may no longer hold.
// ErrKeyConflict ("the key is already used for a different request")
// would be false, and a caller who trusted it would order again under a
// new key while Run sends the first.
func TestCredentialMovedToTheHookAfterUpgradeDrivesTheJournaledOperation(t *testing.T) {
	for _, legacy := range []struct {
		name  string
		query string
		hdr   http.Header
		hook  func(*http.Request)
	}{
		{name: "query parameter", query: "?access_key=LEGACY", hook: func(r *http.Request) {
			q := r.URL.Query()
			q.Set("access_key", "LEGACY")
			r.URL.RawQuery = q.Encode()
		}},
		{name: "header", hdr: http.Header{"Kc-Api-Passphrase": {"LEGACY"}}, hook: func(r *http.Request) {
			r.Header.Set("Kc-Api-Passphrase", "LEGACY")
		}},
	} {
		for _, how := range []string{"submit", "prepare"} {
			t.Run(legacy.name+"/"+how, func(t *testing.T) {
				e := newEnv(t)
				journalLegacy(t, e, legacy.query, legacy.hdr)
				e.crashMidAttempt("k")
				e.opts = append(e.opts, idem.WithRequestHook(func(r *http.Request) error {
					r.Header.Set("Authorization", "Bearer sk_test_PLANTED_SECRET")
					legacy.hook(r)
					return nil
				}))
				e.restart()

				finishJournaledOnce(t, e, how, e.req("k", `{"n":1}`)) // the credential left to the hook

				// A request that differs in anything but the credential is
				// still another request.
				other := e.req("k", `{"n":2}`)
				_, err := e.client.Submit(e.ctx, other)
				require.ErrorIs(t, err, idem.ErrKeyConflict)
				other = e.req("k", `{"n":1}`)
				other.URL += "?currency=EUR"
				_, err = e.client.Submit(e.ctx, other)
				require.ErrorIs(t, err, idem.ErrKeyConflict)
				require.Len(t, e.submits("k"), 1, "submits")
			})
		}
	}
}

// The caller kept the credential in the request but rotated it since
// (apilayer's dashboard resets an access_key): the journaled request
// differs from the one resubmitted only in the credential's value. It is
// driven, as journaled, rather than refused as another request's.
func TestRotatedCredentialResubmittedAfterUpgradeDrivesTheJournaledOperation(t *testing.T) {
	for _, legacy := range []struct {
		name, query, rotated string
		hdr, rotatedHdr      http.Header
	}{
		{name: "query parameter", query: "?access_key=LEGACY", rotated: "?access_key=ROTATED"},
		{name: "query parameter after a semicolon", query: "?currency=EUR;api_key=LEGACY", rotated: "?currency=EUR;api_key=ROTATED"},
		{name: "header", hdr: http.Header{"Kc-Api-Passphrase": {"LEGACY"}}, rotatedHdr: http.Header{"Kc-Api-Passphrase": {"ROTATED"}}},
	} {
		t.Run(legacy.name, func(t *testing.T) {
			e := newEnv(t)
			journalLegacy(t, e, legacy.query, legacy.hdr)
			e.crashMidAttempt("k")
			e.restart()
			req := e.req("k", `{"n":1}`)
			req.URL += legacy.rotated
			req.Header = legacy.rotatedHdr
			finishJournaledOnce(t, e, "submit", req)
		})
	}
}

// The same advice followed for a URL built by appending "&name=value"
// to "?" (so its query starts with an empty pair): the caller removes
// access_key (apilayer's credential, https://apilayer.com/docs) and
// resubmits "?&currency=EUR", the hook adding the key back. Matched
// without the credential, the journaled query had lost its leading '&'
// and the resubmitted one had kept it: ErrKeyConflict, "another
// request", though the server sees the very same one.
func TestCredentialMovedToTheHookFromAQueryStartingWithEmptyPair(t *testing.T) {
	for _, how := range []string{"submit", "prepare"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			journalLegacy(t, e, "?&currency=EUR&access_key=LEGACY", nil)
			e.crashMidAttempt("k")
			e.opts = append(e.opts, idem.WithRequestHook(func(r *http.Request) error {
				r.Header.Set("Authorization", "Bearer sk_test_PLANTED_SECRET")
				q := r.URL.Query()
				q.Set("access_key", "LEGACY")
				r.URL.RawQuery = q.Encode()
				return nil
			}))
			e.restart()

			req := e.req("k", `{"n":1}`)
			req.URL += "?&currency=EUR"
			finishJournaledOnce(t, e, how, req)
		})
	}
}

// finishJournaledOnce finishes the operation journaled under key "k"
// with Resume, or by resubmitting req with Submit or Prepare and Do, and
// checks that the server got it once and made it once.
func finishJournaledOnce(t *testing.T, e *env, how string, req idem.Request) {
	t.Helper()
	switch how {
	case "resume":
		_, err := e.client.Resume(e.ctx)
		require.NoError(t, err)
	case "submit":
		res, err := e.client.Submit(e.ctx, req)
		require.NoError(t, err, "the journaled order, resubmitted")
		require.Equal(t, idem.StateSucceeded, res.State)
	case "prepare":
		op, err := e.client.Prepare(e.ctx, req)
		require.NoError(t, err, "the journaled order, prepared again")
		res, err := e.client.Do(e.ctx, op)
		require.NoError(t, err)
		require.Equal(t, idem.StateSucceeded, res.State)
	}
	require.Equal(t, idem.StateSucceeded, e.record("k").State)
	require.Len(t, e.submits("k"), 1, "submits")
	require.Equal(t, 1, e.srv.KeyStats(scope, "k").Effects, "side effects")
}

// journalLegacy journals under key "k" what an older release journaled:
// the request with a credential this one refuses, in its URL's query
// (query) or its headers (hdr).
func journalLegacy(t *testing.T, e *env, query string, hdr http.Header) {
	t.Helper()
	_, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
		r.URL += query
		for name, v := range hdr {
			r.Header[name] = v
		}
		return e.store.Create(ctx, r)
	})
	require.NoError(t, err)
}
