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
		{name: "header", hdr: http.Header{"Kc-Api-Passphrase": {"LEGACY"}}},
	} {
		for _, how := range []string{"resume", "submit", "prepare"} {
			t.Run(legacy.name+"/"+how, func(t *testing.T) {
				e := newEnv(t)
				old := e.req("k", `{"n":1}`)
				old.URL += legacy.query
				old.Header = legacy.hdr
				// What the older release journaled: this one refuses to.
				_, err := e.client.PrepareIn(e.ctx, e.req("k", `{"n":1}`), func(ctx context.Context, r *journal.Record) (*journal.Record, error) {
					r.URL += legacy.query
					for name, v := range legacy.hdr {
						r.Header[name] = v
					}
					return e.store.Create(ctx, r)
				})
				require.NoError(t, err)
				_, err = e.client.Prepare(e.ctx, func() idem.Request { r := old; r.Key = "new"; return r }())
				require.ErrorIs(t, err, idem.ErrSecretHeader, "a new operation with the credential")
				e.crashMidAttempt("k")
				e.restart()

				switch how {
				case "resume":
					_, err := e.client.Resume(e.ctx)
					require.NoError(t, err)
				case "submit":
					res, err := e.client.Submit(e.ctx, old)
					require.NoError(t, err, "the journaled order, resubmitted")
					require.Equal(t, idem.StateSucceeded, res.State)
				case "prepare":
					op, err := e.client.Prepare(e.ctx, old)
					require.NoError(t, err, "the journaled order, prepared again")
					res, err := e.client.Do(e.ctx, op)
					require.NoError(t, err)
					require.Equal(t, idem.StateSucceeded, res.State)
				}
				require.Equal(t, idem.StateSucceeded, e.record("k").State)
				require.Len(t, e.submits("k"), 1, "submits")
				require.Equal(t, 1, e.srv.KeyStats(scope, "k").Effects, "side effects")
				_, err = e.store.Get(e.ctx, idem.DefaultScope, "new")
				require.ErrorIs(t, err, journal.ErrNotFound, "the refused new operation journaled")
			})
		}
	}
}
